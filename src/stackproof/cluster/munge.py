"""munged for one test cluster: a fresh random key per `up` (0400, removed by `down`), its own
socket, PID and log files in the run directory."""
from __future__ import annotations

import os
import time
from pathlib import Path

from stackproof.errors import StackproofError
from stackproof.cluster.procs import read_pid, sh

KEY_BYTES = 1024


def paths(root: Path) -> dict[str, Path]:
    m = root / "munge"
    return {"dir": m, "key": m / "munge.key", "socket": m / "munge.socket.2", "pid": m / "munged.pid",
            "seed": m / "munged.seed", "log": root / "log/munged.log"}


def new_key(root: Path) -> Path:
    """A fresh key (never reused across `up`s): written 0400 by root from the start, O_EXCL so a
    planted file or link is never followed."""
    p = paths(root)
    p["dir"].mkdir(mode=0o700, exist_ok=True)
    os.chmod(p["dir"], 0o700)
    p["key"].unlink(missing_ok=True)
    fd = os.open(p["key"], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o400)
    with os.fdopen(fd, "wb") as fh:
        fh.write(os.urandom(KEY_BYTES))
    return p["key"]


def remove_key(root: Path) -> bool:
    key = paths(root)["key"]
    if key.exists():
        key.unlink()
        return True
    return False


def start(root: Path, system_cpus: str | None) -> int:
    """Start munged with the run directory's key; bind it to `system_cpus` when given. Returns its pid."""
    p = paths(root)
    if not p["key"].exists():
        raise StackproofError(f"munge key {p['key']} is missing")
    p["pid"].unlink(missing_ok=True)
    sh(["/usr/sbin/munged", "--force", f"--socket={p['socket']}", f"--key-file={p['key']}",
        f"--pid-file={p['pid']}", f"--log-file={p['log']}", f"--seed-file={p['seed']}"])
    for _ in range(100):
        pid = read_pid(p["pid"])
        if pid and p["socket"].exists():
            break
        time.sleep(0.05)
    else:
        raise StackproofError(f"munged did not start; see {p['log']}")
    if system_cpus:
        sh(["taskset", "-a", "-c", "-p", system_cpus, str(pid)])
    return pid
