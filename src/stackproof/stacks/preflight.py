"""Is a stack ready to run? Checked before ReFrame starts, so a bad set-up gives one clear error
naming the stack and the fix instead of a segfault in every task or a silent run on another MPI.

Checks: the stack file loads (unknown name, no launcher, bad keys); a launcher for the system kind;
the compilers and launcher exist; required benchmarks exist (`stackproof stack build NAME` makes
them); every benchmark binary resolves the stack's own MPI library (ldd, in the stack's run
environment: soname regex `mpi.library`, directory `mpi.library_dir`); vendor environment
variables (I_MPI_ROOT, I_MPI_PMI_LIBRARY) point at real files (environment.environment_problems).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from stackproof.stacks.environment import environment_problems as stack_environment_problems
from stackproof.stacks.model import Stack, StackError, load_stack

REQUIRED = ("probe", "hello", "fwq", "netpipe")
_LDD_LINE = re.compile(r"^\s*(\S+)\s+=>\s+(\S+|not found)")
_ANY_MPI = re.compile(r"^lib(mpi|mpich|mpi_abi)\.so")


def linked_libraries(binary: Path, env: dict[str, str]) -> dict[str, str]:
    """soname -> resolved path ('not found' kept) from ldd run in the stack's environment."""
    proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=env)
    libs = {}
    for line in proc.stdout.splitlines():
        m = _LDD_LINE.match(line)
        if m:
            libs[m.group(1)] = m.group(2)
    return libs


def linkage_problem(stack: Stack, binary: Path, libs: dict[str, str]) -> str | None:
    """Why `binary` would not run on `stack`'s own MPI library, or None."""
    mpi = {so: path for so, path in libs.items() if _ANY_MPI.match(so)}
    fix = f"rebuild it with `stackproof stack build {stack.name}`"
    if not mpi:
        return f"{binary} links no MPI library: {fix}"
    for so, path in mpi.items():
        if path == "not found":
            return f"{binary}: {so} not found in the stack's environment (LD_LIBRARY_PATH): {fix}"
        if not re.search(stack.mpi_library, so):
            return f"{binary} links {so} ({path}), not this stack's MPI ({stack.mpi_library}): {fix}"
        if stack.mpi_library_dir and os.path.realpath(os.path.dirname(path)) != \
                os.path.realpath(stack.mpi_library_dir):
            return (f"{binary} resolves {so} to {path}, outside the stack's {stack.mpi_library_dir} "
                    f"(another stack's library on LD_LIBRARY_PATH?): {fix}")
    return None


def _executable(cmd: str, env: dict[str, str]) -> bool:
    return bool(shutil.which(cmd, path=env.get("PATH"))) if "/" not in cmd else os.access(cmd, os.X_OK)


def environment_problems(stack: Stack, env: dict[str, str]) -> list[str]:
    """Vendor-MPI set-up: not installed, I_MPI_ROOT, I_MPI_PMI_LIBRARY (stackproof.stacks.environment)."""
    prefix = f"stack {stack.name}: "
    return [p[len(prefix):] if p.startswith(prefix) else p for p in stack_environment_problems(stack, env)]


def _binaries(stack: Stack, name: str) -> list[Path]:
    path = stack.benchmark(name)
    if path.is_dir():       # a directory of binaries (OSU): check the first few
        return sorted(p for p in path.rglob("osu_*") if p.is_file() and os.access(p, os.X_OK))[:2]
    return [path] if path.is_file() else []


def check(stack: Stack, kind: str, require=REQUIRED) -> tuple[list[str], list[str]]:
    """(problems, notes) for one stack on a system kind. A stack that is not installed gets that
    one problem (its binaries cannot be checked yet); missing benchmarks are named together."""
    env = stack.run_env()
    try:
        launcher = stack.launch_command(kind)
    except StackError as exc:
        return [str(exc).replace(f"stack {stack.name} ", "", 1)], []
    problems = environment_problems(stack, env)
    if any("not installed" in p for p in problems):
        return [p for p in problems if "not installed" in p], []     # everything else follows from it
    if kind == "local" and not _executable(launcher[0], env):
        problems.append(f"launcher {launcher[0]} not found: run `stackproof stack install {stack.name}` "
                        f"(or fix launcher.{kind} in {stack.file})")
    problems += [f"compiler {key}={cmd} not found: run `stackproof stack install {stack.name}`"
                 for key, cmd in (("cc", stack.cc), ("cxx", stack.cxx)) if not _executable(cmd, env)]
    if problems:
        return problems, []
    notes, missing = [], []
    for name in sorted(set(stack.benchmarks) | set(require)):
        if name not in stack.benchmarks:
            problems.append(f"declares no benchmark {name!r}: add it under `benchmarks:` in {stack.file}")
            continue
        binaries = _binaries(stack, name)
        if not binaries:
            if name in require:
                missing.append(name)
            else:
                notes.append(f"no {name} at {stack.benchmark(name)} (its checks skip)")
            continue
        for binary in binaries:
            why = linkage_problem(stack, binary, linked_libraries(binary, env))
            if why:
                problems.append(why)
    if missing:
        problems.insert(0, f"benchmarks {', '.join(missing)} not built (looked in {stack.bench_dir()}): "
                           f"run `stackproof stack build {stack.name}`")
    return problems, notes


def ensure_ready(names, kind: str = "local", require=REQUIRED) -> list[str]:
    """Check every stack; StackError listing every problem (each naming its stack and the fix)."""
    if isinstance(require, str):
        require = tuple(r for r in require.split(",") if r)
    lines, errors = [], []
    for name in names:
        stack = load_stack(name)
        problems, notes = check(stack, kind, require)
        errors += [f"stack {name}: {p}" for p in problems]
        lines += [f"stack {name}: {n}" for n in notes]
        if not problems:
            lines.append(f"stack {name}: ready for {kind} systems ({stack.description})")
    if errors:
        raise StackError("\n".join(errors))
    return lines
