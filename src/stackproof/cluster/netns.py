"""Network namespaces of a multi-node test cluster: one per node plus the controller's, joined by a
bridge in the controller's namespace; this host joins the bridge too, so Slurm clients run from the
root namespace. Namespace names carry a hash of the run directory, so `down` finds a cluster's
namespaces by name even when its state file is lost, and never touches another cluster's."""
from __future__ import annotations

import hashlib
import socket
import subprocess
from pathlib import Path

from .procs import sh

NETNS_PREFIX = "spk"
HOST_VETH = "spk-host"            # root-namespace end of the link to the cluster bridge
SUBNET = "10.99.0"


def prefix(root: Path) -> str:
    return f"{NETNS_PREFIX}{hashlib.sha1(str(root).encode()).hexdigest()[:6]}-"


def names(root: Path, nodes: list[str]) -> list[str]:
    p = prefix(root)
    return [f"{p}ctl"] + [f"{p}{n}" for n in nodes]


def existing(root: Path) -> list[str]:
    """This run directory's namespaces present on the host (controller's first)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    mine = [line.split()[0] for line in out.splitlines() if line.startswith(prefix(root))]
    return sorted(mine, key=lambda n: (not n.endswith("-ctl"), n))


def node_addr(i: int) -> str:
    return f"{SUBNET}.{10 + i}"


def create(root: Path, nodes: list[str], created: list[str]) -> None:
    """Create the namespaces, appending each to `created` as soon as it exists (for roll-back)."""
    ctl, *node_ns = names(root, nodes)
    ip = ["ip"]
    sh(ip + ["netns", "add", ctl])
    created.append(ctl)
    sh(ip + ["-n", ctl, "link", "set", "lo", "up"])
    sh(ip + ["-n", ctl, "link", "add", "br0", "type", "bridge"])
    sh(ip + ["-n", ctl, "addr", "add", f"{SUBNET}.1/24", "dev", "br0"])
    sh(ip + ["-n", ctl, "link", "set", "br0", "up"])
    # The host joins the bridge (10.99.0.254): clients in the root namespace (pytest, ReFrame, a
    # shell) reach the controller, and every packet to 10.99.0.0/24 stays on this machine.
    sh(ip + ["link", "add", HOST_VETH, "type", "veth", "peer", "name", "uplink", "netns", ctl])
    sh(ip + ["-n", ctl, "link", "set", "uplink", "master", "br0", "up"])
    sh(ip + ["addr", "add", f"{SUBNET}.254/24", "dev", HOST_VETH])
    sh(ip + ["link", "set", HOST_VETH, "up"])
    hosts = ["127.0.0.1 localhost", f"{SUBNET}.1 {socket.gethostname().split('.')[0]} ctl"]
    for i, (n, ns) in enumerate(zip(nodes, node_ns), start=1):
        sh(ip + ["netns", "add", ns])
        created.append(ns)
        sh(ip + ["-n", ns, "link", "set", "lo", "up"])
        sh(ip + ["-n", ctl, "link", "add", f"veth{i}", "type", "veth", "peer", "name", "eth0", "netns", ns])
        sh(ip + ["-n", ctl, "link", "set", f"veth{i}", "master", "br0", "up"])
        sh(ip + ["-n", ns, "addr", "add", f"{node_addr(i)}/24", "dev", "eth0"])
        sh(ip + ["-n", ns, "link", "set", "eth0", "up"])
        hosts.append(f"{node_addr(i)} {n}")
    (root / "etc/hosts").write_text("\n".join(hosts) + "\n")


def remove(root: Path, known: list[str]) -> list[str]:
    """Delete the namespaces in `known` and any other of this run directory's (found by name), then
    the host's link to the bridge when it is left over. Returns what was really removed."""
    removed = []
    for ns in reversed(list(dict.fromkeys(known + existing(root)))):
        if subprocess.run(["ip", "netns", "del", ns], capture_output=True).returncode == 0:
            removed.append(ns)
    if any(ns.endswith("-ctl") for ns in removed) or known:
        # Normally gone with its peer (in the controller's namespace); a half-made one may remain.
        if subprocess.run(["ip", "link", "del", HOST_VETH], capture_output=True).returncode == 0:
            removed.append(HOST_VETH)
    return removed
