"""`stackproof spack mirror DIR [--add FILE ...]`: a Spack source mirror holding the project's release
tarball (git archive of the pinned commit), for an offline `spack install` of our recipes, and any
third-party source tarball given with --add (e.g. a Debian `.orig.tar.gz` that is byte-identical to
upstream's). Imports: basics, spack.pins."""
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from stackproof.errors import InputError, StackproofError
from stackproof.paths import REPO
from stackproof.spack.pins import release_tarball_sha256


def write_mirror(envs_dir, pins, mirror):
    """Spack source mirror holding the project's release tarball (git archive of the pinned commit)."""
    rel = pins["stackproof_release"]
    sha = rel["sha256"]
    if release_tarball_sha256(rel["commit"], rel["version"]) != sha:
        raise StackproofError(f"cannot make the release tarball: commit {rel['commit']} is not in this clone "
                              "or its git archive does not have the pinned sha256 (fetch the full history)")
    data = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar",
                           f"--prefix=stackproof-{rel['version']}/", rel["commit"]],
                          capture_output=True, check=True).stdout
    digest = Path(mirror) / "_source-cache" / "archive" / sha[:2] / f"{sha}.tar"
    digest.parent.mkdir(parents=True, exist_ok=True)
    digest.write_bytes(data)
    for pkg in rel["packages"]:
        alias = Path(mirror) / pkg / f"{pkg}-{rel['version']}.tar"
        alias.parent.mkdir(parents=True, exist_ok=True)
        if alias.is_symlink() or alias.exists():
            alias.unlink()
        alias.symlink_to(os.path.relpath(digest, alias.parent))
    print(f"stackproof spack: mirror {mirror}: stackproof-{rel['version']}.tar (sha256 {sha[:12]}…) for "
          f"{', '.join(rel['packages'])}")


ARCHIVE_EXT = re.compile(r"\.(tar\.gz|tar\.bz2|tar\.xz|tar\.zst|tgz|tbz2|txz|tar|zip)$")


def source_ext(path) -> str:
    """The archive extension of a source file given with --add (bad input: InputError)."""
    src = Path(path)
    if not src.is_file():
        raise InputError(f"--add {path}: no such file")
    ext = ARCHIVE_EXT.search(src.name)
    if not ext:
        raise InputError(f"--add {path}: not a source archive (.tar.gz, .tar.bz2, .tar.xz, .tar.zst, .tgz, .tar, .zip)")
    return ext.group(1)


def add_source(mirror, path) -> Path:
    """Copy a source archive to where Spack v1.1 looks for it in a mirror, the content-addressed
    `_source-cache/archive/<sha256[:2]>/<sha256>.<ext>`. No name is trusted: Spack fetches it only for
    a recipe version that declares this sha256 (and checks it again), under the extension of that
    version's URL, so the file must carry the same extension (`.orig.tar.gz` for `…/v1.9.4.tar.gz`)."""
    src = Path(path)
    ext = source_ext(src)
    sha = hashlib.sha256(src.read_bytes()).hexdigest()
    dst = Path(mirror) / "_source-cache" / "archive" / sha[:2] / f"{sha}.{ext}"
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    print(f"stackproof spack: mirror {mirror}: {src.name} as {dst.relative_to(mirror)}")
    return dst
