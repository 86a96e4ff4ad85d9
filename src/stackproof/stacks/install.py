"""Installing a stack and checking its environment: `stackproof stack install NAME...` and
`stackproof stack build NAME...` (the builds themselves are in benchbuild.py).

pip stacks (install.pip in the stack file) get a virtual environment at the stack's prefix holding
exactly the wheels of the stack's hash lock (piplock.py: <name>.pip-lock.txt, `stackproof stack lock
NAME`), installed with `pip install --require-hashes --no-deps -r <lock>`, from the index or from a
local wheel directory (--wheels DIR). The lock is checked first (every pin locked, every line
hashed) and resolved with `pip install --dry-run`, so a missing wheel or a wrong hash fails with the
stack's name and the fix before anything changes; `stack lock` resolves the pins themselves and names
a pin whose dependencies PyPI cannot serve here. A manifest (stackproof-manifest.json in the prefix) records what was
installed; a second run with the same pins does nothing. Debian packages (install.apt) are only
checked: a missing one is named with the apt command that installs it.

stacks/environment.py has the preflight for the vendor
MPI's pitfalls; the `stack install` / `stack build` verbs are in stacks/commands.py.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stackproof.stacks import piplock
from stackproof.stacks.model import Stack, StackError

MANIFEST = "stackproof-manifest.json"
# Versions verified to resolve and work here (docs/acceptance.md, "The vendor stack"): named in errors as the fix.
KNOWN_GOOD = {"impi-devel": "2021.17.2", "impi-rt": "2021.17.2", "mkl-devel": "2025.2.0", "openmpi": "5.0.11"}
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)$")


def progress(msg: str) -> None:
    print(f"[stack {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------- pip pins

def parse_pins(stack: Stack) -> list[tuple[str, str]]:
    """(name, version) of every install.pip entry; StackError unless each is an exact pin."""
    pins = []
    for req in stack.install_pip:
        m = _PIN.match(req.strip())
        if not m:
            raise StackError(f"stack {stack.name}: install.pip entry {req!r} is not an exact pin "
                             f"(write name==version) in {stack.file}")
        pins.append((m.group(1).lower(), m.group(2)))
    return pins


def constraints_file(stack: Stack) -> Path | None:
    """<name>.pip-lock.txt beside the stack file (piplock.py), when there is one."""
    path = piplock.lock_path(stack)
    return path if path is not None and path.is_file() else None


def pip_command(python: str, args: list[str]) -> list[str]:
    return [python, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]


# Wheels only, for `stack lock`'s resolution as for the install: pip builds an sdist by running its
# build backend (setup.py), and this runs as root (issue 42).
ONLY_BINARY = "--only-binary=:all:"


def dry_run_command(python: str, reqs: list[str], report: Path, index: list[str] = ()) -> list[str]:
    """Resolve `reqs` against the registry without installing (independent of what is installed);
    wheels only."""
    return pip_command(python, ["install", "--dry-run", "--ignore-installed", "--quiet", ONLY_BINARY,
                                "--report", str(report), *index, *reqs])


def locked_args(lock: Path, index: list[str] = ()) -> list[str]:
    """pip install arguments for exactly the lock's files: every one hash-checked, a wheel, nothing else
    pulled in."""
    return ["--require-hashes", "--no-deps", ONLY_BINARY, *index, "-r", str(lock)]


def _pip_reason(output: str) -> str:
    """The line of pip's output that says why resolution failed."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for ln in lines:
        if "No matching distribution" in ln or "ResolutionImpossible" in ln or "conflict" in ln.lower() \
            or "DO NOT MATCH THE HASHES" in ln:
            return re.sub(r"^ERROR:\s*", "", ln)
    return re.sub(r"^ERROR:\s*", "", lines[-1]) if lines else "pip gave no reason"


