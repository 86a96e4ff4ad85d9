"""A real Slurm test cluster on this machine: munged + slurmctld + slurmd, configured by
`stackproof slurm render` for the local node type and a core-specialization profile.

Layout: everything lives in one run directory ($STACKPROOF_RUN_DIR, default /tmp/stackproof-cluster):
etc/ (rendered configs, hosts), munge/ (generated key 0400, socket), state/, spool/, log/, run/ (PID
files), tmpfs/, dev/ (fake GPU device files), cluster.json (what `up` started).

Modes:
- single node: one slurmd named after this host, controller on 127.0.0.1;
- --nodes N: N slurmd, each in its own network + UTS (+ mount, for a private /etc/hosts) namespace
  with hostname nI and address 10.99.0.(10+I), bridged in the controller's namespace (10.99.0.1).
  This host joins the bridge as 10.99.0.254, so Slurm clients run from anywhere on it.

`up` is idempotent: a running cluster with the same settings is left alone except that dead daemons
are restarted; different settings (another profile) restart Slurm with the new configuration.
"""
from __future__ import annotations

import argparse
import json
import re
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import StackproofError
from .nodetype import from_host
from .profiles import plan, profile_names
from .slurmconf import Site, render, write_tree

DEFAULT_RUN_DIR = "/tmp/stackproof-cluster"
DEFAULT_PORTS = (17817, 17818)
NETNS_PREFIX = "spk"
HOST_VETH = "spk-host"            # root-namespace end of the link to the cluster bridge
SUBNET = "10.99.0"
REQUIRED = {"slurmctld": "slurmctld", "slurmd": "slurmd", "srun": "slurm-client", "sinfo": "slurm-client",
            "munged": "munge", "ip": "iproute2", "nsenter": "util-linux", "unshare": "util-linux",
            "lstopo-no-graphics": "hwloc"}


def log(msg: str) -> None:
    print(f"[cluster] {msg}", file=sys.stderr, flush=True)


def run_dir() -> Path:
    return Path(os.environ.get("STACKPROOF_RUN_DIR", DEFAULT_RUN_DIR))


@dataclass
class Settings:
    """What defines a cluster; `up` with equal settings is a no-op."""
    profile: str = "baseline"
    k: int | None = None
    nodes: int = 1
    fake_gpus: int = 0
    ports: tuple[int, int] = DEFAULT_PORTS
    mpibind_plugin: str | None = None
    mpibind_args: str = ""
    noise_daemon: str = ""          # e.g. "10Hz-2500us": a daemon-like noise source on the node

    def key(self) -> dict:
        d = asdict(self)
        d["ports"] = list(self.ports)
        return d


@dataclass
class State:
    settings: dict
    node_names: list[str]
    netns: list[str] = field(default_factory=list)
    munged_pid: int | None = None
    noise_pid: int | None = None
    system_cpus: str = ""
    app_cpus: str = ""


# ---- helpers ------------------------------------------------------------------------------------

