"""Building one recipe (stacks/data/recipes.yaml) against one stack, and recording what was built.

The verified source (sources.obtain) is unpacked into <bench>/.build/<recipe>/, the recipe's steps run
there as argv lists with the stack's wrappers, Fortran compiler and BLAS/LAPACK filled in (no shell
line is ever assembled), and the listed binaries and input decks are copied into the bench dir.
Output goes to <bench>/.build/<recipe>.log; lines the build prints as `<recipe>: ...` and a
heartbeat every 30 s show progress. <bench>/provenance.json records, per benchmark, the version,
where the source came from, its sha256 (or git commit and tree digest) and the sha256 of every
installed file.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

from stackproof.paths import REPO
from stackproof.stacks.fetch import safe_extract, sha256_of
from stackproof.stacks.model import Stack, StackError
from stackproof.stacks.recipes import Recipe, RecipeError, data_dir, expand
from stackproof.stacks.sources import Obtained

PROVENANCE = "provenance.json"
# what a stack's blas_lapack may contain: it becomes a make variable and a configure argument
_LINK_FLAGS = re.compile(r"^[A-Za-z0-9_./:=+,@ -]*$")
HEARTBEAT_S = 30


def build_jobs() -> str:
    value = os.environ.get("STACKPROOF_BUILD_JOBS", "2")
    if not value.isdigit() or not 1 <= int(value) <= 256:
        raise StackError(f"STACKPROOF_BUILD_JOBS={value!r}: expected a number of parallel jobs (1-256)")
    return value


def _tool(cmd: str | None, env: dict[str, str]) -> str | None:
    if not cmd:
        return None
    return shutil.which(cmd, path=env.get("PATH")) or cmd


def placeholder_values(stack: Stack, env: dict[str, str], tree: Path, stage: Path) -> dict[str, str]:
    if not _LINK_FLAGS.match(stack.blas_lapack):
        raise StackError(f"stack {stack.name}: blas_lapack {stack.blas_lapack!r} has characters a build "
                         f"command must not get (allowed: letters, digits, _./:=+,@- and spaces) in {stack.file}")
    values = {"cc": _tool(stack.cc, env), "cxx": _tool(stack.cxx, env), "fc": _tool(stack.fc, env),
              "blas": stack.blas_lapack, "jobs": build_jobs(), "src": str(tree), "stage": str(stage),
              "data": str(data_dir()), "repo": str(REPO)}
    for key in ("cc", "cxx", "fc"):
        if values[key] is not None and not _LINK_FLAGS.match(values[key]):
            raise StackError(f"stack {stack.name}: compiler {values[key]!r} has unexpected characters ({stack.file})")
    return values


def recipe_fingerprint(recipe: Recipe) -> str:
    """The recipe and the contents of the data files its steps use (a change rebuilds it)."""
    files = sorted({m for step in recipe.build for a in step.argv for m in re.findall(r"\{data\}/([\w.-]+)", a)})
    return json.dumps({"recipe": asdict(recipe),
                       "data": {f: sha256_of(data_dir() / f) for f in files if (data_dir() / f).is_file()}},
                      sort_keys=True, default=str)


def outputs(stack: Stack, recipe: Recipe) -> list[Path]:
    return [stack.bench_dir() / dest for dest in (*recipe.install, *recipe.inputs)]


def _unpack(obtained: Obtained, bdir: Path) -> Path:
    dest = bdir / "src"
    if obtained.directory is not None:
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(obtained.directory, dest / obtained.directory.name,
                        ignore=shutil.ignore_patterns("build", "__pycache__"))
    else:                       # the pin is checked again on the bytes unpacked (the cache may have changed)
        safe_extract(obtained.archive, dest, sha256=None if obtained.tree_sha256 else obtained.digest,
                     tree_sha256=obtained.tree_sha256)
    tops = [p for p in dest.iterdir()]
    if len(tops) != 1 or not tops[0].is_dir():
        raise StackError(f"{obtained.archive}: expected one top directory, found "
                         f"{', '.join(sorted(p.name for p in tops)[:5]) or 'nothing'}")
    return tops[0]


def _run_step(stack: Stack, recipe: Recipe, argv: list[str], cwd: Path, env: dict[str, str], log: Path,
              say) -> None:
    with open(log, "a") as out:
        out.write(f"\n$ (cd {cwd} && {' '.join(argv)})\n")
        out.flush()
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, errors="replace")
        except OSError as exc:
            raise StackError(f"stack {stack.name}: building {recipe.name}: cannot run {argv[0]} ({exc})") from None
        last, lines, tail = time.monotonic(), 0, []
        for line in proc.stdout:
            out.write(line)
            lines += 1
            tail = (tail + [line.rstrip()])[-3:]
            if line.startswith(f"{recipe.name}: "):
                say(line.rstrip())
                last = time.monotonic()
            elif time.monotonic() - last > HEARTBEAT_S:
                say(f"{recipe.name}: {argv[0]} still running ({lines} lines of output)")
                last = time.monotonic()
        proc.wait()
    if proc.returncode != 0:
        raise StackError(f"stack {stack.name}: building {recipe.name} failed in `{' '.join(argv[:3])}` "
                         f"({' | '.join(tail)}); full log {log}")


def _install(src: Path, dest: Path) -> None:
    """Copy a file or directory into place atomically (a reader sees the old or the new one)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.new")
    if tmp.is_dir():
        shutil.rmtree(tmp)
    if src.is_dir():
        shutil.copytree(src, tmp, symlinks=True)
        if dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest)
        elif dest.exists() or dest.is_symlink():
            dest.unlink()
    else:
        shutil.copy2(src, tmp)
    os.replace(tmp, dest)


