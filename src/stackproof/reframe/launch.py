"""The block launcher: runs a block's launches, one after the other, inside one job.

  python -m stackproof.reframe.launch block.json

block.json (written by StackCheck, stackproof.reframe.block) is plain data, never shell text:

  {"stacks": {NAME: {"env": RECIPE, "modules": [...], "setup": [STEP, ...]}},
   "launches": [{"stack": NAME, "dir": DIR, "block": J, "position": P, "pair": K, "steps": [STEP, ...]}],
   "record": FILE}
  STEP = {"argv": [...], "stdout": FILE, "stderr": FILE, "capture": [NAME, ...]}

Each stack's environment is the job's with the stack's recipe applied (stacks.model.apply_env: its
variables, its PATH / LD_LIBRARY_PATH, the other stacks' variables and directories removed), so a
launch of stack B runs as B whatever stack's environment started the job. First every stack's setup
steps run in `setup-NAME/` (the identity probe, a benchmark's sizing probe); a step with `capture`
stores the words its output printed under those names, and an argv item written `{NAME}` (the whole
item) is replaced by that stack's value. Then the launches run in order, each in its own directory
(output files such as hpccoutf.txt never collide), each step its own process (its own srun / mpirun).
After every launch the record (FILE: each launch's stack, block, position, pair, exit status, start
and end) is rewritten, so a job cut short keeps what it ran. A failed launch does not stop the block:
the check's sanity names it. Exit status: 0 when every launch and setup step exited 0, else 1.

Standard library only (and apply_env): it runs in the job, once per block.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from contextlib import ExitStack

from stackproof.stacks.model import apply_env

_VAR = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)\}$")


class LaunchFileError(Exception):
    """A block file this launcher cannot run (a bug of the writer, not of the benchmark)."""


def _argv(step: dict, values: dict) -> list[str]:
    out = []
    for item in step["argv"]:
        m = _VAR.match(item)
        if m:
            if m.group(1) not in values:
                raise LookupError(f"{m.group(1)} was not set by a setup step (see setup-*/)")
            item = values[m.group(1)]
        out.append(item)
    return out


def run_step(step: dict, cwd: str, env: dict, values: dict) -> int:
    """One step in `cwd`; its stdout / stderr to its files (the same file twice: one stream); its
    captured words into `values`. Returns the exit status (127: not started, with the reason in its
    stderr file)."""
    out, err = step.get("stdout"), step.get("stderr")
    out = os.path.join(cwd, out) if out else None
    err = os.path.join(cwd, err) if err else None
    try:
        argv = _argv(step, values)
    except LookupError as exc:
        with open(err or os.devnull, "a") as fh:
            fh.write(f"stackproof launch: not started: {exc}\n")
        return 127
    if step.get("modules"):
        # the stack's modules, loaded by the site's `module` in a shell the argv is handed to
        argv = ["sh", "-c", 'module load $STACKPROOF_MODULES >/dev/null 2>&1 || exit 126; exec "$@"', "sh", *argv]
        env = {**env, "STACKPROOF_MODULES": " ".join(step["modules"])}
    capture = step.get("capture") or []
    try:
        with ExitStack() as files:
            fo = files.enter_context(open(out, "ab")) if out else subprocess.DEVNULL
            ferr = fo if err == out else files.enter_context(open(err, "ab")) if err else subprocess.DEVNULL
            proc = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE if capture else fo, stderr=ferr)
    except OSError as exc:
        with open(err or os.devnull, "a") as fh:
            fh.write(f"stackproof launch: cannot start {argv[0]}: {exc}\n")
        return 127
    if capture:
        words = proc.stdout.decode(errors="replace").split()
        if out:
            with open(out, "ab") as fh:
                fh.write(proc.stdout)
        if len(words) != len(capture):
            with open(err or os.devnull, "a") as fh:
                fh.write(f"stackproof launch: expected {len(capture)} words ({' '.join(capture)}), "
                         f"got {words[:10]}\n")
            return proc.returncode or 1
        values.update(zip(capture, words))
    return proc.returncode


def _write(path: str, doc: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(tmp, path)


def run_block(spec: dict, base_env: dict | None = None, workdir: str = ".") -> int:
    """Run a block file's setup steps and launches (see the module text); returns the exit status."""
    base = dict(os.environ if base_env is None else base_env)
    stacks = spec.get("stacks")
    launches = spec.get("launches")
    if not isinstance(stacks, dict) or not isinstance(launches, list) or not spec.get("record"):
        raise LaunchFileError("expected stacks, launches and record")
    envs, values, record, failed = {}, {}, [], False
    for name, st in stacks.items():
        envs[name] = apply_env(st.get("env") or {}, base)
        values[name] = {}
        setup_dir = os.path.join(workdir, f"setup-{name}")
        os.makedirs(setup_dir, exist_ok=True)
        for step in st.get("setup") or []:
            rc = run_step({**step, "modules": st.get("modules")}, setup_dir, envs[name], values[name])
            failed = failed or rc != 0
    path = os.path.join(workdir, spec["record"])
    for launch in launches:
        name = launch["stack"]
        if name not in envs:
            raise LaunchFileError(f"launch {launch.get('dir')}: stack {name!r} has no entry under stacks")
        where = os.path.join(workdir, launch["dir"])
        os.makedirs(where, exist_ok=True)
        t0 = time.time()
        rc = 0
        for step in launch["steps"]:
            rc = run_step({**step, "modules": stacks[name].get("modules")}, where, envs[name], values[name])
            if rc != 0:
                break
        failed = failed or rc != 0
        record.append({k: launch[k] for k in ("stack", "dir", "block", "position", "pair") if k in launch}
                      | {"rc": rc, "start": round(t0, 3), "end": round(time.time(), 3)})
        _write(path, {"launches": record})
    if not launches:
        _write(path, {"launches": []})
    return 1 if failed else 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m stackproof.reframe.launch BLOCK.json", file=sys.stderr)
        return 2
    try:
        with open(argv[0]) as fh:
            spec = json.load(fh)
        return run_block(spec)
    except (OSError, ValueError, KeyError, TypeError, LaunchFileError) as exc:
        print(f"stackproof launch: {argv[0]}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
