"""The test cluster's orchestration: `up` (validate, then start or reconfigure or repair), `down`
(jobs through Slurm, then daemons, namespaces, cgroups: found by state and by name), `status`, `exec`."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from stackproof.cluster import cgroups
from stackproof.errors import StackproofError
from stackproof.nodes.nodetype import from_host
from stackproof.nodes.profiles import plan, profile_names
from stackproof.nodes.slurmconf import COMM_PARAMS, Site, render, write_tree
from stackproof.cluster import daemons, munge, netns
from stackproof.cluster.procs import (alive, cgroup_mode, cmdline, daemons_of, has_non_loopback_address, kill_and_wait, log,
                    node_cgroups, pid1_is_systemd, port_in_use, procs_in_cgroups, read_pid,
                    remove_cgroup_tree)
from stackproof.cluster.state import CorruptState, Settings, State, check_private_dir, load_state, run_dir, save_state

REQUIRED = {"slurmctld": "slurmctld", "slurmd": "slurmd", "srun": "slurm-client", "sinfo": "slurm-client",
            "munged": "munge", "ip": "iproute2", "nsenter": "util-linux", "unshare": "util-linux",
            "lstopo-no-graphics": "hwloc"}
READY_STATES = {"idle", "allocated", "mixed", "completing"}


class Cluster:
    def __init__(self, root: Path | None = None):
        # Not resolved: a symlinked run dir must be seen (and refused), not followed.
        self.root = Path(os.path.abspath(root or run_dir()))
        self.state_file = self.root / "cluster.json"

    # ---- paths and state ----
    @property
    def conf(self) -> Path:
        return self.root / "etc/slurm/slurm.conf"

    @property
    def daemon_conf(self) -> Path:
        """The daemons' slurm.conf (it includes slurm.conf and binds each daemon to its node's address:
        nodes.slurmconf.COMM_PARAMS); slurm.conf itself for a cluster rendered before there was one."""
        path = self.root / "etc/slurm/daemons.conf"
        return path if path.is_file() else self.conf

    @property
    def munge_socket(self) -> Path:
        return munge.paths(self.root)["socket"]

    def slurmd_pidfile(self, node: str) -> Path:
        return daemons.slurmd_pidfile(self.root, node)

    def load_state(self) -> State | None:
        """The saved state; None when there is none or it is corrupt (see `state_or_corrupt`)."""
        try:
            return load_state(self.state_file)
        except CorruptState:
            return None

    def save_state(self, st: State) -> None:
        save_state(self.state_file, st)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.conf)
        env["STACKPROOF_RUN_DIR"] = str(self.root)
        # Open MPI refuses to run as root without these (CI and containers run as root).
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        return env

    # ---- validation (nothing is stopped or started before it passes) ----
    def preflight(self, settings: Settings):
        """Check everything about the request; returns the node type and profile plan (computed
        once per command)."""
        if os.geteuid() != 0:
            raise StackproofError("must run as root: the test cluster starts daemons, namespaces and cgroups")
        missing = sorted({pkg for tool, pkg in REQUIRED.items()
                          if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists()})
        if missing:
            raise StackproofError(f"missing packages: {', '.join(missing)} (run scripts/install-deps.sh)")
        settings.validate(profile_names(settings.profile_file or None))
        check_private_dir(self.root, create=False)
        nt = from_host("local")
        prof = plan(nt, settings.profile, k=settings.k, profile_file=settings.profile_file or None)
        if settings.noise_daemon:
            from stackproof.noise.run import binary
            binary("fwq-noise")
        return nt, prof

    def _check_host(self, settings: Settings, running: State | None) -> None:
        """Checks that depend on what else runs on the host (after our own cluster is stopped)."""
        if settings.nodes == 1:
            # slurmd resolves its listen address with AI_ADDRCONFIG, which fails when only loopback
            # is configured (a container started with --network none).
            if not has_non_loopback_address():
                raise StackproofError("no network address besides loopback (a container with --network none?): "
                                      "a single-node cluster needs one; run the container with --network host, "
                                      "or use --nodes 2 (nodes get their own namespaces and addresses)")
            for port in settings.ports:
                if port_in_use(port):
                    raise StackproofError(f"port {port} is in use (another Slurm or test cluster?): "
                                          f"choose others with --ports")

    # ---- up ----
    def up(self, settings: Settings) -> State:
        nt, prof = self.preflight(settings)
        try:
            st = load_state(self.state_file)
        except CorruptState as exc:
            log(f"{exc}: cleaning up what this run directory's cluster left (found by name)")
            st = None
        if st and self._only_the_daemon_changes(st, settings):
            self._switch_noise_daemon(st, settings, prof)
            return st
        if st and st.settings == settings.key() and self.conf.exists() and munge.paths(self.root)["key"].exists():
            try:
                restarted = self._repair(st, prof)
                self._wait_ready(st)
            except StackproofError as exc:
                log(f"repair failed ({exc}): restarting the cluster")
            else:
                log("already up" + (f"; restarted {', '.join(restarted)}" if restarted else ""))
                return st
        elif st:
            log("settings changed: restarting the cluster with the new configuration")
        self.down(quiet=True)  # also what an interrupted up or a corrupt state left
        self._check_host(settings, st)
        check_private_dir(self.root, create=True)
        t0 = time.monotonic()
        try:
            st = self._start(settings, nt, prof)
        except BaseException:
            log("start failed: stopping what was started")
            self.down(quiet=True)
            raise
        log(f"up in {time.monotonic() - t0:.1f} s: {len(st.node_names)} node(s) {','.join(st.node_names)}, "
            f"profile {settings.profile}, system CPUs {st.system_cpus or '-'}, app CPUs {st.app_cpus}")
        return st

    def _only_the_daemon_changes(self, st: State, settings: Settings) -> bool:
        """A healthy cluster whose settings differ in the noise daemon alone (Slurm's files do not
        depend on it): switching it needs no restart of Slurm."""
        new = settings.key()
        if st.settings.get("noise_daemon", "") == new["noise_daemon"] or \
                {k: v for k, v in st.settings.items() if k != "noise_daemon"} != \
                {k: v for k, v in new.items() if k != "noise_daemon"}:
            return False
        return self.conf.exists() and alive(st.munged_pid) and self._slurmctld_alive() and \
            all(alive(read_pid(self.slurmd_pidfile(n))) for n in st.node_names)

    def _switch_noise_daemon(self, st: State, settings: Settings, prof) -> None:
        """Stop the running noise daemon (found by name, as down() does), start the new one bound as
        the profile binds daemons; a fraction of a restart's time (docs/performance.md), and a Table IV
        matrix switches it between every run."""
        kill_and_wait(_named(daemons_of(self.root), "fwq-noise"), timeout=5)
        st.noise_pid = None
        st.settings = settings.key()
        if settings.noise_daemon:
            bind = prof.system_cpu_list if prof.reserve and prof.system_cpus else None
            st.noise_pid = daemons.start_noise_daemon(self.root, settings.noise_daemon, bind)
        self.save_state(st)
        log(f"noise daemon {settings.noise_daemon or 'stopped'} (Slurm left running)")

    def _site(self, s: Settings, names: list[str]) -> Site:
        multi = s.nodes > 1
        plugin, ignore_systemd = cgroups.slurm_cgroup_conf(cgroup_mode(), pid1_is_systemd())
        return Site(
            cluster_name="stackproof", nodes=names, slurm_user="root", run_dir=self.root,
            controller=socket.gethostname().split(".")[0],  # slurmctld insists on its own hostname
            controller_addr=netns.controller_addr(self.root) if multi else "127.0.0.1",
            node_addrs=[netns.node_addr(self.root, i) for i in range(1, s.nodes + 1)] if multi else ["127.0.0.1"],
            slurmctld_port=s.ports[0], slurmd_port=s.ports[1], fake_gpus=s.fake_gpus,
            mpibind_plugin=s.mpibind_plugin, mpibind_args=s.mpibind_args, daemon_comm_params=COMM_PARAMS,
            cgroup_plugin=plugin, ignore_systemd=ignore_systemd,
            extra=[f"AuthInfo=socket={self.munge_socket}", "SlurmdDebug=info", "SlurmctldDebug=info",
                   # a job larger than the cluster is refused at submission, never left pending
                   "EnforcePartLimits=ALL",
                   # schedule a batch job when it is submitted, not in the next pass up to 3 s later
                   # (Slurm's default batch_sched_delay=3): ReFrame's jobs run one after another
                   # (--dependency=singleton), so every test case paid the delay (docs/performance.md)
                   "SchedulerParameters=batch_sched_delay=0"])

    def _start(self, s: Settings, nt, prof) -> State:
        r = self.root
        for d in ["etc", "state", "spool", "log", "run", "tmpfs", "dev"]:
            (r / d).mkdir(exist_ok=True)
        multi = s.nodes > 1
        names = [f"n{i}" for i in range(1, s.nodes + 1)] if multi else [socket.gethostname().split(".")[0]]
        st = State(settings=s.key(), node_names=names, system_cpus=prof.system_cpu_list, app_cpus=prof.app_cpu_list)
        self.save_state(st)  # so that a failing start can be cleaned by down()
        write_tree(render(nt, prof, self._site(s, names)), r)
        if not multi:       # the daemons' /etc/hosts (daemons.py): this host's name is the node, on loopback
            (r / "etc/hosts").write_text(f"127.0.0.1 localhost {names[0]}\n")
        for n in names:
            (r / "spool" / n).mkdir(exist_ok=True)
            (r / "tmpfs" / n).mkdir(exist_ok=True)
        for i in range(s.fake_gpus):
            dev = r / "dev" / f"nvidia{i}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(195, i))  # character device, NVIDIA major
        bind = prof.system_cpu_list if prof.reserve and prof.system_cpus else None
        munge.new_key(r)
        st.munged_pid = munge.start(r, bind)
        self.save_state(st)
        if s.noise_daemon:
            st.noise_pid = daemons.start_noise_daemon(r, s.noise_daemon, bind)
            self.save_state(st)
        if multi:
            try:
                netns.create(r, names, st.netns)
            finally:
                self.save_state(st)
        daemons.start_slurmctld(r, self.daemon_conf, self.env(), st.netns[0] if st.netns else None, clear=True)
        for n in names:
            daemons.start_slurmd(r, self.daemon_conf, self.env(), n, self._node_netns(st, n))
        self._wait_ready(st)
        return st

    @staticmethod
    def _node_netns(st: State, node: str) -> str | None:
        return next((ns for ns in st.netns if ns.endswith(f"-{node}")), None)

    def _slurmctld_alive(self) -> bool:
        return alive(read_pid(daemons.slurmctld_pidfile(self.root)))

    def _repair(self, st: State, prof) -> list[str]:
        """Restart dead daemons in dependency order; slurmctld from its saved state, so jobs survive."""
        restarted = []
        bind = prof.system_cpu_list if prof.reserve and prof.system_cpus else None
        if not alive(st.munged_pid):
            st.munged_pid = munge.start(self.root, bind)   # same key: the cluster's credentials stay valid
            restarted.append("munged")
        if st.settings.get("noise_daemon") and not alive(st.noise_pid):
            st.noise_pid = daemons.start_noise_daemon(self.root, st.settings["noise_daemon"], bind)
            restarted.append("noise daemon")
        self.save_state(st)
        if not self._slurmctld_alive():
            daemons.start_slurmctld(self.root, self.daemon_conf, self.env(), st.netns[0] if st.netns else None,
                                    clear=False)
            restarted.append("slurmctld")
        for n in st.node_names:
            if not alive(read_pid(self.slurmd_pidfile(n))):
                daemons.start_slurmd(self.root, self.daemon_conf, self.env(), n, self._node_netns(st, n))
                restarted.append(f"slurmd {n}")
        return restarted

    def _node_states(self) -> dict[str, str]:
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True,
                              env=self.env(), timeout=30)
        return dict(line.split()[:2] for line in proc.stdout.splitlines() if len(line.split()) >= 2)

    def _wait_ready(self, st: State, timeout: float = 60.0) -> None:
        """Ready = every node registered and responding; when all are idle, a job step must also run
        on every node (sinfo 'idle' is unreliable after restarts). Nodes busy with (or completing)
        jobs count as ready: a restart keeps jobs, and a probe step would only queue behind them."""
        n = len(st.node_names)
        deadline = time.monotonic() + timeout
        last = ""
        probe = ["srun", f"-N{n}", f"-n{n}", "-t1", "--immediate=10"] + \
            (["--mpibind=off"] if st.settings.get("mpibind_plugin") else []) + ["true"]
        while time.monotonic() < deadline:
            if not self._slurmctld_alive():
                raise StackproofError(f"slurmctld exited; see {self.root}/log/slurmctld.log")
            try:
                states = self._node_states()
                if len(states) == n and all(s in READY_STATES for s in states.values()):
                    if any(s != "idle" for s in states.values()):
                        return
                    proc = subprocess.run(probe, capture_output=True, text=True, env=self.env(),
                                          timeout=max(1.0, min(30.0, deadline - time.monotonic())))
                    if proc.returncode == 0:
                        return
                    last = proc.stderr.strip()
                else:
                    last = f"node states {states}"
            except subprocess.TimeoutExpired:
                last = "probe timed out"
            time.sleep(0.3)
        queue = subprocess.run(["squeue"], capture_output=True, text=True, env=self.env()).stdout
        raise StackproofError(f"cluster not ready after {timeout:.0f} s: {last}\n{queue}")

    # ---- status ----
    def status(self) -> dict:
        try:
            st = load_state(self.state_file)
        except CorruptState as exc:
            pids = daemons_of(self.root)
            return {"up": True, "healthy": False, "corrupt": str(exc), "run_dir": str(self.root),
                    "daemons": {f"pid {p}": {"pid": p, "alive": True} for p in pids}}
        if st is None:
            pids = daemons_of(self.root)
            if pids:
                return {"up": True, "healthy": False, "corrupt": "no state file", "run_dir": str(self.root),
                        "daemons": {f"pid {p}": {"pid": p, "alive": True} for p in pids}}
            return {"up": False, "run_dir": str(self.root)}
        ctl_pid = read_pid(daemons.slurmctld_pidfile(self.root))
        procs = {"munged": {"pid": st.munged_pid, "alive": alive(st.munged_pid)},
                 "slurmctld": {"pid": ctl_pid, "alive": alive(ctl_pid)}}
        if st.settings.get("noise_daemon"):
            procs["noise daemon"] = {"pid": st.noise_pid, "alive": alive(st.noise_pid)}
        for n in st.node_names:
            pid = read_pid(self.slurmd_pidfile(n))
            procs[f"slurmd {n}"] = {"pid": pid, "alive": alive(pid)}
        return {"up": True, "healthy": all(d["alive"] for d in procs.values()), "run_dir": str(self.root),
                "settings": st.settings, "nodes": st.node_names, "netns": st.netns, "daemons": procs,
                "system_cpus": st.system_cpus, "app_cpus": st.app_cpus, "slurm_conf": str(self.conf)}

    # ---- down ----
    def _node_names_by_name(self) -> list[str]:
        """Node names from the run directory's layout (spool/<node>), for a lost state file."""
        spool = self.root / "spool"
        return sorted(p.name for p in spool.iterdir() if p.is_dir()) if spool.is_dir() else []

    def _cancel_jobs(self) -> int:
        """Every job through Slurm first (its epilog and cgroup clean-up run); returns the count."""
        if not self._slurmctld_alive() or not self.conf.exists():
            return 0
        jobs: list[str] = []
        try:
            q = subprocess.run(["squeue", "-h", "-o", "%A"], capture_output=True, text=True,
                               env=self.env(), timeout=15)
            jobs = q.stdout.split()
            if not jobs:
                return 0
            subprocess.run(["scancel", *jobs], capture_output=True, env=self.env(), timeout=15)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                left = subprocess.run(["squeue", "-h", "-t", "R,CG,S,PD", "-o", "%A"], capture_output=True,
                                      text=True, env=self.env(), timeout=15).stdout.split()
                if not left:
                    break
                time.sleep(0.2)
        except subprocess.TimeoutExpired:
            pass
        return len(jobs)

    def down(self, quiet: bool = False) -> dict:
        """Stop everything this run directory's cluster made, found through its state file and by
        name (pids whose arguments point into the run dir, namespaces named after it, slurm_<node>
        cgroups of its nodes). Returns (and logs) what was really removed."""
        try:
            st = load_state(self.state_file)
        except CorruptState as exc:
            log(f"{exc}: finding the cluster's processes, namespaces and cgroups by name")
            st = None
        nodes = sorted(set((st.node_names if st else []) + self._node_names_by_name()))
        removed: dict[str, list] = {"jobs": [], "processes": [], "job tasks": [], "namespaces": [],
                                    "cgroups": [], "files": []}
        cancelled = self._cancel_jobs()
        if cancelled:
            removed["jobs"] = [cancelled]
        found = daemons_of(self.root)
        removed["processes"] += kill_and_wait(_named(found, "slurmd"))  # in parallel: seconds each
        removed["processes"] += kill_and_wait(_named(found, "slurmctld"))
        removed["processes"] += kill_and_wait(_named(found, "fwq-noise"), timeout=5)
        # Job tasks that outlived their slurmd (reparented to PID 1): they are still in the node's cgroups.
        cgroups = [cg for n in nodes for cg in node_cgroups(n)]
        removed["job tasks"] = kill_and_wait(procs_in_cgroups(cgroups), timeout=5, sig=signal.SIGKILL)
        removed["processes"] += kill_and_wait([p for p in daemons_of(self.root)], timeout=5)  # munged, leftovers
        removed["namespaces"] = netns.remove(self.root, st.netns if st else [])
        removed["cgroups"] = [str(cg) for cg in cgroups if remove_cgroup_tree(cg)]
        for f in list((self.root / "run").glob("*.pid")) + [munge.paths(self.root)["pid"], self.state_file]:
            if f.exists():
                f.unlink()
        if munge.remove_key(self.root):
            removed["files"].append("munge key")
        if not quiet:
            parts = [f"{len(v) if k != 'jobs' else v[0]} {k}" for k, v in removed.items() if v]
            log("down: " + ("removed " + ", ".join(parts) if parts else "nothing was running"))
        return removed

    # ---- exec ----
    def exec_cmd(self, cmd: list[str], node: str | None = None, **kw) -> subprocess.CompletedProcess:
        st = self.load_state()
        if st is None:
            raise StackproofError(f"no cluster is up (run dir {self.root}): run `stackproof cluster up`")
        if shutil.which(cmd[0], path=self.env().get("PATH")) is None:
            raise StackproofError(f"{cmd[0]}: command not found")
        if node is not None:
            if node not in st.node_names:
                raise StackproofError(f"unknown node {node!r} (nodes: {', '.join(st.node_names)})")
            pid = read_pid(self.slurmd_pidfile(node))
            if st.netns and not alive(pid):
                raise StackproofError(f"slurmd {node} is not running: `stackproof cluster up` restarts it")
            prefix = ["nsenter", "-t", str(pid), "--net", "--uts", "--mount"] if st.netns else []
        else:
            prefix = []  # clients reach the controller from the root namespace (see netns.py)
        return subprocess.run(prefix + cmd, env=self.env(), **kw)


def _named(pids: list[int], name: str) -> list[int]:
    return [p for p in pids if Path((cmdline(p) or [""])[0]).name == name]
