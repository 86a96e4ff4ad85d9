"""Starting the cluster's daemons: slurmctld (fresh or from its saved state), one slurmd per node
(in the node's namespaces for multi-node clusters) and the optional noise daemon.

slurmctld and slurmd read the daemons' configuration (CommunicationParameters=NoCtldInAddrAny,
NoInAddrAny: each binds the address its host name resolves to, never 0.0.0.0) in a private mount
namespace whose /etc/hosts is the cluster's (<run dir>/etc/hosts): the controller's name resolves to
the controller's address, a node's to its node address (127.0.0.1 for a single node), whatever this
host's own /etc/hosts says."""
from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

from stackproof.cpulist import format_list
from stackproof.errors import InputError, StackproofError
from stackproof.cluster.procs import sh, wait_pidfile
from stackproof.cluster.state import NOISE_DAEMON


def slurmctld_pidfile(root: Path) -> Path:
    return root / "run/slurmctld.pid"


def slurmd_pidfile(root: Path, node: str) -> Path:
    return root / f"run/slurmd-{node}.pid"


def _wait_pid(pidfile: Path, what: str, log: Path, timeout: float = 10.0) -> int:
    return wait_pidfile(pidfile, what, log, timeout)


def _private_hosts(root: Path, command: list[str], hostname: str | None = None) -> list[str]:
    """`command` in a private mount namespace (and UTS namespace with `hostname`) whose /etc/hosts is
    the cluster's; as it is when the cluster has none (one rendered before it had one)."""
    hosts = root / "etc/hosts"
    if not hosts.is_file():
        return command
    inner = (f"hostname {shlex.quote(hostname)} && " if hostname else "") + \
        f"mount --bind {shlex.quote(str(hosts))} /etc/hosts && exec {shlex.join(command)}"
    return ["unshare", *(["--uts"] if hostname else []), "--mount", "--propagation", "private", "sh", "-c", inner]


def start_slurmctld(root: Path, conf: Path, env: dict, netns: str | None, clear: bool) -> int:
    """`clear` (-c) only for a new cluster: a restart keeps the saved jobs and node states."""
    slurmctld_pidfile(root).unlink(missing_ok=True)
    cmd = (["nsenter", f"--net=/run/netns/{netns}"] if netns else []) + \
        _private_hosts(root, ["/usr/sbin/slurmctld"] + (["-c"] if clear else []) + ["-f", str(conf)])
    sh(cmd, env=env)
    return _wait_pid(slurmctld_pidfile(root), "slurmctld", root / "log/slurmctld.log")


def start_slurmd(root: Path, conf: Path, env: dict, node: str, netns: str | None) -> int:
    pidfile = slurmd_pidfile(root, node)
    pidfile.unlink(missing_ok=True)
    slurmd = ["/usr/sbin/slurmd", "-f", str(conf), "-N", node]
    if netns:
        # own network, host name and (private) mount namespace for the cluster's /etc/hosts
        cmd = ["nsenter", f"--net=/run/netns/{netns}"] + _private_hosts(root, slurmd, hostname=node)
    else:
        cmd = _private_hosts(root, slurmd)
    sh(cmd, env=env)
    return _wait_pid(pidfile, f"slurmd {node}", root / f"log/slurmd-{node}.log")


def start_noise_daemon(root: Path, signature: str, system_cpus: str | None) -> int:
    """A node daemon that steals the CPU like snmpd or irqbalance did on the paper's nodes:
    fwq-noise with one thread whose every burst lands on a CPU the daemon may use, drawn at random
    (--roam). The profile treats it like the other daemons: bound to the system CPUs when the profile
    reserves them, free to go to any CPU otherwise. Why --roam rather than leaving the thread to the
    OS: a SCHED_FIFO thread never leaves the CPU it started on (it can always preempt the
    application there), and it started on CPU 0 in 7-8 of 8 runs here, so which application core
    suffered under baseline was a fact about the start, not about the profile (docs/noise.md). Its
    bursts fall on the realtime grid (--sync, multiples of the period), so a trace attributes them by
    phase, apart from any co-tenant's. Checked alive after start (a signature whose duration is not
    shorter than its period makes fwq-noise exit at once)."""
    from stackproof.noise.run import binary
    m = NOISE_DAEMON.fullmatch(signature)
    if not m:
        raise InputError(f"--noise-daemon {signature!r}: expected FREQHz-DURATION, e.g. 10Hz-2500us")
    log_path = root / "log/noise-daemon.json"
    where = system_cpus or format_list(os.sched_getaffinity(0))
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen([str(binary("fwq-noise")), "--freq", m.group(1), "--duration", m.group(2),
                                 "--cpus", where, "--roam", "--sync"], stdout=log_file, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        if system_cpus:
            sh(["taskset", "-a", "-c", "-p", system_cpus, str(proc.pid)])
        time.sleep(0.3)
    finally:
        if proc.poll() is not None:
            proc.wait()
            detail = log_path.read_text(errors="replace").strip().splitlines()
            raise StackproofError(f"--noise-daemon {signature}: fwq-noise exited at once "
                                  f"({detail[-1] if detail else f'exit {proc.returncode}'})")
    return proc.pid
