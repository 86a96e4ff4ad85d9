"""A benchmark build's key and its reuse on another machine (stacks/buildkey.py, `stack build --reuse`):
the key changes with every input a build reads (source, recipe, stack file, compilers, toolchain
package versions, MPI library bytes, pip pins) and with nothing else (no mtime, no host); a build made
elsewhere is taken only with the same key and the files its record lists, each with its sha256, and
the refusal says what differs."""
import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import require_tools, run_cli
from stackproof.stacks import benchbuild, buildkey
from stackproof.stacks.model import load_stack, parse_stack

# a dpkg database in little: gcc's closure, a -dev package from the same source as a library, an
# alternative whose first choice is not installed, a virtual package, and perl, which no compile reads
DPKG = {
    "gcc": ("4:12.2.0-3", "devel", "gcc-defaults", "gcc-12 (>= 12.2.0-1~), cpp (= 4:12.2.0-3), "),
    "gcc-12": ("12.2.0-14", "devel", "gcc-12", "cpp-12 (= 12.2.0-14), libgcc-s1, binutils, perl, "),
    "cpp": ("4:12.2.0-3", "interpreters", "gcc-defaults", "cpp-12, "),
    "cpp-12": ("12.2.0-14", "interpreters", "gcc-12", ", "),
    "libgcc-s1": ("12.2.0-14", "libs", "gcc-12", ", "),
    "binutils": ("2.40-2", "devel", "binutils", ", "),
    "perl": ("5.36.0-7", "perl", "perl", ", "),
    "libc6-dev": ("2.36-9", "libdevel", "glibc", "libc6 (= 2.36-9), linux-libc-dev, "),
    "libc6": ("2.36-9", "libs", "glibc", ", "),
    "linux-libc-dev": ("6.1.187-1", "devel", "linux", ", "),
    "libopenblas-dev": ("0.3.21", "metapackages", "openblas",
                        "libopenblas-openmp-dev | libopenblas-pthread-dev | libopenblas-serial-dev, "),
    "libopenblas-pthread-dev": ("0.3.21", "libdevel", "openblas", "libopenblas0-pthread, "),
    "libopenblas0-pthread": ("0.3.21", "libs", "openblas", ", "),
    "mawk": ("1.3.4", "interpreters", "mawk", ", "),
}


@pytest.fixture
def dpkg(monkeypatch):
    """buildkey's view of dpkg: DPKG (a copy the test may change), `awk` provided by mawk."""
    db = {k: v for k, v in DPKG.items()}
    monkeypatch.setattr(buildkey, "_dpkg_database", lambda: (db, {"awk": "mawk"}))
    return db


def test_toolchain_is_the_development_sources_of_the_closure(dpkg):
    got = buildkey.toolchain_packages(("gcc", "libc6-dev", "libopenblas-dev", "awk", "not-installed"))
    assert got == {"gcc": "4:12.2.0-3", "cpp": "4:12.2.0-3", "gcc-12": "12.2.0-14", "cpp-12": "12.2.0-14",
                   "libgcc-s1": "12.2.0-14", "binutils": "2.40-2", "libc6-dev": "2.36-9", "libc6": "2.36-9",
                   "linux-libc-dev": "6.1.187-1", "libopenblas-dev": "0.3.21",
                   "libopenblas-pthread-dev": "0.3.21", "libopenblas0-pthread": "0.3.21"}
    # perl (a dependency no compile reads) and mawk (a root, but no development package) stay out
    assert "perl" not in got and "mawk" not in got


def vendor_like(tmp_path, **over):
    data = {"name": "vendor", "prefix": str(tmp_path / "vendor"), "install": {"apt": ["g++"]},
            "env": {"I_MPI_ROOT": "${prefix}"}, "path": ["${prefix}/bin"], "ld_library_path": ["${prefix}/lib"],
            "compilers": {"cc": "${prefix}/bin/mpicc", "cxx": "${prefix}/bin/mpicxx"},
            "mpi": {"family": "intelmpi", "version": "x", "library": r"libmpi\.so\.12", "library_dir": "${prefix}/lib"},
            "launcher": {"local": ["${prefix}/bin/mpirun"], "slurm": ["srun"]}, "benchmarks": {"probe": "bin/mpi_identity"}}
    data.update(over)
    path = tmp_path / "stacks" / "vendor.yaml"
    path.parent.mkdir(exist_ok=True)
    if not path.exists():
        path.write_text("# test\n")
    lib = tmp_path / "vendor" / "lib" / "libmpi.so.12"
    if not lib.exists():
        lib.parent.mkdir(parents=True)
        lib.write_bytes(b"the MPI library")
    return parse_stack(data, path, "vendor")


def key(stack, source="int main(void){return 0;}"):
    return buildkey.key_of(buildkey.target_parts(buildkey.stack_parts(stack, {}), "probe", source, ""))


