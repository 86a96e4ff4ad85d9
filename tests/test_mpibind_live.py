"""Live test of the mpibind SPANK plugin on the local Slurm test cluster (issue 4, item 6)."""
import importlib.util
import re

import pytest

from stackproof import cluster as cl
from stackproof.cpulist import parse_list
from stackproof.nodes.nodetype import from_host

if importlib.util.find_spec("mpibind") is None:     # checked before importing: a failing import is an error
    pytest.skip("mpibind Python binding not installed (make mpibind-build)", allow_module_level=True)
import mpibind  # noqa: E402

pytestmark = pytest.mark.live
LOCAL = from_host()


@pytest.fixture
def mpibind_cluster(live_cluster):
    plugin = cl.find_built_mpibind_plugin()
    if plugin is None:
        pytest.skip("mpibind SPANK plugin not built (make mpibind-build) and STACKPROOF_MPIBIND_PLUGIN unset")

    def up(profile, **kw):
        return live_cluster.up(cl.Settings(profile=profile, mpibind_plugin=plugin, **kw))
    return live_cluster, up


def tasks_report(c, *args):
    proc = c.exec_cmd(["srun", *args, "sh", "-c",
                       'echo "task=$SLURM_PROCID cpus=$(awk \'/Cpus_allowed_list/ {print $2}\' /proc/self/status) '
                       'omp=$OMP_NUM_THREADS places=$OMP_PLACES bind=$OMP_PROC_BIND"'],
                      capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = {}
    for m in re.finditer(r"task=(\d+) cpus=(\S+) omp=(\d+) places=(\S*) bind=(\S*)", proc.stdout):
        rows[int(m.group(1))] = {"cpus": parse_list(m.group(2)), "nthreads": int(m.group(3)),
                                 "places": m.group(4), "bind": m.group(5)}
    return rows, proc


def test_plugin_binds_each_task_to_what_the_library_predicts(mpibind_cluster):
    c, up = mpibind_cluster
    up("baseline")
    n = LOCAL.num_cores
    rows, proc = tasks_report(c, f"-n{n}", "--mpibind=v")
    assert "mpibind: task" in proc.stderr + proc.stdout  # verbose mapping printed
    predicted = mpibind.mapping(n)
    assert sorted(rows) == list(range(n))
    assert sorted(t["task"] for t in predicted) == list(range(n))      # the loop below sees every task
    for t in predicted:
        got = rows[t["task"]]
        assert got["cpus"] == parse_list(t["cpus"]), f"task {t['task']}"
        assert got["nthreads"] == t["nthreads"]
        assert (got["places"], got["bind"]) == ("threads", "spread")


@pytest.mark.skipif(LOCAL.cores_per_socket < 2, reason="core specialization needs >= 2 cores per socket")
def test_plugin_keeps_out_of_the_system_cores_under_corespec(mpibind_cluster):
    c, up = mpibind_cluster
    st = up("corespec", k=1)
    app, system = parse_list(st.app_cpus), parse_list(st.system_cpus)
    rows, _ = tasks_report(c, f"-n{len(app)}", "--mpibind=on")
    predicted = mpibind.mapping(len(app), restrict_ids=st.app_cpus, restrict_type="cpu")
    assert app and sorted(rows) == list(range(len(app)))
    assert sorted(t["task"] for t in predicted) == list(range(len(app)))
    for t in predicted:
        assert rows[t["task"]]["cpus"] == parse_list(t["cpus"])
        assert not rows[t["task"]]["cpus"] & system


def test_bogus_option_fails_before_any_task_runs(mpibind_cluster, tmp_path):
    c, up = mpibind_cluster
    up("baseline")
    marker = tmp_path / "ran"
    proc = c.exec_cmd(["srun", "-n1", "--mpibind=bogus", "touch", str(marker)], capture_output=True, text=True,
                      timeout=60)
    assert proc.returncode != 0
    assert "bogus" in proc.stderr
    assert not marker.exists()


def test_option_is_registered_for_sbatch_and_salloc(mpibind_cluster):
    c, up = mpibind_cluster
    up("baseline")
    sb = c.exec_cmd(["sbatch", "--mpibind=v", "-o", "/dev/null", "--wrap", "true"], capture_output=True, text=True, timeout=60)
    assert sb.returncode == 0 and "Submitted batch job" in sb.stdout, sb.stderr
    sa = c.exec_cmd(["salloc", "--mpibind=off", "true"], capture_output=True, text=True, timeout=120)
    assert sa.returncode == 0, sa.stderr