def resolve_pins(stack: Stack, python: str = sys.executable, runner=subprocess.run,
                 wheels: Path | None = None) -> dict:
    """Dry-run the stack's pins (what `stack lock` records); pip's installation report, or StackError
    naming the pin that cannot be resolved here and the fix."""
    pins = parse_pins(stack)
    reqs = [f"{n}=={v}" for n, v in pins]
    index = piplock.index_args(wheels)
    with tempfile.TemporaryDirectory(prefix="stackproof-pip-") as tmp:
        report = Path(tmp) / "report.json"
        proc = runner(dry_run_command(python, reqs, report, index), capture_output=True, text=True)
        if proc.returncode == 0 and report.is_file():
            return json.loads(report.read_text())
        reason = _pip_reason((proc.stdout or "") + "\n" + (proc.stderr or ""))
        culprit = None
        if len(pins) > 1:      # which pin? resolve each alone (only on this error path)
            for name, version in pins:
                one = runner(dry_run_command(python, [f"{name}=={version}"], Path(tmp) / "one.json", index),
                             capture_output=True, text=True)
                if one.returncode != 0:
                    culprit = (name, version)
                    reason = _pip_reason((one.stdout or "") + "\n" + (one.stderr or ""))
                    break
        name, version = culprit or pins[0]
        good = KNOWN_GOOD.get(name)
        fix = f"pin {good}" if good and good != version else "pin a version that `pip install --dry-run` resolves"
        raise StackError(f"stack {stack.name}: {name}=={version} cannot be resolved from "
                         f"{'the wheels in ' + str(wheels) if wheels else 'PyPI'} here ({reason}): {fix} in {stack.file}")


def lock(stack: Stack, python: str = sys.executable, runner=subprocess.run, wheels: Path | None = None) -> str:
    """Write the stack's hash lock from its pins (`stackproof stack lock NAME`); a one-line summary."""
    if not stack.install_pip:
        return f"stack {stack.name}: no install.pip pins, nothing to lock"
    progress(f"{stack.name}: resolving {', '.join(stack.install_pip)} (pip --dry-run)")
    report = resolve_pins(stack, python, runner, wheels)
    path = piplock.write_lock(stack, report)
    return f"stack {stack.name}: locked {len(report.get('install', []))} distribution(s) with sha256 in {path}"


def resolve_lock(stack: Stack, python: str = sys.executable, runner=subprocess.run,
                 wheels: Path | None = None) -> dict[str, str]:
    """Dry-run the stack's lock (hashes checked, nothing else pulled in): {name: version} pip would
    install, or StackError with pip's reason and the fix."""
    lock_file = piplock.check_lock(stack, parse_pins(stack))
    with tempfile.TemporaryDirectory(prefix="stackproof-pip-") as tmp:
        report = Path(tmp) / "report.json"
        proc = runner(dry_run_command(python, locked_args(lock_file, piplock.index_args(wheels)), report),
                      capture_output=True, text=True)
        if proc.returncode == 0 and report.is_file():
            data = json.loads(report.read_text())
            return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in data.get("install", [])}
        reason = _pip_reason((proc.stdout or "") + "\n" + (proc.stderr or ""))
        where = f"the wheels in {wheels}" if wheels else "the index"
        raise StackError(f"stack {stack.name}: {lock_file.name} cannot be installed from {where} ({reason}): "
                         f"check the wheels, or run `stackproof stack lock {stack.name}` if the pins changed")


# ---------------------------------------------------------------- install

