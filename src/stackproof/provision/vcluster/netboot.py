"""What the head's dnsmasq and HTTP server hand out, as text: dnsmasq.conf (DHCP for the nodes' MACs,
TFTP with the iPXE boot script) and the iPXE scripts (Warewulf-style: one boot.ipxe that chains to a
per-MAC script naming the kernel, the image and the node's overlays). Pure functions; tests hold
them to nodes.conf.
"""
from __future__ import annotations

from pathlib import Path

from stackproof.provision.vcluster.artifacts import image_rel
from stackproof.provision.vcluster.nodesconf import HEAD_ADDR, NETWORK, VNode

HTTP_PORT = 8000
BRIDGE = "br0"


def base_url() -> str:
    return f"http://{HEAD_ADDR}:{HTTP_PORT}"


def mac_name(hwaddr: str) -> str:
    """iPXE's ${mac:hexhyp}."""
    return hwaddr.lower().replace(":", "-")


def dnsmasq_conf(nodes: list[VNode], run: Path, tftp: Path) -> str:
    lines = [
        "# dnsmasq of the vcluster head: DHCP + TFTP on the namespace's bridge only (no DNS)",
        "port=0",
        f"interface={BRIDGE}",
        "bind-interfaces",
        "except-interface=lo",
        # static leases only: an unknown MAC gets no address
        f"dhcp-range={NETWORK.network_address},static,{NETWORK.netmask},1h",
    ]
    lines += [f"dhcp-host={n.hwaddr},{n.ipaddr},{n.name}" for n in nodes]
    lines += [
        f"dhcp-option=option:router,{HEAD_ADDR}",
        "dhcp-match=set:ipxe,175",
        "dhcp-option=encap:175,176,1b",                     # iPXE: no ProxyDHCP wait
        f"dhcp-boot=tag:ipxe,boot.ipxe,,{HEAD_ADDR}",       # the boot script over TFTP
        "enable-tftp",
        f"tftp-root={tftp}",
        "enable-ra",                                        # answers iPXE's IPv6 router solicitations
        f"dhcp-range=::,constructor:{BRIDGE},ra-only,64",
        "log-dhcp",
        f"log-facility={run}/dnsmasq.log",
        f"dhcp-leasefile={run}/dnsmasq.leases",
        f"pid-file={run}/dnsmasq.pid",
    ]
    return "\n".join(lines) + "\n"


def boot_script() -> str:
    return f"#!ipxe\necho vcluster: chain to the per-node script\nchain {base_url()}/ipxe/${{mac:hexhyp}}.ipxe\n"


def node_script(node: VNode, extra_initrds: tuple[str, ...] = ()) -> str:
    """The per-node iPXE script: Warewulf's `default` template in spirit (kernel + image + system
    and runtime overlays as concatenated initrds; later archives win). `extra_initrds`: further
    archives under http/ after the overlays (the shared-directory overlay, share.img)."""
    url = base_url()
    args = " ".join(node.kernel_args + [f"wwid={node.name}"])
    initrds = [image_rel(node.image), "kmods.img"]
    initrds += [f"overlays/{node.name}/system.img", f"overlays/{node.name}/runtime.img", *extra_initrds]
    lines = ["#!ipxe", f"echo vcluster: {node.name} {node.ipaddr} image {node.image}",
             f"kernel {url}/vmlinuz {args}"]
    lines += [f"initrd {url}/{p}" for p in initrds]
    lines += ["boot"]
    return "\n".join(lines) + "\n"

