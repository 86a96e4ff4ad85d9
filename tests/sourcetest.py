"""Benchmark sources for tests of stacks/sources.py: tarballs of a demo tree made here, and a runner
that fails the test if apt-get would run."""
import hashlib
import io
import tarfile
from pathlib import Path


def make_tarball(path: Path, members: dict[str, bytes], top="demo-1.0", links=(), mode="w:gz") -> str:
    """A tar (gzipped unless `mode` says otherwise) of `members` under `top/` (a name starting with /
    or .. as it is) and symbolic `links` (name, target); its sha256."""
    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name if name.startswith(("/", "..")) else f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in links:
            info = tarfile.TarInfo(f"{top}/{name}")
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def no_apt(*args, **kwargs):
    raise AssertionError("apt-get must not run")
