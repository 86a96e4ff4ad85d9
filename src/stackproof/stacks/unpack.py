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

The archive itself is opened through stackproof.files: never through a symbolic link, only a
regular file (non-blocking: a FIFO swapped in does not hang), at most files.MAX_ARCHIVE bytes copied.
tarfile reads each header's body whole before anything can look at it: a pax or GNU long-name header
declaring 600 MB made it allocate 600 MB (the OOM killer, or a MemoryError traceback under a memory
limit), and 3,000 chained headers recursed past Python's limit. So a header body over MAX_HEADER
bytes, or more than MAX_HEADER_CHAIN extended headers before one member, is refused before tarfile
reads it (_GuardedInfo), and a RecursionError or MemoryError still raised is one line.

Integrity is checked at the moment of use: with `sha256`, the archive is first copied into that
private directory and hashed there, and only that copy is read; with `tree_sha256`, the digest of the
tree actually written (tree_digest) must match. This module needs only the standard library,
stackproof.errors and stackproof.files, so the tests run it under both interpreters.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from stackproof import files
from stackproof.errors import StackproofError

MAX_BYTES = 2 << 30         # 2 GiB unpacked (SW4 3.0's tree is 77 MB, hypre 2.26's 50 MB)
MAX_MEMBERS = 100_000       # SW4 3.0 has 1,482 files, hypre 2.26 about 3,000
MAX_PATH = 1024             # bytes of a member name (PATH_MAX is 4096; long names are the CVE's lever)
MAX_COMPONENT = 255         # bytes of one name component (NAME_MAX)
MAX_LINK_HOPS = 40          # the kernel's limit on symlinks in one resolution
MAX_HEADER = 64 << 10       # bytes of one pax / GNU long-name header body (a real one is a few hundred)
MAX_HEADER_CHAIN = 8        # extended headers in a row before a member (pax + long name + long link: 3)
CHUNK = 1 << 20


class ArchiveError(StackproofError):
    """An archive that cannot be read (truncated, not a tar file)."""


class UnsafeArchive(ArchiveError):
    """An archive that would write outside its tree, exceed a cap, or is not the pinned bytes."""


class _HeaderRefused(UnsafeArchive):
    """Raised inside tarfile's header parsing (no label there); extract() adds the archive's name."""


_EXTENDED = {tarfile.XHDTYPE: "pax", tarfile.XGLTYPE: "pax global", tarfile.SOLARIS_XHDTYPE: "pax",
             tarfile.GNUTYPE_LONGNAME: "GNU long-name", tarfile.GNUTYPE_LONGLINK: "GNU long-link"}


class _GuardedInfo(tarfile.TarInfo):
    """tarfile's member header, refusing an extended header before its body is read: over MAX_HEADER
    bytes, or past MAX_HEADER_CHAIN in a row (tarfile reads each chained header recursively).
    _proc_member is the hook tarfile documents for subclasses."""

    def _proc_member(self, tar):
        kind = _EXTENDED.get(self.type)
        if kind is None:
            return super()._proc_member(tar)
        if self.size > MAX_HEADER:
            raise _HeaderRefused(f"a {kind} header of {self.size} bytes (at most {MAX_HEADER}) at offset "
                                 f"{self.offset}: not read")
        depth = getattr(tar, "_stackproof_chain", 0) + 1
        if depth > MAX_HEADER_CHAIN:
            raise _HeaderRefused(f"more than {MAX_HEADER_CHAIN} extended headers in a row at offset {self.offset}: "
                                 "not read")
        tar._stackproof_chain = depth
        try:
            return super()._proc_member(tar)
        finally:
            tar._stackproof_chain = depth - 1


def _open_tar(fileobj, label: str) -> tarfile.TarFile:
    return tarfile.open(fileobj=fileobj, mode="r:*", tarinfo=_GuardedInfo)


def _unreadable(label: str, exc: BaseException, verb: str) -> ArchiveError:
    """The one-line error for what reading an archive raised."""
    if isinstance(exc, _HeaderRefused):
        return UnsafeArchive(f"{label}: {exc}: not unpacked")
    if isinstance(exc, RecursionError):
        return UnsafeArchive(f"{label}: headers nested too deeply to read: not unpacked")
    if isinstance(exc, MemoryError):
        return UnsafeArchive(f"{label}: reading it needs more memory than this process may use: not unpacked")
    return ArchiveError(f"{label}: cannot {verb} ({type(exc).__name__}: {exc})")


