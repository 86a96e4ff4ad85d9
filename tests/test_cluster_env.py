"""The test cluster describes itself to ReFrame: `stackproof cluster env` exports what a shell needs,
and reframe-tests/config/systems/testcluster.py reads node count, fake GPUs, profile and noise
daemon from the running cluster's cluster.json (no cluster: one error saying how to start one)."""
import json
import os
import shlex
import subprocess
import sys

import pytest

from stackproof.paths import REPO

SUITE = REPO / "reframe-tests"
LOAD = """
import json, sys
sys.argv = ['reframe'] + sys.argv[1:]
sys.path.insert(0, %r)
from reframe.utility import import_module_from_file
conf = import_module_from_file(%r).site_configuration
tc = next(s for s in conf['systems'] if s['name'] == 'testcluster')
print(json.dumps({'partitions': tc['partitions'],
                  'environments': sorted({e['name'] for e in conf['environments']
                                          if 'testcluster' in e.get('target_systems', [])})}))
""" % (str(SUITE / "config"), str(SUITE / "config" / "site.py"))


def write_state(run_dir, nodes=3, fake_gpus=2, profile="corespec", noise_daemon="", mpibind=None):
    run_dir.mkdir(parents=True, exist_ok=True)
    names = [f"n{i}" for i in range(1, nodes + 1)]
    (run_dir / "cluster.json").write_text(json.dumps({
        "settings": {"profile": profile, "k": None, "nodes": nodes, "fake_gpus": fake_gpus,
                     "ports": [17817, 17818], "mpibind_plugin": mpibind, "mpibind_args": "",
                     "noise_daemon": noise_daemon, "profile_file": ""},
        "node_names": names, "netns": [], "munged_pid": None, "noise_pid": None,
        "system_cpus": "0", "app_cpus": "1"}))


def load(tmp_path, *argv, **env_extra):
    pytest.importorskip("reframe")
    env = dict(os.environ, STACKPROOF_RFM_PREFIX=str(tmp_path / "prefix"),
               STACKPROOF_RESULTS_DB=str(tmp_path / "db" / "r.db"), STACKPROOF_RUN_DIR=str(tmp_path / "run"))
    for var in ("STACKPROOF_FAKE_GPUS", "STACKPROOF_CLUSTER_NODES", "RFM_SYSTEM", "SLURM_CONF"):
        env.pop(var, None)
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", LOAD, *argv], capture_output=True, text=True, env=env)


def test_cluster_env_exports_what_reframe_and_slurm_need(tmp_path):
    run = tmp_path / "run"
    write_state(run, nodes=3)
    proc = subprocess.run([sys.executable, "-m", "stackproof.cli", "cluster", "--run-dir", str(run), "env"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    exports = dict(shlex.split(line)[1].split("=", 1) for line in proc.stdout.splitlines())
    assert exports["SLURM_CONF"] == str(run / "etc/slurm/slurm.conf")
    assert exports["STACKPROOF_RUN_DIR"] == str(run)
    assert exports["STACKPROOF_CLUSTER_NODES"] == "3"
    assert exports["STACKPROOF_CLUSTER_PROFILE"] == "corespec"
    assert exports["RFM_SYSTEM"] == "testcluster"
    assert exports["OMPI_ALLOW_RUN_AS_ROOT"] == "1"


def test_cluster_env_without_a_cluster_says_how_to_start_one(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "stackproof.cli", "cluster", "--run-dir", str(tmp_path / "none"),
                           "env"], capture_output=True, text=True)
    assert proc.returncode != 0 and proc.stdout == ""
    assert "stackproof cluster up" in proc.stderr and "Traceback" not in proc.stderr


def test_testcluster_partitions_describe_the_running_cluster(tmp_path):
    write_state(tmp_path / "run", nodes=3, fake_gpus=2, profile="corespec", noise_daemon="10Hz-2500us")
    proc = load(tmp_path, "--system", "testcluster")
    assert proc.returncode == 0, proc.stderr
    conf = json.loads(proc.stdout.splitlines()[-1])
    parts = {p["name"]: p for p in conf["partitions"]}
    assert set(parts) == {"cpu", "gpu"}
    for p in parts.values():
        assert p["extras"]["nodes"] == 3
        assert p["extras"]["profile"] == "corespec" and p["extras"]["noise_daemon"] == "10Hz-2500us"
        # jobs never overlap and never pend forever, whatever the execution policy
        assert {"--exclusive", "--dependency=singleton"} <= set(p["access"])
        assert "PartitionConfig" in p["sched_options"]["slurm_job_cancel_reasons"]
        assert {"builtin", "default"} <= set(p["environs"])
        assert "caches" in p["processor"]["topology"]
    assert parts["gpu"]["devices"][0]["num_devices"] == 2
    assert "mpibind" not in parts["cpu"]["features"], "the cluster was started without the mpibind plugin"
    assert {"builtin", "default"} <= set(conf["environments"])


def test_testcluster_single_node_baseline_without_gpus(tmp_path):
    write_state(tmp_path / "run", nodes=1, fake_gpus=0, profile="baseline")
    conf = json.loads(load(tmp_path, "--system", "testcluster").stdout.splitlines()[-1])
    assert [p["name"] for p in conf["partitions"]] == ["cpu"]
    assert conf["partitions"][0]["extras"]["nodes"] == 1


def test_running_checks_without_a_cluster_stops_once_with_how_to_start_one(tmp_path):
    proc = load(tmp_path, "--system", "testcluster", "-r")
    assert proc.returncode != 0
    assert proc.stderr.count("stackproof cluster up") == 1, proc.stderr[-2000:]
    listing = load(tmp_path, "--system", "testcluster", "-l")      # listing and dry runs need no cluster
    assert listing.returncode == 0, listing.stderr
