"""Live: install and build the vendor (Intel MPI 2021.17 from PyPI), commodity (Debian Open MPI 4.1.4) and
commodity-next (Open MPI 5.0.11 from PyPI) stacks, then run each stack's mpi_identity with its own local
launcher (Hydra / mpirun) and on the Slurm test cluster (`srun --mpi=pmi2|pmix`), and check every rank's
MPI_Get_library_version and resolved library path against the stack file. Run under the live lock.
Every stack comes from a registry (Debian, PyPI), so an install error is a failure, never a skip."""
import os
import re
import subprocess

import pytest

from conftest import require_root
from stackproof import cluster as cl
from stackproof.stacks import benchbuild, environment, install
from stackproof.stacks.model import StackError, load_stack

pytestmark = [pytest.mark.live, pytest.mark.slow]

IDENTITY = re.compile(r"^identity rank=(\d+) host=(\S+) library=(\S+) version=(.*)$")
EXPECTED = {"commodity": "Open MPI v4.1", "vendor": "Intel(R) MPI Library 2021.17", "commodity-next": "Open MPI v5.0"}
NP = 2


@pytest.fixture(scope="module")
def stacks():
    require_root()
    ready = {}
    for name in EXPECTED:
        st = load_stack(name)
        install.install(st)           # a StackError here is the code under test failing
        for _line in benchbuild.build_stack(st, only=("probe", "hello", "netpipe")):
            pass
        environment.check_environment(st)
        ready[name] = st
    return ready


def identities(stack, proc):
    assert proc.returncode == 0, f"stack {stack.name}: rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    rows = [IDENTITY.match(line) for line in proc.stdout.splitlines() if line.startswith("identity ")]
    assert len(rows) == NP and all(rows), proc.stdout
    assert sorted(int(m.group(1)) for m in rows) == list(range(NP))
    for m in rows:
        library, version = m.group(3), m.group(4)
        assert version.startswith(EXPECTED[stack.name]), (stack.name, version)
        assert re.search(stack.mpi_version, version)
        assert re.search(stack.mpi_library, os.path.basename(library)), library
        assert os.path.realpath(os.path.dirname(library)) == os.path.realpath(stack.mpi_library_dir), library
    return rows


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_identity_with_the_stacks_local_launcher(stacks, name):
    st = stacks[name]
    cmd = [*st.launch_command("local"), "-n", str(NP), str(st.benchmark("probe"))]
    identities(st, subprocess.run(cmd, env=st.run_env(), capture_output=True, text=True, timeout=180))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_identity_on_the_test_cluster(stacks, live_cluster, name):
    st = stacks[name]
    live_cluster.up(cl.Settings(profile="baseline"))
    env = st.run_env(base=live_cluster.env())       # the cluster's SLURM_CONF, then the stack's own variables
    cmd = [*st.launch_command("slurm"), "-n", str(NP), str(st.benchmark("probe"))]
    identities(st, subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180))


def test_wrong_pmi_library_is_caught_before_any_task_starts(stacks):
    st = stacks["vendor"]
    env = dict(st.run_env(), I_MPI_PMI_LIBRARY="/nonexistent/libpmi2.so")
    with pytest.raises(StackError, match=r"^stack vendor: I_MPI_PMI_LIBRARY=/nonexistent/libpmi2.so does not exist"):
        environment.check_environment(st, env=env)


def test_second_install_and_build_change_nothing(stacks):
    for st in stacks.values():
        assert "up-to-date" in install.install(st) or not st.install_pip
        lines = list(benchbuild.build_stack(st, only=("probe", "hello", "netpipe")))
        assert all("built in" not in line for line in lines), lines


def test_probe_exposes_the_soname_trap(stacks):
    """Open MPI 4.1 and 5.0 share libmpi.so.40: commodity's binary started in commodity-next's environment
    runs silently on Open MPI 5. ldd on the build host cannot see this; the probe's per-rank record does."""
    old, new = stacks["commodity"], stacks["commodity-next"]
    cmd = [*new.launch_command("local"), "-n", str(NP), str(old.benchmark("probe"))]
    proc = subprocess.run(cmd, env=new.run_env(), capture_output=True, text=True, timeout=180)
    rows = identities(new, proc)          # what really ran: commodity-next's library and version
    assert all(not re.search(old.mpi_version, m.group(4)) for m in rows)
    assert all(os.path.dirname(m.group(3)) != old.mpi_library_dir for m in rows)
