"""Installing a stack without network: pip pins and the dry-run error path (a fake pip), Debian package
checks, the vendor environment preflight, NetPIPE's source verification and output parser (fixtures
recorded here from real runs), the ldd check on recorded ldd output, CLI errors."""
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import stackproof_cli
from stackproof.stacks import appbuild, benchbuild, debsource, environment, install, netpipe, piplock
from stackproof.stacks.model import StackError, load_stack, parse_stack
from stackproof.stacks.recipes import load_recipes
from stackproof.stacks.sources import Obtained

DATA = Path(__file__).parent / "data"
RECORDED_ROOT = "/opt/stackproof/stacks"     # the stacks root the ldd fixtures were recorded with


@pytest.fixture
def recorded_root(monkeypatch):
    monkeypatch.setenv("STACKPROOF_STACKS_ROOT", RECORDED_ROOT)
    for var in ("STACKPROOF_STACKS_DIR", "I_MPI_PMI_LIBRARY", "STACKPROOF_VENDOR_VIEW"):
        monkeypatch.delenv(var, raising=False)


def vendor_like(tmp_path, **over):
    """A vendor (Intel MPI) stack whose prefix is under tmp_path."""
    data = {
        "name": "vendor", "prefix": str(tmp_path / "vendor"),
        "install": {"pip": ["impi-devel==2021.17.2", "impi-rt==2021.17.2", "mkl-devel==2025.2.0"]},
        "env": {"I_MPI_ROOT": "${prefix}"}, "path": ["${prefix}/bin"], "ld_library_path": ["${prefix}/lib"],
        "compilers": {"cc": "${prefix}/bin/mpicc", "cxx": "${prefix}/bin/mpicxx"},
        "mpi": {"family": "intelmpi", "version": r"Intel\(R\) MPI Library 2021\.17", "library": r"libmpi\.so\.12",
                "library_dir": "${prefix}/lib"},
        "launcher": {"local": ["${prefix}/bin/mpirun"], "slurm": ["srun", "--mpi=pmi2"]},
        "benchmarks": {"probe": "bin/mpi_identity"},
    }
    data.update(over)
    path = tmp_path / "stacks" / "vendor.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text("# test\n")
    return parse_stack(data, path, "vendor")


def fake_python(tmp_path, fail_for: str, reason: str) -> str:
    """An executable standing in for `python -m pip`: resolution fails for requirement `fail_for`."""
    script = tmp_path / "fakepython"
    script.write_text(f"""#!/bin/sh
echo "$@" >> {tmp_path}/calls.log
case " $* " in
  *" {fail_for} "*) echo "ERROR: Could not find a version that satisfies the requirement x" >&2
                    echo "ERROR: {reason}" >&2; exit 1;;
esac
for a in "$@"; do if [ "$prev" = "--report" ]; then echo '{{"install": []}}' > "$a"; fi; prev=$a; done
exit 0
""")
    script.chmod(0o755)
    return str(script)


# ---------------------------------------------------------------- pip pins and install

def test_pins_must_be_exact(tmp_path):
    st = vendor_like(tmp_path, install={"pip": ["impi-rt>=2021"]})
    with pytest.raises(StackError, match=r"stack vendor: install.pip entry 'impi-rt>=2021' is not an exact pin"):
        install.parse_pins(st)
    assert install.parse_pins(vendor_like(tmp_path))[1] == ("impi-rt", "2021.17.2")


def test_dry_run_command_resolves_without_installing(tmp_path):
    cmd = install.dry_run_command("/py", ["impi-rt==2021.17.2"], tmp_path / "r.json", ["-c", "lock.txt"])
    assert cmd[:3] == ["/py", "-m", "pip"]
    for arg in ("install", "--dry-run", "--ignore-installed", "--report", "-c", "lock.txt", "impi-rt==2021.17.2",
                "--only-binary=:all:"):          # no sdist's build backend runs as root (issue 42)
        assert arg in cmd


def test_unresolvable_pin_names_stack_pin_reason_and_fix_before_anything_changes(tmp_path):
    st = vendor_like(tmp_path, install={"pip": ["impi-devel==2021.18.0", "impi-rt==2021.18.0",
                                                "mkl-devel==2025.2.0"]})
    py = fake_python(tmp_path, "impi-rt==2021.18.0", "No matching distribution found for libfabric>=2.6")
    with pytest.raises(StackError, match=r"no hash lock .*vendor.pip-lock.txt beside the stack file: run "
                                         r"`stackproof stack lock vendor`"):
        install.install(st, python=py)                # the new pins are not locked yet
    with pytest.raises(StackError) as err:
        install.lock(st, python=py)                   # locking them resolves them
    assert not (tmp_path / "stacks" / "vendor.pip-lock.txt").exists()
    msg = str(err.value)
    assert msg.startswith("stack vendor: impi-rt==2021.18.0 cannot be resolved from PyPI here "
                          "(No matching distribution found for libfabric>=2.6): pin 2021.17.2")
    assert "\n" not in msg
    assert not (tmp_path / "vendor").exists(), "nothing may change before the pins resolve"
    assert all("--dry-run" in line for line in (tmp_path / "calls.log").read_text().splitlines())


