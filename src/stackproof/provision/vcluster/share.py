"""Directories shared from the head to every node at the same path (virtiofs): what ReFrame needs
on both sides, its stage/output directories and the stack binaries jobs run.

Why virtiofs and not NFS (what Warewulf sites export): an NFS server in the head namespace needs the
host's kernel nfsd (not loadable in a container; a global service besides) or a userspace server plus
rpcbind, and the nodes' NFS client stack. virtiofs needs no server on the network at all: one
`virtiofsd` per node and directory, started inside the head namespace and talking to its QEMU over a
unix socket in run/, so nothing listens anywhere and `down` stops them with the rest. The guest side
is two modules of the pinned cloud kernel (fuse, virtiofs; it has no 9p) and a unit that mounts the
shares before slurmd starts. vhost-user needs the VM's memory in a shared memfd (same size).

Shares (tag -> host path, mounted at the same path on the nodes):
  spk-share   <root>/share, read-write: ReFrame's stage directories for the vcluster system (its output
              directories, perflogs and reports stay on the head: reframe-tests/config/systems/vcluster.py)
  spk-stacks  $STACKPROOF_STACKS_ROOT (default /opt/stackproof/stacks), read-only, when it exists

A node is another party to the head (issue 42): root in a VM is root on a share, since virtiofsd
writes with the guest's ids. So "read-only" is enforced on the head, not by the guest's mount option
(a guest's root can remount): that share's virtiofsd runs in a mount namespace of its own where its
source is a read-only bind mount. The read-write share's virtiofsd drops CAP_MKNOD and CAP_SETFCAP (no
device node, no file capability made on the head's filesystem), the guests mount it nosuid,nodev,
and what the nodes write there is read on the head only through stackproof.files (failure_detail,
parse_output, the report's traces and curves); ReFrame's own copy of job files into the output
directory follows links, so StackCheck removes links, FIFOs and devices from the stage directory
first (stackproof.reframe.check).
"""
from __future__ import annotations

import io
import shlex
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from stackproof.errors import StackproofError
from stackproof.stacks.model import stacks_root
from stackproof.provision.cpio import File, overlay_entries, to_bytes

VIRTIOFSD = Path("/usr/lib/qemu/virtiofsd")      # qemu-system-common (a dependency of qemu-system-x86)
UNIT = "vcluster-share.service"
MODULES = ["kernel/fs/fuse/fuse.ko", "kernel/fs/fuse/virtiofs.ko"]     # load order (virtiofs needs fuse)


@dataclass(frozen=True)
class Share:
    tag: str
    path: Path
    readonly: bool = False


def shares(root: Path) -> list[Share]:
    out = [Share("spk-share", (root / "share").resolve())]
    stacks = stacks_root().resolve()
    if stacks.is_dir():
        out.append(Share("spk-stacks", stacks, readonly=True))
    return out


def socket_path(run: Path, node: str, share: Share) -> Path:
    return run / f"{node}.{share.tag}.socket"


PIDFILE_DIR = Path("/run/virtiofsd")      # virtiofsd's lock files, named after the socket path; left behind


def leftover_pidfiles(run: Path) -> list[Path]:
    """virtiofsd's pid files for sockets under run/ (it never removes them itself)."""
    prefix = str(run).replace("/", ".")
    return sorted(PIDFILE_DIR.glob(f"{prefix}.*.pid")) if PIDFILE_DIR.is_dir() else []


def remove_pidfiles(run: Path) -> None:
    for p in leftover_pidfiles(run):
        p.unlink(missing_ok=True)
    try:
        PIDFILE_DIR.rmdir()         # only when empty (no other virtiofsd on this host)
    except OSError:
        pass


