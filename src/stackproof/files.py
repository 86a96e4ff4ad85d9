"""Files: the sha256 of a file of ours, and the one way root opens a path another party controls.

A source mirror, the source cache, `stack fetch --into`, ReFrame's stage and output directories, the
virtual cluster's share and a report's inputs hold files someone else writes: a local user, a VM,
whoever fills the mirror. Root following a link there read or overwrote whatever the link named
(issue 42). So each such path is opened here, and only here:

- resolved *beneath* a directory the caller chose (`open_beneath(root, rel)`): a relative name
  without '..', and no symbolic link anywhere on the way (LINKS_REFUSED) or, for a mirror whose Spack
  layout links into its own source cache, only links that stay beneath that directory
  (LINKS_BENEATH). The kernel decides where it can: openat2(2) with RESOLVE_BENEATH
  (| RESOLVE_NO_SYMLINKS), atomic against any rename; where it cannot (no openat2 before Linux 5.6,
  or a seccomp filter answering ENOSYS/EPERM), one component at a time from directory descriptors
  with O_NOFOLLOW, each link read and resolved by us under the same rules;
- opened O_NONBLOCK (a FIFO in place of a file must not hang root), then accepted only as a regular
  file (fstat of the descriptor), optionally of one owner, and never read past the size cap of its
  kind (MAX_*);
- new files are created only in a `Staging` directory: private (0700) inside the target directory,
  each file O_CREAT | O_EXCL | O_NOFOLLOW at mode 0600; the caller verifies what it wrote (a hash)
  and `commit` renames it into place through directory descriptors (a link planted at the final
  name is replaced, never written through);
- a directory root writes into (the source cache, `--into`) must be its own: `check_owned_dir`
  refuses a link, another owner, a directory group or others may write, or a parent they may write
  without the sticky bit.

Every refusal is UnsafePath: one line naming the path and why. A missing file stays an OSError
(FileNotFoundError) for the caller. Standard library only: the hostile tests run it under Debian's
/usr/bin/python3 as well as the venv's interpreter.
"""
from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import secrets
import shutil
import stat
from pathlib import Path

from stackproof.errors import StackproofError

LINKS_REFUSED = "refused"       # no symbolic link at all below the root
LINKS_BENEATH = "beneath"       # links followed only while they stay below the root (a Spack mirror)

# The size cap of each kind of file another party controls.
MAX_ARCHIVE = 512 << 20         # a source tarball (the largest pinned one is 6.7 MB)
MAX_RECORD = 1 << 20            # a small text file: a cache entry's .origin record, a Debian .dsc
MAX_FIGURE = 32 << 20           # a PNG a report embeds
MAX_OUTPUT = 256 << 20          # a benchmark's output or trace read whole (fwq.dat, np.out)
TAIL_BYTES = 1 << 20            # what a report shows of a job's stderr/stdout: at most its last MiB
MAX_LINK_HOPS = 40              # the kernel's limit on links in one resolution
CHUNK = 1 << 20

_FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_RESOLVE_NO_MAGICLINKS, _RESOLVE_NO_SYMLINKS, _RESOLVE_BENEATH = 0x02, 0x04, 0x08
_SYS_OPENAT2 = 437              # one number on every architecture (the unified table since Linux 5.1)
NO_OPENAT2_VAR = "STACKPROOF_NO_OPENAT2"    # "1": always walk component by component (tests use it)


class UnsafePath(StackproofError):
    """A path another party controls that is not what it may be: a link, outside its directory, not
    a regular file, someone else's, over its size cap, a directory others may write."""


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file of ours (pins, provenance, build stamps), read in 1 MiB blocks; OSError
    propagates. Not for a path another party controls: `sha256_beneath` is."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


# ---- resolving a name beneath a directory -------------------------------------------------------------

class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_state = {"syscall": None, "usable": None}


def _syscall():
    if _state["syscall"] is None:
        try:
            fn = ctypes.CDLL(None, use_errno=True).syscall
            fn.restype = ctypes.c_long
            _state["syscall"] = fn
        except (OSError, AttributeError):
            _state["syscall"] = False
    return _state["syscall"] or None


def openat2_available() -> bool:
    """Whether this kernel resolves for us (openat2); False when NO_OPENAT2_VAR is "1"."""
    if os.environ.get(NO_OPENAT2_VAR) == "1":
        return False
    if _state["usable"] is None:
        fd = _openat2(os.open("/", _DIR_FLAGS), ".", _DIR_FLAGS, _RESOLVE_BENEATH, close_dir=True)
        if fd is not None:
            os.close(fd)
    return bool(_state["usable"])


