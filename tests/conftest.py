"""Shared pytest fixtures: the ../shared data directory and root/live gating."""
import os
import shutil

import pytest

from stackproof.paths import REPO, shared_dir


@pytest.fixture(scope="session")
def repo():
    return REPO


@pytest.fixture(scope="session")
def shared():
    path = shared_dir()
    if not (path / "topologies").is_dir():
        pytest.fail(f"shared data not found at {path}: set STACKPROOF_SHARED to the shared/ directory")
    return path


def require_root():
    if os.geteuid() != 0:
        pytest.skip("live test needs root (starts daemons, namespaces, cgroups)")


def require_tools(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"missing tools: {', '.join(missing)} (run scripts/install-deps.sh)")


@pytest.fixture(scope="session")
def live_cluster():
    """The local Slurm test cluster (real daemons), shared by every live test of the session and
    stopped at the end. Tests call `live_cluster.up(Settings(...))` for the configuration they need;
    `up` is idempotent and reconfigures only when the settings change."""
    require_root()
    require_tools("slurmctld", "slurmd", "munged", "srun")
    from stackproof.cluster import Cluster
    cluster = Cluster()
    yield cluster
    cluster.down(quiet=True)


@pytest.fixture(scope="session")
def mpi_hello(tmp_path_factory):
    """The packaged MPI smoke program built with each MPI: {'openmpi': path, 'mpich': path}."""
    require_tools("mpicc.openmpi", "mpicc.mpich")
    from stackproof.acceptance import build_mpi_hello
    out_dir = tmp_path_factory.mktemp("hello")
    return {mpi: str(build_mpi_hello(mpi, out_dir)) for mpi in ("openmpi", "mpich")}
