"""`stackproof images scan PATH`: secrets in a built image (rootfs directory, tar, OCI archive or OCI
layout): munge keys, SSH host keys and private keys, in every layer, including files that a later
layer deletes (a whiteout does not remove the bytes from the archive).
"""
from __future__ import annotations

import io
import json
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

from stackproof.errors import StackproofError


SECRET_PATHS = [
    (re.compile(r"^etc/munge/munge\.key$"), "munge key"),
    (re.compile(r"^etc/ssh/ssh_host_[a-z0-9]+_key$"), "SSH host private key"),
    (re.compile(r"^etc/ssh/ssh_host_[a-z0-9]+_key\.pub$"), "SSH host public key"),
    (re.compile(r"^etc/ssl/private/.+\.(key|pem)$"), "TLS private key"),
    (re.compile(r"^(root|home/[^/]+)/\.ssh/id_[a-z0-9]+$"), "user SSH private key"),
    (re.compile(r"^etc/slurm/slurm\.jwt.*\.key$|^var/spool/slurm.*/jwt.*\.key$"), "Slurm JWT key"),
]
# Private key material anywhere in files under these trees (binaries and documentation elsewhere may
# legitimately contain the marker, e.g. test vectors in Python packages).
CONTENT_TREES = ("etc/", "root/", "home/", "var/lib/", "opt/stackproof/etc/")
PRIVATE_KEY = re.compile(rb"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----")
MAX_CONTENT_SCAN = 1 << 20


@dataclass
class Finding:
    where: str
    path: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: /{self.path}: {self.what}"


def _check(path: str, read, where: str) -> list[Finding]:
    path = path.lstrip("./")
    base = path.rsplit("/", 1)
    if len(base) == 2 and base[1].startswith(".wh."):   # a whiteout names a deleted file: not content
        return []
    found = [Finding(where, path, what) for rx, what in SECRET_PATHS if rx.search(path)]
    if not found and path.startswith(CONTENT_TREES):
        data = read()
        if data is not None and PRIVATE_KEY.search(data):
            found.append(Finding(where, path, "private key material"))
    return found


def _scan_tar(tf: tarfile.TarFile, where: str) -> list[Finding]:
    found = []
    for member in tf:
        if not (member.isfile() or member.islnk() or member.issym()):
            continue

        def read(m=member):
            if not m.isfile() or m.size > MAX_CONTENT_SCAN:
                return None
            fh = tf.extractfile(m)
            return fh.read() if fh else None
        found += _check(member.name, read, where)
    return found


def _scan_oci(blob, index: dict, where: str) -> list[Finding]:
    found = []
    manifests = list(index.get("manifests", []))
    seen = set()
    while manifests:
        desc = manifests.pop()
        doc = json.loads(blob(desc["digest"]))
        manifests += doc.get("manifests", [])            # nested image index
        for layer in doc.get("layers", []):
            if layer["digest"] in seen:
                continue
            seen.add(layer["digest"])
            with tarfile.open(fileobj=io.BytesIO(blob(layer["digest"])), mode="r:*") as tf:
                found += _scan_tar(tf, f"{where} layer {layer['digest'][7:19]}")
    return found


def scan(path: str | Path) -> list[Finding]:
    """Secrets in a rootfs directory, a (compressed) rootfs tar, an OCI archive or an OCI layout."""
    path = Path(path)
    where = str(path)
    if path.is_dir():
        if (path / "index.json").is_file() and (path / "blobs").is_dir():
            def blob(d):
                return (path / "blobs" / d.replace(":", "/", 1)).read_bytes()
            return _scan_oci(blob, json.loads((path / "index.json").read_text()), where)
        found = []
        for f in sorted(path.rglob("*")):
            if f.is_file() and not f.is_symlink():
                def read(f=f):
                    return f.read_bytes() if f.stat().st_size <= MAX_CONTENT_SCAN else None
                found += _check(str(f.relative_to(path)), read, where)
            elif f.is_symlink():
                found += _check(str(f.relative_to(path)), lambda: None, where)
        return found
    if not path.is_file():
        raise StackproofError(f"image not found: {path}")
    try:
        with tarfile.open(path, mode="r:*") as tf:
            names = tf.getnames()
            if "index.json" in names and "oci-layout" in names:
                def blob(d):
                    return tf.extractfile("blobs/" + d.replace(":", "/", 1)).read()
                return _scan_oci(blob, json.loads(tf.extractfile("index.json").read()), where)
            return _scan_tar(tf, where)
    except tarfile.TarError as exc:
        raise StackproofError(f"{path}: not a rootfs directory, tar or OCI archive ({exc})") from None
