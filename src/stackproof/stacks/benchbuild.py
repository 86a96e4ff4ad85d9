"""Building the benchmarks against one stack: `stackproof stack build NAME...`.

Into ${prefix}/bench (the stack's bench dir), with the stack's own compilers and environment:
  bin/mpi_identity   per rank: rank, host, resolved MPI library, MPI_Get_library_version (data/mpi_identity.c)
  bin/mpi_hello      the packaged MPI smoke program (data/mpi_hello.c)
  every recipe of stacks/data/recipes.yaml: fwq-mpi (this repository), NetPIPE, HPCC and hypre's ij
  (Debian's source archive), OSU, AMG and SW4 (a source mirror or upstream; skipped, saying what to
  set, when neither is reachable). Sources: sources.py; the build itself: appbuild.py.
Each target leaves a record keyed by the hash of its inputs (buildkey.py: recipe, source digest, build
code, stack file, toolchain package versions, MPI library files), so a second run rebuilds nothing,
and `--reuse DIR` takes another machine's build of a target (DIR/<stack>/, a copy of its bench dir)
when, and only when, its key is the one computed here. Every binary is then checked
with ldd in the stack's run environment: it must resolve the stack's MPI library (mpi.library in
mpi.library_dir) and nothing from another stack's directories. <bench>/provenance.json says what
was built from what (appbuild.record_provenance).

A stack with a `view:` (a Spack environment's view) is not built: its benchmarks are that
environment's installs; `stack build` reports which ones Spack provides (spackbench.py).
"""
from __future__ import annotations

import os
import re
import subprocess
import time
from importlib import resources
from pathlib import Path

from stackproof.stacks import buildkey
from stackproof.stacks.appbuild import build_recipe, outputs, recipe_fingerprint, record_provenance
from stackproof.stacks.fetch import sha256_of as sha256
from stackproof.stacks.model import Stack, StackError, load_stack, stack_names
from stackproof.stacks.preflight import linkage_problem, linked_libraries
from stackproof.stacks.recipes import Recipe, load_recipes
from stackproof.stacks.sources import Obtained, SourceUnavailable, obtain
from stackproof.stacks.spackbench import view_report

RECIPES = load_recipes()
TARGETS = ("probe", "hello", *RECIPES)
SYSTEM_DIRS = ("/usr/lib", "/lib", "/usr/local/lib")


def progress(stack: Stack, msg: str) -> None:
    print(f"[stack {time.strftime('%H:%M:%S')}] {stack.name}: {msg}", flush=True)


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
    return Path(str(resources.files("stackproof.stacks") / "data" / name))


def build_c_program(stack: Stack, src: Path, exe: Path, env: dict[str, str]) -> None:
    exe.parent.mkdir(parents=True, exist_ok=True)
    _run(stack, exe.name, [stack.cc, "-std=gnu11", "-O2", "-o", str(exe), str(src), "-ldl"], env,
         log=stack.bench_dir() / ".build" / f"{exe.name}.log")


# ---------------------------------------------------------------- sources (once per process)

_SOURCES: dict[str, Obtained | SourceUnavailable] = {}


def source_for(recipe: Recipe, say) -> Obtained:
    """The recipe's verified source, looked up once per run for all stacks (an unreachable upstream
    is tried once); SourceUnavailable is remembered too."""
    if recipe.name not in _SOURCES:
        try:
            _SOURCES[recipe.name] = obtain(recipe, log=say)
        except SourceUnavailable as exc:
            _SOURCES[recipe.name] = exc
    hit = _SOURCES[recipe.name]
    if isinstance(hit, SourceUnavailable):
        raise hit
    return hit


# ---------------------------------------------------------------- one stack