def test_install_is_idempotent_from_the_manifest(tmp_path):
    st = vendor_like(tmp_path)
    prefix = tmp_path / "vendor"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").write_text("")
    lock = tmp_path / "stacks" / "vendor.pip-lock.txt"
    lock.write_text("".join(f"{p} --hash=sha256:{'0' * 64}\n" for p in st.install_pip))
    pins = [f"{n}=={v}" for n, v in install.parse_pins(st)] + [f"lock:{install.sha256_text(lock.read_text())}"]
    (prefix / install.MANIFEST).write_text(f'{{"pins": {pins!r}}}'.replace("'", '"'))
    py = fake_python(tmp_path, "never", "")
    assert "up-to-date" in install.install(st, python=py)
    assert not (tmp_path / "calls.log").exists(), "an up-to-date stack must not call pip"


def test_shipped_pip_lock_pins_the_vendor_dependencies(recorded_root):
    st = load_stack("vendor")
    lock = install.constraints_file(st)
    assert lock is not None and lock.name == "vendor.pip-lock.txt"
    locked = piplock.read_lock(lock)                     # every line name==version with a sha256
    assert {f"{n}=={v}" for n, v in install.parse_pins(st)} <= {f"{n}=={v}" for n, (v, _) in locked.items()}


def test_apt_packages_missing_name_the_apt_command(recorded_root):
    st = load_stack("commodity")
    with pytest.raises(StackError, match=r"^stack commodity: Debian packages not installed: libopenblas-dev: "
                                         r"run `apt-get install -y libopenblas-dev`"):
        install.check_apt(st, query=lambda p: p != "libopenblas-dev")
    install.check_apt(st, query=lambda p: True)


# ---------------------------------------------------------------- vendor environment preflight

def installed_intel(tmp_path):
    prefix = tmp_path / "vendor"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "include").mkdir()
    (prefix / "lib" / "libmpi.so.12").write_text("")
    (prefix / "include" / "mpi.h").write_text("")
    return prefix


def test_vendor_not_installed(tmp_path):
    st = vendor_like(tmp_path)
    with pytest.raises(StackError, match=r"^stack vendor: its MPI is not installed .*run `stackproof stack "
                                         r"install vendor`"):
        environment.check_environment(st, env={})


def test_i_mpi_root_unset_or_wrong(tmp_path):
    installed_intel(tmp_path)
    st = vendor_like(tmp_path)
    with pytest.raises(StackError, match=r"^stack vendor: I_MPI_ROOT is unset .*mpi.h: No such file.*add "
                                         r"`env: \{I_MPI_ROOT: \$\{prefix\}\}`"):
        environment.check_environment(st, env={})
    with pytest.raises(StackError, match=r"I_MPI_ROOT=/nowhere has no include/mpi.h .*point it at the Intel MPI "
                                         r"prefix"):
        environment.check_environment(st, env={"I_MPI_ROOT": "/nowhere"})
    environment.check_environment(st)      # the stack's own env sets it right


def test_i_mpi_pmi_library_pointing_nowhere(tmp_path):
    installed_intel(tmp_path)
    st = vendor_like(tmp_path)
    env = dict(st.run_env(), I_MPI_PMI_LIBRARY="/no/libpmi2.so")
    with pytest.raises(StackError, match=r"^stack vendor: I_MPI_PMI_LIBRARY=/no/libpmi2.so does not exist "
                                         r"\(every task would segfault\): unset it"):
        environment.check_environment(st, env=env)


def test_check_environment_is_what_preflight_uses(tmp_path):
    from stackproof.stacks import preflight
    st = vendor_like(tmp_path)
    assert environment.environment_problems(st) == [
        f"its MPI is not installed (no libmpi\\.so\\.12 in {tmp_path}/vendor/lib): run `stackproof stack install vendor`"]
    problems = preflight.environment_problems(st, st.run_env())
    assert len(problems) == 1 and "its MPI is not installed" in problems[0]


# ---------------------------------------------------------------- NetPIPE source and parser

NETPIPE = load_recipes()["netpipe"]


