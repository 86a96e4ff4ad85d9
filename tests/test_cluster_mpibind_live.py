"""Live: the mpibind SPANK plugin on the test cluster under every core-specialization profile (the
acceptance's MpibindBinding in miniature, without ReFrame): no task on a reserved or freed core, every
application core used; GRES's GPU list on the fake-GPU node left as Slurm set it."""
import os

import pytest

from conftest import require_files
from stackproof import cluster as cl
from stackproof.cpulist import parse_list
from stackproof.nodes.nodetype import from_host
from stackproof.nodes.profiles import plan, profile_names, read_profile_env
from stackproof.paths import REPO
from stackproof.reframe.profile import app_core_cpus

pytestmark = pytest.mark.live

LOCAL = from_host()


def _applicable():
    out = []
    for p in profile_names():
        try:
            plan(LOCAL, p)
        except Exception:   # noqa: BLE001 - a profile this host cannot run (too few cores) is left out
            continue
        out.append(p)
    return out


@pytest.fixture(scope="module")
def plugin():
    path = cl.find_built_mpibind_plugin()
    require_files(path or REPO / "build/mpibind/plugin/mpibind_slurm.so", hint="make mpibind-build")
    return path


def _tasks(cluster, env, ntasks, extra_env):
    """Each task's CPUs, for a whole-node job whose step is bound by the plugin."""
    proc = cluster.exec_cmd(["env", *(f"{k}={v}" for k, v in extra_env.items()), "salloc", "-N1", "--exclusive",
                             "srun", f"-n{ntasks}", "--mpi=pmix", "--mpibind=on",
                             "grep", "Cpus_allowed_list", "/proc/self/status"],
                            capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [parse_list(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("Cpus_allowed")]


@pytest.mark.parametrize("profile", _applicable())
def test_the_plugin_keeps_every_profiles_tasks_on_its_application_cores(live_cluster, plugin, profile):
    live_cluster.up(cl.Settings(profile=profile, mpibind_plugin=plugin))
    env = read_profile_env(live_cluster.root / "etc/stackproof/profile.env")
    cores, app = app_core_cpus(env), parse_list(env["STACKPROOF_APP_CPUS"])
    restrict = {k: env[k] for k in ("MPIBIND_RESTRICT", "MPIBIND_RESTRICT_TYPE")}
    tasks = _tasks(live_cluster, env, len(cores), restrict)
    assert len(tasks) == len(cores)
    assert all(t <= app for t in tasks), f"{profile}: tasks on {tasks}, application CPUs {sorted(app)}"
    assert all(core & set().union(*tasks) for core in cores), f"{profile}: an application core unused: {tasks}"
    if env["STACKPROOF_RESERVED"] == "no" and env["STACKPROOF_FREE_CPUS"]:
        # a freed core is no system change: without the profile's MPIBIND_RESTRICT the plugin maps
        # the whole node (why the binding check exports it)
        unrestricted = _tasks(live_cluster, env, len(cores), {})
        assert set().union(*unrestricted) & parse_list(env["STACKPROOF_FREE_CPUS"]), unrestricted


def test_gres_gpu_list_on_the_fake_gpu_node_is_left_alone(live_cluster, plugin):
    """hwloc sees no GPU behind the fake device files: the plugin exports only OMP_* and the step
    keeps the CUDA_VISIBLE_DEVICES Slurm's GRES set (mpibind replaces it only for GPUs it sees)."""
    live_cluster.up(cl.Settings(profile="baseline", fake_gpus=2, mpibind_plugin=plugin))
    proc = live_cluster.exec_cmd(["srun", "-n1", "-p", "gpu", "--gres=gpu:2", "--mpibind=on", "sh", "-c",
                                  "echo $CUDA_VISIBLE_DEVICES $OMP_NUM_THREADS"],
                                 capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    gpus, threads = proc.stdout.split()
    assert gpus == "0,1" and int(threads) >= 1, proc.stdout
    assert os.path.exists(live_cluster.root / "dev" / "nvidia1")
