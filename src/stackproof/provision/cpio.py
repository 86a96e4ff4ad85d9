"""newc cpio archives, the format the Linux kernel unpacks as an initramfs (and that Warewulf serves).

Two sources of entries:
- `overlay_entries(files)`: a rendered overlay ({path: File}) with its parent directories;
- `oci_rootfs_entries(archive)`: the flattened root filesystem of an OCI image archive (layers applied
  in order, whiteouts honoured, hard links kept as links), streamed without unpacking to disk.
`write(fh, entries)` writes them; `read(data)` parses an archive back (tests, `vcluster` checks).
"""
from __future__ import annotations

import fnmatch
import io
import json
import stat
import tarfile
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterable, Iterator

MAGIC = b"070701"
TRAILER = "TRAILER!!!"


@dataclass
class File:
    """One overlay file: text or bytes, its mode and owner; or a symlink (link=target)."""
    data: bytes | str = b""
    mode: int = 0o644
    uid: int = 0
    gid: int = 0
    link: str | None = None


@dataclass
class Entry:
    path: str                   # relative, no leading '/' ("etc/hosts")
    mode: int                   # full st_mode (type bits included)
    uid: int = 0
    gid: int = 0
    mtime: int = 0
    size: int = 0
    read: Callable[[], bytes] | None = None      # file data (size bytes)
    link: str | None = None                      # symlink target
    ino: int | None = None                       # shared by hard links
    nlink: int = 1
    rdev: tuple[int, int] = (0, 0)


def _pad(n: int) -> bytes:
    return b"\0" * ((4 - n % 4) % 4)


def _header(e: Entry, ino: int, size: int, name: bytes) -> bytes:
    fields = [ino, e.mode, e.uid, e.gid, e.nlink, e.mtime, size, 0, 0, e.rdev[0], e.rdev[1], len(name) + 1, 0]
    return MAGIC + b"".join(b"%08X" % f for f in fields)


def write(fh: BinaryIO, entries: Iterable[Entry]) -> int:
    """Write entries as a newc archive; returns the number of entries (trailer excluded)."""
    count = 0
    next_ino = 1 << 20          # private inode numbers; hard links bring their own
    for e in entries:
        name = e.path.strip("/").encode() or b"."
        if e.link is not None:
            body = e.link.encode()
        elif stat.S_ISREG(e.mode) and e.read is not None and e.size:
            body = e.read()
            if len(body) != e.size:
                raise ValueError(f"{e.path}: expected {e.size} bytes, read {len(body)}")
        else:
            body = b""
        ino = e.ino if e.ino is not None else next_ino
        next_ino += 1
        head = _header(e, ino, len(body), name) + name + b"\0"
        fh.write(head + _pad(len(head)))
        fh.write(body + _pad(len(body)))
        count += 1
    head = _header(Entry(TRAILER, 0), 0, 0, TRAILER.encode()) + TRAILER.encode() + b"\0"
    fh.write(head + _pad(len(head)))
    return count


def to_bytes(entries: Iterable[Entry]) -> bytes:
    buf = io.BytesIO()
    write(buf, entries)
    return buf.getvalue()


def read(data: bytes) -> list[tuple[Entry, bytes]]:
    """Parse a (possibly concatenated) uncompressed newc archive: [(entry, body)]."""
    out, pos = [], 0
    while pos < len(data):
        if data[pos:pos + 6] != MAGIC:
            if not data[pos:].strip(b"\0"):
                break
            raise ValueError(f"not a newc cpio archive at offset {pos}")
        f = [int(data[pos + 6 + 8 * i: pos + 14 + 8 * i], 16) for i in range(13)]
        ino, mode, uid, gid, nlink, mtime, size, _, _, rmaj, rmin, namesize = f[:12]
        name_at = pos + 110
        name = data[name_at:name_at + namesize - 1].decode()
        body_at = name_at + namesize
        body_at += (4 - body_at % 4) % 4
        body = data[body_at:body_at + size]
        pos = body_at + size
        pos += (4 - pos % 4) % 4
        if name == TRAILER:
            continue
        e = Entry(name, mode, uid, gid, mtime, size, ino=ino, nlink=nlink, rdev=(rmaj, rmin))
        if stat.S_ISLNK(mode):
            e.link = body.decode()
        out.append((e, body))
    return out


# ---- overlays ----------------------------------------------------------------------------------------

def overlay_entries(files: dict[str, File], dirs: dict[str, tuple[int, int, int]] | None = None,
                    mtime: int = 0) -> list[Entry]:
    """Entries for an overlay: every parent directory first (0755 root unless `dirs` gives
    (mode, uid, gid): the kernel applies a directory entry's mode to an existing directory, so the
    overlay must carry the right one), then the files, sorted so the archive is reproducible."""
    dirs = dict(dirs or {})
    wanted: dict[str, tuple[int, int, int]] = {}
    for path in files:
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            wanted[d] = dirs.get(d, (0o755, 0, 0))
    entries = [Entry(d, stat.S_IFDIR | m, u, g, mtime) for d, (m, u, g) in sorted(wanted.items())]
    for path in sorted(files):
        f = files[path]
        if f.link is not None:
            entries.append(Entry(path.strip("/"), stat.S_IFLNK | 0o777, f.uid, f.gid, mtime, link=f.link))
            continue
        data = f.data.encode() if isinstance(f.data, str) else f.data
        entries.append(Entry(path.strip("/"), stat.S_IFREG | f.mode, f.uid, f.gid, mtime, len(data),
                             read=lambda d=data: d))
    return entries


# ---- OCI image -> root filesystem --------------------------------------------------------------------

def _norm(name: str) -> str:
    name = name[2:] if name.startswith("./") else name
    return name.strip("/")