def test_the_key_changes_with_every_input_and_nothing_else(tmp_path, dpkg):
    st = vendor_like(tmp_path)
    k = key(st)
    assert key(st) == k
    lib = tmp_path / "vendor" / "lib" / "libmpi.so.12"
    os.utime(lib, (1, 1))                   # when or where a file was written: not an input
    assert key(st) == k
    assert key(st, source="int main(void){return 1;}") != k
    assert key(vendor_like(tmp_path, compilers={"cc": "/other/mpicc", "cxx": "/other/mpicxx"})) != k
    assert key(vendor_like(tmp_path, prefix=str(tmp_path / "elsewhere"))) != k
    dpkg["linux-libc-dev"] = ("6.1.192-3",) + dpkg["linux-libc-dev"][1:]    # g++ is not in DPKG: gcc is a root
    assert key(st) != k
    dpkg["linux-libc-dev"] = DPKG["linux-libc-dev"]
    dpkg["perl"] = ("5.36.0-8",) + dpkg["perl"][1:]                         # no compile reads it
    assert key(st) == k
    lib.write_bytes(b"another MPI library")
    assert key(st) != k
    lib.write_bytes(b"the MPI library")
    (tmp_path / "stacks" / "vendor.yaml").write_text("# test, edited\n")
    assert key(st) != k


def test_a_pip_stacks_key_follows_its_installed_pins(tmp_path, dpkg):
    st = vendor_like(tmp_path, install={"pip": ["impi-devel==2021.17.2"]})
    manifest = tmp_path / "vendor" / "stackproof-manifest.json"
    manifest.write_text(json.dumps({"pins": ["impi-devel==2021.17.2", "lock:aa"], "installed": {"impi-devel": "2021.17.2"},
                                    "python": "3.11.7", "seconds": 12.0, "date": "today"}))
    k = key(st)
    manifest.write_text(json.dumps({"pins": ["impi-devel==2021.17.2", "lock:aa"], "installed": {"impi-devel": "2021.17.2"},
                                    "python": "3.11.2", "seconds": 30.0, "date": "tomorrow"}))
    assert key(st) == k          # the venv's Python and the install's time: not what a compile reads
    manifest.write_text(json.dumps({"pins": ["impi-devel==2021.17.2", "lock:bb"], "installed": {"impi-devel": "2021.17.2"}}))
    assert key(st) != k


# ---------------------------------------------------------------- reuse

def built(bench, parts, files):
    """A finished build in `bench`: its files and its record."""
    outs = []
    for rel, text in files.items():
        path = bench / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
        outs.append(path)
    buildkey.write_record(bench, "osu", parts, [bench / "libexec/osu"])
    return outs


def parts_for(stack):
    return buildkey.target_parts(buildkey.stack_parts(stack, {}), "osu", "recipe", "sha256:src")


def test_reuse_takes_the_same_inputs_build_with_every_file_checked(tmp_path, dpkg):
    st = vendor_like(tmp_path)
    parts = parts_for(st)
    other = tmp_path / "other" / "vendor"
    built(other, parts, {"libexec/osu/pt2pt/osu_latency": "lat", "libexec/osu/coll/osu_allreduce": "red"})
    bench = st.bench_dir()
    (bench / "libexec/osu/old").mkdir(parents=True)          # an earlier build's tree is replaced whole
    buildkey.reuse(other, bench, "osu", parts, [bench / "libexec/osu"])
    assert (bench / "libexec/osu/pt2pt/osu_latency").read_text() == "lat"
    assert os.access(bench / "libexec/osu/coll/osu_allreduce", os.X_OK)
    assert not (bench / "libexec/osu/old").exists()
    assert buildkey.current(bench, "osu", buildkey.key_of(parts), [bench / "libexec/osu"])


def test_reuse_refuses_other_inputs_saying_what_differs(tmp_path, dpkg):
    st = vendor_like(tmp_path)
    other = tmp_path / "other" / "vendor"
    built(other, parts_for(st), {"libexec/osu/osu_latency": "lat"})
    dpkg["linux-libc-dev"] = ("6.1.192-3",) + dpkg["linux-libc-dev"][1:]
    bench = st.bench_dir()
    with pytest.raises(buildkey.NotReusable, match=r"toolchain \(linux-libc-dev 6.1.192-3 here, 6.1.187-1 there\)"):
        buildkey.reuse(other, bench, "osu", parts_for(st), [bench / "libexec/osu"])
    assert not (bench / "libexec").exists()


