"""Building the benchmarks against one stack: `stackproof stack build NAME...`.

Into ${prefix}/bench (the stack's bench dir), with the stack's own compilers and environment:
  bin/mpi_identity   per rank: rank, host, resolved MPI library, MPI_Get_library_version (data/mpi_identity.c)
  bin/mpi_hello      the packaged MPI smoke program (data/mpi_hello.c)
  bin/fwq-mpi        fwq/ with CMake and the stack's mpicc
  bin/NPmpi          NetPIPE 3.7.2 from Debian's netpipe source package (debsource.py), `make mpi MPICC=`
  OSU, AMG, SW4      when $STACKPROOF_BENCH_SOURCES holds their git mirrors, by
                     ../shared/tools/real-benchmarks/build.sh (SW4 linked with the stack's blas_lapack)
Each target has a stamp keyed by the hash of its inputs (sources, compilers, the stack's environment,
the MPI library files), so a second run rebuilds nothing. Every binary is then checked with ldd in
the stack's run environment: it must resolve the stack's MPI library (mpi.library in mpi.library_dir)
and nothing from another stack's directories.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import time
from importlib import resources
from pathlib import Path

from ..paths import REPO, shared_dir
from .debsource import fetch_netpipe, sha256
from .model import Stack, StackError, load_stack, stack_names
from .preflight import linkage_problem, linked_libraries

TARGETS = ("probe", "hello", "fwq", "netpipe", "real")
RECIPE = "1"                    # bump when a build recipe below changes
SYSTEM_DIRS = ("/usr/lib", "/lib", "/usr/local/lib")


def progress(stack: Stack, msg: str) -> None:
    print(f"[stack {time.strftime('%H:%M:%S')}] {stack.name}: {msg}", flush=True)


# ---------------------------------------------------------------- stamps

def mpi_library_files(stack: Stack) -> list[str]:
    """'path size mtime' of the stack's MPI library files (they change when the MPI is upgraded)."""
    if not stack.mpi_library_dir or not Path(stack.mpi_library_dir).is_dir():
        return []
    rx = re.compile(stack.mpi_library)
    out = []
    for p in sorted(Path(stack.mpi_library_dir).iterdir()):
        if rx.search(p.name):
            real = Path(os.path.realpath(p))
            st = real.stat() if real.exists() else None
            out.append(f"{p.name}->{real} {st.st_size if st else 0} {int(st.st_mtime) if st else 0}")
    return out


def input_hash(stack: Stack, target: str, sources: list[Path], extra: tuple[str, ...] = ()) -> str:
    h = hashlib.sha256()
    stack_part = {"recipe": RECIPE, "target": target, "cc": stack.cc, "cxx": stack.cxx, "fc": stack.fc,
                  "env": stack.env, "path": stack.path, "ld": stack.ld_library_path,
                  "blas": stack.blas_lapack, "libs": mpi_library_files(stack), "extra": extra}
    h.update(json.dumps(stack_part, sort_keys=True).encode())
    for src in sources:
        h.update(str(src.name).encode())
        h.update(sha256(src).encode())
    return h.hexdigest()


def stamp_path(stack: Stack, target: str) -> Path:
    return stack.bench_dir() / ".stamps" / f"{target}.stamp"


def up_to_date(stack: Stack, target: str, key: str, outputs: list[Path]) -> bool:
    st = stamp_path(stack, target)
    return st.is_file() and st.read_text().strip() == key and all(o.exists() for o in outputs)


def write_stamp(stack: Stack, target: str, key: str) -> None:
    st = stamp_path(stack, target)
    st.parent.mkdir(parents=True, exist_ok=True)
    st.write_text(key + "\n")


# ---------------------------------------------------------------- ldd check

_LDD_LINE = re.compile(r"^\s*(\S+)\s+=>\s+(\S+|not found)")


def parse_ldd(text: str) -> dict[str, str]:
    """soname -> resolved path ('not found' kept) from ldd's output."""
    return {m.group(1): m.group(2) for m in map(_LDD_LINE.match, text.splitlines()) if m}