def _excluded(path: str, excludes: list[str]) -> bool:
    """Warewulf excludes: '/usr/share/doc/' drops that tree; a pattern with * ? [ is matched
    (fnmatch) against the whole path."""
    for ex in excludes:
        ex = ex.strip().strip("/")
        if not ex:
            continue
        if any(c in ex for c in "*?["):
            if fnmatch.fnmatchcase(path, ex) or fnmatch.fnmatchcase(path, ex + "/*"):
                return True
        elif path == ex or path.startswith(ex + "/"):
            return True
    return False


def _layers(archive: tarfile.TarFile) -> list[str]:
    index = json.load(archive.extractfile("index.json"))
    manifest = index["manifests"][0]
    while "manifests" in manifest or manifest.get("mediaType", "").endswith("index.v1+json"):
        doc = json.load(archive.extractfile("blobs/" + manifest["digest"].replace(":", "/", 1)))
        manifest = doc["manifests"][0]
    doc = json.load(archive.extractfile("blobs/" + manifest["digest"].replace(":", "/", 1)))
    return ["blobs/" + layer["digest"].replace(":", "/", 1) for layer in doc["layers"]]


def _open_layer(archive: tarfile.TarFile, blob: str) -> tarfile.TarFile:
    return tarfile.open(fileobj=archive.extractfile(blob), mode="r|*")


def _final_versions(archive: tarfile.TarFile, blobs: list[str]) -> tuple[dict[str, int], dict[str, int], list[str]]:
    """Pass 1: path -> index of the layer holding its final version (negative: the final version is
    a directory; its first layer since it was last deleted, so that it is created before anything
    inside it); hard-link target -> link count; the image's own /etc/warewulf/excludes."""
    final: dict[str, int] = {}
    hardlinks: list[tuple[str, int, str]] = []
    excludes: list[str] = []
    for i, blob in enumerate(blobs):
        with _open_layer(archive, blob) as layer:
            for m in layer:
                path = _norm(m.name)
                base = path.rsplit("/", 1)[-1]
                parent = path.rsplit("/", 1)[0] if "/" in path else ""
                if base == ".wh..wh..opq":
                    for p in [p for p in final if p.startswith(parent + "/")]:
                        del final[p]
                elif base.startswith(".wh."):
                    gone = (parent + "/" if parent else "") + base[4:]
                    for p in [p for p in final if p == gone or p.startswith(gone + "/")]:
                        del final[p]
                elif path:
                    if m.isdir():
                        final[path] = final[path] if final.get(path, 0) < 0 else -(i + 1)
                        continue
                    final[path] = i
                    if m.islnk():
                        hardlinks.append((path, i, _norm(m.linkname)))
                    elif path == "etc/warewulf/excludes" and m.isfile():
                        excludes = [x for x in layer.extractfile(m).read().decode().split()
                                    if not x.startswith("#")]
    links: dict[str, int] = {}
    for path, i, target in hardlinks:
        if final.get(path) == i:
            links[target] = links.get(target, 1) + 1
    return final, links, excludes


def image_excludes(archive_path: str) -> list[str]:
    with tarfile.open(archive_path) as archive:
        return _final_versions(archive, _layers(archive))[2]


def oci_rootfs_entries(archive_path: str, excludes: list[str] = (), own_excludes: bool = True) -> Iterator[Entry]:
    """The image's root filesystem, layer by layer: pass 1 finds which layer holds the final version
    of each path (whiteouts `.wh.NAME` delete, `.wh..wh..opq` empties a directory); pass 2 streams
    the layers again and yields only those versions, in archive order (a directory before its files).
    Hard links become cpio hard links (shared inode, nlink counted in pass 1). The image's own
    /etc/warewulf/excludes apply too (own_excludes), as with `wwctl image build`."""
    excludes = list(excludes)
    with tarfile.open(archive_path) as archive:
        blobs = _layers(archive)
        final, links, own = _final_versions(archive, blobs)
        if own_excludes:
            excludes += own
        inodes: dict[str, int] = {}
        for i, blob in enumerate(blobs):
            with _open_layer(archive, blob) as layer:
                for m in layer:
                    path = _norm(m.name)
                    at = final.get(path)
                    if at is None or _excluded(path, excludes):
                        continue
                    # a directory comes out where it first appears and again with each later
                    # version (the kernel applies the later mode/owner to the existing directory)
                    if not (at == i or (at < 0 and m.isdir() and -(at + 1) <= i)):
                        continue
                    e = Entry(path, m.mode & 0o7777, m.uid, m.gid, int(m.mtime))
                    if m.isdir():
                        e.mode |= stat.S_IFDIR
                    elif m.issym():
                        e.mode |= stat.S_IFLNK
                        e.link = m.linkname
                    elif m.islnk():
                        target = _norm(m.linkname)
                        if target not in inodes or _excluded(target, excludes):
                            continue        # its target was excluded or replaced: drop the link
                        e.mode |= stat.S_IFREG
                        e.ino, e.nlink = inodes[target], links[target]
                    elif m.isreg():
                        e.mode |= stat.S_IFREG
                        e.size = m.size
                        data = layer.extractfile(m).read()
                        e.read = lambda d=data: d
                        if path in links:
                            inodes[path] = (1 << 30) + len(inodes)
                            e.ino, e.nlink = inodes[path], links[path]
                    elif m.ischr() or m.isblk():
                        e.mode |= stat.S_IFCHR if m.ischr() else stat.S_IFBLK
                        e.rdev = (m.devmajor, m.devminor)
                    elif m.isfifo():
                        e.mode |= stat.S_IFIFO
                    else:
                        continue
                    yield e
