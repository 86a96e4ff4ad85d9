"""Network namespaces of a multi-node test cluster: one per node plus the controller's, joined by a
bridge in the controller's namespace; this host joins the bridge too, so Slurm clients run from the
root namespace. Namespace names, the host's link and the subnet all derive from a hash of the run
directory, so `down` finds a cluster's namespaces and link by name even when its state file is lost
and never touches another cluster's, and two multi-node clusters on one host use different links
and subnets (a subnet already on the host is refused, never shared)."""
from __future__ import annotations

import hashlib
import socket
import subprocess
from pathlib import Path

from stackproof.errors import StackproofError
from stackproof.cluster.procs import sh

NETNS_PREFIX = "spk"
SUBNET_BASE = "10.99"             # the cluster's /24 is 10.99.X.0/24, X from the run directory


def _digest(root: Path) -> str:
    return hashlib.sha1(str(root).encode()).hexdigest()


def prefix(root: Path) -> str:
    return f"{NETNS_PREFIX}{_digest(root)[:6]}-"


def host_veth(root: Path) -> str:
    """Root-namespace end of the link to this cluster's bridge (14 characters: IFNAMSIZ is 16)."""
    return f"{prefix(root)}host"


def subnet(root: Path) -> str:
    """This cluster's /24 (first three octets): 10.99.16 to 10.99.239."""
    return f"{SUBNET_BASE}.{16 + int(_digest(root)[6:12], 16) % 224}"


def controller_addr(root: Path) -> str:
    return f"{subnet(root)}.1"


def names(root: Path, nodes: list[str]) -> list[str]:
    p = prefix(root)
    return [f"{p}ctl"] + [f"{p}{n}" for n in nodes]


def existing(root: Path) -> list[str]:
    """This run directory's namespaces present on the host (controller's first)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    mine = [line.split()[0] for line in out.splitlines() if line.startswith(prefix(root))]
    return sorted(mine, key=lambda n: (not n.endswith("-ctl"), n))


def node_addr(root: Path, i: int) -> str:
    return f"{subnet(root)}.{10 + i}"


def _subnet_in_use(net: str) -> str | None:
    """The host link that already has an address in `net`.0/24, if any."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3].startswith(f"{net}."):
            return fields[1]
    return None


def create(root: Path, nodes: list[str], created: list[str]) -> None:
    """Create the namespaces, appending each to `created` as soon as it exists (for roll-back)."""
    ctl, *node_ns = names(root, nodes)
    net, veth = subnet(root), host_veth(root)
    used = _subnet_in_use(net)
    if used:
        raise StackproofError(f"subnet {net}.0/24 of this cluster is already on the host (link {used}): "
                              "another test cluster or network uses it; bring that one down or use "
                              "another --run-dir")
    ip = ["ip"]
    sh(ip + ["netns", "add", ctl])
    created.append(ctl)
    sh(ip + ["-n", ctl, "link", "set", "lo", "up"])
    sh(ip + ["-n", ctl, "link", "add", "br0", "type", "bridge"])
    sh(ip + ["-n", ctl, "addr", "add", f"{net}.1/24", "dev", "br0"])
    sh(ip + ["-n", ctl, "link", "set", "br0", "up"])
    # The host joins the bridge (.254): clients in the root namespace (pytest, ReFrame, a shell)
    # reach the controller, and every packet to the cluster's /24 stays on this machine.
    sh(ip + ["link", "add", veth, "type", "veth", "peer", "name", "uplink", "netns", ctl])
    sh(ip + ["-n", ctl, "link", "set", "uplink", "master", "br0", "up"])
    sh(ip + ["addr", "add", f"{net}.254/24", "dev", veth])
    sh(ip + ["link", "set", veth, "up"])
    hosts = ["127.0.0.1 localhost", f"{net}.1 {socket.gethostname().split('.')[0]} ctl"]
    for i, (n, ns) in enumerate(zip(nodes, node_ns), start=1):
        sh(ip + ["netns", "add", ns])
        created.append(ns)
        sh(ip + ["-n", ns, "link", "set", "lo", "up"])
        sh(ip + ["-n", ctl, "link", "add", f"veth{i}", "type", "veth", "peer", "name", "eth0", "netns", ns])
        sh(ip + ["-n", ctl, "link", "set", f"veth{i}", "master", "br0", "up"])
        sh(ip + ["-n", ns, "addr", "add", f"{node_addr(root, i)}/24", "dev", "eth0"])
        sh(ip + ["-n", ns, "link", "set", "eth0", "up"])
        hosts.append(f"{node_addr(root, i)} {n}")
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
        veth = host_veth(root)
        if subprocess.run(["ip", "link", "del", veth], capture_output=True).returncode == 0:
            removed.append(veth)
    return removed
