"""The test cluster describes itself to ReFrame: `stackproof cluster env` exports what a shell needs,
and reframe-tests/config/systems/testcluster.py reads node count, fake GPUs, profile and noise
daemon from the running cluster's cluster.json (no cluster: one error saying how to start one)."""
import json
import shlex

from conftest import stackproof_cli


def write_state(run_dir, nodes=3, fake_gpus=2, profile="corespec", noise_daemon="", mpibind=None):
    run_dir.mkdir(parents=True, exist_ok=True)
    names = [f"n{i}" for i in range(1, nodes + 1)]
    (run_dir / "cluster.json").write_text(json.dumps({
        "settings": {"profile": profile, "k": None, "nodes": nodes, "fake_gpus": fake_gpus,
                     "ports": [17817, 17818], "mpibind_plugin": mpibind, "mpibind_args": "",
                     "noise_daemon": noise_daemon, "profile_file": ""},
        "node_names": names, "netns": [], "munged_pid": None, "noise_pid": None,
        "system_cpus": "0", "app_cpus": "1"}))


def test_cluster_env_exports_what_reframe_and_slurm_need(tmp_path):
    run = tmp_path / "run"
    write_state(run, nodes=3)
    proc = stackproof_cli("cluster", "--run-dir", str(run), "env")
    assert proc.returncode == 0, proc.stderr
    exports = dict(shlex.split(line)[1].split("=", 1) for line in proc.stdout.splitlines())
    assert exports["SLURM_CONF"] == str(run / "etc/slurm/slurm.conf")
    assert exports["STACKPROOF_RUN_DIR"] == str(run)
    assert exports["STACKPROOF_CLUSTER_NODES"] == "3"
    assert exports["STACKPROOF_CLUSTER_PROFILE"] == "corespec"
    assert exports["RFM_SYSTEM"] == "testcluster"
    assert exports["OMPI_ALLOW_RUN_AS_ROOT"] == "1"


def test_cluster_env_without_a_cluster_says_how_to_start_one(tmp_path):
    proc = stackproof_cli("cluster", "--run-dir", str(tmp_path / "none"),
                           "env")
    assert proc.returncode != 0 and proc.stdout == ""
    assert "stackproof cluster up" in proc.stderr and "Traceback" not in proc.stderr


def test_testcluster_partitions_describe_the_running_cluster(reframe_config, tmp_path):
    write_state(tmp_path / "run", nodes=3, fake_gpus=2, profile="corespec", noise_daemon="10Hz-2500us")
    conf = reframe_config("--system", "testcluster")
    assert conf.proc.returncode == 0, conf.proc.stderr
    parts = {p["name"]: p for p in conf.partitions("testcluster")}
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
    assert {"builtin", "default"} <= set(conf.environments("testcluster"))


def test_testcluster_single_node_baseline_without_gpus(reframe_config, tmp_path):
    write_state(tmp_path / "run", nodes=1, fake_gpus=0, profile="baseline")
    parts = reframe_config("--system", "testcluster").partitions("testcluster")
    assert [p["name"] for p in parts] == ["cpu"] and parts[0]["extras"]["nodes"] == 1


def test_running_checks_without_a_cluster_stops_once_with_how_to_start_one(reframe_config):
    proc = reframe_config("--system", "testcluster", "-r").proc
    assert proc.returncode != 0
    assert proc.stderr.count("stackproof cluster up") == 1, proc.stderr[-2000:]
    listing = reframe_config("--system", "testcluster", "-l").proc      # listing and dry runs need no cluster
    assert listing.returncode == 0, listing.stderr
