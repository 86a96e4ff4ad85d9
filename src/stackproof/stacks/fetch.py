"""Getting a source archive safely: download with progress, sha256 check, and an unpack that either
completes inside its directory or leaves nothing.

- download(url, dest, sha256): streamed to dest.part while hashing; renamed to dest only when the
  size the server announced arrived and the sha256 matches (a wrong or truncated file never stays).
- verify_file(path, sha256): before anything is unpacked.
- safe_extract(archive, dest): every member is checked first (no absolute names, no '..', no links
  pointing outside, no devices); the tree is unpacked into a temporary directory beside dest and
  renamed into place, so a failure leaves no half-unpacked tree.
Every failure is a FetchError with one line naming the file or URL and what was wrong.
"""
from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from stackproof.files import sha256_of  # noqa: F401 - re-exported for sources.py
from stackproof.stacks.model import StackError

TIMEOUT_S = 20          # connect/read timeout: an unreachable site answers fast or not at all
CHUNK = 1 << 16


class FetchError(StackError):
    """A source that could not be fetched, verified or unpacked."""


class ChecksumError(FetchError):
    """Bytes that are not the pinned ones, or an archive that would write outside its tree: never
    a reason to try elsewhere quietly."""


def verify_file(path: Path, sha256: str) -> Path:
    got = sha256_of(path)
    if got != sha256:
        raise ChecksumError(f"{path}: sha256 {got} does not match the pinned {sha256}")
    return path


def _progress_printer(log, name: str, total: int | None):
    state = {"last": 0.0, "shown": -1}

    def show(done: int, final: bool = False) -> None:
        now = time.monotonic()
        pct = int(100 * done / total) if total else None
        if not final and now - state["last"] < 2 and (pct is None or pct < state["shown"] + 25):
            return
        state["last"], state["shown"] = now, pct if pct is not None else state["shown"]
        size = f"{done / 1e6:.1f} MB" + (f" of {total / 1e6:.1f} MB ({pct}%)" if total else "")
        log(f"{name}: {size}{' done' if final else ''}")
    return show


def download(url: str, dest: Path, sha256: str, log=print, timeout: float = TIMEOUT_S) -> Path:
    """Fetch url into dest (verified); FetchError on any failure, leaving no dest and no dest.part."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    h = hashlib.sha256()
    done = 0
    try:
        req = urllib.request.Request(url, headers={"User-Agent": "stackproof"})
        with urllib.request.urlopen(req, timeout=timeout) as resp, open(part, "wb") as out:
            length = resp.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            show = _progress_printer(log, dest.name, total)
            while True:
                chunk = resp.read(CHUNK)
                if not chunk:
                    break
                out.write(chunk)
                h.update(chunk)
                done += len(chunk)
                show(done)
            show(done, final=True)
        if total is not None and done != total:
            raise FetchError(f"{url}: truncated download ({done} of {total} bytes)")
        got = h.hexdigest()
        if got != sha256:
            raise ChecksumError(f"{url}: sha256 {got} does not match the pinned {sha256} (not the pinned release)")
        os.replace(part, dest)
        return dest
    except urllib.error.HTTPError as exc:
        raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise FetchError(f"{url}: unreachable ({exc.reason})") from None
    except (OSError, ValueError) as exc:       # timeouts, resets, IncompleteRead
        raise FetchError(f"{url}: download failed ({type(exc).__name__}: {exc})") from None
    finally:
        part.unlink(missing_ok=True)


def _check_member(archive: Path, m: tarfile.TarInfo) -> None:
    name = m.name
    parts = name.replace("\\", "/").split("/")
    if name.startswith("/") or ".." in parts:
        raise ChecksumError(f"{archive}: unsafe member {name!r} (absolute or '..'): not unpacked")
    if m.issym() or m.islnk():
        target = m.linkname
        base = posixpath.dirname(name) if m.issym() else ""
        resolved = posixpath.normpath(posixpath.join(base, target))
        if target.startswith("/") or resolved == ".." or resolved.startswith("../"):
            raise ChecksumError(f"{archive}: member {name!r} links outside the tree ({target!r}): not unpacked")
    elif not (m.isfile() or m.isdir()):
        raise ChecksumError(f"{archive}: member {name!r} is a device or fifo: not unpacked")


def safe_extract(archive: Path, dest: Path) -> Path:
    """Unpack `archive` so that its contents become `dest` (replacing an older dest); FetchError with
    nothing left behind when the archive is unreadable or unsafe."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        try:
            with tarfile.open(archive) as tar:
                members = tar.getmembers()
                for m in members:
                    _check_member(archive, m)
                if not members:
                    raise FetchError(f"{archive}: empty archive")
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(tmp, members=members, filter="data")
                else:                                           # checked above member by member
                    tar.extractall(tmp, members=members)
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise FetchError(f"{archive}: cannot unpack ({type(exc).__name__}: {exc})") from None
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
        return dest
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
