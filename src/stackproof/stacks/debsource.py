"""NetPIPE's source from Debian (`apt-get source netpipe`), fetched once and verified.

Debian's netpipe source package builds NPmpi for any MPI (`make mpi MPICC=<the stack's mpicc>`).
The archive still serves the .dsc and the upstream tarball of 3.7.2-8 but answers 404 for its
debian.tar.xz, so `apt-get source --download-only` exits non-zero: we keep what it fetched and check
the .dsc against the pinned hash and the orig tarball against the .dsc's Checksums-Sha256 ourselves.
The verified files are cached under the stacks root (${STACKPROOF_STACKS_ROOT}/sources), so CI
downloads them once.
"""
from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from .model import StackError, stacks_root

NETPIPE_VERSION = "3.7.2-8"
NETPIPE_DSC = "netpipe_3.7.2-8.dsc"
NETPIPE_DSC_SHA256 = "4e7aa27ce96d68217fc13332e494f8752fd350d222ffa75bde2d90b00ea45fc3"
NETPIPE_ORIG = "netpipe_3.7.2.orig.tar.gz"
NETPIPE_ORIG_SHA256 = "13dac884ff52951636f651c421f5ff4a853218a95aa28a4a852402ee385a2ab8"
DEB_SRC_FIX = ("add deb-src entries (scripts/install-deps.sh writes "
               "/etc/apt/sources.list.d/stackproof-deb-src.sources) and run `apt-get update`")


def source_cache() -> Path:
    return stacks_root() / "sources" / "netpipe"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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


def verify(directory: Path) -> Path:
    """The verified orig tarball in `directory`; StackError naming the file that does not match."""
    dsc, orig = directory / NETPIPE_DSC, directory / NETPIPE_ORIG
    for path in (dsc, orig):
        if not path.is_file():
            raise StackError(f"netpipe source: {path} missing after `apt-get source`: {DEB_SRC_FIX}")
    if sha256(dsc) != NETPIPE_DSC_SHA256:
        raise StackError(f"netpipe source: {dsc} does not match the pinned sha256 {NETPIPE_DSC_SHA256}: "
                         f"remove {directory} and fetch again")
    want = dsc_checksums(dsc.read_text(errors="replace")).get(NETPIPE_ORIG)
    got = sha256(orig)
    if want is None or got != want or got != NETPIPE_ORIG_SHA256:
        raise StackError(f"netpipe source: {orig} sha256 {got} differs from the .dsc ({want}): "
                         f"remove {directory} and fetch again")
    return orig


def fetch_netpipe(cache: Path | None = None, runner=subprocess.run, log=print) -> Path:
    """The verified netpipe orig tarball, fetched with `apt-get source` when not cached."""
    cache = cache or source_cache()
    try:
        return verify(cache)
    except StackError:
        pass
    cache.mkdir(parents=True, exist_ok=True)
    log(f"netpipe: apt-get source --download-only netpipe={NETPIPE_VERSION} into {cache}")
    proc = runner(["apt-get", "source", "--download-only", f"netpipe={NETPIPE_VERSION}"], cwd=cache,
                  capture_output=True, text=True)
    out = (proc.stdout or "") + (proc.stderr or "")
    if "deb-src" in out and "You must put some" in out:
        raise StackError(f"netpipe source: apt has no source entries: {DEB_SRC_FIX}")
    if proc.returncode != 0 and not (cache / NETPIPE_ORIG).is_file():
        tail = " | ".join(out.strip().splitlines()[-2:])
        raise StackError(f"netpipe source: `apt-get source netpipe={NETPIPE_VERSION}` failed ({tail}): "
                         f"{DEB_SRC_FIX}")
    return verify(cache)
