"""Writing where another party can write: a directory root writes into must be its own
(check_owned_dir); new files only through a private Staging directory renamed into place; entries
looked at, removed and cleaned without following links (stackproof.files: the rules)."""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import stat
from pathlib import Path

from stackproof.files.limits import DIR_FLAGS, UnsafePath
from stackproof.files.read import capped_blocks
from stackproof.files.resolve import open_dir, open_file, open_path, relative_parts

def entry_stat(directory, name: str) -> os.stat_result | None:
    """lstat of `name` in `directory` (never followed); None when there is nothing."""
    relative_parts(name, os.path.join(str(directory), name))
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
                    sub = os.open(entry.name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
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

def check_parents(path: Path, what: str) -> None:
    """UnsafePath unless every existing parent of the absolute `path` is root's or ours and, where
    group or others may write it, sticky (else another user could swap the directory below it)."""
    me = os.geteuid()
    for parent in reversed(path.parents):
        try:
            st = os.stat(parent)
        except FileNotFoundError:
            break
        if st.st_uid not in (0, me):
            raise UnsafePath(f"{what} {path}: its parent {parent} is owned by uid {st.st_uid}: refused")
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise UnsafePath(f"{what} {path}: its parent {parent} is writable by others (group or others, "
                             f"no sticky bit): refused")


def check_owned_dir(path, what: str, create: bool = False) -> Path:
    """`path`, a directory of this user (root) that no one else may write; created (0755, with missing
    parents) when `create`. UnsafePath in one line for a link, another owner, a directory group or
    others may write, or a parent others may write without the sticky bit."""
    path = Path(os.path.abspath(path))
    check_parents(path, what)
    me = os.geteuid()
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
        self.target_fd = os.open(self.target, DIR_FLAGS | os.O_NOFOLLOW)
        try:
            self.name = f".stage-{secrets.token_hex(8)}"
            os.mkdir(self.name, 0o700, dir_fd=self.target_fd)
            self.fd = os.open(self.name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=self.target_fd)
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
        relative_parts(name, name)
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
            for block in capped_blocks(fh, cap, label):
                h.update(block)
                out.write(block)
        return h.hexdigest()

    def commit(self, name: str, dest: str | None = None, mode: int | None = None) -> Path:
        """Rename `name` to `dest` (default the same name) in the target directory, first giving it
        `mode` (after verification: the bytes are then the pinned, public ones)."""
        dest = dest or name
        relative_parts(dest, str(self.target / dest))
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