def _openat2(dirfd: int, name: str, flags: int, resolve: int, close_dir: bool = False) -> int | None:
    """A descriptor, None when the kernel has no usable openat2, OSError for the kernel's refusal."""
    try:
        call = _syscall()
        if call is None:
            _state["usable"] = False
            return None
        how = _OpenHow(flags, 0, resolve)
        for _ in range(16):        # EAGAIN: a rename elsewhere raced a '..' check; the kernel asks to retry
            fd = call(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(dirfd), os.fsencode(name), ctypes.byref(how),
                      ctypes.c_size_t(ctypes.sizeof(how)))
            if fd >= 0:
                _state["usable"] = True
                return fd
            err = ctypes.get_errno()
            if err in (errno.EAGAIN, errno.EINTR):
                continue
            if err in (errno.ENOSYS, errno.EPERM, errno.E2BIG) and not _state["usable"]:
                _state["usable"] = False        # no openat2 (old kernel, a seccomp filter): walk instead
                return None
            _state["usable"] = True
            raise OSError(err, os.strerror(err), name)
        return None
    finally:
        if close_dir:
            os.close(dirfd)


def _parts(rel, label: str) -> list[str]:
    rel = os.fspath(rel)
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not rel or "\x00" in rel or rel.startswith("/") or not parts or ".." in parts:
        raise UnsafePath(f"{label}: {rel!r} is not a plain relative name below its directory: refused")
    return parts


def _walk(dirfd: int, parts: list[str], flags: int, links: str, label: str) -> int:
    """openat2's rules, one component at a time: every directory opened O_NOFOLLOW from the descriptor
    of the one before; a link is read (readlinkat) and, when links may be followed, resolved by us."""
    fds = [os.dup(dirfd)]
    queue, hops, done = list(parts), 0, []
    try:
        while queue:
            part = queue.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if len(fds) == 1:
                    raise UnsafePath(f"{label}: a link leads outside its directory (above it): refused")
                os.close(fds.pop())
                done.pop()
                continue
            last = not queue
            try:
                fd = os.open(part, (flags if last else _DIR_FLAGS) | os.O_NOFOLLOW, dir_fd=fds[-1])
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                try:
                    target = os.readlink(part, dir_fd=fds[-1])
                except OSError:
                    raise exc from None
                if links != LINKS_BENEATH:
                    raise UnsafePath(f"{label}: {_shown(label, parts, done + [part])} is a symbolic link: "
                                     "not followed") from None
                hops += 1
                if hops > MAX_LINK_HOPS:
                    raise UnsafePath(f"{label}: more than {MAX_LINK_HOPS} symbolic links (a loop): refused") from None
                if target.startswith("/"):
                    raise UnsafePath(f"{label}: a link leads outside its directory ({'/'.join(done + [part])} "
                                     f"-> {target[:80]!r}): refused") from None
                queue[:0] = target.split("/")
                continue
            if last:
                return fd
            fds.append(fd)
            done.append(part)
        return os.open(".", flags, dir_fd=fds[-1])
    finally:
        for fd in fds:
            os.close(fd)


def _shown(label: str, parts: list[str], done: list[str]) -> str:
    """`done` (components below the root) as the message shows them: absolute when the root is /."""
    return ("/" if label == "/" + "/".join(parts) else "") + "/".join(done)


def _which_link(dirfd: int, parts: list[str]) -> str | None:
    """The first component of `parts` that is a symbolic link (for the message only)."""
    for i in range(len(parts)):
        try:
            if stat.S_ISLNK(os.stat("/".join(parts[:i + 1]), dir_fd=dirfd, follow_symlinks=False).st_mode):
                return "/".join(parts[:i + 1])
        except OSError:
            return None
    return None


def open_dir(path) -> int:
    """A directory the caller chose (its own path, followed as given), as a descriptor."""
    return os.open(path, _DIR_FLAGS)


def open_beneath(root, rel, *, links: str = LINKS_REFUSED, directory: bool = False) -> int:
    """A descriptor for `rel` resolved beneath `root` (a path, or a directory descriptor), opened
    read-only and non-blocking (O_DIRECTORY with `directory`). UnsafePath when the name or a link
    leaves `root`, or names any link under LINKS_REFUSED; OSError (FileNotFoundError, ...) else."""
    label = os.path.join(str(root), os.fspath(rel)) if not isinstance(root, int) else os.fspath(rel)
    parts = _parts(rel, label)
    rootfd = root if isinstance(root, int) else open_dir(root)
    flags = _DIR_FLAGS if directory else _FILE_FLAGS
    try:
        fd = None
        if openat2_available():
            resolve = _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS | (_RESOLVE_NO_SYMLINKS if links != LINKS_BENEATH else 0)
            try:
                fd = _openat2(rootfd, "/".join(parts), flags, resolve)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    link = _which_link(rootfd, parts) if links != LINKS_BENEATH else None
                    link = "/" + link if link and str(root) == "/" else link
                    raise UnsafePath(f"{label}: {link} is a symbolic link: not followed" if link else
                                     f"{label}: a symbolic link on the way that may not be followed "
                                     "(or a loop): refused") from None
                if exc.errno == errno.EXDEV:
                    raise UnsafePath(f"{label}: a link leads outside its directory: refused") from None
                raise OSError(exc.errno, exc.strerror, label) from None
        if fd is None:
            try:
                fd = _walk(rootfd, parts, flags, links, label)
            except UnsafePath:
                raise
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, label) from None
        return fd
    finally:
        if not isinstance(root, int):
            os.close(rootfd)