def _open_archive(archive: Path, label: str):
    """The archive as a binary file (files.open_file: no link, a regular file, non-blocking open)."""
    archive = Path(archive)
    try:
        fh, _st = files.open_file(archive.parent, archive.name, files.MAX_ARCHIVE)
        return fh
    except files.UnsafePath as exc:
        raise UnsafeArchive(f"{exc}: not unpacked") from None
    except OSError as exc:
        raise ArchiveError(f"{label}: cannot open ({exc.strerror})") from None


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


def _private_copy(archive: Path, stage: files.Staging, sha256: str, label: str):
    """Copy `archive` (files.open_file's rules, at most files.MAX_ARCHIVE bytes) into the private
    staging directory, hashing the copy; the copy opened for reading, or UnsafeArchive when its bytes
    are not the pinned ones."""
    try:
        got = stage.copy_from(archive.parent, archive.name, "archive", files.MAX_ARCHIVE)
    except files.UnsafePath as exc:
        raise UnsafeArchive(f"{exc}: not unpacked") from None
    except OSError as exc:
        raise ArchiveError(f"{label}: cannot open ({exc.strerror})") from None
    if got != sha256:
        raise UnsafeArchive(f"{label}: sha256 {got} does not match the pinned {sha256} (checked as it was "
                            "unpacked): not unpacked")
    return files.open_file(stage.fd, "archive", files.MAX_ARCHIVE)[0]


def extract(archive: Path, dest: Path, sha256: str | None = None, tree_sha256: str | None = None,
            top: str | None = None, max_bytes: int = MAX_BYTES, max_members: int = MAX_MEMBERS) -> str:
    """Unpack `archive` so that its one top directory lands in `dest` (replacing an older dest); the
    tree's digest. ArchiveError / UnsafeArchive with nothing left behind otherwise."""
    archive, dest = Path(archive), Path(dest)
    label = str(archive)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with files.Staging(dest.parent) as stage:          # mode 0700, ours alone
        # the copy in our private directory when hashed, else the archive itself (files' rules)
        source = _private_copy(archive, stage, sha256, label) if sha256 else _open_archive(archive, label)
        tree = os.path.join(stage.path, "tree")
        os.mkdir(tree, 0o755)
        try:
            with source, _open_tar(source, label) as tar:
                entries = plan(tar, label, top, max_bytes, max_members)
                digest = _write(tar, entries, tree, label, max_bytes)
        except UnsafeArchive as exc:
            raise (_unreadable(label, exc, "unpack") if isinstance(exc, _HeaderRefused) else exc) from None
        except (tarfile.TarError, EOFError, OSError, ValueError, RecursionError, MemoryError) as exc:
            raise _unreadable(label, exc, "unpack") from None
        if tree_sha256 and digest != tree_sha256:
            raise UnsafeArchive(f"{label}: tree sha256 {digest} does not match the pinned {tree_sha256}: "
                                "not unpacked")
        if dest.is_symlink() or dest.is_file():
            dest.unlink()
        elif dest.exists():
            shutil.rmtree(dest)
        os.replace(tree, dest)
        return digest


def archive_tree_digest(archive: Path, max_bytes: int = MAX_BYTES, max_members: int = MAX_MEMBERS) -> str:
    """The tree digest of an archive's members, read without unpacking (the cache check before reuse);
    UnsafeArchive / ArchiveError as extract() would raise them."""
    label = str(archive)
    records, digests = [], {}
    try:
        with _open_archive(archive, label) as fh, _open_tar(fh, label) as tar:
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
    except UnsafeArchive as exc:
        raise (_unreadable(label, exc, "read") if isinstance(exc, _HeaderRefused) else exc) from None
    except (tarfile.TarError, EOFError, OSError, ValueError, RecursionError, MemoryError) as exc:
        raise _unreadable(label, exc, "read") from None
    return tree_digest(records)