def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_manifest(prefix: Path) -> dict | None:
    try:
        return json.loads((prefix / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def missing_apt(packages, query=None) -> list[str]:
    """Debian packages of `packages` that are not installed."""
    def installed(pkg: str) -> bool:
        proc = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
        return proc.returncode == 0 and "install ok installed" in proc.stdout
    query = query or installed
    return [p for p in packages if not query(p)]


def check_apt(stack: Stack, query=None) -> None:
    missing = missing_apt(stack.install_apt, query)
    if missing:
        raise StackError(f"stack {stack.name}: Debian packages not installed: {' '.join(missing)}: run "
                         f"`apt-get install -y {' '.join(missing)}` (or scripts/install-deps.sh)")


def _size_mb(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total // (1 << 20)


def install(stack: Stack, python: str = sys.executable, wheels: Path | None = None) -> str:
    """Install one stack from its hash lock (idempotent); a one-line summary. `wheels`: a local wheel
    directory instead of the index."""
    check_apt(stack)
    if not stack.install_pip:
        return f"stack {stack.name}: system packages present ({' '.join(stack.install_apt) or 'none needed'})"
    if stack.prefix is None:
        raise StackError(f"stack {stack.name}: install.pip needs a `prefix:` in {stack.file}")
    prefix = stack.prefix
    pins = parse_pins(stack)
    lock_file = piplock.check_lock(stack, pins)
    wanted = [f"{n}=={v}" for n, v in pins] + [f"lock:{sha256_text(lock_file.read_text())}"]
    manifest = read_manifest(prefix)
    if manifest and manifest.get("pins") == wanted and \
            Path(prefix, "bin", "python").exists():
        return f"stack {stack.name}: up-to-date at {prefix} ({', '.join(stack.install_pip)})"
    progress(f"{stack.name}: resolving {lock_file.name} (pip --dry-run --require-hashes)")
    planned = resolve_lock(stack, python, wheels=wheels)
    t0 = time.monotonic()
    if prefix.exists() and not Path(prefix, "pyvenv.cfg").is_file() and any(prefix.iterdir()):
        raise StackError(f"stack {stack.name}: {prefix} exists and is not a stack venv: move it away or "
                         "change `prefix:`")
    progress(f"{stack.name}: venv at {prefix}, installing {len(planned)} distributions "
             f"({', '.join(f'{k}=={v}' for k, v in sorted(planned.items()))})")
    prefix.parent.mkdir(parents=True, exist_ok=True)
    if not Path(prefix, "bin", "python").exists():
        _run([python, "-m", "venv", str(prefix)], stack, "create the venv")
    venv_py = str(prefix / "bin" / "python")
    _run(pip_command(venv_py, ["install", "--quiet", *locked_args(lock_file, piplock.index_args(wheels))]), stack,
         "pip install")
    listing = subprocess.run(pip_command(venv_py, ["list", "--format", "json"]), capture_output=True,
                             text=True, check=True).stdout
    installed = {d["name"].lower(): d["version"] for d in json.loads(listing)}
    stale = sorted(set(installed) - set(planned) - {"pip", "setuptools"})
    if stale:       # left over from earlier pins: the venv holds exactly what the pins resolve to
        _run(pip_command(venv_py, ["uninstall", "--quiet", "-y", *stale]), stack, "pip uninstall (old pins)")
        installed = {k: v for k, v in installed.items() if k not in stale}
    wrong = [f"{n}=={installed.get(n)} (wanted {v})" for n, v in pins if installed.get(n) != v]
    if wrong:
        raise StackError(f"stack {stack.name}: pip installed {', '.join(wrong)} in {prefix}: remove the prefix "
                         f"and run `stackproof stack install {stack.name}` again")
    seconds = round(time.monotonic() - t0, 1)
    size = _size_mb(prefix)
    (prefix / MANIFEST).write_text(json.dumps({
        "stack": stack.name, "pins": wanted,
        "installed": {k: v for k, v in sorted(installed.items()) if k not in ("pip", "setuptools")},
        "python": sys.version.split()[0], "seconds": seconds, "size_mb": size,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=2) + "\n")
    return f"stack {stack.name}: installed at {prefix} in {seconds} s, {size} MB"


def _run(cmd: list[str], stack: Stack, what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise StackError(f"stack {stack.name}: {what} failed ({tail}): fix the cause and run "
                         f"`stackproof stack install {stack.name}` again")