def open_path(path, *, directory: bool = True) -> int:
    """An absolute path another party may have built (a stage directory a job or a VM writes), opened
    from / with no symbolic link anywhere on it."""
    path = os.fspath(path)
    if not os.path.isabs(path):
        raise UnsafePath(f"{path}: not an absolute path: refused")
    if path.rstrip("/") == "":
        return open_dir("/")
    return open_beneath("/", path.lstrip("/"), directory=directory)


# ---- reading a regular file ---------------------------------------------------------------------------

def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a link")):
        if test(mode):
            return name
    return "not a file"


def open_file(root, rel, cap: int, *, links: str = LINKS_REFUSED, owner: int | None = None):
    """(binary file object, os.stat_result) of the regular file `rel` beneath `root`, at most `cap`
    bytes when opened (the readers below stop at the cap too), owned by `owner` when given."""
    label = os.path.join(str(root), os.fspath(rel)) if not isinstance(root, int) else os.fspath(rel)
    fd = open_beneath(root, rel, links=links)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"{label}: not a regular file ({_kind(st.st_mode)}): refused")
        if owner is not None and st.st_uid != owner:
            raise UnsafePath(f"{label}: owned by uid {st.st_uid}, not uid {owner}: refused")
        if st.st_size > cap:
            raise UnsafePath(f"{label}: {st.st_size} bytes, over the size cap of {cap}: refused")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), st
    except BaseException:
        os.close(fd)
        raise


def _blocks(fh, cap: int, label: str):
    total = 0
    for block in iter(lambda: fh.read(CHUNK), b""):
        total += len(block)
        if total > cap:
            raise UnsafePath(f"{label}: grew past the size cap of {cap} bytes while read: refused")
        yield block


def read_bytes(root, rel, cap: int, **kw) -> bytes:
    fh, _st = open_file(root, rel, cap, **kw)
    with fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise UnsafePath(f"{os.path.join(str(root), os.fspath(rel))}: over the size cap of {cap} bytes: refused")
    return data


def read_text(root, rel, cap: int, **kw) -> str:
    return read_bytes(root, rel, cap, **kw).decode(errors="replace")


def read_tail(root, rel, nbytes: int = TAIL_BYTES, **kw) -> bytes:
    """The last `nbytes` of a regular file beneath `root` (a log of any length)."""
    fh, st = open_file(root, rel, 1 << 62, **kw)
    with fh:
        fh.seek(max(0, st.st_size - nbytes))
        return fh.read(nbytes)


def read_in(directory, name, cap: int = MAX_OUTPUT) -> bytes:
    """A job's file: `name` below `directory` (an absolute path a job or a VM may have built: no link
    anywhere on either, open_path), a regular file of at most `cap` bytes."""
    fd = open_path(directory)
    try:
        return read_bytes(fd, name, cap)
    finally:
        os.close(fd)


def open_in(directory, name, cap: int = MAX_OUTPUT):
    """(file object, stat) of `name` below `directory`, as read_in checks them."""
    fd = open_path(directory)
    try:
        return open_file(fd, name, cap)
    finally:
        os.close(fd)


def sha256_beneath(root, rel, cap: int, **kw) -> str:
    label = os.path.join(str(root), os.fspath(rel))
    fh, _st = open_file(root, rel, cap, **kw)
    h = hashlib.sha256()
    with fh:
        for block in _blocks(fh, cap, label):
            h.update(block)
    return h.hexdigest()


def entry_stat(directory, name: str) -> os.stat_result | None:
    """lstat of `name` in `directory` (never followed); None when there is nothing."""
    _parts(name, os.path.join(str(directory), name))
    try:
        return os.stat(name, dir_fd=directory, follow_symlinks=False) if isinstance(directory, int) else \
            os.lstat(os.path.join(directory, name))
    except FileNotFoundError:
        return None


def remove_entry(directory: Path, name: str) -> None:
    """Remove `name` from `directory` whatever it is (a link is removed, not followed)."""
    fd = open_dir(directory)
    try:
        st = entry_stat(fd, name)
        if st is None:
            return
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(name, dir_fd=fd)
        else:
            os.unlink(name, dir_fd=fd)
    finally:
        os.close(fd)


