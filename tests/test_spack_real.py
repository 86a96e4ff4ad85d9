"""spack-envs/ with the real Spack (SPACK_ROOT = Spack v1.1.0, SPACK_PACKAGES_ROOT = spack-packages
v2025.11.0): the recipes pass `spack audit`, the committed laptop lock is reproduced offline (same root
hashes), and an environment that builds its own MPI concretizes with the Debian site externals.
`make spack-check` (`stackproof spack check`) does every environment; these are the quick ones (~1-3 min each on 2 cores)."""
import json
import os
from pathlib import Path

import pytest

from stackproof.spack import driver, lock
from stackproof.spack.pins import load_pins
from stackproof.paths import REPO

ENVS = REPO / "spack-envs"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not os.environ.get("SPACK_ROOT"),
    reason="needs SPACK_ROOT (Spack v1.1.0 checkout) and SPACK_PACKAGES_ROOT (spack-packages v2025.11.0): "
           "CI has no Spack; docs/spack.md says how to get them")]


@pytest.fixture(scope="module")
def spack():
    # a persistent work dir: Spack's repo index, slow to build (docs/performance.md), is kept between runs
    return driver.Spack(load_pins(ENVS), REPO / "build" / "spack-test", offline=True)


def test_recipes_pass_spack_audit(spack):
    results = spack.audit(ENVS)
    assert [r["rc"] for r in results] == [0, 0, 0], [Path(r["log"]).read_text()[-2000:] for r in results]


def test_laptop_lock_is_reproduced_offline(spack):
    res = spack.concretize(ENVS, "laptop")
    assert res["rc"] == 0, Path(res["log"]).read_text()[-3000:]
    committed = json.loads((ENVS / "laptop" / "spack.lock").read_text())
    assert lock.root_hashes(res["lock"]) == lock.root_hashes(committed)


def test_own_mpi_with_debian_site_externals(spack):
    res = spack.concretize(ENVS, "commodity-cpu", ENVS / "site" / "debian12" / "packages.yaml")
    assert res["rc"] == 0, Path(res["log"]).read_text()[-3000:]
    ompi = [n for n in res["lock"]["concrete_specs"].values() if n["name"] == "openmpi"]
    assert [n["version"] for n in ompi] == ["4.1.8"] and "external" not in ompi[0]
