"""Getting a source archive safely: download with progress, sha256 check, and an unpack that either
completes inside its directory or leaves nothing.

- download(url, dest, sha256): streamed into a private staging directory beside dest (files.Staging:
  0700, the file 0600, nobody reads it before it is checked) while hashing, at most
  MAX_DOWNLOAD_BYTES and DEADLINE_S seconds in all (a server that streams forever, or one byte at a
  time, is cut off and named with the limit it hit); renamed to dest only when the size the server
  announced arrived and the sha256 matches (a wrong or truncated file never stays, and a link
  planted at dest is replaced, never written through).
- safe_extract(archive, dest, sha256=..., tree_sha256=...): unpack.extract, our own member check on
  every Python (no names or links leaving the tree, one top directory, caps on bytes and members)
  and the hash checked at the moment of use; a failure leaves no half-unpacked tree.
Every failure is a FetchError with one line naming the file or URL and what was wrong.
"""
from __future__ import annotations

import hashlib
import time
import urllib.error
import urllib.request
from pathlib import Path

from stackproof import files
from stackproof.stacks import unpack
from stackproof.stacks.model import StackError

TIMEOUT_S = 20          # connect/read timeout: an unreachable site answers fast or not at all
DEADLINE_S = 1800       # a whole download (the largest pinned source, hypre, is 6.7 MB)
MAX_DOWNLOAD_BYTES = 512 << 20
CHUNK = 1 << 16


sha256_of = files.sha256_of     # for files of ours (builds, provenance): benchbuild, appbuild


class FetchError(StackError):
    """A source that could not be fetched, verified or unpacked."""


class ChecksumError(FetchError):
    """Bytes that are not the pinned ones, or an archive that would write outside its tree: never
    a reason to try elsewhere quietly."""


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


def download(url: str, dest: Path, sha256: str, log=print, timeout: float = TIMEOUT_S,
             max_bytes: int = MAX_DOWNLOAD_BYTES, deadline_s: float = DEADLINE_S) -> Path:
    """Fetch url into dest (verified); FetchError on any failure, leaving nothing beside dest.
    Each read waits at most `timeout` s (and never past the deadline), so a trickling server is cut
    off within min(timeout, deadline_s) of the deadline."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    done = 0
    end = time.monotonic() + deadline_s
    try:
        with files.Staging(dest.parent) as stage:
            req = urllib.request.Request(url, headers={"User-Agent": "stackproof"})
            with urllib.request.urlopen(req, timeout=min(timeout, deadline_s)) as resp, \
                    stage.create("download") as out:
                length = resp.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else None
                if total is not None and total > max_bytes:
                    raise FetchError(f"{url}: the server announces {total} bytes, over the size cap of "
                                     f"{max_bytes} bytes: not downloaded")
                show = _progress_printer(log, dest.name, total)
                while True:
                    if time.monotonic() > end:
                        raise FetchError(f"{url}: not complete after the deadline of {deadline_s:g} s "
                                         f"({done} bytes): not kept")
                    chunk = resp.read1(CHUNK)
                    if not chunk:
                        break
                    done += len(chunk)
                    if done > max_bytes:
                        raise FetchError(f"{url}: more than the size cap of {max_bytes} bytes: not kept")
                    out.write(chunk)
                    h.update(chunk)
                    show(done)
                show(done, final=True)
            if total is not None and done != total:
                raise FetchError(f"{url}: truncated download ({done} of {total} bytes)")
            got = h.hexdigest()
            if got != sha256:
                raise ChecksumError(f"{url}: sha256 {got} does not match the pinned {sha256} (not the pinned release)")
            return stage.commit("download", dest.name)
    except urllib.error.HTTPError as exc:
        raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise FetchError(f"{url}: unreachable ({exc.reason})") from None
    except (OSError, ValueError) as exc:       # timeouts, resets, IncompleteRead
        late = " (past the deadline of {:g} s)".format(deadline_s) if time.monotonic() > end else ""
        raise FetchError(f"{url}: download failed ({type(exc).__name__}: {exc}){late}") from None


def safe_extract(archive: Path, dest: Path, sha256: str | None = None, tree_sha256: str | None = None,
                 top: str | None = None, max_bytes: int = unpack.MAX_BYTES,
                 max_members: int = unpack.MAX_MEMBERS) -> Path:
    """Unpack `archive` so that its contents become `dest` (replacing an older dest), checking the
    archive's sha256 and/or the written tree's digest as it is used; ChecksumError (unsafe or not the
    pinned bytes) or FetchError (unreadable) with nothing left behind."""
    try:
        unpack.extract(archive, dest, sha256=sha256, tree_sha256=tree_sha256, top=top, max_bytes=max_bytes,
                       max_members=max_members)
    except unpack.UnsafeArchive as exc:
        raise ChecksumError(str(exc)) from None
    except unpack.ArchiveError as exc:
        raise FetchError(str(exc)) from None
    return dest