def remove_specials(directory, max_depth: int = 32) -> list[str]:
    """Remove every entry below `directory` (an absolute path, no link on it: open_path) that is not a
    regular file or a directory: links, FIFOs, devices, sockets. Walked through directory
    descriptors, nothing followed, at most `max_depth` levels; the names removed, relative."""
    removed: list[str] = []

    def walk(fd: int, prefix: str, depth: int) -> None:
        for entry in os.scandir(fd):
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                if depth < max_depth:
                    sub = os.open(entry.name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
                    try:
                        walk(sub, f"{prefix}{entry.name}/", depth + 1)
                    finally:
                        os.close(sub)
            elif not stat.S_ISREG(st.st_mode):
                os.unlink(entry.name, dir_fd=fd)
                removed.append(prefix + entry.name)

    top = open_path(directory)
    try:
        walk(top, "", 0)
    finally:
        os.close(top)
    return removed


# ---- directories root writes into ---------------------------------------------------------------------

def check_owned_dir(path, what: str, create: bool = False) -> Path:
    """`path`, a directory of this user (root) that no one else may write; created (0755, with missing
    parents) when `create`. UnsafePath in one line for a link, another owner, a directory group or
    others may write, or a parent others may write without the sticky bit."""
    path = Path(os.path.abspath(path))
    me = os.geteuid()
    for parent in reversed(path.parents):
        try:
            st = os.stat(parent)
        except FileNotFoundError:
            break
        if st.st_uid not in (0, me):
            raise UnsafePath(f"{what} {path}: its parent {parent} is owned by uid {st.st_uid}: refused")
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise UnsafePath(f"{what} {path}: its parent {parent} is writable by group or others: refused")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            raise
        for d in [*reversed(path.parents), path]:
            try:
                os.mkdir(d, 0o755)
            except FileExistsError:
                pass
        return check_owned_dir(path, what)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePath(f"{what} {path} is a symbolic link: refused")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{what} {path} is not a directory: refused")
    if st.st_uid != me:
        raise UnsafePath(f"{what} {path} is owned by uid {st.st_uid}, not by uid {me}: refused")
    if st.st_mode & 0o022:
        raise UnsafePath(f"{what} {path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o}): "
                         "refused (chmod go-w it)")
    return path


class Staging:
    """A private directory (0700) inside `target` for new files: each created O_EXCL at mode 0600,
    verified by the caller, then renamed into `target` by `commit` (through directory descriptors:
    a link at the final name is replaced, never written through). Removed with what is left in it
    on close. `target` is opened once; check it (check_owned_dir) before."""

    def __init__(self, target):
        self.target = Path(target)
        self.target_fd = os.open(self.target, _DIR_FLAGS | os.O_NOFOLLOW)
        try:
            self.name = f".stage-{secrets.token_hex(8)}"
            os.mkdir(self.name, 0o700, dir_fd=self.target_fd)
            self.fd = os.open(self.name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=self.target_fd)
        except BaseException:
            os.close(self.target_fd)
            raise
        self.path = self.target / self.name     # for a tool that needs a path (git): ours alone

    def __enter__(self) -> "Staging":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.fd < 0:
            return
        os.close(self.fd)
        self.fd = -1
        shutil.rmtree(self.name, dir_fd=self.target_fd, ignore_errors=True)
        os.close(self.target_fd)

    def create(self, name: str):
        """A new file in the staging directory, open for writing (mode 0600)."""
        _parts(name, name)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                     dir_fd=self.fd)
        return os.fdopen(fd, "wb")

    def write(self, name: str, data: bytes) -> str:
        with self.create(name) as out:
            out.write(data)
        return hashlib.sha256(data).hexdigest()

    def copy_from(self, root, rel, name: str, cap: int, **kw) -> str:
        """Copy the regular file `rel` beneath `root` (open_file's rules) to `name` here; its sha256.
        UnsafePath past `cap` bytes."""
        label = os.path.join(str(root), os.fspath(rel)) if not isinstance(root, int) else os.fspath(rel)
        fh, _st = open_file(root, rel, cap, **kw)
        h = hashlib.sha256()
        with fh, self.create(name) as out:
            for block in _blocks(fh, cap, label):
                h.update(block)
                out.write(block)
        return h.hexdigest()

    def commit(self, name: str, dest: str | None = None, mode: int | None = None) -> Path:
        """Rename `name` to `dest` (default the same name) in the target directory, first giving it
        `mode` (after verification: the bytes are then the pinned, public ones)."""
        dest = dest or name
        _parts(dest, str(self.target / dest))
        if mode is not None:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.fd)
            try:
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
        old = entry_stat(self.target_fd, dest)
        if old is not None and stat.S_ISDIR(old.st_mode):
            shutil.rmtree(dest, dir_fd=self.target_fd)
        os.rename(name, dest, src_dir_fd=self.fd, dst_dir_fd=self.target_fd)
        return self.target / dest