def foreign_problem(stack: Stack, binary: Path, libs: dict[str, str], others: list[Stack]) -> str | None:
    """A library resolved inside another stack's directories (prefix, library dir, LD_LIBRARY_PATH)."""
    own = {os.path.realpath(d) for d in ([str(stack.prefix)] if stack.prefix else []) +
           ([stack.mpi_library_dir] if stack.mpi_library_dir else []) + list(stack.ld_library_path)}
    for other in others:
        dirs = ([str(other.prefix)] if other.prefix else []) + list(other.ld_library_path) + \
            ([other.mpi_library_dir] if other.mpi_library_dir else [])
        for d in dirs:
            real = os.path.realpath(d)
            if real in own or real.startswith(SYSTEM_DIRS) or any(o.startswith(real + "/") for o in own):
                continue
            for so, path in libs.items():
                if path != "not found" and os.path.realpath(path).startswith(real + "/"):
                    return f"{binary} resolves {so} to {path}, a file of stack {other.name}"
    return None


def check_binary(stack: Stack, binary: Path, env: dict[str, str], others: list[Stack],
                 ldd=linked_libraries) -> None:
    libs = ldd(binary, env)
    why = linkage_problem(stack, binary, libs) or foreign_problem(stack, binary, libs, others)
    if why:
        why = why.split(": rebuild it with")[0]
        raise StackError(f"stack {stack.name}: ldd check failed: {why}: the build picked up another MPI; "
                         f"check compilers/ld_library_path in {stack.file}, then "
                         f"`stackproof stack build --force {stack.name}`")


def other_stacks(stack: Stack) -> list[Stack]:
    out = []
    for name in stack_names():
        if name == stack.name:
            continue
        try:
            out.append(load_stack(name))
        except StackError:
            continue
    return out


# ---------------------------------------------------------------- builds

def _run(stack: Stack, what: str, cmd: list[str], env: dict[str, str], cwd: Path | None = None,
         log: Path | None = None) -> None:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if log:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"$ {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")
    if proc.returncode != 0:
        text = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        hint = ""
        if "mpi.h" in "\n".join(text) and stack.mpi_family == "intelmpi":
            hint = " (is I_MPI_ROOT set to the prefix in the stack's env?)"
        raise StackError(f"stack {stack.name}: building {what} failed{hint}: {' | '.join(text[-3:])}"
                         f"{f' (full log: {log})' if log else ''}")


def _packaged(name: str) -> Path:
    return Path(str(resources.files("stackproof") / "data" / name))


def build_c_program(stack: Stack, src: Path, exe: Path, env: dict[str, str]) -> None:
    exe.parent.mkdir(parents=True, exist_ok=True)
    _run(stack, exe.name, [stack.cc, "-std=gnu11", "-O2", "-o", str(exe), str(src), "-ldl"], env,
         log=stack.bench_dir() / ".build" / f"{exe.name}.log")


def build_fwq(stack: Stack, out: Path, env: dict[str, str]) -> None:
    bdir = stack.bench_dir() / ".build" / "fwq"
    shutil.rmtree(bdir, ignore_errors=True)
    cc = shutil.which(stack.cc, path=env.get("PATH")) or stack.cc
    _run(stack, "fwq-mpi (cmake)", ["cmake", "-S", str(REPO / "fwq"), "-B", str(bdir), "-DCMAKE_BUILD_TYPE=Release",
                                    f"-DCMAKE_C_COMPILER={cc}", f"-DMPI_C_COMPILER={cc}"], env,
         log=bdir.parent / "fwq-configure.log")
    _run(stack, "fwq-mpi", ["cmake", "--build", str(bdir), "--target", "fwq-mpi", "-j2"], env,
         log=bdir.parent / "fwq-build.log")
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(bdir / "fwq-mpi", out)


def build_netpipe(stack: Stack, orig: Path, out: Path, env: dict[str, str]) -> None:
    bdir = stack.bench_dir() / ".build" / "netpipe"
    shutil.rmtree(bdir, ignore_errors=True)
    bdir.mkdir(parents=True)
    with tarfile.open(orig) as tar:
        tar.extractall(bdir, filter="data")
    tree = next(p for p in bdir.iterdir() if p.is_dir())
    # MPICC, not CC: the makefile's mpi target uses $(MPICC), which defaults to whatever `mpicc` is on PATH
    _run(stack, "NPmpi", ["make", "mpi", f"MPICC={stack.cc}"], env, cwd=tree,
         log=bdir.parent / "netpipe-build.log")
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(tree / "NPmpi", out)