def test_dsc_checksums_and_verification(tmp_path):
    deb = NETPIPE.source.debian
    orig = tmp_path / deb.orig
    orig.write_bytes(b"not the real tarball")
    dsc = tmp_path / deb.dsc
    digest = hashlib.sha256(orig.read_bytes()).hexdigest()
    dsc.write_text(f"Format: 3.0 (quilt)\nChecksums-Sha256:\n {digest} 20 {orig.name}\n"
                   f" {'0' * 64} 11708 netpipe_3.7.2-8.debian.tar.xz\nFiles:\n abc 1 x\n")
    assert debsource.dsc_checksums(dsc.read_text()) == {orig.name: digest,
                                                        "netpipe_3.7.2-8.debian.tar.xz": "0" * 64}
    with pytest.raises(StackError, match="does not match the pinned sha256"):
        debsource.verify(deb, NETPIPE.source.sha256, tmp_path)            # our .dsc is not Debian's


def test_fetch_without_deb_src_names_the_fix(tmp_path):
    def runner(cmd, **kw):
        assert cmd == ["apt-get", "source", "--download-only", "netpipe=3.7.2-8"]
        return subprocess.CompletedProcess(cmd, 100, "", "E: You must put some 'deb-src' URIs in your sources.list\n")
    with pytest.raises(StackError, match=r"apt has no source entries: add deb-src entries \(scripts/install-deps.sh"):
        debsource.fetch_debian(NETPIPE.source.debian, NETPIPE.source.sha256, tmp_path / "cache", runner=runner,
                               log=lambda m: None)


NETPIPE_RUNS = {      # fixture -> MPI (recorded on this machine: NPmpi -l 8 -u 1048576 -p 0 -n 100, 2 ranks)
    "openmpi-4.1.4.np.out": "Open MPI 4.1.4 (commodity)",
    "intelmpi-2021.17.np.out": "Intel MPI 2021.17 (vendor)",
    "mpich-4.0.2.np.out": "MPICH 4.0.2",
    "openmpi-5.0.11.np.out": "Open MPI 5.0.11 (commodity-next)",
}


@pytest.mark.parametrize("fixture", sorted(NETPIPE_RUNS))
def test_netpipe_recorded_runs(fixture):
    points = netpipe.parse((DATA / "netpipe" / fixture).read_text())
    sizes = [p.bytes for p in points]
    assert sizes[0] == 8 and sizes[-1] == 1 << 20 and sizes == sorted(sizes)
    m = netpipe.metrics(points)
    assert 0 < m["lat_8B"] < 1e5 and 0 < m["bw_1MiB"] < 1e6
    big = netpipe.at_size(points, 1 << 20)
    # MB/s from NetPIPE's Mbps (2^20 bit/s) and from bytes / one-way time agree
    assert m["bw_1MiB"] == pytest.approx((1 << 20) / (big.usec * 1e-6) / 1e6, rel=1e-3)


def test_netpipe_stderr_lines_and_units():
    text = ("Now starting the main loop\n"
            "  0:       8 bytes    100 times -->     13.19 Mbps in       4.63 usec\n"
            "  1: 1048576 bytes    100 times -->  80000.00 Mbps in     100.00 usec\n")
    points = netpipe.parse(text)
    assert [p.bytes for p in points] == [8, 1048576]
    m = netpipe.metrics(points)
    assert m["lat_8B"] == 4.63
    assert m["bw_1MiB"] == pytest.approx(80000 * 1048576 / 8 / 1e6)


def test_netpipe_missing_size_and_garbage():
    assert netpipe.metrics(netpipe.parse("       8 13.19 0.00000463\n"))["bw_1MiB"] is None
    with pytest.raises(netpipe.NetpipeError, match="no NetPIPE data lines.*MPI_Init failed"):
        netpipe.parse("MPI_Init failed\n")


# ---------------------------------------------------------------- ldd check (recorded ldd output)

def ldd_fixture(name):
    libs = benchbuild.parse_ldd((DATA / "stacks" / f"ldd-{name}.txt").read_text())
    return lambda binary, env: libs


@pytest.mark.parametrize("stack,fixture", [("vendor", "vendor-mpi_identity"), ("commodity", "commodity-mpi_identity"),
                                           ("commodity-next", "commodity-next-mpi_identity"),
                                           ("mpich", "mpich-mpi_identity")])
def test_ldd_check_accepts_the_stacks_own_library(recorded_root, stack, fixture):
    st = load_stack(stack)
    benchbuild.check_binary(st, Path("/b/mpi_identity"), {}, benchbuild.other_stacks(st), ldd=ldd_fixture(fixture))


