"""`stackproof vcluster up|down|status|console|exec`: the orchestration.

up = check everything (description, profile, nodes.conf, overlays, host tools) -> build what changed
(kernel, image cpio, overlays, iPXE/DHCP config) -> head namespace + dnsmasq + HTTP + munged +
slurmctld + virtiofsd -> boot the QEMU nodes -> show each node's stage until its slurmd has registered
(or fail with its console log). Root directory: $STACKPROOF_VCLUSTER_DIR or build/vcluster
(http/ and cache/ are kept between runs; run/ holds logs, consoles, pids, slurm state; share/ is
mounted on every node at the same path, see share.py).
"""
from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import time
from pathlib import Path

from stackproof.provision import warewulf
from stackproof.errors import StackproofError
from stackproof.paths import REPO
from stackproof.provision.vcluster import artifacts, boot, head, httpserve, netboot, nodesconf, overlays, share
from stackproof.provision.vcluster.boot import NodeBoot
from stackproof.provision.vcluster.nodesconf import HEAD_ADDR

DEFAULT_TIMEOUT = 300.0


root_dir = head.root_dir


def log(msg: str) -> None:
    print(f"vcluster: {msg}", flush=True)


def head_slurm_conf(node_conf: str, run: Path, plugstack: Path) -> str:
    """The nodes' slurm.conf (rendered by the slurm overlay) with the controller-side paths moved
    into run/, slurmctld running as root on the head's private munge socket, and the controller's
    address given (the head has no resolver for "head"; the nodes have /etc/hosts). Of the nodes'
    CommunicationParameters the head keeps NoCtldInAddrAny: slurmctld binds head's address (its
    run/etc/hosts, head.start_slurmctld); clients on the head bind as usual (the host's name there
    does not resolve to the bridge)."""
    repl = {"StateSaveLocation": f"{run}/slurmctld-state", "SlurmctldPidFile": f"{run}/slurmctld.pid",
            "SlurmctldLogFile": f"{run}/slurmctld.log", "PlugStackConfig": str(plugstack), "SlurmUser": "root"}
    out = []
    for ln in node_conf.splitlines():
        key = ln.split("=", 1)[0]
        if key == "SlurmctldHost" and "(" not in ln:
            ln = f"{ln}({HEAD_ADDR})"
        if key == "CommunicationParameters":
            kept = [p for p in ln.split("=", 1)[1].split(",") if p == "NoCtldInAddrAny"]
            if not kept:
                continue
            ln = f"{key}={','.join(kept)}"
        out.append(f"{key}={repl.pop(key)}" if key in repl else ln)
    out += [f"{k}={v}" for k, v in repl.items()]
    out.insert(0, f"AuthInfo=socket={run}/munge.socket")
    out.insert(1, "DebugFlags=NO_CONF_HASH")       # differs from the nodes' copy on purpose
    return "# the vcluster head's copy of the nodes' slurm.conf (paths moved into run/)\n" + "\n".join(out) + "\n"