def _resolve(path: str, tree: Path, values: dict[str, str]) -> Path:
    full = expand(path, values)
    return Path(full) if Path(full).is_absolute() else tree / full


def build_recipe(stack: Stack, recipe: Recipe, obtained: Obtained, env: dict[str, str], say=print) -> list[Path]:
    """Build `recipe` for `stack` from `obtained`; the installed files (binaries and inputs)."""
    if "fc" in recipe.needs and not stack.fc:
        raise StackError(f"stack {stack.name}: {recipe.name} needs a Fortran compiler (compilers.fc in {stack.file})")
    bench = stack.bench_dir()
    bdir = bench / ".build" / recipe.name
    log = bench / ".build" / f"{recipe.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"{recipe.name} {recipe.version} for stack {stack.name} from {obtained.origin}\n")
    tree = _unpack(obtained, bdir)
    stage = bdir / "stage"
    try:
        values = placeholder_values(stack, env, tree, stage)
        steps = [([expand(a, values) for a in step.argv], tree / step.cwd if step.cwd else tree)
                 for step in recipe.build]
    except RecipeError as exc:
        raise StackError(f"stack {stack.name}: {recipe.name}: {exc}") from None
    for i, (argv, cwd) in enumerate(steps, 1):
        say(f"{recipe.name}: step {i}/{len(steps)}: {' '.join(argv[:2])}")
        _run_step(stack, recipe, argv, cwd, env, log, say)
    installed = []
    for dest, src in (*recipe.install.items(), *recipe.inputs.items()):
        path = _resolve(src, tree, values)
        if not path.exists():
            raise StackError(f"stack {stack.name}: {recipe.name} built no {path} (recipe install {dest}); log {log}")
        _install(path, bench / dest)
        installed.append(bench / dest)
    shutil.rmtree(bdir, ignore_errors=True)         # sources and objects: hundreds of MB for nothing
    return installed


# ---------------------------------------------------------------- provenance

def installed_files(stack: Stack, recipe: Recipe, inputs: bool) -> dict[str, str]:
    """{file name: sha256} of the recipe's installed binaries (or input decks); a directory (OSU's
    libexec tree) lists its executable files (their names are unique: osu_latency, ...)."""
    bench = stack.bench_dir()
    out = {}
    for dest in (recipe.inputs if inputs else recipe.install):
        path = bench / dest
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and
                                                     (inputs or os.access(p, os.X_OK)))
        for f in files:
            out[f.name] = sha256_of(f)
    return out


def record_provenance(stack: Stack, recipe: Recipe, obtained: Obtained) -> Path:
    """Merge this benchmark's entry into <bench>/provenance.json (written atomically)."""
    path = stack.bench_dir() / PROVENANCE
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data[recipe.key] = {"recipe": recipe.name, "version": recipe.version, "source": obtained.origin,
                        "sha256": obtained.digest, **({"commit": obtained.commit} if obtained.commit else {}),
                        **({"tree_sha256": obtained.tree_sha256} if obtained.tree_sha256 else {}),
                        "spack": recipe.spack, "stack": stack.name,
                        "binaries": installed_files(stack, recipe, inputs=False),
                        "inputs": installed_files(stack, recipe, inputs=True)}
    tmp = path.with_name(f".{PROVENANCE}.{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path