def _current_reused_or_built(stack: Stack, target: str, what: str, parts: dict, outs: list[Path], build,
                             force: bool, reuse: Path | None):
    """One target: up to date (its record has this key), else taken from `reuse`/<stack>/ when that
    build's key is this one, else built by `build()`; yields the status line."""
    bench = stack.bench_dir()
    key = buildkey.key_of(parts)
    if not force and buildkey.current(bench, target, key, outs):
        yield f"stack {stack.name}: {what} up-to-date"
        return
    why = None
    if reuse is not None and not force:
        try:
            buildkey.reuse(reuse / stack.name, bench, target, parts, outs)
            yield f"stack {stack.name}: {what} reused from {reuse / stack.name} (same inputs: key {key[:12]})"
            return
        except buildkey.NotReusable as exc:
            why = str(exc)
    t0 = time.monotonic()
    build()
    buildkey.write_record(bench, target, parts, outs)
    yield (f"stack {stack.name}: {what} built in {time.monotonic() - t0:.1f} s"
           + (f" (not reused: {why})" if why else ""))


def _recipe_target(stack: Stack, recipe: Recipe, env: dict[str, str], shared: dict, force: bool,
                   reuse: Path | None):
    """Build one recipe if its inputs changed; yields status lines, returns the binaries to check."""
    def say(msg):
        progress(stack, msg)
    bench = stack.bench_dir()
    binaries = [bench / dest for dest in recipe.install]
    if "fc" in recipe.needs and not stack.fc:
        yield f"stack {stack.name}: {recipe.name} not built (it needs a Fortran compiler: compilers.fc in {stack.file})"
        return []
    try:
        src = source_for(recipe, say)
    except SourceUnavailable as exc:
        kept = [b for b in binaries if b.exists()]
        yield (f"stack {stack.name}: {recipe.name} not built: {exc}"
               + (f" (an earlier build is kept: {', '.join(b.name for b in kept)})" if kept else ""))
        return kept
    parts = buildkey.target_parts(shared, recipe.name, recipe_fingerprint(recipe), src.digest)

    def build():
        say(f"building {recipe.name} {recipe.version} from {src.origin}")
        build_recipe(stack, recipe, src, env, say=say)
    yield from _current_reused_or_built(stack, recipe.name, f"{recipe.name} {recipe.version}", parts,
                                        outputs(stack, recipe), build, force, reuse)
    record_provenance(stack, recipe, src)       # kept current also when up to date (hashes: milliseconds)
    return binaries


def _executables(paths: list[Path]) -> list[Path]:
    """Files to ldd-check: the paths themselves, or a directory's executables (OSU's tree)."""
    out = []
    for p in paths:
        if p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.is_file() and os.access(f, os.X_OK))
        elif p.is_file() and os.access(p, os.X_OK):
            out.append(p)
    return out


def build_stack(stack: Stack, only=None, force: bool = False, reuse: Path | None = None):
    """Build (or confirm up to date, or take from `reuse`/<stack>/ when its inputs are the same) every
    target of `stack`, yielding a line per target as it goes."""
    if stack.view is not None:
        yield from view_report(stack)
        return
    targets = only or TARGETS
    bad = set(targets) - set(TARGETS)
    if bad:
        raise StackError(f"unknown build targets {sorted(bad)} (known: {', '.join(TARGETS)})")
    env = stack.run_env()
    bench = stack.bench_dir()
    shared = buildkey.stack_parts(stack, env)
    built = []
    t_all = time.monotonic()
    for target, exe in (("probe", "mpi_identity"), ("hello", "mpi_hello")):
        if target not in targets:
            continue
        out, src = bench / "bin" / exe, _packaged(f"{exe}.c")
        parts = buildkey.target_parts(shared, target, sha256(src), "")

        def build(exe=exe, src=src, out=out):
            progress(stack, f"building {exe} with {stack.cc}")
            build_c_program(stack, src, out, env)
        yield from _current_reused_or_built(stack, target, exe, parts, [out], build, force, reuse)
        built.append(out)
    for name, recipe in RECIPES.items():
        if name in targets:
            built += yield from _recipe_target(stack, recipe, env, shared, force, reuse)
    others = other_stacks(stack)
    binaries = _executables(built)
    for binary in binaries:
        check_binary(stack, binary, env, others)
    yield (f"stack {stack.name}: {len(binaries)} binaries link {stack.mpi_library} in "
           f"{stack.mpi_library_dir or 'the stack'} ({time.monotonic() - t_all:.1f} s)")
