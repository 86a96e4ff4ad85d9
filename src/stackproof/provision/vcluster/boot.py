"""QEMU TCG nodes that network-boot from the head, and the boot stages read from their consoles.

Each node: 1 host thread (`-accel tcg,thread=single`) running 2 vCPUs (1 socket x 2 cores, the
vcluster node type, so corespec has a system core and an application core), 1.5 GB, one virtio NIC
on its own tap with the MAC from nodes.conf, `-boot n` (QEMU's NIC option ROM is iPXE), serial
console to a log file. Started inside the head's namespace and under `nice`.
"""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from stackproof.errors import StackproofError
from stackproof.provision.vcluster import share
from stackproof.provision.vcluster import head
from stackproof.provision.vcluster.head import alive, read_pid, sh
from stackproof.provision.vcluster.nodesconf import VNode

MEMORY_MB = 1536
SMP = "2,sockets=1,cores=2,threads=1"
NICE = 5
QEMU = "qemu-system-x86_64"
IPXE_ROM = Path("/usr/lib/ipxe/qemu/efi-virtio.rom")

# (stage, console pattern) in boot order; the last one seen is the node's stage.
STAGES = [
    ("firmware", re.compile(r"SeaBIOS|iPXE")),
    ("dhcp", re.compile(r"vcluster: chain")),
    ("kernel", re.compile(r"Linux version")),
    ("unpacked", re.compile(r"Freeing initrd memory|Freeing unused kernel")),
    ("wwinit", re.compile(r"vcluster: network up")),
    ("systemd", re.compile(r"systemd\[1\]|Welcome to")),
    ("share", re.compile(r"vcluster: share \S+ at ")),
    ("munge", re.compile(r"Started .*munge")),
    ("slurmd", re.compile(r"Started .*slurmd")),
]


# A daemon the node needs has failed: stop waiting.
FAILED = re.compile(r"(slurmd|munge|vcluster-share)\.service: Failed with result|vcluster: share \S+ failed"
                    r"|Kernel panic|Initramfs unpacking failed")


@dataclass
class NodeBoot:
    node: VNode
    tap: str
    console: Path
    pidfile: Path
    started: float = 0.0
    stage: str = "qemu"
    stage_at: dict[str, float] = field(default_factory=dict)
    failed: str | None = None
    shares: list[share.Share] = field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return read_pid(self.pidfile)


def preflight() -> None:
    """The host tools a boot needs, each with its fix."""
    fixes = share.preflight()
    if not shutil.which(QEMU):
        fixes.append(f"{QEMU} not found: apt-get install qemu-system-x86 ipxe-qemu")
    elif not IPXE_ROM.is_file():
        fixes.append(f"{IPXE_ROM} missing (QEMU's network-boot ROM): apt-get install ipxe-qemu")
    if not Path("/dev/net/tun").exists():
        fixes.append("/dev/net/tun missing (QEMU taps): modprobe tun, or mknod /dev/net/tun c 10 200 "
                     "(containers: pass --device /dev/net/tun)")
    for tool, pkg in (("dnsmasq", "dnsmasq-base"), ("cpio", "cpio"), ("ip", "iproute2"),
                      ("unshare", "util-linux"), ("slurmctld", "slurmctld"), ("srun", "slurm-client"),
                      ("munged", "munge"), ("apt-get", "apt")):
        if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists():
            fixes.append(f"{tool} not found: apt-get install {pkg}")
    if fixes:
        raise StackproofError("cannot boot the virtual cluster:\n  " + "\n  ".join(fixes))


def qemu_command(b: NodeBoot) -> list[str]:
    n = b.node
    return head.ns() + ["nice", "-n", str(NICE), QEMU, "-name", n.name, "-accel", "tcg,thread=single",
                 "-cpu", "max", "-smp", SMP, "-m", str(MEMORY_MB), "-display", "none", "-vga", "none",
                 "-no-reboot", "-netdev", f"tap,id=n0,ifname={b.tap},script=no,downscript=no",
                 "-device", f"virtio-net-pci,netdev=n0,mac={n.hwaddr}", "-boot", "n",
                 "-serial", f"file:{b.console}", "-monitor", "none",
                 "-daemonize", "-pidfile", str(b.pidfile)] + share.qemu_args(b.console.parent, n.name, MEMORY_MB, b.shares)


def start(b: NodeBoot, now: float) -> None:
    if alive(b.pid):
        return
    b.console.unlink(missing_ok=True)
    b.pidfile.unlink(missing_ok=True)
    sh(qemu_command(b))
    b.started = now
    b.stage, b.stage_at = "qemu", {"qemu": 0.0}


def update_stage(b: NodeBoot, now: float) -> bool:
    """Advance the node's stage from its console log; True when it changed."""
    try:
        text = b.console.read_text(errors="replace")
    except OSError:
        return False
    failed = FAILED.search(text)
    if failed:
        b.failed = failed.group(0)
    changed = False
    for name, rx in STAGES:
        if name not in b.stage_at and rx.search(text):
            b.stage_at[name] = now - b.started
            changed = True
    if changed:
        b.stage = [name for name, _ in STAGES if name in b.stage_at][-1]
    return changed


def console_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").replace("\r", "")
    except OSError:
        return "(no console output)"
    # drop terminal escape sequences (firmware and systemd colour)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1bc", "", text)
    return "\n".join([ln for ln in text.splitlines() if ln.strip()][-lines:])


def failure(b: NodeBoot, why: str) -> StackproofError:
    return StackproofError(f"node {b.node.name} {why} (stage: {b.stage}); console log {b.console}, last lines:\n"
                           + "\n".join("  | " + ln for ln in console_tail(b.console).splitlines()))