def fwq_sources() -> list[Path]:
    return sorted(p for p in (REPO / "fwq").iterdir() if p.suffix in (".c", ".h", ".txt"))


# ---------------------------------------------------------------- real benchmarks (OSU, AMG, SW4)

def real_benchmarks_script() -> Path | None:
    script = shared_dir() / "tools" / "real-benchmarks" / "build.sh"
    return script if script.is_file() else None


OSU_DEDUPE = r"""dedupe_osu() {
  local am=$1/c/mpi/collective/non_blocking/Makefile.am
  [[ -f $am ]] && perl -0pi -e 's/(osu_ireduce_scatter)[ \t]*\\\n[ \t]*osu_ireduce_scatter\n/$1\n/' "$am" || true
}
"""


def adapt_build_script(text: str) -> str:
    """build.sh, adapted for a stack: SW4 links $SW4_LINKFLAGS (the stack's blas_lapack) instead of
    Debian's -llapack -lblas, and OSU 7.2's duplicate program name is dropped before `make install`."""
    old = 'linkflags="-llapack -lblas -lgfortran"'
    if old in text:
        text = text.replace(old, 'linkflags="${SW4_LINKFLAGS:--llapack -lblas -lgfortran}"')
    # OSU 7.2 lists osu_ireduce_scatter twice in c/mpi/collective/non_blocking/Makefile.am, and
    # coreutils' install refuses the second copy ("will not overwrite just-created")
    export = 'export_src "$g" "$sha" "$bdir/src" || return 1\n  (\n'
    if export in text and "build_osu_one() {" in text:
        head, tail = text.split("build_osu_one() {", 1)
        tail = tail.replace(export, export.replace("\n  (\n", "\n  dedupe_osu \"$bdir/src\"\n  (\n"), 1)
        text = head + OSU_DEDUPE + "build_osu_one() {" + tail
    return text


