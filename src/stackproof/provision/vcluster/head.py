"""The head node: one network namespace (`spk-vc-<id>`) holding a bridge, one tap per node, dnsmasq
(DHCP + TFTP), an HTTP server for the artifacts (httpserve.py), munged, slurmctld and the nodes'
virtiofsd. Nothing listens outside the namespace. Every process the head starts lives in the
namespace, so `down` finds them all with `ip netns pids` (QEMU included) and then deletes the
namespace, which removes bridge and taps.

One cluster per root directory: <id> is derived from the root's path, so two checkouts (or two
STACKPROOF_VCLUSTER_DIR) run side by side; bridge, taps and the 10.77.0.0/24 subnet live inside
each namespace and never meet, and each `down` deletes only its own namespace and runtime dir.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from stackproof.cluster.procs import alive, exited, read_pid, wait_pidfile  # noqa: F401 - one process helper (boot.py imports them here)
from stackproof.errors import StackproofError
from stackproof.paths import REPO
from stackproof.provision.vcluster.netboot import BRIDGE, HTTP_PORT
from stackproof.provision.vcluster.nodesconf import HEAD_ADDR, NETWORK

NETNS_PREFIX = "spk-vc-"
RUNTIME_BASE = Path("/run/stackproof")


def root_dir() -> Path:
    return Path(os.environ.get("STACKPROOF_VCLUSTER_DIR", REPO / "build" / "vcluster")).resolve()


def cluster_id(root: Path) -> str:
    return hashlib.sha1(str(Path(root).resolve()).encode()).hexdigest()[:8]


NETNS = NETNS_PREFIX + cluster_id(root_dir())


def select(root: Path) -> None:
    """Act on the cluster of `root` (its namespace) from now on."""
    global NETNS
    NETNS = NETNS_PREFIX + cluster_id(root)


def ns() -> list[str]:
    return ["ip", "netns", "exec", NETNS]


def runtime_dir(root: Path) -> Path:
    """/run/stackproof/vcluster-<id>: what dnsmasq serves (it drops to `nobody`, who may not be able to
    traverse the checkout: a 0700 home or mktemp -d). Root-owned, world-traversable, nothing secret."""
    return RUNTIME_BASE / f"vcluster-{cluster_id(root)}"


def make_runtime_dir(root: Path) -> Path:
    """Create (or check) RUNTIME_BASE and runtime_dir(root): real directories, owned by us, mode 0755
    (never followed through a symlink another user planted)."""
    out = runtime_dir(root)
    for d in (RUNTIME_BASE, out):
        try:
            os.mkdir(d, 0o755)
        except FileExistsError:
            pass
        st = os.lstat(d)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise StackproofError(f"{d}: not a directory owned by uid {os.geteuid()} and writable by it alone "
                                  f"(a symlink, or someone else's): remove it")
        os.chmod(d, 0o755)
    return out


def remove_runtime_dir(root: Path) -> None:
    shutil.rmtree(runtime_dir(root), ignore_errors=True)
    try:
        RUNTIME_BASE.rmdir()        # only when empty (no other cluster)
    except OSError:
        pass


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
    sh(ns() + ["ip", "link", "set", "lo", "up"])
    links = sh(ns() + ["ip", "-o", "link", "show"]).stdout
    if f" {BRIDGE}:" not in links:
        sh(ns() + ["ip", "link", "add", BRIDGE, "type", "bridge"])
        sh(ns() + ["ip", "addr", "add", f"{HEAD_ADDR}/{NETWORK.prefixlen}", "dev", BRIDGE])
        sh(ns() + ["ip", "-6", "addr", "add", "fd77::1/64", "dev", BRIDGE])
        sh(ns() + ["ip", "link", "set", BRIDGE, "up"])
    for i in range(taps):
        tap = f"tap{i}"
        if f" {tap}:" not in links:
            sh(ns() + ["ip", "tuntap", "add", "dev", tap, "mode", "tap"])
            sh(ns() + ["ip", "link", "set", tap, "master", BRIDGE])
            sh(ns() + ["ip", "link", "set", tap, "up"])


def start_dnsmasq(conf: Path, run: Path) -> int:
    pid = read_pid(run / "dnsmasq.pid")
    if alive(pid):
        os.kill(pid, signal.SIGTERM)
        _wait_gone([pid])
    sh(ns() + ["dnsmasq", f"--conf-file={conf}"])
    return _wait_pidfile(run / "dnsmasq.pid", "dnsmasq", run / "dnsmasq.log")


def start_http(root: Path, run: Path, allow: Path) -> int:
    """The artifacts server (httpserve.py): only the files `allow` lists, each to the nodes it names."""
    pid = read_pid(run / "http.pid")
    if alive(pid):
        os.kill(pid, signal.SIGTERM)       # the allow list may have changed
        _wait_gone([pid])
    log = open(run / "http.log", "ab")
    proc = subprocess.Popen(ns() + [sys.executable, "-m", "stackproof.provision.vcluster.httpserve", "--bind", HEAD_ADDR,
                                  "--port", str(HTTP_PORT), "--root", str(root / "http"), "--allow", str(allow)],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    (run / "http.pid").write_text(f"{proc.pid}\n")
    return proc.pid


def start_virtiofsd(cmd: list[str], socket: Path, logfile: Path, timeout: float = 15.0) -> int:
    """One virtiofsd (one node, one shared directory) in the namespace; returns once its socket exists
    (QEMU connects to it at start)."""
    socket.unlink(missing_ok=True)
    log = open(logfile, "ab")
    proc = subprocess.Popen(ns() + cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
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
    sh(ns() + ["/usr/sbin/munged", "--force", f"--socket={run}/munge.socket", f"--key-file={key}",
             f"--pid-file={run}/munged.pid", f"--log-file={run}/munged.log", f"--seed-file={run}/munged.seed"])
    return _wait_pidfile(run / "munged.pid", "munged", run / "munged.log")


def start_slurmctld(conf: Path, run: Path) -> int:
    """slurmctld insists that the host is named like SlurmctldHost: its own UTS namespace, 'head'; and
    a mount namespace whose /etc/hosts (run/etc/hosts) resolves 'head' to the head's address, which
    it binds alone (CommunicationParameters=NoCtldInAddrAny), not every address."""
    pid = read_pid(run / "slurmctld.pid")
    if alive(pid):
        os.kill(pid, signal.SIGTERM)
        _wait_gone([pid])
    hosts = run / "etc" / "hosts"
    inner = (f"hostname head && mount --bind {shlex.quote(str(hosts))} /etc/hosts && "
             f"exec /usr/sbin/slurmctld -c -f {shlex.quote(str(conf))}")
    sh(ns() + ["unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c", inner])
    return _wait_pidfile(run / "slurmctld.pid", "slurmctld", run / "slurmctld.log")


def _wait_pidfile(path: Path, what: str, logfile: Path, timeout: float = 15.0) -> int:
    return wait_pidfile(path, what, logfile, timeout, poll=0.1)


def qemu_pid(pidfile: Path) -> int | None:
    """The pid in a node's QEMU pid file, only while it names a QEMU process (a stale file may name a
    reused pid: that one is never signalled)."""
    pid = read_pid(pidfile)
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] if pid else b""
    except OSError:
        return None
    return pid if os.path.basename(argv0).startswith(b"qemu-system") else None


def _wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    """Wait until every process has exited with all its threads (procs.exited); those still there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(exited(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if not exited(p)]


def teardown(also: list[int] = ()) -> list[int]:
    """Stop every process in the namespace and `also` (the nodes' QEMU, by their pid files), TERM
    then KILL, and return only when each has exited with all its threads; then delete the namespace.
    Returns the pids found."""
    pids = sorted(set(netns_pids()) | {p for p in also if p and not exited(p)})
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
    left = [p for p in pids if not exited(p)]
    if left:
        raise StackproofError(f"processes {left} in namespace {NETNS} did not exit")
    return pids
