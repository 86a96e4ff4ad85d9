"""The head node: one network namespace (`spk-vc`) holding a bridge, one tap per node, dnsmasq
(DHCP + TFTP), an HTTP server for the artifacts, munged, slurmctld and the nodes' virtiofsd. Nothing listens outside the
namespace. Every process the head starts lives in the namespace, so `down` finds them all with
`ip netns pids` (QEMU included) and then deletes the namespace, which removes bridge and taps.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..cluster.procs import alive, read_pid  # noqa: F401 - one process helper (boot.py imports them here)
from ..errors import StackproofError
from .netboot import BRIDGE, HTTP_PORT
from .nodesconf import HEAD_ADDR, NETWORK

NETNS = "spk-vc"
NS = ["ip", "netns", "exec", NETNS]


def sh(cmd: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise StackproofError(f"command failed ({proc.returncode}): {' '.join(cmd)}: {proc.stderr.strip()[-400:]}")
    return proc


def netns_exists() -> bool:
    return Path(f"/run/netns/{NETNS}").exists()


def netns_pids() -> list[int]:
    if not netns_exists():
        return []
    proc = sh(["ip", "netns", "pids", NETNS], check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def make_netns(taps: int) -> None:
    """Namespace, bridge with the head's address (and a ULA so dnsmasq answers iPXE's router
    solicitations at once), one tap per node. Idempotent."""
    if not netns_exists():
        sh(["ip", "netns", "add", NETNS])
    sh(NS + ["ip", "link", "set", "lo", "up"])
    links = sh(NS + ["ip", "-o", "link", "show"]).stdout
    if f" {BRIDGE}:" not in links:
        sh(NS + ["ip", "link", "add", BRIDGE, "type", "bridge"])
        sh(NS + ["ip", "addr", "add", f"{HEAD_ADDR}/{NETWORK.prefixlen}", "dev", BRIDGE])
        sh(NS + ["ip", "-6", "addr", "add", "fd77::1/64", "dev", BRIDGE])
        sh(NS + ["ip", "link", "set", BRIDGE, "up"])
    for i in range(taps):
        tap = f"tap{i}"
        if f" {tap}:" not in links:
            sh(NS + ["ip", "tuntap", "add", "dev", tap, "mode", "tap"])
            sh(NS + ["ip", "link", "set", tap, "master", BRIDGE])
            sh(NS + ["ip", "link", "set", tap, "up"])


def start_dnsmasq(conf: Path, run: Path) -> int:
    pid = read_pid(run / "dnsmasq.pid")
    if alive(pid):
        os.kill(pid, signal.SIGTERM)
        _wait_gone([pid])
    sh(NS + ["dnsmasq", f"--conf-file={conf}"])
    return _wait_pidfile(run / "dnsmasq.pid", "dnsmasq", run / "dnsmasq.log")


def start_http(root: Path, run: Path) -> int:
    pid = read_pid(run / "http.pid")
    if alive(pid):
        return pid
    log = open(run / "http.log", "ab")
    proc = subprocess.Popen(NS + [sys.executable, "-m", "http.server", str(HTTP_PORT), "--bind", HEAD_ADDR,
                                  "--directory", str(root / "http")],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    (run / "http.pid").write_text(f"{proc.pid}\n")
    return proc.pid


def start_virtiofsd(cmd: list[str], socket: Path, logfile: Path, timeout: float = 15.0) -> int:
    """One virtiofsd (one node, one shared directory) in the namespace; returns once its socket exists
    (QEMU connects to it at start)."""
    socket.unlink(missing_ok=True)
    log = open(logfile, "ab")
    proc = subprocess.Popen(NS + cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + timeout
    while not socket.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = logfile.read_text(errors="replace").splitlines()[-5:] if logfile.is_file() else []
            raise StackproofError(f"virtiofsd did not start ({socket}); see {logfile}"
                                  + ("\n  " + "\n  ".join(tail) if tail else ""))
        time.sleep(0.05)
    return proc.pid


def start_munged(key: Path, run: Path) -> int:
    pid = read_pid(run / "munged.pid")
    if alive(pid):
        return pid
    sh(NS + ["/usr/sbin/munged", "--force", f"--socket={run}/munge.socket", f"--key-file={key}",
             f"--pid-file={run}/munged.pid", f"--log-file={run}/munged.log", f"--seed-file={run}/munged.seed"])
    return _wait_pidfile(run / "munged.pid", "munged", run / "munged.log")


def start_slurmctld(conf: Path, run: Path) -> int:
    """slurmctld insists that the host is named like SlurmctldHost: its own UTS namespace, 'head'."""
    pid = read_pid(run / "slurmctld.pid")
    if alive(pid):
        os.kill(pid, signal.SIGTERM)
        _wait_gone([pid])
    sh(NS + ["unshare", "--uts", "sh", "-c", f"hostname head && exec /usr/sbin/slurmctld -c -f {conf}"])
    return _wait_pidfile(run / "slurmctld.pid", "slurmctld", run / "slurmctld.log")


def _wait_pidfile(path: Path, what: str, logfile: Path, timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = read_pid(path)
        if alive(pid):
            return pid
        time.sleep(0.1)
    tail = logfile.read_text(errors="replace").splitlines()[-5:] if logfile.is_file() else []
    raise StackproofError(f"{what} did not start; see {logfile}" + ("\n  " + "\n  ".join(tail) if tail else ""))


def _wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def teardown() -> list[int]:
    """Stop every process in the namespace (TERM, then KILL), then delete it. Returns the pids found."""
    pids = netns_pids()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        left = _wait_gone(pids, 10.0 if sig == signal.SIGTERM else 5.0)
        if not left:
            break
    if netns_exists():
        sh(["ip", "netns", "del", NETNS])
    left = [p for p in pids if alive(p)]
    if left:
        raise StackproofError(f"processes {left} in namespace {NETNS} did not exit")
    return pids