@pytest.mark.parametrize("stack,fixture,why", [
    ("commodity", "vendor-mpi_identity", r"links libmpi.so.12 .*not this stack's MPI"),
    ("vendor", "commodity-mpi_identity", r"links libmpi.so.40 .*not this stack's MPI"),
    ("commodity", "commodity-next-mpi_identity", r"resolves libmpi.so.40 to /opt/stackproof/stacks/commodity-next/"),
    ("commodity", "commodity-NPmpi-with-next-ld-path", r"outside the stack's /usr/lib/x86_64-linux-gnu"),
    ("commodity-next", "mpich-mpi_identity", r"links libmpich.so.12"),
])
def test_ldd_check_names_stack_binary_and_fix(recorded_root, stack, fixture, why):
    st = load_stack(stack)
    with pytest.raises(StackError) as err:
        benchbuild.check_binary(st, Path("/b/NPmpi"), {}, benchbuild.other_stacks(st), ldd=ldd_fixture(fixture))
    import re
    msg = str(err.value)
    assert msg.startswith(f"stack {stack}: ldd check failed: /b/NPmpi ") and re.search(why, msg), msg
    assert f"stackproof stack build --force {stack}" in msg


def test_ldd_check_rejects_another_stacks_files(recorded_root):
    st = load_stack("commodity")
    libs = benchbuild.parse_ldd((DATA / "stacks" / "ldd-commodity-mpi_identity.txt").read_text())
    libs["libmkl_rt.so.2"] = f"{RECORDED_ROOT}/vendor/lib/libmkl_rt.so.2"
    with pytest.raises(StackError, match=r"resolves libmkl_rt.so.2 to .*/vendor/lib/libmkl_rt.so.2, a file of "
                                         r"stack vendor"):
        benchbuild.check_binary(st, Path("/b/sw4"), {}, benchbuild.other_stacks(st), ldd=lambda b, e: libs)


# ---------------------------------------------------------------- builds and commands (keys: test_stacks_buildkey.py)

def test_netpipe_build_uses_the_stacks_mpicc(tmp_path, monkeypatch):
    """The recipe's steps get the stack's own wrapper (MPICC, not CC: NetPIPE's makefile builds `mpi`
    with $(MPICC), default: whatever mpicc is on PATH)."""
    st = vendor_like(tmp_path)
    calls = []
    monkeypatch.setattr(appbuild, "_run_step", lambda stack, recipe, argv, cwd, env, log, say: calls.append(argv)
                        or (cwd / "NPmpi").write_text("x"))
    import io
    import tarfile
    tgz = tmp_path / "np.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        info = tarfile.TarInfo("NetPIPE-3.7.2/makefile")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    sha = hashlib.sha256(tgz.read_bytes()).hexdigest()      # checked again as it is unpacked
    got = Obtained("netpipe", "test", sha, archive=tgz)
    installed = appbuild.build_recipe(st, NETPIPE, got, {}, say=lambda m: None)
    assert calls == [["make", "mpi", f"MPICC={tmp_path}/vendor/bin/mpicc"]]
    assert installed == [st.bench_dir() / "bin" / "NPmpi"]
    prov = appbuild.record_provenance(st, NETPIPE, got)
    entry = json.loads(prov.read_text())["netpipe"]
    assert entry["version"] == "3.7.2" and entry["source"] == "test" and entry["sha256"] == sha
    assert entry["binaries"] == {"NPmpi": hashlib.sha256(b"x").hexdigest()}
    assert not (st.bench_dir() / ".build" / "netpipe").exists()      # the build tree is removed


def test_link_flags_with_shell_or_make_syntax_are_refused(tmp_path):
    st = vendor_like(tmp_path, blas_lapack="-lopenblas $(shell id)")
    with pytest.raises(StackError, match="blas_lapack .* has characters a build command must not get"):
        appbuild.placeholder_values(st, {}, tmp_path, tmp_path)


def test_cli_unknown_stack_and_target_are_one_line_errors():
    for args, code, want in ((("stack", "install", "nosuch"), 2, "unknown stack 'nosuch'"),
                             (("stack", "build", "commodity", "--only", "bogus"), 1, "unknown build targets ['bogus']"),
                             (("stack", "build", "vendor"), 1, "stack vendor: its MPI is not installed")):
        proc = stackproof_cli(*args, env=dict(os.environ, STACKPROOF_STACKS_ROOT="/nonexistent/stacks"))
        assert proc.returncode == code, proc
        assert "Traceback" not in proc.stderr and want in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_netpipe_stderr_and_file_of_one_run_agree():
    file_points = netpipe.parse((DATA / "netpipe" / "intelmpi-2021.17.np.out").read_text())
    err_points = netpipe.parse((DATA / "netpipe" / "intelmpi-2021.17.stderr").read_text())
    assert [p.bytes for p in err_points] == [p.bytes for p in file_points]
    for a, b in zip(err_points, file_points):
        assert a.usec == pytest.approx(b.usec, abs=0.006) and a.mbps == pytest.approx(b.mbps, abs=0.006)
