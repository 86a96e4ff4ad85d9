"""ReFrame's own tutorial checks, unchanged, pass on the live Slurm test cluster: sent to both
partitions (`cpu`, and `gpu` since the cluster has fake GPUs), with an Open MPI and an MPICH stack."""
import pytest
from reframe_examples import TUTORIAL, check_results, installed_stacks, run_examples

from stackproof import cluster as cl

pytestmark = pytest.mark.live


def test_tutorial_checks_pass_on_the_test_cluster(live_cluster, tmp_path):
    if not (TUTORIAL / "stream/stream_build_run.py").is_file():
        pytest.skip(f"reframe-hpc's examples are not installed at {TUTORIAL}")
    # one stack per MPI family Debian ships (srun --mpi=pmix and --mpi=pmi2); `local` runs them all
    stacks = [s for s in ("commodity", "mpich") if s in installed_stacks()]
    if not stacks:
        pytest.skip("no stack installed (scripts/install-deps.sh)")
    # the settings test_reframe_testcluster_live uses, so the session's cluster is not reconfigured
    live_cluster.up(cl.Settings(profile="baseline", fake_gpus=2, mpibind_plugin=cl.find_built_mpibind_plugin()))
    env = dict(live_cluster.env(), STACKPROOF_CLUSTER_NODES="1")
    env.pop("STACKPROOF_FAKE_GPUS", None)      # the gpu partition must come from the cluster's own state
    proc, cases = run_examples("testcluster", stacks, tmp_path, env)
    check_results(proc, cases, ["cpu", "gpu"], stacks)