@pytest.mark.parametrize("tamper, message", [
    (lambda other: (other / "libexec/osu/osu_latency").write_text("changed"), "does not have the sha256"),
    (lambda other: ((other / "libexec/osu/osu_latency").unlink(),
                    (other / "libexec/osu/osu_latency").symlink_to("/etc/passwd")), "a missing file, or a link"),
    (lambda other: _edit_record(other, lambda r: r["files"].update({"libexec/osu/../../../../etc/passwd": "x"})),
     "not a path inside the bench directory"),
    (lambda other: _edit_record(other, lambda r: r["files"].update({"bin/extra": "x"})), "not one of the target's outputs"),
    (lambda other: _edit_record(other, lambda r: r["files"].clear()), "its record lacks libexec/osu"),
    (lambda other: _edit_record(other, lambda r: r["parts"].update({"source": "sha256:other"})),
     "its record's key is not the hash of its parts"),
    (lambda other: (other / ".stamps/osu.json").write_text("[]"), "no build record"),
])
def test_reuse_refuses_a_build_whose_files_or_record_do_not_hold(tmp_path, dpkg, tamper, message):
    st = vendor_like(tmp_path)
    other = tmp_path / "other" / "vendor"
    built(other, parts_for(st), {"libexec/osu/osu_latency": "lat"})
    tamper(other)
    bench = st.bench_dir()
    with pytest.raises(buildkey.NotReusable, match=message):
        buildkey.reuse(other, bench, "osu", parts_for(st), [bench / "libexec/osu"])
    assert not (bench / "libexec").exists() and not list(bench.glob(".reuse-*"))
    assert {p.name for p in bench.parent.iterdir()} <= {"bench", "lib"}     # nothing written beside it


def _edit_record(other, change):
    path = other / ".stamps/osu.json"
    rec = json.loads(path.read_text())
    change(rec)
    path.write_text(json.dumps(rec))


def test_build_stack_reuses_a_copy_of_its_own_build_and_rebuilds_a_changed_one(tmp_path, monkeypatch):
    """The real compile of the identity probe and hello with Debian's Open MPI (the commodity stack):
    built once, its bench dir copied away (as the laptop image build does), the bench dir emptied,
    then `stack build --reuse` takes both back without compiling, and the ldd check passes on them."""
    require_tools("mpicc.openmpi")
    monkeypatch.setenv("STACKPROOF_STACKS_ROOT", str(tmp_path / "root"))
    monkeypatch.delenv("STACKPROOF_STACKS_DIR", raising=False)
    st = load_stack("commodity")
    lines = list(benchbuild.build_stack(st, only=("probe", "hello")))
    assert [ln.split(" built in")[0] for ln in lines[:2]] == ["stack commodity: mpi_identity", "stack commodity: mpi_hello"]
    shutil.copytree(st.bench_dir(), tmp_path / "host" / "commodity")
    shutil.rmtree(st.bench_dir())
    monkeypatch.setattr(benchbuild, "build_c_program", lambda *a: pytest.fail("compiled instead of reusing"))
    lines = list(benchbuild.build_stack(st, only=("probe", "hello"), reuse=tmp_path / "host"))
    assert all(" reused from " in ln for ln in lines[:2]), lines
    assert "2 binaries link" in lines[-1]
    # the next run finds them up to date; a changed input makes the copy useless, and it says why
    assert [ln for ln in benchbuild.build_stack(st, only=("probe",))][0] == "stack commodity: mpi_identity up-to-date"
    rec = json.loads((tmp_path / "host/commodity/.stamps/hello.json").read_text())
    rec["parts"]["recipe"], rec["key"] = "0" * 64, None
    rec["key"] = buildkey.key_of(rec["parts"])
    (tmp_path / "host/commodity/.stamps/hello.json").write_text(json.dumps(rec))
    shutil.rmtree(st.bench_dir())
    compiled = []
    monkeypatch.setattr(benchbuild, "build_c_program", lambda stack, src, exe, env: compiled.append(exe.name) or
                        shutil.copy(tmp_path / "host/commodity/bin" / exe.name, exe))
    lines = list(benchbuild.build_stack(st, only=("probe", "hello"), reuse=tmp_path / "host"))
    assert compiled == ["mpi_hello"] and "(not reused: built from other inputs: recipe)" in lines[1], lines


def test_cli_reuse_of_a_missing_directory_is_one_line(tmp_path, capsys):
    rc, err = run_cli(["stack", "build", "commodity", "--only", "probe", "--reuse", str(tmp_path / "nothing")], capsys)
    assert rc == 2 and len(err) == 1 and "--reuse" in err[0] and "no such directory" in err[0], err


def test_keys_are_the_same_for_the_same_stack_file_elsewhere(tmp_path, dpkg):
    """Two stacks roots with the same prefix string (the host's and the image's /opt/stackproof/stacks)
    and the same stack file give the same key: nothing of the machine's own path or time enters it."""
    a = vendor_like(tmp_path)
    b = vendor_like(tmp_path)
    assert key(a) == key(b)
    assert Path(buildkey.__file__).with_name("appbuild.py").is_file()
