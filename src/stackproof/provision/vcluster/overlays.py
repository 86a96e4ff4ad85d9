"""The overlays the head serves each node, rendered from nodes.conf + the cluster description.

- Site overlays (images/warewulf/overlays: slurm, corespec, munge): with a real wwctl (PATH or
  $STACKPROOF_WWCTL), `wwctl overlay build` renders them in a private Warewulf tree and its images
  are read back (`render_auto`); without one, their files are what `stackproof.provision.warewulf.expected_renders`
  says the templates render (the golden output the wwctl tests hold the templates to;
  tests/test_warewulf_real.py holds the two renderers equal). The munge key is the head's generated
  key, 0400 munge:munge.
- Stand-ins for Warewulf's distribution overlays a virtual node needs: wwinit (/init: NIC driver,
  address from nodes.conf, then the image's init), hostname, hosts.
- vctools (runtime): the MPI hello built on the head.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
from importlib import resources
from pathlib import Path

from stackproof.provision import warewulf

from stackproof.provision import wwctl
from stackproof.provision.images import munge_id
from stackproof.errors import StackproofError
from stackproof.provision.cpio import File
from stackproof.provision.vcluster.nodesconf import HEAD_ADDR, VNode

# Kernel modules the cloud kernel needs for virtio-net, in load order (virtio_ring before virtio
# fails with "unknown symbol").
KMODS = ["drivers/virtio/virtio_ring.ko", "drivers/virtio/virtio.ko", "drivers/virtio/virtio_pci_legacy_dev.ko",
         "drivers/virtio/virtio_pci_modern_dev.ko", "drivers/virtio/virtio_pci.ko", "net/core/failover.ko",
         "drivers/net/net_failover.ko", "drivers/net/virtio_net.ko"]
KMODS = [f"kernel/{m}" for m in KMODS]


def _builtin(node: VNode, nodes: list[VNode], name: str) -> dict[str, File]:
    if name == "wwinit":
        config = "\n".join([
            "# rendered by stackproof vcluster from nodes.conf (Warewulf's /warewulf/config, reduced)",
            f"WWHOSTNAME={node.name}", f"WWIPADDR={node.ipaddr}", f"WWPREFIX={node.prefix}",
            f"WWNETMASK={node.netmask}", f"WWGATEWAY={node.gateway or ''}", f"WWDEVICE={node.device}",
            f"WWHWADDR={node.hwaddr}", f"WWINIT={node.init}", f"WWKMODS='{' '.join(KMODS)}'", ""])
        init = resources.files("stackproof.provision.vcluster").joinpath("data/wwinit.sh").read_text()
        return {"init": File(init, 0o755), "warewulf/config": File(config, 0o644)}
    if name == "vcnode":
        # no ssh.host_keys overlay here, no login on a console that is a log file, no controller
        # on a compute node (the image carries slurmctld for the laptop image): mask them
        files = {f"etc/systemd/system/{u}": File(link="/dev/null") for u in MASKED_UNITS}
        # the console is the only window into a node: when munged or slurmd stops, show its log
        for unit, logfile in (("slurmd", "/var/log/slurm/slurmd.log"), ("munge", "/var/log/munge/munged.log")):
            files[f"etc/systemd/system/{unit}.service.d/90-vcluster-console.conf"] = File(
                "[Service]\nStandardOutput=journal+console\nStandardError=journal+console\n"
                f"ExecStopPost=-/bin/sh -c 'echo \"vcluster: {unit} stopped ($$SERVICE_RESULT), last log lines:\"; "
                f"tail -n 12 {logfile}'\n")
        return files
    if name == "hostname":
        return {"etc/hostname": File(node.name + "\n")}
    if name == "hosts":
        lines = ["127.0.0.1 localhost", f"{HEAD_ADDR} head"] + [f"{n.ipaddr} {n.name}" for n in nodes]
        return {"etc/hosts": File("\n".join(lines) + "\n")}
    raise KeyError(name)


BUILTIN = ("wwinit", "vcnode", "hostname", "hosts")
MASKED_UNITS = ["ssh.service", "slurmctld.service", "serial-getty@ttyS0.service"]
SITE = ("slurm", "corespec", "munge")
RUNTIME = ("vctools",)


def check_known(nodes: list[VNode]) -> None:
    """Every overlay a node names must be one we can render: fail before boot otherwise."""
    known = set(BUILTIN + SITE + RUNTIME)
    for n in nodes:
        for o in n.system_overlays + n.runtime_overlays:
            if o not in known:
                raise StackproofError(f"nodes.conf: node {n.name}: overlay {o!r} has no vcluster renderer "
                                      f"(known: {', '.join(sorted(known))})")


def _slurmd_options(node: VNode) -> str:
    opts = f'--conf-server {node.tags["slurmctld_host"]}' if node.tags.get("slurm_configless") == "yes" else ""
    return f"# Rendered for {node.name} (stackproof slurm overlay).\nSLURMD_OPTIONS=\"{opts}\"\n"


def render(spec: warewulf.ClusterSpec, nodes: list[VNode], munge_key: bytes,
           mpi_hello: bytes | None) -> dict[str, dict[str, dict[str, File]]]:
    """node -> {"system": files, "runtime": files}."""
    check_known(nodes)
    expected = warewulf.expected_renders(spec)
    uid = munge_id()
    out = {}
    for node in nodes:
        system: dict[str, File] = {}
        for o in node.system_overlays + node.runtime_overlays:
            files: dict[str, File] = {}
            if o in BUILTIN:
                files = _builtin(node, nodes, o)
            elif o in warewulf.OVERLAY_FILES:
                for rel, text in expected.get(node.name, {}).items():
                    # wwctl writes slurm's files even when they hold only comments (gres.conf, no GPUs)
                    if rel.startswith(warewulf.OVERLAY_FILES[o]) and (text or o == "slurm"):
                        files[rel] = File(text)
                if o == "slurm":
                    files["etc/default/slurmd"] = files["etc/sysconfig/slurmd"] = File(_slurmd_options(node))
            elif o == "munge":
                files = {"etc/munge/munge.key": File(munge_key, 0o400, uid, uid)}
            if o in node.system_overlays:
                system.update(files)
        runtime: dict[str, File] = {}
        if "vctools" in node.runtime_overlays and mpi_hello is not None:
            runtime["opt/vcluster/bin/mpi-hello"] = File(mpi_hello, 0o755)
        out[node.name] = {"system": system, "runtime": runtime}
    return out


def overlay_dirs() -> dict[str, tuple[int, int, int]]:
    """Directory modes the overlays must carry (the kernel applies them to the image's directories)."""
    uid = munge_id()
    return {"etc/munge": (0o700, uid, uid), "opt": (0o755, 0, 0)}


# ---- site overlays by a real wwctl --------------------------------------------------------------------

def site_nodes_conf(nodes: list[VNode], key_path: Path) -> dict:
    """The nodes as wwctl sees them: addresses, tags, and the site overlays only (the vcluster
    stand-ins for Warewulf's distribution overlays stay ours)."""
    conf: dict = {"nodeprofiles": {}, "nodes": {}}
    for n in nodes:
        dev = {"device": n.device, "hwaddr": n.hwaddr, "ipaddr": n.ipaddr, "netmask": n.netmask}
        if n.gateway:
            dev["gateway"] = n.gateway
        conf["nodes"][n.name] = {"tags": {**n.tags, "munge_key_path": str(key_path)},
                                 "system overlay": [o for o in n.system_overlays if o in SITE],
                                 "network devices": {"default": dev}}
    return conf


def render_site_by_wwctl(nodes: list[VNode], munge_key: bytes, workdir: Path,
                         exe: str | None = None) -> dict[str, dict[str, File]]:
    """node -> the site overlays' files as `wwctl overlay build` writes them (bytes, mode, owner)."""
    if munge_key.endswith(b"\n"):
        raise StackproofError("the munge key ends with a newline byte, which Warewulf's Include() drops: "
                              "delete it (cache/munge.key) so that a new one is generated")
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    key = workdir / "munge.key"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(fd, "wb") as fh:
        fh.write(munge_key)
    tree = wwctl.Tree(workdir / "warewulf", site_nodes_conf(nodes, key), exe=exe)
    built = tree.build([n.name for n in nodes])
    return {name: parts["system"] for name, parts in built.items()}


def render_auto(spec: warewulf.ClusterSpec, nodes: list[VNode], munge_key: bytes, mpi_hello: bytes | None,
                workdir: Path) -> tuple[dict[str, dict[str, dict[str, File]]], str]:
    """`render`, but with the site overlays rendered by a real wwctl when there is one; also returns
    a line saying which renderer made them (`vcluster up` prints it)."""
    exe = wwctl.find()
    if exe is None:
        return (render(spec, nodes, munge_key, mpi_hello),
                "site overlays rendered by stackproof's renderer (no wwctl on PATH or in $STACKPROOF_WWCTL)")
    check_known(nodes)
    site = render_site_by_wwctl(nodes, munge_key, workdir, exe)
    rest = [dataclasses.replace(n, system_overlays=[o for o in n.system_overlays if o not in SITE]) for n in nodes]
    out = render(spec, rest, munge_key, mpi_hello)
    for n in nodes:
        out[n.name]["system"].update(site[n.name])
    return out, f"site overlays {', '.join(SITE)} rendered by `wwctl overlay build` ({exe}, {wwctl.version(exe)})"