def build_real(stack: Stack, env: dict[str, str]) -> list[Path]:
    """OSU 7.2, AMG 1.2, SW4 (and AMG2023 when its mirrors are there) with build.sh; installed binaries.
    build.sh keeps its own stamps; SW4 links the stack's blas_lapack."""
    src = os.environ.get("STACKPROOF_BENCH_SOURCES")
    script = real_benchmarks_script()
    if not src:
        return []
    if not script:
        raise StackError(f"STACKPROOF_BENCH_SOURCES is set but {shared_dir()}/tools/real-benchmarks/build.sh is "
                         "missing: set STACKPROOF_SHARED to the shared/ directory")
    if not Path(src).is_dir():
        raise StackError(f"STACKPROOF_BENCH_SOURCES={src} is not a directory: point it at the benchmark mirrors")
    wrapper = stack.bench_dir() / ".build" / "real-benchmarks-build.sh"
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(adapt_build_script(script.read_text()))
    wrapper.chmod(0o755)
    benches = ["osu", "amg", "sw4"]
    if any((Path(src) / c).exists() for c in ("LLNL+AMG2023", "AMG2023", "AMG2023.git")) and \
            any((Path(src) / c).exists() for c in ("hypre-space+hypre", "hypre", "hypre.git")):
        benches.append("amg2023")
    launcher = stack.launch_command("local")[0]
    renv = dict(env, BENCH_CC=stack.cc, BENCH_CXX=stack.cxx, BENCH_MPIRUN=launcher,
                BENCH_LIBMPI=stack.mpi_library, FC=stack.fc or "gfortran", BENCHMARKS=" ".join(benches),
                OSU_REFS="release/7.2", JOBS="2", SW4_LINKFLAGS=f"{stack.blas_lapack} -lgfortran".strip())
    progress(stack, f"{', '.join(benches)} from {src} (build.sh; minutes on a first build)")
    # the view is <prefix>/bench: build.sh's stack name "bench" under PREFIX = the stack's prefix
    log = stack.bench_dir() / ".build" / "real-benchmarks.log"
    with open(log, "w") as f, subprocess.Popen(
            ["nice", "-n", "10", str(wrapper), src, str(stack.bench_dir().parent), "bench"],
            env=renv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:
            f.write(line)
            if line.startswith("[build.sh"):        # its progress lines, e.g. "osu/bench: built in 33 s"
                progress(stack, line.split("] ", 1)[-1].rstrip())
    if proc.returncode != 0:
        tail = " | ".join(log.read_text().strip().splitlines()[-3:])
        raise StackError(f"stack {stack.name}: OSU/AMG/SW4 build failed ({tail}); full log {log}")
    return real_binaries(stack)


def real_binaries(stack: Stack) -> list[Path]:
    """The OSU/AMG/SW4/AMG2023 binaries present in the stack's bench dir."""
    bench = stack.bench_dir()
    out = [bench / "bin" / b for b in ("amg", "sw4", "amg2023") if (bench / "bin" / b).is_file()]
    osu = bench / "libexec" / "osu-micro-benchmarks" / "mpi"
    if osu.is_dir():
        out += sorted(p for p in osu.rglob("osu_*") if p.is_file() and os.access(p, os.X_OK))
    return out


# ---------------------------------------------------------------- one stack

def build_stack(stack: Stack, only=None, force: bool = False):
    """Build (or confirm up to date) every target of `stack`, yielding a line per target as it goes."""
    if stack.view is not None:
        raise StackError(f"stack {stack.name} uses the view {stack.view}: its benchmarks come from there, "
                         "nothing to build (unset the view to build into the prefix)")
    targets = only or TARGETS
    bad = set(targets) - set(TARGETS)
    if bad:
        raise StackError(f"unknown build targets {sorted(bad)} (known: {', '.join(TARGETS)})")
    env = stack.run_env()
    bench = stack.bench_dir()
    built = []
    t_all = time.monotonic()
    plan = []
    if "probe" in targets:
        plan.append(("probe", "mpi_identity", [_packaged("mpi_identity.c")],
                     lambda out, srcs: build_c_program(stack, srcs[0], out, env)))
    if "hello" in targets:
        plan.append(("hello", "mpi_hello", [_packaged("mpi_hello.c")],
                     lambda out, srcs: build_c_program(stack, srcs[0], out, env)))
    if "fwq" in targets:
        plan.append(("fwq", "fwq-mpi", fwq_sources(), lambda out, srcs: build_fwq(stack, out, env)))
    if "netpipe" in targets:
        orig = fetch_netpipe(log=lambda m: progress(stack, m))
        plan.append(("netpipe", "NPmpi", [orig], lambda out, srcs: build_netpipe(stack, srcs[0], out, env)))
    for target, exe, sources, build in plan:
        out = bench / "bin" / exe
        key = input_hash(stack, target, sources)
        if not force and up_to_date(stack, target, key, [out]):
            yield f"stack {stack.name}: {exe} up-to-date"
        else:
            t0 = time.monotonic()
            progress(stack, f"building {exe} with {stack.cc}")
            build(out, sources)
            write_stamp(stack, target, key)
            yield f"stack {stack.name}: {exe} built in {time.monotonic() - t0:.1f} s"
        built.append(out)
    if "real" in targets:
        if os.environ.get("STACKPROOF_BENCH_SOURCES"):
            real = build_real(stack, env)
            yield f"stack {stack.name}: OSU/AMG/SW4: {len(real)} binaries"
        else:
            real = real_binaries(stack)       # from an earlier build with sources: still checked
            yield (f"stack {stack.name}: OSU/AMG/SW4 not built (set STACKPROOF_BENCH_SOURCES to their mirrors)"
                   + (f"; {len(real)} binaries of an earlier build kept" if real else ""))
        built += real
    others = other_stacks(stack)
    for binary in built:
        check_binary(stack, binary, env, others)
    yield (f"stack {stack.name}: {len(built)} binaries link {stack.mpi_library} in "
           f"{stack.mpi_library_dir or 'the stack'} ({time.monotonic() - t_all:.1f} s)")
