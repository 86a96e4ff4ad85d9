"""`stackproof spack mirror DIR [--add FILE]`: the project's release tarball under the names Spack
looks for, and third-party sources (e.g. a Debian .orig.tar.gz identical to upstream's) by sha256."""
import hashlib

import pytest
import yaml

from conftest import stackproof_cli
from stackproof.paths import REPO
from stackproof.spack import mirror as spack_mirror, pins as spack_pins

ENVS = REPO / "spack-envs"
PINS = yaml.safe_load((ENVS / "pins.yaml").read_text())


def test_mirror_holds_the_release_under_spack_names(tmp_path):
    rel = PINS["stackproof_release"]
    if spack_pins.release_tarball_sha256(rel["commit"], rel["version"]) is None:
        pytest.skip(f"commit {rel['commit'][:12]} is not in this clone (shallow?)")
    spack_mirror.write_mirror(ENVS, PINS, tmp_path / "m")
    for pkg in rel["packages"]:
        alias = tmp_path / "m" / pkg / f"{pkg}-{rel['version']}.tar"
        assert alias.resolve() == (tmp_path / "m" / "_source-cache" / "archive" / rel["sha256"][:2] /
                                   f"{rel['sha256']}.tar")


def test_mirror_adds_a_source_where_spack_looks(tmp_path):
    """--add: Spack v1.1 finds a source in a mirror only by the recipe's sha256
    (`_source-cache/archive/<sha[:2]>/<sha>.<ext of the recipe URL>`), whatever the file's name."""
    src = tmp_path / "lz4_1.9.4.orig.tar.gz"
    src.write_bytes(b"not really a tarball")
    sha = hashlib.sha256(src.read_bytes()).hexdigest()
    dst = spack_mirror.add_source(tmp_path / "m", src)
    assert dst == tmp_path / "m" / "_source-cache" / "archive" / sha[:2] / f"{sha}.tar.gz"
    assert dst.read_bytes() == src.read_bytes()


@pytest.mark.parametrize("name, why", [("nosuch.tar.gz", "no such file"), ("notes.txt", "not a source archive")])
def test_mirror_add_bad_input_writes_nothing(tmp_path, name, why):
    (tmp_path / "notes.txt").write_text("x")
    r = stackproof_cli("spack", "mirror", str(tmp_path / "m"), "--add", str(tmp_path / name), cwd=REPO)
    assert r.returncode == 2 and why in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "m").exists()
