"""A real Warewulf `wwctl`, when one is installed: find it, give it a private tree, build overlays.

`find()` looks at $STACKPROOF_WWCTL, then $WWCTL, then PATH (images/warewulf/build-wwctl.sh builds
one from a Warewulf v4.7.0 checkout). `Tree` is a private Warewulf installation in a directory:
a warewulf.conf whose `paths:` all point into it (dhcp, tftp, nfs off: nothing on the host changes),
a nodes.conf, and our site overlays (images/warewulf/overlays) installed the way
images/warewulf/install-overlays.sh installs them. `Tree.build()` runs `wwctl overlay build` and
reads each node's system and runtime images back as {path: cpio.File}.
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import yaml

from stackproof.errors import StackproofError
from stackproof.paths import REPO
from stackproof.provision import cpio
from stackproof.provision.images import munge_id

OVERLAYS = REPO / "images" / "warewulf" / "overlays"
SITE_OVERLAYS = ("slurm", "corespec", "munge")
WAREWULF_CONF = {"ipaddr": "10.77.0.1/24", "netmask": "255.255.255.0", "network": "10.77.0.0",
                 "warewulf": {"port": 9873, "secure": False, "update interval": 60,
                              "autobuild overlays": False, "host overlay": False},
                 "dhcp": {"enabled": False}, "tftp": {"enabled": False}, "nfs": {"enabled": False}}


def find() -> str | None:
    """The wwctl to use, or None. An explicit $STACKPROOF_WWCTL/$WWCTL that is not executable is an error."""
    for var in ("STACKPROOF_WWCTL", "WWCTL"):
        exe = os.environ.get(var)
        if exe:
            if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
                raise StackproofError(f"{var}={exe} is not an executable wwctl (unset it to use PATH)")
            return exe
    return shutil.which("wwctl")


def version(exe: str) -> str:
    """`wwctl version` ("4.7.0-1"), or the error."""
    try:
        proc = subprocess.run([exe, "--emptyconf", "version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise StackproofError(f"{exe} version: {exc}") from None
    words = proc.stdout.split()
    if proc.returncode != 0 or not words:
        raise StackproofError(f"{exe} version failed (exit {proc.returncode}): {proc.stderr.strip()[:200]}")
    return words[-1]


class Tree:
    """A private Warewulf tree under `root` with the site overlays installed."""

    def __init__(self, root: Path, nodes_conf: dict, exe: str | None = None,
                 overlays: tuple[str, ...] = SITE_OVERLAYS):
        self.exe = exe or find()
        if not self.exe:
            raise StackproofError("wwctl not found: put it on PATH or set STACKPROOF_WWCTL "
                                  "(images/warewulf/build-wwctl.sh builds one)")
        self.root = Path(root)
        conf = dict(WAREWULF_CONF)
        r = self.root
        conf["paths"] = {"sysconfdir": f"{r}/etc", "localstatedir": f"{r}/var", "cachedir": f"{r}/var/cache",
                         "datadir": f"{r}/share", "wwoverlaydir": f"{r}/overlays",
                         "wwchrootdir": f"{r}/var/chroots", "wwprovisiondir": f"{r}/var/provision",
                         "srvdir": f"{r}/srv"}
        (r / "etc/warewulf").mkdir(parents=True, exist_ok=True)
        self.conf = r / "etc/warewulf/warewulf.conf"
        self.conf.write_text(yaml.safe_dump(conf))
        (r / "etc/warewulf/nodes.conf").write_text(yaml.safe_dump(nodes_conf))
        for name in overlays:
            dest = r / "overlays" / name / "rootfs"
            shutil.rmtree(dest.parent, ignore_errors=True)
            shutil.copytree(OVERLAYS / name / "rootfs", dest)
        # what install-overlays.sh sets and git cannot carry
        if "munge" in overlays:
            uid = munge_id()
            self.run("overlay", "chmod", "munge", "etc/munge", "0700")
            self.run("overlay", "chown", "munge", "etc/munge", f"{uid}:{uid}")
            self.run("overlay", "chmod", "munge", "etc/munge/munge.key.ww", "0400")
            self.run("overlay", "chown", "munge", "etc/munge/munge.key.ww", f"{uid}:{uid}")

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        try:
            proc = subprocess.run([self.exe, "--warewulfconf", str(self.conf), *args],
                                  capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise StackproofError(f"wwctl {' '.join(args)}: {exc}") from None
        if check and proc.returncode != 0:
            last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
            raise StackproofError(f"wwctl {' '.join(args)} failed (exit {proc.returncode}): {last[0]}")
        return proc

    def build(self, nodes: list[str]) -> dict[str, dict[str, dict[str, cpio.File]]]:
        """`wwctl overlay build NODE...`; node -> {"system"|"runtime": {path: File}} (files and links;
        `image()` gives the whole archive)."""
        self.run("overlay", "build", *nodes)
        out = {}
        for node in nodes:
            out[node] = {part: _files(self.image(node, part)) for part in ("system", "runtime")}
        return out

    def image(self, node: str, part: str) -> bytes:
        """The node's built __SYSTEM__/__RUNTIME__ image (an empty archive if wwctl wrote none)."""
        img = self.root / "var/provision/overlays" / node / f"__{part.upper()}__.img"
        if not img.is_file():
            return cpio.to_bytes([])
        return img.read_bytes()


def _files(data: bytes) -> dict[str, cpio.File]:
    out = {}
    for e, body in cpio.read(data):
        path = e.path[2:] if e.path.startswith("./") else e.path.lstrip("/")
        if stat.S_ISREG(e.mode):
            out[path] = cpio.File(body, stat.S_IMODE(e.mode), e.uid, e.gid)
        elif stat.S_ISLNK(e.mode):
            out[path] = cpio.File(link=e.link, uid=e.uid, gid=e.gid)
    return out
