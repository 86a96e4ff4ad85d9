"""Upstream tarballs from Debian's source archive (`apt-get source`), fetched once and verified.

NetPIPE, HPCC and hypre come as Debian source packages whose `orig` tarball is the upstream release,
so any Debian machine (and CI) builds them without reaching upstream sites. The archive serves the
.dsc and the orig tarball but answers 404 for some packages' debian.tar.xz (netpipe, hpcc), so
`apt-get source --download-only` then exits non-zero: we keep what it fetched, check the .dsc
against its pinned sha256 and the orig tarball against the .dsc's Checksums-Sha256 (and the
recipe's pin) ourselves, and build upstream as is (Debian's patches are not applied). The directory
is part of the source cache: its files are read through stackproof.files (no link, regular, capped).
"""
from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from stackproof import files
from stackproof.stacks.fetch import FetchError
from stackproof.stacks.recipes import DebianSource

DEB_SRC_FIX = ("add deb-src entries (scripts/install-deps.sh writes "
               "/etc/apt/sources.list.d/stackproof-deb-src.sources) and run `apt-get update`")


def dsc_checksums(text: str) -> dict[str, str]:
    """file name -> sha256 from a .dsc's Checksums-Sha256 field."""
    sums, inside = {}, False
    for line in text.splitlines():
        if line.startswith("Checksums-Sha256:"):
            inside = True
            continue
        if inside:
            m = re.match(r"^\s+([0-9a-f]{64})\s+\d+\s+(\S+)\s*$", line)
            if not m:
                if line and not line[0].isspace():
                    inside = False
                continue
            sums[m.group(2)] = m.group(1)
    return sums


def verify(deb: DebianSource, orig_sha256: str, directory: Path) -> Path:
    """The verified orig tarball in `directory`; FetchError naming the file that does not match."""
    dsc, orig = directory / deb.dsc, directory / deb.orig
    try:
        dsc_bytes = files.read_bytes(directory, deb.dsc, files.MAX_RECORD)
        got = files.sha256_beneath(directory, deb.orig, files.MAX_ARCHIVE)
    except FileNotFoundError as exc:
        raise FetchError(f"{deb.package} source: {exc.filename} missing after `apt-get source`: {DEB_SRC_FIX}") from None
    except (OSError, files.UnsafePath) as exc:
        raise FetchError(f"{deb.package} source: {exc}: remove {directory} and fetch again") from None
    if hashlib.sha256(dsc_bytes).hexdigest() != deb.dsc_sha256:
        raise FetchError(f"{deb.package} source: {dsc} does not match the pinned sha256 {deb.dsc_sha256}: "
                         f"remove {directory} and fetch again")
    want = dsc_checksums(dsc_bytes.decode(errors="replace")).get(deb.orig)
    if want is None or got != want or got != orig_sha256:
        raise FetchError(f"{deb.package} source: {orig} sha256 {got} differs from the .dsc ({want}) or the "
                         f"recipe ({orig_sha256}): remove {directory} and fetch again")
    return orig


def fetch_debian(deb: DebianSource, orig_sha256: str, cache: Path, runner=subprocess.run, log=print) -> Path:
    """The verified orig tarball of `deb`, fetched into `cache` with `apt-get source` when not there."""
    try:
        return verify(deb, orig_sha256, cache)
    except FetchError:
        pass
    cache.mkdir(parents=True, exist_ok=True)
    log(f"{deb.package}: apt-get source --download-only {deb.package}={deb.version} into {cache}")
    try:
        proc = runner(["apt-get", "source", "--download-only", f"{deb.package}={deb.version}"], cwd=cache,
                      capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FetchError(f"{deb.package} source: apt-get source failed ({exc})") from None
    out = (proc.stdout or "") + (proc.stderr or "")
    if "deb-src" in out and "You must put some" in out:
        raise FetchError(f"{deb.package} source: apt has no source entries: {DEB_SRC_FIX}")
    if proc.returncode != 0 and files.entry_stat(cache, deb.orig) is None:
        tail = " | ".join(out.strip().splitlines()[-2:])
        raise FetchError(f"{deb.package} source: `apt-get source {deb.package}={deb.version}` failed ({tail}): "
                         f"{DEB_SRC_FIX}")
    return verify(deb, orig_sha256, cache)
