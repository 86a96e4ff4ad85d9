"""ReFrame partitions exist only where the hardware is, node types are read lazily, and a run that
measured nothing fails (stackproof.report.outcome, reframe-tests/run.py)."""
import json
import os
import subprocess
import sys

import pytest

from stackproof.report import outcome as run_outcome
from stackproof.paths import REPO, nodetypes_dir

SUITE = REPO / "reframe-tests"


@pytest.fixture
def no_lstopo(tmp_path):
    if (nodetypes_dir() / "local.yaml").exists():
        pytest.skip("slurm-conf/nodetypes/local.yaml exists: the local node type never needs lstopo here")
    empty = tmp_path / "emptybin"
    empty.mkdir()
    return str(empty)


def test_login_node_without_lstopo_loads_its_own_system(reframe_config, tmp_path, no_lstopo):
    conf = reframe_config("--system", "x86gpu", PATH=no_lstopo)
    assert conf.systems["x86gpu"] == ["gpu"]
    assert "local" not in conf.systems and "testcluster" not in conf.systems
    assert conf.unavailable["local"] == "not loaded: --system x86gpu was requested"


def test_without_lstopo_local_is_left_out_with_the_reason(reframe_config, tmp_path, no_lstopo):
    conf = reframe_config(PATH=no_lstopo)
    assert {"lassen", "x86gpu"} <= set(conf.systems) and "local" not in conf.systems
    assert "lstopo not found" in conf.unavailable["local"]


def test_run_py_says_why_a_system_is_unavailable(tmp_path, no_lstopo):
    env = dict(os.environ, PATH=no_lstopo, STACKPROOF_RFM_PREFIX=str(tmp_path / "p"),
               STACKPROOF_RESULTS_DB=str(tmp_path / "r.db"))
    env.pop("STACKPROOF_LOCAL_NODETYPE", None)
    proc = subprocess.run([sys.executable, str(SUITE / "run.py"), "--system", "local", "--stack", "laptop"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    assert "run.py: error: system 'local' is not available here: node type 'local' unavailable: lstopo not found" \
        in proc.stderr


def test_testcluster_gpu_partition_only_with_fake_gpus(reframe_config, tmp_path):
    assert reframe_config("--system", "testcluster").systems["testcluster"] == ["cpu"]
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "cluster.json").write_text(json.dumps({"settings": {"fake_gpus": 2}}))
    conf = reframe_config("--system", "testcluster")
    assert conf.systems["testcluster"] == ["cpu", "gpu"] and "fakegpu" in conf.features["testcluster:gpu"]
    assert reframe_config("--system", "testcluster", STACKPROOF_FAKE_GPUS="0").systems["testcluster"] == ["cpu"]


def test_local_gets_a_gpu_partition_from_a_gpu_node_type(reframe_config, tmp_path):
    conf = reframe_config("--system=local:gpu", STACKPROOF_LOCAL_NODETYPE="pascal")
    assert conf.systems["local"] == ["default", "gpu"]
    assert {"gpu", "cuda"} <= set(conf.features["local:gpu"])
    assert "gpu" not in conf.features["local:default"]


# ---- no silent pass -----------------------------------------------------------------------------------

def case(name, result, partition="gpu", tags=("gpu",), reason=""):
    return {"name": name, "system": "local", "partition": partition, "environ": "laptop", "result": result,
            "tags": list(tags), **({"skip_reason": reason} if reason else {})}


def test_verdicts():
    """The reasons come from the JSON report (every stackproof skip records `skip_reason`)."""
    gpu = ["local:gpu"]
    assert "no test case was selected for X" in run_outcome.problems(None, gpu, False, "X")[0]
    assert "no test case was selected" in run_outcome.problems([], [], True, "X")[0]
    skipped = [case("GPUHealth", "skip", reason="nvcc not found (looked in x)"),
               case("OSUBenchmark %benchmark=osu_latency %buffers=cuda-device", "skip",
                    reason="stack 'laptop''s MPI is not CUDA-aware"),
               case("MPIHello", "pass", "default", ())]
    (msg,) = run_outcome.problems(skipped, gpu, False, "X")
    assert msg.startswith("GPU partition local:gpu: all 2 GPU test case(s) were skipped: ")
    assert "nvcc not found" in msg and "not CUDA-aware" in msg
    # a third-party check that recorded no reason says where it is
    (msg,) = run_outcome.problems([case("Foreign", "skip")], gpu, False, "X")
    assert "recorded no reason" in msg
    # one GPU case measured: not silent
    assert run_outcome.problems([case("GPUHealth", "pass")] + skipped[1:], gpu, False, "X") == []
    # a GPU partition on which nothing GPU ran, unless the user narrowed the run
    only_cpu = [case("MPIHello", "pass", "gpu", ())]
    assert "no GPU check was selected" in run_outcome.problems(only_cpu, gpu, False, "X")[0]
    assert run_outcome.problems(only_cpu, gpu, True, "X") == []
    assert run_outcome.problems(only_cpu, [], False, "X") == []


def test_run_gpu_partitions_real_gpus_only_and_last_system_wins():
    from stackproof.reframe.session import Target
    config = {"systems": [
        {"name": "testcluster", "partitions": [{"name": "cpu", "features": ["cpu"]},
                                               {"name": "gpu", "features": ["gpu", "fakegpu"]}]},
        {"name": "local", "partitions": [{"name": "default", "features": ["cpu"]},
                                         {"name": "gpu", "features": ["gpu", "cuda"]}]}]}
    def gpu_partitions(system, extra):
        return Target(system, ["s"], config=config).gpu_partitions(extra)
    assert gpu_partitions("testcluster", []) == []          # fake GPUs cannot run CUDA
    assert gpu_partitions("local", []) == ["local:gpu"]
    assert gpu_partitions("local", ["--system", "local:default"]) == []
    assert gpu_partitions("testcluster", ["--system=local"]) == ["local:gpu"]