class VCluster:
    def __init__(self, root: Path | None = None):
        self.root = root or root_dir()
        head.select(self.root)
        self.run = self.root / "run"
        self.state_file = self.run / "vcluster.json"

    # ---- plan: everything that can fail before a boot ---------------------------------------------
    def plan(self, spec_path: str | Path, nodes: int | None, profile: str | None, image: str | None):
        spec = nodesconf.load_spec(spec_path, nodes, profile, image)
        conf = nodesconf.generate(spec)
        vnodes = nodesconf.resolve(conf)
        overlays.check_known(vnodes)
        for img in {n.image for n in vnodes}:
            artifacts.oci_archive(img)
        return spec, conf, vnodes

    def settings_key(self, spec, vnodes) -> dict:
        return {"spec": str(spec.path), "nodes": [n.name for n in vnodes],
                "profiles": {p.name: p.profile for p in spec.profiles.values()},
                "images": sorted({n.image for n in vnodes}),
                "shares": [[s.tag, str(s.path), s.readonly] for s in share.shares(self.root)]}

    def load_state(self) -> dict | None:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return None

    # ---- up ----------------------------------------------------------------------------------------
    def up(self, spec_path, nodes=None, profile=None, image=None, timeout=DEFAULT_TIMEOUT) -> dict:
        if os.geteuid() != 0:
            raise StackproofError("vcluster needs root (network namespace, taps, QEMU)")
        spec, conf, vnodes = self.plan(spec_path, nodes, profile, image)
        boot.preflight()
        key = self.settings_key(spec, vnodes)
        st = self.load_state()
        if st and st.get("key") == key and self._all_alive(st):
            log(f"already up with the same settings ({', '.join(key['nodes'])}); `vcluster down` to stop")
            return st
        if head.netns_exists():
            log("a previous vcluster is running with other settings (or is broken): taking it down")
            self.down(quiet=True)
        t_up = time.monotonic()
        self.run.mkdir(parents=True, exist_ok=True)
        for f in self.run.glob("*"):
            if f.is_file():
                f.unlink()
        # artifacts
        artifacts.kernel(self.root)
        for img in sorted({n.image for n in vnodes}):
            artifacts.image(self.root, img)
        mkey = self._munge_key()
        rendered, how = overlays.render_auto(spec, vnodes, mkey.read_bytes(), artifacts.mpi_hello(self.root),
                                             self.root / "cache" / "wwctl")
        log(how)
        artifacts.overlays(self.root, rendered, overlays.overlay_dirs())
        shares = share.shares(self.root)
        for s in shares:
            s.path.mkdir(parents=True, exist_ok=True)
        self._share_image(shares)
        tftp = artifacts.boot_files(self.root, head.make_runtime_dir(self.root), vnodes,
                                    nodesconf.text(conf, spec.path), netboot.boot_script(),
                                    functools.partial(netboot.node_script, extra_initrds=("share.img",)))
        allow = self.run / "http-allow.json"
        allow.write_text(json.dumps(httpserve.allow_list(vnodes, ("share.img",)), indent=1) + "\n")
        (self.run / "dnsmasq.conf").write_text(netboot.dnsmasq_conf(vnodes, self.run, tftp))
        etc = self.run / "etc"
        etc.mkdir(exist_ok=True)
        node_slurm = rendered[vnodes[0].name]["system"]["etc/slurm/slurm.conf"].data
        (etc / "plugstack.conf").write_text(self._head_plugstack())
        (etc / "slurm.conf").write_text(head_slurm_conf(node_slurm, self.run, etc / "plugstack.conf"))
        (etc / "hosts").write_text(f"127.0.0.1 localhost\n{HEAD_ADDR} head\n")     # slurmctld's (NoCtldInAddrAny)
        cg = rendered[vnodes[0].name]["system"].get("etc/slurm/cgroup.conf")
        (etc / "cgroup.conf").write_text(cg.data if cg else "CgroupPlugin=autodetect\n")
        (self.run / "slurmctld-state").mkdir(exist_ok=True)
        self._profile_env(spec, vnodes, etc)
        t_art = time.monotonic() - t_up
        log(f"artifacts ready in {t_art:.1f} s under {self.root / 'http'}")
        try:
            # head
            head.make_netns(len(vnodes))
            pids = {"dnsmasq": head.start_dnsmasq(self.run / "dnsmasq.conf", self.run),
                    "http": head.start_http(self.root, self.run, allow),
                    "munged": head.start_munged(mkey, self.run),
                    "slurmctld": head.start_slurmctld(etc / "slurm.conf", self.run)}
            boots = [NodeBoot(n, f"tap{i}", self.run / f"{n.name}.console.log", self.run / f"{n.name}.qemu.pid",
                              shares=shares) for i, n in enumerate(vnodes)]
            for b in boots:
                for s in shares:
                    pids[f"virtiofsd-{b.node.name}-{s.tag}"] = head.start_virtiofsd(
                        share.virtiofsd_command(self.run, b.node.name, s), share.socket_path(self.run, b.node.name, s),
                        self.run / f"{b.node.name}.{s.tag}.virtiofsd.log")
            log(f"head {nodesconf.HEAD_ADDR} in namespace {head.NETNS}: dnsmasq, http :{netboot.HTTP_PORT}, "
                f"munged, slurmctld, virtiofsd for " + ", ".join(f"{s.path} ({'ro' if s.readonly else 'rw'})"
                                                                 for s in shares))
            # nodes
            t0 = time.monotonic()
            for b in boots:
                boot.start(b, time.monotonic())
            st = {"key": key, "root": str(self.root), "head": pids, "started": time.time(),
                  "shares": {s.tag: {"path": str(s.path), "readonly": s.readonly} for s in shares},
                  "nodes": {b.node.name: {"pidfile": str(b.pidfile), "console": str(b.console), "ip": b.node.ipaddr,
                                          "mac": b.node.hwaddr} for b in boots}}
            self.state_file.write_text(json.dumps(st, indent=1) + "\n")
            times = self._wait_registered(boots, t0, timeout)
        except BaseException:
            log("up failed: taking the virtual cluster down (logs and consoles stay in " + str(self.run) + ")")
            self.down(quiet=True)
            raise
        for b in boots:
            st["nodes"][b.node.name].update(boot_s=round(times[b.node.name], 1),
                                            stages={k: round(v, 1) for k, v in b.stage_at.items()})
        st["artifacts_s"] = round(t_art, 1)
        st["up_s"] = round(time.monotonic() - t_up, 1)
        self.state_file.write_text(json.dumps(st, indent=1) + "\n")
        for b in boots:
            stages = " ".join(f"{k}={v:.1f}" for k, v in sorted(b.stage_at.items(), key=lambda kv: kv[1]))
            log(f"boot time {b.node.name}: {times[b.node.name]:.1f} s from QEMU start to slurmd registered ({stages})")
        log(f"up in {st['up_s']:.1f} s (artifacts {t_art:.1f} s); try: stackproof vcluster exec -- srun -N{len(boots)} hostname")
        return st

    def _profile_env(self, spec, vnodes, etc: Path) -> None:
        """run/etc/stackproof/profile.env: the core-specialization profile the nodes run, rendered like
        theirs (`stackproof slurm render`); ReFrame's vcluster partition reads it as a site's login
        node reads its installed copy."""
        names = {n.name for n in vnodes}
        profs = sorted({prof for name, prof, _ in spec.nodes if name in names})
        files = warewulf.stackproof_render(spec, spec.profiles[profs[0]], sorted(names))
        out = etc / "stackproof" / "profile.env"
        out.parent.mkdir(parents=True, exist_ok=True)
        note = f"# nodes {', '.join(sorted(names))}" + (f" (also profiles {', '.join(profs[1:])})" if profs[1:] else "")
        out.write_text(note + "\n" + files["etc/stackproof/profile.env"])

    def _share_image(self, shares: list[share.Share]) -> Path:
        """http/share.img: the virtiofs modules (from the cached kernel package) and the mount unit."""
        out = self.root / "http" / "share.img"
        inputs = {"kernel": artifacts.KERNEL_VERSION, "writer": artifacts.sha256(Path(share.__file__)),
                  "shares": [[s.tag, str(s.path), s.readonly] for s in shares]}
        if artifacts._stamp_ok(out, inputs):
            return out
        debs = sorted((self.root / "cache").glob(f"{artifacts.KERNEL_PACKAGE}_*.deb"))
        if not debs:
            raise StackproofError(f"no {artifacts.KERNEL_PACKAGE} package in {self.root / 'cache'}: "
                                  f"remove {self.root / 'http' / 'kmods.img'} and run `vcluster up` again")
        artifacts.write_if_changed(out, share.overlay_image(debs[-1], artifacts.KERNEL_RELEASE, shares))
        artifacts._stamp(out, inputs)
        return out

    def _munge_key(self) -> Path:
        key = self.root / "cache" / "munge.key"
        key.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(key.parent, 0o700)      # cache/ also holds wwctl's rendered overlays (the key inside)
        if not key.is_file():
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
            with os.fdopen(fd, "wb") as fh:
                data = os.urandom(1024)
                # Warewulf's Include() drops a trailing newline byte (wwctl renders the key overlay)
                fh.write(data[:-1] + b"\x00" if data.endswith(b"\n") else data)
        return key

    def _head_plugstack(self) -> str:
        """srun on the head loads plugstack.conf too: the repo's mpibind build when there is one."""
        plugin = next(iter(sorted(REPO.glob("build/mpibind/**/mpibind_slurm.so"))), None)
        return f"optional {plugin}\n" if plugin else "# no mpibind SPANK plugin built on the head\n"

    def _all_alive(self, st: dict) -> bool:
        pids = [p for p in (st.get("head") or {}).values()]
        if not all(head.alive(p) for p in pids if p) or not head.alive(head.read_pid(self.run / "slurmctld.pid")):
            return False
        return all(head.alive(head.read_pid(Path(n["pidfile"]))) for n in st.get("nodes", {}).values())

    def node_states(self) -> dict[str, str]:
        proc = self.exec_cmd(["scontrol", "-o", "show", "node"], capture=True, check=False)
        states = {}
        for ln in proc.stdout.splitlines():
            m, s = re.search(r"NodeName=(\S+)", ln), re.search(r"\bState=(\S+)", ln)
            if m and s:
                reason = re.search(r"\bReason=(.*?)(?: \w+=|$)", ln)
                states[m.group(1)] = s.group(1) + (f" ({reason.group(1)})" if reason else "")
        return states

    def _wait_registered(self, boots: list[NodeBoot], t0: float, timeout: float) -> dict[str, float]:
        done: dict[str, float] = {}
        last_line = ""
        while True:
            now = time.monotonic()
            for b in boots:
                boot.update_stage(b, now)
                if b.node.name not in done and not head.alive(b.pid):
                    raise boot.failure(b, "stopped (QEMU exited)")
                if b.node.name not in done and b.failed:
                    time.sleep(2.0)         # let the unit's log tail reach the console
                    raise boot.failure(b, f"failed: {b.failed}")
            states = self.node_states() if any(b.stage_at.get("wwinit") is not None for b in boots) else {}
            for b in boots:
                s = states.get(b.node.name, "")
                if b.node.name not in done and re.match(r"(IDLE|ALLOCATED|MIXED|COMPLETING)", s):
                    if "DRAIN" in s:
                        raise boot.failure(b, f"registered but drained: {s}")
                    done[b.node.name] = now - b.started
                    b.stage, b.stage_at["registered"] = "registered", now - b.started
            line = " | ".join(f"{b.node.name}: {b.stage}" for b in boots)
            if line != last_line:
                log(f"[{now - t0:5.1f} s] {line}")
                last_line = line
            if len(done) == len(boots):
                return done
            if now - t0 > timeout:
                late = [b for b in boots if b.node.name not in done]
                raise boot.failure(late[0], f"did not register with slurmctld within {timeout:.0f} s"
                                   + (f" (also late: {', '.join(b.node.name for b in late[1:])})" if late[1:] else ""))
            time.sleep(1.0)

    # ---- down / status / exec / console --------------------------------------------------------------
    def down(self, quiet: bool = False) -> None:
        """Stop everything and return only when the nodes' QEMU processes are gone (all threads)."""
        st = self.load_state()
        nodes = st.get("nodes") if isinstance(st, dict) else None
        qemu = [head.qemu_pid(Path(n["pidfile"])) for n in (nodes.values() if isinstance(nodes, dict) else [])
                if isinstance(n, dict) and isinstance(n.get("pidfile"), str)]
        pids = head.teardown(also=[p for p in qemu if p])
        self.state_file.unlink(missing_ok=True)
        for sock in self.run.glob("*.socket*"):
            sock.unlink(missing_ok=True)
        share.remove_pidfiles(self.run)
        head.remove_runtime_dir(self.root)
        if not quiet:
            log(f"down: stopped {len(pids)} processes; namespace {head.NETNS} (bridge, taps) removed")

    def status(self) -> dict:
        st = self.load_state()
        out = {"up": bool(st) and head.netns_exists(), "namespace": head.NETNS if head.netns_exists() else None}
        if not st:
            return out
        out["head"] = {k: {"pid": p, "alive": head.alive(p)} for k, p in st["head"].items()}
        out["head"]["slurmctld"] = {"pid": head.read_pid(self.run / "slurmctld.pid"),
                                    "alive": head.alive(head.read_pid(self.run / "slurmctld.pid"))}
        out["shares"] = st.get("shares", {})
        states = self.node_states() if out["up"] else {}
        out["nodes"] = {}
        for name, n in st["nodes"].items():
            pid = head.read_pid(Path(n["pidfile"]))
            out["nodes"][name] = {"ip": n["ip"], "qemu_pid": pid, "qemu_alive": head.alive(pid),
                                  "slurm": states.get(name, "?"), "boot_s": n.get("boot_s"), "console": n["console"]}
        return out

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.run / "etc" / "slurm.conf")}

    def exec_cmd(self, cmd: list[str], capture: bool = False, check: bool = True,
                 timeout: float | None = None) -> subprocess.CompletedProcess:
        if not head.netns_exists():
            raise StackproofError("the virtual cluster is not up: stackproof vcluster up")
        return subprocess.run(head.ns() + cmd, env=self.env(), capture_output=capture, text=True, check=False,
                              timeout=timeout)

    def console(self, node: str, lines: int) -> str:
        path = self.run / f"{node}.console.log"
        if not path.is_file():
            known = sorted(p.name.split(".")[0] for p in self.run.glob("*.console.log"))
            raise StackproofError(f"no console log for {node!r} (nodes: {', '.join(known) or 'none'})")
        return f"console log {path}:\n" + boot.console_tail(path, lines)

