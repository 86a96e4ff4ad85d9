"""Resolving a name beneath a directory without following a link another party planted: openat2(2)
with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS where the kernel has it, else one component at a time with
O_NOFOLLOW (stackproof.files explains the rules); regular files only, opened non-blocking."""
from __future__ import annotations

import ctypes
import errno
import os
import stat

from stackproof.files.limits import (DIR_FLAGS, FILE_FLAGS, LINKS_BENEATH, LINKS_REFUSED, MAX_LINK_HOPS,
                                     NO_OPENAT2_VAR, RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS,
                                     SYS_OPENAT2, UnsafePath)


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
        fd = _openat2(os.open("/", DIR_FLAGS), ".", DIR_FLAGS, RESOLVE_BENEATH, close_dir=True)
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
            fd = call(ctypes.c_long(SYS_OPENAT2), ctypes.c_int(dirfd), os.fsencode(name), ctypes.byref(how),
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


def relative_parts(rel, label: str) -> list[str]:
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
                fd = os.open(part, (flags if last else DIR_FLAGS) | os.O_NOFOLLOW, dir_fd=fds[-1])
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
    return os.open(path, DIR_FLAGS)


def open_beneath(root, rel, *, links: str = LINKS_REFUSED, directory: bool = False) -> int:
    """A descriptor for `rel` resolved beneath `root` (a path, or a directory descriptor), opened
    read-only and non-blocking (O_DIRECTORY with `directory`). UnsafePath when the name or a link
    leaves `root`, or names any link under LINKS_REFUSED; OSError (FileNotFoundError, ...) else."""
    label = os.path.join(str(root), os.fspath(rel)) if not isinstance(root, int) else os.fspath(rel)
    parts = relative_parts(rel, label)
    rootfd = root if isinstance(root, int) else open_dir(root)
    flags = DIR_FLAGS if directory else FILE_FLAGS
    try:
        fd = None
        if openat2_available():
            resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | (RESOLVE_NO_SYMLINKS if links != LINKS_BENEATH else 0)
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