def qemu_args(run: Path, node: str, memory_mb: int, items: list[Share]) -> list[str]:
    """vhost-user-fs devices, one per share; the guest memory in a shared memfd (vhost-user needs it)."""
    if not items:
        return []
    args = ["-object", f"memory-backend-memfd,id=mem,size={memory_mb}M,share=on", "-machine", "memory-backend=mem"]
    for i, s in enumerate(items):
        args += ["-chardev", f"socket,id=fs{i},path={socket_path(run, node, s)}",
                 "-device", f"vhost-user-fs-pci,chardev=fs{i},tag={s.tag}"]
    return args


def virtiofsd_command(run: Path, node: str, share: Share) -> list[str]:
    """virtiofsd for one node and share; a read-only share's source is a read-only bind mount in a
    mount namespace of its own (the head enforces it, whatever the guest mounts)."""
    # sandbox=chroot: the namespace sandbox needs privileges a container may not give
    cmd = [str(VIRTIOFSD), f"--socket-path={socket_path(run, node, share)}", "-o", f"source={share.path}",
           "-o", "sandbox=chroot", "-o", "cache=auto", "-o", "log_level=warn"]
    if not share.readonly:
        return cmd + ["-o", "modcaps=-mknod:-setfcap"]
    src = shlex.quote(str(share.path))
    inner = f"mount --bind {src} {src} && mount -o remount,bind,ro {src} && exec {shlex.join(cmd)}"
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", inner]


def preflight() -> list[str]:
    if not VIRTIOFSD.is_file():
        return [f"{VIRTIOFSD} missing (shared directories): apt-get install qemu-system-common"]
    return []


def mount_script(items: list[Share], release: str) -> str:
    lines = ["#!/bin/sh", "# rendered by stackproof vcluster: the head's shared directories (virtiofs)"]
    lines += [f"insmod /lib/modules/{release}/{m} 2>/dev/null || true" for m in MODULES]
    for s in items:
        opts = "ro" if s.readonly else "rw,nosuid,nodev"
        lines += [f"mkdir -p '{s.path}'",
                  f"mount -t virtiofs -o {opts} {s.tag} '{s.path}' || {{ echo 'vcluster: share {s.tag} failed'; exit 1; }}",
                  f"echo 'vcluster: share {s.tag} at {s.path}'"]
    return "\n".join(lines) + "\n"


UNIT_TEXT = """[Unit]
Description=vcluster: mount the head's shared directories (virtiofs)
Before=slurmd.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/vcluster-share
StandardOutput=journal+console
StandardError=journal+console
[Install]
RequiredBy=slurmd.service
"""


def overlay_files(items: list[Share], release: str, modules: dict[str, bytes]) -> dict[str, File]:
    """The `share` overlay: the two modules, the mount script and its unit, required by slurmd."""
    files = {f"usr/lib/modules/{release}/{m}": File(data) for m, data in modules.items()}
    files["usr/local/sbin/vcluster-share"] = File(mount_script(items, release), 0o755)
    files[f"etc/systemd/system/{UNIT}"] = File(UNIT_TEXT)
    files[f"etc/systemd/system/slurmd.service.requires/{UNIT}"] = File(link=f"/etc/systemd/system/{UNIT}")
    return files


def kernel_modules(deb: Path, release: str) -> dict[str, bytes]:
    """fuse.ko and virtiofs.ko from the cached kernel package (read from its data tar, nothing unpacked)."""
    proc = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True)
    if proc.returncode != 0:
        raise StackproofError(f"dpkg-deb --fsys-tarfile {deb} failed: {proc.stderr.decode(errors='replace')[-300:]}")
    want = {f"./lib/modules/{release}/{m}": m for m in MODULES}
    found = {}
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        for member in tar:
            if member.name in want:
                found[want[member.name]] = tar.extractfile(member).read()
    missing = [m for m in MODULES if m not in found]
    if missing:
        raise StackproofError(f"{deb.name} lacks {', '.join(missing)} (virtiofs shares)")
    return {m: found[m] for m in MODULES}


def overlay_image(deb: Path, release: str, items: list[Share]) -> bytes:
    return to_bytes(overlay_entries(overlay_files(items, release, kernel_modules(deb, release))))

