"""Unpacking a source archive that came from a mirror or a cache, trusting nothing in it.

Our own check decides what is written, on every Python we support: Debian 12's /usr/bin/python3
(3.11.2) has no tarfile.data_filter, and the filter of later releases was itself bypassed
(CVE-2025-4517: a long path that makes os.path.realpath stop resolving, chained with symlinks and
hard links). So tarfile only parses here; it never writes a file.

Before anything is written, every member is checked by its name alone (no file system lookup):
- a relative name without '..', at most MAX_PATH bytes and MAX_COMPONENT bytes a component;
- a directory, regular file, symlink or hard link (no devices, fifos);
- all under one top directory (the expected one when the caller names it);
- no member below a symlink member (nothing is ever written through a link);
- a symlink's target, resolved component by component through the archive's other symlinks (as the
  kernel would, '..' after a link applies to the link's target), stays inside the tree; absolute
  targets and loops are refused; a hard link names a regular file earlier in the archive;
- at most `max_members` members and `max_bytes` bytes unpacked (counted again while writing).
Then the tree is written into a fresh private directory beside the destination: directories, files
(O_EXCL | O_NOFOLLOW, modes 0644/0755, the archive's mtimes: builds compare them), hard links, and
the symlinks last. Only a complete, verified tree is renamed into place.

Integrity is checked at the moment of use: with `sha256`, the archive is first copied into that
private directory and hashed there, and only that copy is read; with `tree_sha256`, the digest of the
tree actually written (tree_digest) must match. This module needs only the standard library and
stackproof.errors, so the tests run it under both interpreters.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from stackproof.errors import StackproofError

MAX_BYTES = 2 << 30         # 2 GiB unpacked (SW4 3.0's tree is 77 MB, hypre 2.26's 50 MB)
MAX_MEMBERS = 100_000       # SW4 3.0 has 1,482 files, hypre 2.26 about 3,000
MAX_PATH = 1024             # bytes of a member name (PATH_MAX is 4096; long names are the CVE's lever)
MAX_COMPONENT = 255         # bytes of one name component (NAME_MAX)
MAX_LINK_HOPS = 40          # the kernel's limit on symlinks in one resolution
CHUNK = 1 << 20


class ArchiveError(StackproofError):
    """An archive that cannot be read (truncated, not a tar file)."""


class UnsafeArchive(ArchiveError):
    """An archive that would write outside its tree, exceed a cap, or is not the pinned bytes."""


@dataclass
class _Entry:
    member: tarfile.TarInfo
    path: str                   # normalised: components joined by '/'
    kind: str                   # dir | file | symlink | hardlink
    target: str = ""            # symlink target as written, or the hard link's normalised source path


def _components(name: str, label: str, what: str) -> list[str]:
    if "\x00" in name:
        raise UnsafeArchive(f"{label}: {what} {name!r} contains a NUL byte: not unpacked")
    if name.startswith("/"):
        raise UnsafeArchive(f"{label}: unsafe member {name!r} (absolute or '..'): not unpacked")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(".." in p.split("\\") for p in parts):        # also a Windows-style a\..\b
        raise UnsafeArchive(f"{label}: unsafe member {name!r} (absolute or '..'): not unpacked")
    if len(name.encode(errors="surrogateescape")) > MAX_PATH or \
            any(len(p.encode(errors="surrogateescape")) > MAX_COMPONENT for p in parts):
        raise UnsafeArchive(f"{label}: member {name[:60]!r}... has a name longer than {MAX_PATH} bytes "
                            f"(or a component over {MAX_COMPONENT}): not unpacked")
    return parts


def _kind(m: tarfile.TarInfo) -> str | None:
    if m.isdir():
        return "dir"
    if m.isreg():
        return "file"
    if m.issym():
        return "symlink"
    if m.islnk():
        return "hardlink"
    return None


def resolve_link(link: str, target: str, symlinks: dict[str, str]) -> list[str]:
    """The components (from the tree's root) a symlink at `link` pointing to `target` reaches,
    following the archive's own symlinks; ValueError when it leaves the tree, is absolute or loops."""
    if target.startswith("/"):
        raise ValueError("an absolute target")
    out = link.split("/")[:-1]
    queue = target.split("/")
    hops = 0
    while queue:
        c = queue.pop(0)
        if c in ("", "."):
            continue
        if c == "..":
            if not out:
                raise ValueError("a target outside the tree")
            out.pop()
            continue
        out.append(c)
        key = "/".join(out)
        if key in symlinks:
            hops += 1
            if hops > MAX_LINK_HOPS:
                raise ValueError(f"more than {MAX_LINK_HOPS} links in a row (a loop)")
            inner = symlinks[key]
            if inner.startswith("/"):
                raise ValueError(f"a link through {key!r}, which is absolute")
            out.pop()
            queue = inner.split("/") + queue
    return out


def plan(members, label: str, top: str | None = None, max_bytes: int = MAX_BYTES,
         max_members: int = MAX_MEMBERS) -> list[_Entry]:
    """Check every member (see the module docstring) without touching the file system."""
    entries: list[_Entry] = []
    kinds: dict[str, str] = {}
    symlinks: dict[str, str] = {}
    total = 0
    for count, m in enumerate(members, 1):
        if count > max_members:
            raise UnsafeArchive(f"{label}: more than {max_members} members (the member cap): not unpacked")
        parts = _components(m.name, label, "member")
        kind = _kind(m)
        if kind is None:
            raise UnsafeArchive(f"{label}: member {m.name!r} is a device or fifo: not unpacked")
        if not parts:
            if kind == "dir":
                continue                                # "./": the archive's own root
            raise UnsafeArchive(f"{label}: unsafe member {m.name!r} (no name): not unpacked")
        path = "/".join(parts)
        if path in kinds and not (kind == "dir" and kinds[path] == "dir"):
            raise UnsafeArchive(f"{label}: member {path!r} appears twice: not unpacked")
        if len(parts) == 1 and kind != "dir":
            raise UnsafeArchive(f"{label}: {path!r} beside the top directory is a {kind}, not a directory: "
                                "not unpacked")
        kinds[path] = kind
        target = ""
        if kind == "file":
            total += m.size
            if total > max_bytes:
                raise UnsafeArchive(f"{label}: more than {max_bytes} bytes unpacked (the size cap): not unpacked")
        elif kind == "symlink":
            target = m.linkname
            if "\x00" in target or len(target.encode(errors="surrogateescape")) > MAX_PATH:
                raise UnsafeArchive(f"{label}: member {path!r} has an unusable link target: not unpacked")
            symlinks[path] = target
        elif kind == "hardlink":
            source = "/".join(_components(m.linkname, label, "hard link target"))
            if kinds.get(source) != "file":
                raise UnsafeArchive(f"{label}: member {path!r} links outside the tree or to something other than "
                                    f"an earlier regular file ({m.linkname!r}): not unpacked")
            target = source
        entries.append(_Entry(m, path, kind, target))
    if not entries:
        raise ArchiveError(f"{label}: empty archive")
    tops = sorted({e.path.split("/")[0] for e in entries})
    if len(tops) != 1 or (top is not None and tops != [top]):
        want = f"the top directory {top!r}" if top else "one top directory"
        raise UnsafeArchive(f"{label}: expected {want}, found {', '.join(tops[:5])}: not unpacked")
    for e in entries:
        parts = e.path.split("/")
        for i in range(1, len(parts)):
            above = "/".join(parts[:i])
            if above in symlinks:
                raise UnsafeArchive(f"{label}: member {e.path!r} lies below the symlink {above!r}: not unpacked")
        if e.kind == "symlink":
            try:
                resolve_link(e.path, e.target, symlinks)
            except ValueError as why:
                raise UnsafeArchive(f"{label}: member {e.path!r} links outside the tree ({e.target!r}: {why}): "
                                    "not unpacked") from None
    return entries


def tree_digest(records: list[tuple[str, str, str]]) -> str:
    """sha256 over a tree's files and symlinks, sorted by path: (path, 'file 644|file 755|symlink',
    content sha256 or link target). Directories and timestamps do not count, so the same tree gives
    the same digest from a git commit or any tar of it."""
    h = hashlib.sha256()
    for path, kind, payload in sorted(records, key=lambda r: r[0].encode(errors="surrogateescape")):
        for field in (path, kind, payload):
            h.update(field.encode(errors="surrogateescape") + b"\x00")
    return h.hexdigest()


def _mtime(m: tarfile.TarInfo) -> int:
    try:
        return max(0, min(int(m.mtime), 2**33))
    except (TypeError, ValueError, OverflowError):
        return 0


def _write(tar: tarfile.TarFile, entries: list[_Entry], root: str, label: str, max_bytes: int) -> str:
    dirs = {"/".join(e.path.split("/")[:i]) for e in entries for i in range(1, e.path.count("/") + 1)}
    dirs |= {e.path for e in entries if e.kind == "dir"}
    for d in sorted(dirs, key=lambda p: p.count("/")):
        os.mkdir(os.path.join(root, d), 0o755)
    records, written, digests = [], 0, {}
    for e in entries:
        full = os.path.join(root, e.path)
        if e.kind == "file":
            mode = 0o755 if e.member.mode & 0o111 else 0o644
            src = tar.extractfile(e.member)
            h = hashlib.sha256()
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                while True:
                    block = src.read(CHUNK)
                    if not block:
                        break
                    written += len(block)
                    if written > max_bytes:
                        raise UnsafeArchive(f"{label}: more than {max_bytes} bytes unpacked (the size cap): "
                                            "not unpacked")
                    h.update(block)
                    out.write(block)
                out.flush()
                os.fchmod(out.fileno(), mode)
                os.utime(out.fileno(), (_mtime(e.member), _mtime(e.member)))
            digests[e.path] = (f"file {mode:o}", h.hexdigest())
            records.append((e.path, *digests[e.path]))
        elif e.kind == "hardlink":
            os.link(os.path.join(root, e.target), full, follow_symlinks=False)
            records.append((e.path, *digests[e.target]))
    for e in entries:
        if e.kind == "symlink":
            full = os.path.join(root, e.path)
            os.symlink(e.target, full)
            os.utime(full, (_mtime(e.member),) * 2, follow_symlinks=False)
            records.append((e.path, "symlink", e.target))
    mtimes = {e.path: _mtime(e.member) for e in entries if e.kind == "dir"}
    for d in sorted(dirs, key=lambda p: -p.count("/")):
        if d in mtimes:
            os.utime(os.path.join(root, d), (mtimes[d], mtimes[d]))
    return tree_digest(records)


def _private_copy(archive: Path, into: str, sha256: str, label: str) -> str:
    """Copy `archive` (never through a symlink, only a regular file) into the private directory,
    hashing the copy; the path of the copy, or UnsafeArchive when its bytes are not the pinned ones."""
    try:
        fd = os.open(archive, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise ArchiveError(f"{label}: cannot open ({exc.strerror}{', a symlink' if os.path.islink(archive) else ''})"
                           ) from None
    copy = os.path.join(into, ".archive")
    h = hashlib.sha256()
    with os.fdopen(fd, "rb") as src:
        if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
            raise UnsafeArchive(f"{label}: not a regular file: not unpacked")
        with open(copy, "xb") as out:
            for block in iter(lambda: src.read(CHUNK), b""):
                h.update(block)
                out.write(block)
    got = h.hexdigest()
    if got != sha256:
        raise UnsafeArchive(f"{label}: sha256 {got} does not match the pinned {sha256} (checked as it was "
                            "unpacked): not unpacked")
    return copy


def extract(archive: Path, dest: Path, sha256: str | None = None, tree_sha256: str | None = None,
            top: str | None = None, max_bytes: int = MAX_BYTES, max_members: int = MAX_MEMBERS) -> str:
    """Unpack `archive` so that its one top directory lands in `dest` (replacing an older dest); the
    tree's digest. ArchiveError / UnsafeArchive with nothing left behind otherwise."""
    archive, dest = Path(archive), Path(dest)
    label = str(archive)
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent)      # mode 0700, ours alone
    try:
        source = _private_copy(archive, work, sha256, label) if sha256 else str(archive)
        tree = os.path.join(work, "tree")
        os.mkdir(tree, 0o755)
        try:
            with tarfile.open(source) as tar:
                entries = plan(tar, label, top, max_bytes, max_members)
                digest = _write(tar, entries, tree, label, max_bytes)
        except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
            raise ArchiveError(f"{label}: cannot unpack ({type(exc).__name__}: {exc})") from None
        if tree_sha256 and digest != tree_sha256:
            raise UnsafeArchive(f"{label}: tree sha256 {digest} does not match the pinned {tree_sha256}: "
                                "not unpacked")
        if dest.is_symlink() or dest.is_file():
            dest.unlink()
        elif dest.exists():
            shutil.rmtree(dest)
        os.replace(tree, dest)
        return digest
    finally:
        shutil.rmtree(work, ignore_errors=True)


def archive_tree_digest(archive: Path, max_bytes: int = MAX_BYTES, max_members: int = MAX_MEMBERS) -> str:
    """The tree digest of an archive's members, read without unpacking (the cache check before reuse);
    UnsafeArchive / ArchiveError as extract() would raise them."""
    label = str(archive)
    records, digests = [], {}
    try:
        fd = os.open(archive, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise UnsafeArchive(f"{label}: not a regular file")
            with tarfile.open(fileobj=fh) as tar:
                for e in plan(tar, label, None, max_bytes, max_members):
                    if e.kind == "file":
                        h = hashlib.sha256()
                        src = tar.extractfile(e.member)
                        for block in iter(lambda: src.read(CHUNK), b""):
                            h.update(block)
                        mode = 0o755 if e.member.mode & 0o111 else 0o644
                        digests[e.path] = (f"file {mode:o}", h.hexdigest())
                        records.append((e.path, *digests[e.path]))
                    elif e.kind == "hardlink":
                        records.append((e.path, *digests[e.target]))
                    elif e.kind == "symlink":
                        records.append((e.path, "symlink", e.target))
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise ArchiveError(f"{label}: cannot read ({type(exc).__name__}: {exc})") from None
    return tree_digest(records)
