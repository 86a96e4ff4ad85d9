"""File helpers every layer uses: the sha256 of a file (pins, provenance, build stamps)."""
from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks (OSError propagates)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
