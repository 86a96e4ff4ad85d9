"""Reading what another party wrote, capped: whole files, a tail, a job's file by its name in a
directory, the sha256 of a file beneath a root (stackproof.files: the rules), and of a file of ours."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from stackproof.files.limits import CHUNK, MAX_OUTPUT, TAIL_BYTES, UnsafePath
from stackproof.files.resolve import open_file, open_path


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file of ours (pins, provenance, build stamps), read in 1 MiB blocks; OSError
    propagates. Not for a path another party controls: `sha256_beneath` is."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


# ---- resolving a name beneath a directory -------------------------------------------------------------


def capped_blocks(fh, cap: int, label: str):
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
        for block in capped_blocks(fh, cap, label):
            h.update(block)
    return h.hexdigest()
