"""Stacks whose benchmarks are a Spack environment's installs (a `view:` in the stack file, e.g.
spack-envs/stacks/spack-laptop.yaml): nothing is rebuilt. `stack build` says, per benchmark, what
the view provides and which Spack install it is (`spack find` when Spack is on PATH; without Spack
the view is used as it is, and the report says so).
"""
from __future__ import annotations

import shutil
import subprocess

from stackproof.stacks.model import Stack
from stackproof.stacks.recipes import load_recipes


def spack_installs(names: list[str], runner=subprocess.run) -> dict[str, str] | str:
    """{spack package: 'name@version /hash'} from `spack find`, or the reason there is none."""
    spack = shutil.which("spack")
    if spack is None:
        return "spack is not on PATH"
    try:
        proc = runner([spack, "find", "--format", "{name}@{version} /{hash:7}", *names],
                      capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"spack find failed ({exc})"
    found = {}
    for line in proc.stdout.splitlines():
        spec = line.strip()
        if "@" in spec and not spec.startswith("=="):
            found.setdefault(spec.split("@", 1)[0], spec)
    return found


def view_report(stack: Stack, runner=subprocess.run):
    """Lines saying which benchmarks the stack's view holds and which Spack installs they are."""
    recipes = load_recipes()
    wanted = {r.key: r for r in recipes.values() if r.key in stack.benchmarks}
    installs = spack_installs(sorted({r.spack for r in wanted.values()}), runner)
    yield f"stack {stack.name}: benchmarks from the view {stack.view}, not rebuilt"
    for key, recipe in sorted(wanted.items()):
        path = stack.benchmark(key)
        state = "present" if path.exists() else "missing"
        if stack.view not in path.parents:
            yield f"stack {stack.name}: {key}: {path} {state} (outside the view: `stackproof stack build` of its stack)"
            continue
        spack = installs.get(recipe.spack, "not installed") if isinstance(installs, dict) else installs
        yield f"stack {stack.name}: {key}: {path} {state} (Spack {recipe.spack}: {spack})"