def _sh(cmd: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise StackproofError(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr.strip()}")
    return proc


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _kill_and_wait(pids: list[int], timeout: float = 20.0) -> None:
    pids = [p for p in pids if _alive(p)]
    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    for p in pids:
        if _alive(p):
            log(f"pid {p} ignored SIGTERM for {timeout:.0f}s: SIGKILL")
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


def _has_non_loopback_address() -> bool:
    proc = subprocess.run(["ip", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True)
    return proc.returncode != 0 or bool(proc.stdout.strip())


def cgroup_mode() -> str:
    """'v1' for legacy/hybrid hierarchies (cpuset mounted as v1), 'v2' for a pure unified hierarchy."""
    if Path("/sys/fs/cgroup/cpuset").is_dir() and not Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return "v1"
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return "v2"
    return "v1"


def _pid1_is_systemd() -> bool:
    try:
        return Path("/proc/1/comm").read_text().strip() == "systemd"
    except OSError:
        return False


def find_mpibind_plugin() -> str | None:
    """The SPANK plugin from the repo build (or STACKPROOF_MPIBIND_PLUGIN), if built."""
    from .paths import REPO
    env = os.environ.get("STACKPROOF_MPIBIND_PLUGIN")
    if env:
        if env == "none":
            return None
        if not Path(env).is_file():
            raise StackproofError(f"STACKPROOF_MPIBIND_PLUGIN={env}: no such file")
        return env
    for cand in sorted(REPO.glob("build/mpibind/**/mpibind_slurm.so")):
        return str(cand)
    return None


# ---- the cluster ------------------------------------------------------------------------------

class Cluster:
    def __init__(self, root: Path | None = None):
        self.root = (root or run_dir()).resolve()
        self.state_file = self.root / "cluster.json"

    # paths
    @property
    def conf(self) -> Path:
        return self.root / "etc/slurm/slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge/munge.socket.2"

    def slurmd_pidfile(self, node: str) -> Path:
        return self.root / f"run/slurmd-{node}.pid"

    def load_state(self) -> State | None:
        try:
            return State(**json.loads(self.state_file.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def save_state(self, st: State) -> None:
        self.state_file.write_text(json.dumps(asdict(st), indent=1, sort_keys=True) + "\n")

    # environment for clients
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.conf)
        env["STACKPROOF_RUN_DIR"] = str(self.root)
        # Open MPI refuses to run as root without these (CI and containers run as root).
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        return env

    # ---- preflight ----
    def preflight(self, settings: Settings) -> None:
        if os.geteuid() != 0:
            raise StackproofError("must run as root: the test cluster starts daemons, namespaces and cgroups")
        missing = sorted({pkg for tool, pkg in REQUIRED.items()
                          if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists()})
        if missing:
            raise StackproofError(f"missing packages: {', '.join(missing)} (run scripts/install-deps.sh)")
        if settings.nodes < 1 or settings.nodes > 16:
            raise StackproofError(f"--nodes must be between 1 and 16 (got {settings.nodes})")
        if settings.fake_gpus < 0 or settings.fake_gpus > 16:
            raise StackproofError(f"--fake-gpus must be between 0 and 16 (got {settings.fake_gpus})")
        if settings.profile not in profile_names():
            raise StackproofError(f"unknown profile {settings.profile!r} (known: {', '.join(profile_names())})")
        if settings.nodes == 1:
            # slurmd resolves its listen address with AI_ADDRCONFIG, which fails when only loopback
            # is configured (a container started with --network none).
            if not _has_non_loopback_address():
                raise StackproofError("no network address besides loopback (a container with --network none?): "
                                      "a single-node cluster needs one; run the container with --network host, "
                                      "or use --nodes 2 (nodes get their own namespaces and addresses)")
            for port in settings.ports:
                if _port_in_use(port):
                    raise StackproofError(f"port {port} is in use (another Slurm or test cluster?): "
                                          f"choose others with --ports")

    # ---- up ----
    def up(self, settings: Settings) -> State:
        st = self.load_state()
        if st and st.settings == settings.key() and self._slurmctld_alive():
            restarted = self._restart_dead(st)
            log("already up" + (f"; restarted {', '.join(restarted)}" if restarted else ""))
            self._wait_ready(st)
            return st
        if st:
            log("settings changed: restarting the cluster with the new configuration")
        self.down(quiet=True)  # also stops orphaned daemons of this run directory
        self.preflight(settings)
        t0 = time.monotonic()
        try:
            st = self._start(settings)
        except BaseException:
            log("start failed: stopping what was started")
            self.down(quiet=True)
            raise
        log(f"up in {time.monotonic() - t0:.1f} s: {len(st.node_names)} node(s) {','.join(st.node_names)}, "
            f"profile {settings.profile}, system CPUs {st.system_cpus or '-'}, app CPUs {st.app_cpus}")
        return st

    def _start(self, s: Settings) -> State:
        r = self.root
        for d in ["etc", "munge", "state", "spool", "log", "run", "tmpfs", "dev"]:
            (r / d).mkdir(parents=True, exist_ok=True)
        r.chmod(0o755)
        multi = s.nodes > 1
        hostname = socket.gethostname().split(".")[0]
        names = [f"n{i}" for i in range(1, s.nodes + 1)] if multi else [hostname]
        st = State(settings=s.key(), node_names=names)
        self.save_state(st)  # so that a failing start can be cleaned by down()

        nt = from_host("local")
        prof = plan(nt, s.profile, k=s.k)
        st.system_cpus, st.app_cpus = prof.system_cpu_list, prof.app_cpu_list

        cg = cgroup_mode()
        site = Site(
            cluster_name="stackproof", nodes=names, slurm_user="root", run_dir=r,
            controller=hostname,  # slurmctld insists on its own hostname; the address picks the netns
            controller_addr=f"{SUBNET}.1" if multi else "127.0.0.1",
            node_addrs=[f"{SUBNET}.{10 + i}" for i in range(1, s.nodes + 1)] if multi else ["127.0.0.1"],
            slurmctld_port=s.ports[0], slurmd_port=s.ports[1], fake_gpus=s.fake_gpus,
            mpibind_plugin=s.mpibind_plugin, mpibind_args=s.mpibind_args,
            cgroup_plugin="autodetect" if cg == "v1" else "cgroup/v2",
            ignore_systemd=(cg == "v2" and not _pid1_is_systemd()),
            extra=[f"AuthInfo=socket={self.munge_socket}", "SlurmdDebug=info", "SlurmctldDebug=info"])
        files = render(nt, prof, site)
        write_tree(files, r)
        for n in names:
            (r / "spool" / n).mkdir(parents=True, exist_ok=True)
            (r / "tmpfs" / n).mkdir(parents=True, exist_ok=True)
        for i in range(s.fake_gpus):
            dev = r / "dev" / f"nvidia{i}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(195, i))  # character device, NVIDIA major
        self._start_munge(st, prof)
        if s.noise_daemon:
            self._start_noise_daemon(st, prof, s.noise_daemon)
        if multi:
            self._make_netns(st)
        self._start_slurmctld(st)
        for n in names:
            self._start_slurmd(st, n)
        self.save_state(st)
        self._wait_ready(st)
        return st

    def _start_munge(self, st: State, prof) -> None:
        m = self.root / "munge"
        m.chmod(0o700)
        key = m / "munge.key"
        if not key.exists():
            # A fresh random key per cluster, readable by its owner only; never committed or reused.
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
            with os.fdopen(fd, "wb") as fh:
                fh.write(os.urandom(1024))
        _sh(["/usr/sbin/munged", "--force", f"--socket={self.munge_socket}", f"--key-file={key}",
             f"--pid-file={m}/munged.pid", f"--log-file={self.root}/log/munged.log",
             f"--seed-file={m}/munged.seed"])
        for _ in range(50):
            pid = _read_pid(m / "munged.pid")
            if pid and self.munge_socket.exists():
                break
            time.sleep(0.1)
        else:
            raise StackproofError(f"munged did not start; see {self.root}/log/munged.log")
        st.munged_pid = pid
        if prof.reserve and prof.system_cpus:
            # The profile's system side for the daemon this cluster owns (munge is in its daemon set).
            _sh(["taskset", "-a", "-c", "-p", prof.system_cpu_list, str(pid)])

    def _start_noise_daemon(self, st: State, prof, signature: str) -> None:
        """A node daemon that steals the CPU like snmpd or irqbalance did on the paper's nodes:
        fwq-noise with one floating thread (the OS places it). The profile treats it like the other
        daemons: bound to the system CPUs when the profile reserves them, left to the OS otherwise
        (so free cores can absorb it). Its noise is what the profiles are meant to mitigate."""
        from .noise.run import binary
        m = re.fullmatch(r"(\d+(?:\.\d+)?)Hz-(\d+(?:\.\d+)?(?:ns|us|ms|s))", signature)
        if not m:
            raise StackproofError(f"--noise-daemon {signature!r}: expected FREQHz-DURATION, e.g. 10Hz-2500us")
        log_file = open(self.root / "log/noise-daemon.json", "w")
        proc = subprocess.Popen([str(binary("fwq-noise")), "--freq", m.group(1), "--duration", m.group(2),
                                 "--cpus", "0", "--float"], stdout=log_file, stderr=subprocess.STDOUT,
                                start_new_session=True)
        st.noise_pid = proc.pid
        self.save_state(st)
        if prof.reserve and prof.system_cpus:
            _sh(["taskset", "-a", "-c", "-p", prof.system_cpu_list, str(proc.pid)])

    def _make_netns(self, st: State) -> None:
        ctl = f"{NETNS_PREFIX}-ctl"
        st.netns = [ctl]
        self.save_state(st)
        ip = ["ip"]
        _sh(ip + ["netns", "add", ctl])
        _sh(ip + ["-n", ctl, "link", "set", "lo", "up"])
        _sh(ip + ["-n", ctl, "link", "add", "br0", "type", "bridge"])
        _sh(ip + ["-n", ctl, "addr", "add", f"{SUBNET}.1/24", "dev", "br0"])
        _sh(ip + ["-n", ctl, "link", "set", "br0", "up"])
        # The host itself joins the bridge (10.99.0.254), so Slurm clients run from the root namespace
        # (pytest, ReFrame, a shell) and every packet to 10.99.0.0/24 stays on this machine.
        _sh(ip + ["link", "add", HOST_VETH, "type", "veth", "peer", "name", "uplink", "netns", ctl])
        _sh(ip + ["-n", ctl, "link", "set", "uplink", "master", "br0", "up"])
        _sh(ip + ["addr", "add", f"{SUBNET}.254/24", "dev", HOST_VETH])
        _sh(ip + ["link", "set", HOST_VETH, "up"])
        hosts = ["127.0.0.1 localhost", f"{SUBNET}.1 {socket.gethostname().split('.')[0]} ctl"]
        for i, n in enumerate(st.node_names, start=1):
            ns = f"{NETNS_PREFIX}-{n}"
            _sh(ip + ["netns", "add", ns])
            st.netns.append(ns)
            self.save_state(st)
            _sh(ip + ["-n", ns, "link", "set", "lo", "up"])
            _sh(ip + ["-n", ctl, "link", "add", f"veth{i}", "type", "veth", "peer", "name", "eth0", "netns", ns])
            _sh(ip + ["-n", ctl, "link", "set", f"veth{i}", "master", "br0", "up"])
            _sh(ip + ["-n", ns, "addr", "add", f"{SUBNET}.{10 + i}/24", "dev", "eth0"])
            _sh(ip + ["-n", ns, "link", "set", "eth0", "up"])
            hosts.append(f"{SUBNET}.{10 + i} {n}")
        (self.root / "etc/hosts").write_text("\n".join(hosts) + "\n")

    def _start_slurmctld(self, st: State) -> None:
        netns = ["nsenter", f"--net=/run/netns/{st.netns[0]}"] if st.netns else []
        cmd = netns + ["/usr/sbin/slurmctld", "-c", "-f", str(self.conf)]
        _sh(cmd, env=self.env())
        for _ in range(100):
            if self._slurmctld_alive():
                return
            time.sleep(0.1)
        raise StackproofError(f"slurmctld did not start; see {self.root}/log/slurmctld.log")

    def _start_slurmd(self, st: State, node: str) -> None:
        pidfile = self.slurmd_pidfile(node)
        pidfile.unlink(missing_ok=True)
        if st.netns:
            # Own network, hostname and (private) mount namespace for a private /etc/hosts.
            inner = (f"hostname {node} && mount --bind {self.root}/etc/hosts /etc/hosts && "
                     f"exec /usr/sbin/slurmd -f {self.conf} -N {node}")
            cmd = ["nsenter", f"--net=/run/netns/{NETNS_PREFIX}-{node}", "unshare", "--uts", "--mount",
                   "--propagation", "private", "sh", "-c", inner]
        else:
            cmd = ["/usr/sbin/slurmd", "-f", str(self.conf), "-N", node]
        _sh(cmd, env=self.env())
        for _ in range(100):
            if _alive(_read_pid(pidfile)):
                return
            time.sleep(0.1)
        raise StackproofError(f"slurmd {node} did not start; see {self.root}/log/slurmd-{node}.log")

    def _slurmctld_alive(self) -> bool:
        return _alive(_read_pid(self.root / "run/slurmctld.pid"))

    def _restart_dead(self, st: State) -> list[str]:
        restarted = []
        if not _alive(st.munged_pid):
            self._start_munge(st, plan(from_host("local"), st.settings["profile"], k=st.settings["k"]))
            restarted.append("munged")
        if st.noise_pid and not _alive(st.noise_pid):
            self._start_noise_daemon(st, plan(from_host("local"), st.settings["profile"], k=st.settings["k"]),
                                     st.settings["noise_daemon"])
            restarted.append("noise daemon")
        for n in st.node_names:
            if not _alive(_read_pid(self.slurmd_pidfile(n))):
                self._start_slurmd(st, n)
                restarted.append(f"slurmd {n}")
        self.save_state(st)
        return restarted

    def _wait_ready(self, st: State, timeout: float = 60.0) -> None:
        """Ready = a job step runs on every node (sinfo 'idle' is unreliable after restarts)."""
        n = len(st.node_names)
        deadline = time.monotonic() + timeout
        last = ""
        probe = ["srun", f"-N{n}", f"-n{n}", "-t1"] + (["--mpibind=off"] if self._has_mpibind(st) else []) + ["true"]
        while time.monotonic() < deadline:
            if not self._slurmctld_alive():
                raise StackproofError(f"slurmctld exited; see {self.root}/log/slurmctld.log")
            try:
                proc = subprocess.run(probe, capture_output=True, text=True,
                                      env=self.env(), timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired as exc:
                last = (exc.stderr or b"").decode(errors="replace").strip()
                break
            if proc.returncode == 0:
                return
            last = proc.stderr.strip()
            time.sleep(0.3)
        queue = subprocess.run(["squeue"], capture_output=True, text=True,
                               env=self.env()).stdout
        raise StackproofError(f"cluster not ready after {timeout:.0f} s: {last}\n{queue}")

    @staticmethod
    def _has_mpibind(st: State) -> bool:
        return bool(st.settings.get("mpibind_plugin"))

    # ---- status ----
    def status(self) -> dict:
        st = self.load_state()
        if st is None:
            return {"up": False, "run_dir": str(self.root)}
        ctl_pid = _read_pid(self.root / "run/slurmctld.pid")
        daemons = {"munged": {"pid": st.munged_pid, "alive": _alive(st.munged_pid)},
                   "slurmctld": {"pid": ctl_pid, "alive": _alive(ctl_pid)}}
        if st.noise_pid:
            daemons["noise daemon"] = {"pid": st.noise_pid, "alive": _alive(st.noise_pid)}
        for n in st.node_names:
            pid = _read_pid(self.slurmd_pidfile(n))
            daemons[f"slurmd {n}"] = {"pid": pid, "alive": _alive(pid)}
        return {"up": True, "healthy": all(d["alive"] for d in daemons.values()), "run_dir": str(self.root),
                "settings": st.settings, "nodes": st.node_names, "netns": st.netns, "daemons": daemons,
                "system_cpus": st.system_cpus, "app_cpus": st.app_cpus,
                "slurm_conf": str(self.conf)}

    # ---- down ----
    def down(self, quiet: bool = False) -> None:
        st = self.load_state()
        if st is None:
            orphans = self._orphan_pids()
            if orphans:
                # Daemons of this run directory without cluster.json (an interrupted up/down).
                log(f"no cluster state, but daemons of {self.root} are running (pids {orphans}): stopping them")
                _kill_and_wait(orphans)
            elif not quiet:
                log("not up")
            return
        slurmd = [_read_pid(self.slurmd_pidfile(n)) for n in st.node_names]
        _kill_and_wait([p for p in slurmd if p])          # in parallel: slurmd takes seconds each
        ctl = _read_pid(self.root / "run/slurmctld.pid")
        _kill_and_wait([ctl] if ctl else [])
        # Job steps that outlived their slurmd (should not happen; be thorough).
        for p in self._stray_stepds(st):
            _kill_and_wait([p], timeout=5)
        if st.noise_pid:
            _kill_and_wait([st.noise_pid], timeout=5)
        if st.munged_pid:
            _kill_and_wait([st.munged_pid], timeout=5)
        for ns in reversed(st.netns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        if st.netns:  # normally gone with its peer in the controller namespace
            subprocess.run(["ip", "link", "del", HOST_VETH], capture_output=True)
        self._remove_cgroups(st)
        for f in (self.root / "run").glob("*.pid"):
            f.unlink(missing_ok=True)
        self.state_file.unlink(missing_ok=True)
        if not quiet:
            log(f"down: stopped {len(st.node_names)} slurmd, slurmctld, munged; removed "
                f"{len(st.netns)} namespaces and the cgroups")

    def _orphan_pids(self) -> list[int]:
        """Daemons started for this run directory: their command line names its config or socket."""
        pids = []
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                cmd = _cmdline(int(proc.name)).split()
                if cmd and Path(cmd[0]).name in ("slurmctld", "slurmd", "munged") and \
                        any(arg.startswith(str(self.root) + "/") or arg.startswith(f"--socket={self.root}/")
                            for arg in cmd[1:]):
                    pids.append(int(proc.name))
        return [p for p in pids if _alive(p)]

    def _stray_stepds(self, st: State) -> list[int]:
        """slurmstepd processes of this cluster's nodes (found by their /slurm_<node> cgroup)."""
        mine = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                if (proc / "comm").read_text().strip() != "slurmstepd":
                    continue
                cg = (proc / "cgroup").read_text()
            except OSError:
                continue
            if any(f"/slurm_{n}/" in cg for n in st.node_names):
                mine.append(int(proc.name))
        return mine

    @staticmethod
    def _remove_cgroups(st: State) -> None:
        base = Path("/sys/fs/cgroup")
        roots = []
        for n in st.node_names:
            roots += list(base.glob(f"*/slurm_{n}")) + list(base.glob(f"slurm_{n}"))
        for root in roots:
            # Depth first: a cgroup directory can only be removed once its children are gone.
            for d in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                try:
                    d.rmdir()
                except OSError:
                    pass
            try:
                root.rmdir()
            except OSError:
                pass

    # ---- exec ----
    def exec_cmd(self, cmd: list[str], node: str | None = None, **kw) -> subprocess.CompletedProcess:
        st = self.load_state()
        if st is None:
            raise StackproofError(f"no cluster is up (run dir {self.root}): run `stackproof cluster up`")
        if node is not None:
            if node not in st.node_names:
                raise StackproofError(f"unknown node {node!r} (nodes: {', '.join(st.node_names)})")
            pid = _read_pid(self.slurmd_pidfile(node))
            prefix = ["nsenter", "-t", str(pid), "--net", "--uts", "--mount"] if st.netns else []
        else:
            prefix = []  # clients reach the controller from the root namespace (see _make_netns)
        return subprocess.run(prefix + cmd, env=self.env(), **kw)


# ---- CLI ------------------------------------------------------------------------------------------

def _parse_ports(text: str) -> tuple[int, int]:
    try:
        a, b = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("--ports takes SLURMCTLD,SLURMD (e.g. 17817,17818)")
    return a, b


def settings_from_args(args, current: dict | None = None) -> Settings:
    """Settings for `up`: options given on the command line win; the others keep the running
    cluster's values (so `up --profile corespec` switches the profile of a 3-node cluster with
    fake GPUs and leaves the rest alone), or take the defaults when nothing runs."""
    base = Settings()
    if current:
        base = Settings(**{**current, "ports": tuple(current["ports"])})
    mpibind = args.mpibind
    if mpibind is None:
        plugin = base.mpibind_plugin if current else find_mpibind_plugin()
    elif mpibind == "off":
        plugin = None
    else:
        plugin = find_mpibind_plugin()
        if mpibind == "on" and plugin is None:
            raise StackproofError("--mpibind on: the mpibind SPANK plugin is not built (make build) "
                                  "and STACKPROOF_MPIBIND_PLUGIN is not set")

    def pick(value, inherited):
        return inherited if value is None else value
    # k belongs to the profile: a new profile without --k takes the node type's default.
    k = args.k if args.k is not None else (base.k if args.profile is None else None)
    return Settings(profile=pick(args.profile, base.profile), k=k, nodes=pick(args.nodes, base.nodes),
                    fake_gpus=pick(args.fake_gpus, base.fake_gpus), ports=pick(args.ports, base.ports),
                    mpibind_plugin=plugin, mpibind_args=pick(args.mpibind_args, base.mpibind_args),
                    noise_daemon="" if args.noise_daemon == "none" else pick(args.noise_daemon, base.noise_daemon))


def _cmd_up(args) -> int:
    c = Cluster(args.run_dir)
    st = c.load_state()
    c.up(settings_from_args(args, st.settings if st else None))
    return 0


def _cmd_down(args) -> int:
    Cluster(args.run_dir).down()
    return 0


def _cmd_status(args) -> int:
    s = Cluster(args.run_dir).status()
    if args.json:
        print(json.dumps(s, indent=1, sort_keys=True))
    elif not s["up"]:
        print(f"down (run dir {s['run_dir']})")
    else:
        print(f"run dir {s['run_dir']}  profile {s['settings']['profile']}  nodes {','.join(s['nodes'])}")
        for name, d in s["daemons"].items():
            print(f"  {name:12s} pid {d['pid']!s:>7s}  {'running' if d['alive'] else 'DEAD'}")
        print(f"  system CPUs {s['system_cpus'] or '-'}  application CPUs {s['app_cpus']}")
        print(f"  export SLURM_CONF={s['slurm_conf']}")
    if not s["up"]:
        return 3
    return 0 if s["healthy"] else 1


def _cmd_exec(args) -> int:
    cmd = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    if not cmd:
        raise StackproofError("exec: no command given (stackproof cluster exec -- CMD ...)")
    return Cluster(args.run_dir).exec_cmd(cmd, node=args.node).returncode


def _cmd_env(args) -> int:
    c = Cluster(args.run_dir)
    print(f"export SLURM_CONF={c.conf}")
    print(f"export STACKPROOF_RUN_DIR={c.root}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("cluster", help="local Slurm test cluster (real munged/slurmctld/slurmd)")
    p.add_argument("--run-dir", type=Path, default=None, help=f"state directory (default $STACKPROOF_RUN_DIR or {DEFAULT_RUN_DIR})")
    csub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    u = csub.add_parser("up", help="start (or reconfigure) the cluster; idempotent")
    u.epilog = "Options not given keep the running cluster's values (defaults when none runs)."
    u.add_argument("--profile", help="|".join(profile_names()) + " (default baseline)")
    u.add_argument("--k", type=int, help="system/free cores per socket (default: the node type's)")
    u.add_argument("--nodes", type=int, help="emulated nodes, each in its own namespaces (default 1)")
    u.add_argument("--fake-gpus", type=int, help="GPU gres per node backed by device files (default 0)")
    u.add_argument("--ports", type=_parse_ports, help="SLURMCTLD,SLURMD ports (default 17817,17818)")
    u.add_argument("--mpibind", choices=["auto", "on", "off"],
                   help="load the mpibind SPANK plugin from the build (default auto: when built)")
    u.add_argument("--mpibind-args", help="plugstack.conf arguments, e.g. default_off")
    u.add_argument("--noise-daemon", metavar="FREQHz-DURATION|none",
                   help="run a daemon-like noise source on the node (e.g. 10Hz-2500us), bound like "
                        "the profile's daemons")
    u.set_defaults(func=_cmd_up)
    d = csub.add_parser("down", help="stop every daemon, remove namespaces and cgroups")
    d.set_defaults(func=_cmd_down)
    s = csub.add_parser("status", help="daemon health (exit 1 if one is dead, 3 if down)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_cmd_status)
    e = csub.add_parser("exec", help="run a command where Slurm clients reach the controller")
    e.add_argument("--node", help="run inside that node's namespaces instead")
    e.add_argument("cmd", nargs=argparse.REMAINDER)
    e.set_defaults(func=_cmd_exec)
    v = csub.add_parser("env", help="print shell exports for SLURM_CONF")
    v.set_defaults(func=_cmd_env)
