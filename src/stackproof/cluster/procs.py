"""Process helpers for the test cluster: run a command, read PID files, liveness, stop and wait,
and /proc scans that find this cluster's processes by their command line or cgroup."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from stackproof.cluster import cgroups
from stackproof.errors import StackproofError


def log(msg: str) -> None:
    print(f"[cluster] {msg}", file=sys.stderr, flush=True)


def sh(cmd: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    """Run a command; a non-zero exit is a StackproofError carrying its stderr."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    except OSError as exc:
        raise StackproofError(f"cannot run {cmd[0]}: {exc.strerror}") from None
    if check and proc.returncode != 0:
        raise StackproofError(f"command failed ({proc.returncode}): {' '.join(cmd)}: "
                              f"{proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def alive(pid: int | None) -> bool:
    """True for a live, non-zombie process."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def exited(pid: int | None) -> bool:
    """True once a process is gone for good: no /proc entry, or a zombie none of whose threads still
    runs. alive() alone is not enough to wait on: a multi-threaded process (QEMU) whose main thread
    has exited shows its leader as a zombie while its other threads still run and hold its memory,
    files and devices."""
    if not pid:
        return True
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return True
    except OSError:
        return not alive(pid)
    return tasks == [str(pid)] and not alive(pid)


def read_pid(path: Path) -> int | None:
    try:
        pid = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if pid > 1 else None


def kill_and_wait(pids: list[int], timeout: float = 20.0, sig: int = signal.SIGTERM) -> list[int]:
    """Signal the live processes, wait for them, SIGKILL what ignored `sig`. Returns the pids that
    were alive and are now gone."""
    pids = [p for p in pids if alive(p)]
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    for p in pids:
        if alive(p):
            log(f"pid {p} ignored signal {sig} for {timeout:.0f}s: SIGKILL")
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if not alive(p)]


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def daemons_of(root: Path) -> list[int]:
    """munged, slurmctld, slurmd and fwq-noise started for this run directory: one of their
    arguments is a path below it (config, socket, PID file), or (fwq-noise) its output is."""
    prefix = f"{root}/"
    pids = []
    for pid in all_pids():
        cmd = cmdline(pid)
        name = Path(cmd[0]).name if cmd else ""
        if name in ("slurmctld", "slurmd", "munged"):
            mine = any(prefix in arg for arg in cmd[1:])
        elif name == "fwq-noise":   # the noise daemon writes its report into the run dir's log/
            try:
                mine = os.readlink(f"/proc/{pid}/fd/1").startswith(prefix)
            except OSError:
                mine = False
        else:
            continue
        if mine and alive(pid):
            pids.append(pid)
    return pids


def procs_in_cgroups(cgroup_dirs: list[Path]) -> list[int]:
    """Every process listed in these cgroup directories or below (v1 `tasks` / v2 `cgroup.procs`)."""
    pids: set[int] = set()
    for top in cgroup_dirs:
        for f in list(top.rglob("cgroup.procs")) + list(top.rglob("tasks")):
            try:
                pids.update(int(x) for x in f.read_text().split())
            except (OSError, ValueError):
                pass
    pids.discard(os.getpid())
    return sorted(p for p in pids if alive(p))


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


def has_non_loopback_address() -> bool:
    proc = subprocess.run(["ip", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True)
    return proc.returncode != 0 or bool(proc.stdout.strip())


def cgroup_mode() -> str:
    """'v1', 'v2' or 'hybrid' (stackproof.cluster.cgroups.hierarchy)."""
    return cgroups.hierarchy()


def pid1_is_systemd() -> bool:
    try:
        return Path("/proc/1/comm").read_text().strip() == "systemd"
    except OSError:
        return False


def node_cgroups(node: str) -> list[Path]:
    """The job cgroups Slurm made for `node` on this host's hierarchy (stackproof.cluster.cgroups.node_cgroups)."""
    return cgroups.node_cgroups(node, cgroups.hierarchy())


def remove_cgroup_tree(root: Path) -> bool:
    """rmdir depth first (a cgroup directory goes only once its children are gone); True if gone."""
    for d in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        try:
            d.rmdir()
        except OSError:
            pass
    try:
        root.rmdir()
    except OSError:
        pass
    return not root.exists()


def wait_pidfile(pidfile: Path, what: str, log: Path, timeout: float = 10.0, poll: float = 0.05) -> int:
    """The PID a daemon wrote to `pidfile`, once that process is alive; StackproofError naming the
    log (and its last lines) when it does not start within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = read_pid(pidfile)
        if alive(pid):
            return pid
        time.sleep(poll)
    tail = log.read_text(errors="replace").splitlines()[-5:] if log.is_file() else []
    raise StackproofError(f"{what} did not start; see {log}" + ("\n  " + "\n  ".join(tail) if tail else ""))
