"""`stackproof spack mirror DIR`: a Spack source mirror holding the project's release tarball (git
archive of the pinned commit), for an offline `spack install` of our recipes. Imports: basics, spack.pins."""
import os
import subprocess
from pathlib import Path

from stackproof.errors import StackproofError
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
