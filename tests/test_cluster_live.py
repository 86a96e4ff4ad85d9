"""Live tests of the local Slurm test cluster: real munged, slurmctld and slurmd on this machine."""
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import stackproof_cli
from stackproof.cluster import cgroups
from stackproof import cluster as cl
from stackproof.cluster.procs import alive, read_pid
from stackproof.cpulist import parse_list
from stackproof.errors import StackproofError
from stackproof.nodes.nodetype import from_host

pytestmark = pytest.mark.live

LOCAL = from_host()


def srun(c, *args, timeout=120, node=None):
    proc = c.exec_cmd(["srun", *args], node=node, capture_output=True, text=True, timeout=timeout)
    return proc


def allowed_of(pid):
    with open(f"/proc/{pid}/status") as fh:
        return parse_list(next(l.split()[1] for l in fh if l.startswith("Cpus_allowed_list")))


def step_allowed(c, *args):
    proc = srun(c, *args, "grep", "Cpus_allowed_list", "/proc/self/status")
    assert proc.returncode == 0, proc.stderr
    return [parse_list(line.split()[1]) for line in proc.stdout.splitlines()]


def test_baseline_single_node_steps_get_every_core(live_cluster, mpi_hello):
    st = live_cluster.up(cl.Settings(profile="baseline"))
    assert st.node_names == [socket.gethostname().split(".")[0]]
    sets = step_allowed(live_cluster, "-n1", f"-c{LOCAL.num_cpus}")
    assert sets == [LOCAL.all_cpus]
    # one task per core, each on its own core
    per_task = step_allowed(live_cluster, f"-n{LOCAL.num_cores}")
    assert set().union(*per_task) == LOCAL.all_cpus
    # the step runs inside Slurm's cgroup for this node
    proc = srun(live_cluster, "-n1", "cat", "/proc/self/cgroup")
    kind = cgroups.hierarchy()
    path = cgroups.task_cgroup(proc.stdout, kind)
    node = st.node_names[0]
    assert (f"/{node}_slurmstepd.scope/" if kind == "v2" else f"/slurm_{node}/uid_0/") in path, proc.stdout
    assert cgroups.slurm_step(path)[1] == "0", proc.stdout


def test_up_is_idempotent(live_cluster):
    live_cluster.up(cl.Settings(profile="baseline"))
    before = live_cluster.status()["daemons"]
    live_cluster.up(cl.Settings(profile="baseline"))
    assert live_cluster.status()["daemons"] == before


def test_a_job_larger_than_the_cluster_is_refused_not_left_pending(live_cluster):
    """EnforcePartLimits=ALL: sbatch refuses it at once (a ReFrame session never waits on it)."""
    live_cluster.up(cl.Settings(profile="baseline"))
    proc = live_cluster.exec_cmd(["sbatch", "-N", "5", "--wrap", "true"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0, proc.stdout
    assert "More processors requested than permitted" in proc.stderr, proc.stderr   # refused, not unreachable
    queue = live_cluster.exec_cmd(["squeue", "-h", "-o", "%i %r"], capture_output=True, text=True, timeout=30)
    assert "PartitionConfig" not in queue.stdout, queue.stdout


def test_batch_jobs_are_scheduled_at_submission(live_cluster):
    """batch_sched_delay=0: the running slurmctld schedules a batch job when it arrives, not in the
    periodic pass up to 3 s later (which every ReFrame test case paid once)."""
    live_cluster.up(cl.Settings(profile="baseline"))
    proc = live_cluster.exec_cmd(["scontrol", "show", "config"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("SchedulerParameters"))
    assert "batch_sched_delay=0" in line, line


def test_mpi_single_node_openmpi_pmix_and_mpich_pmi2(live_cluster, mpi_hello):
    live_cluster.up(cl.Settings(profile="baseline"))
    n = LOCAL.num_cores
    ompi = srun(live_cluster, f"-n{n}", "--mpi=pmix", mpi_hello["openmpi"])
    assert ompi.returncode == 0, ompi.stderr
    assert sorted(re.findall(rf"rank (\d+) of {n} on \S+ cpu \d+ sum {n}", ompi.stdout)) == [str(i) for i in range(n)]
    mpich = srun(live_cluster, f"-n{n}", "--mpi=pmi2", mpi_hello["mpich"])
    assert mpich.returncode == 0, mpich.stderr
    assert sorted(re.findall(rf"rank (\d+) of {n} on \S+ cpu \d+ sum {n}", mpich.stdout)) == [str(i) for i in range(n)]


@pytest.mark.skipif(LOCAL.cores_per_socket < 2, reason="core specialization needs >= 2 cores per socket")
def test_corespec_steps_exclude_system_cores_and_slurmd_runs_on_them(live_cluster):
    st = live_cluster.up(cl.Settings(profile="corespec", k=1))
    system, app = parse_list(st.system_cpus), parse_list(st.app_cpus)
    assert system and app and not system & app
    for cpus in step_allowed(live_cluster, f"-n{len(app)}"):
        assert cpus <= app, f"job step on system CPUs {cpus & system}"
    slurmd_pid = read_pid(live_cluster.slurmd_pidfile(st.node_names[0]))
    assert allowed_of(slurmd_pid) <= system
    assert allowed_of(st.munged_pid) <= system
    node = live_cluster.exec_cmd(["scontrol", "show", "node"], capture_output=True, text=True).stdout
    assert f"CPUSpecList={st.system_cpus}" in node
    # a step asking for every CPU of the node does not fit any more
    proc = srun(live_cluster, f"-n{LOCAL.num_cpus}", "true")
    assert proc.returncode != 0 and "Requested node configuration is not available" in proc.stderr


@pytest.mark.skipif(LOCAL.cores_per_socket < 2, reason="needs >= 2 cores per socket")
def test_freecore_profile_leaves_the_node_alone_and_tells_apps_where_to_run(live_cluster):
    st = live_cluster.up(cl.Settings(profile="freecore-first", k=1))
    env = dict(line.split("=", 1) for line in
               (live_cluster.root / "etc/stackproof/profile.env").read_text().splitlines() if "=" in line and not line.startswith("#"))
    assert env["STACKPROOF_APP_CPUS"] == st.app_cpus and env["STACKPROOF_RESERVED"] == "no"
    node = live_cluster.exec_cmd(["scontrol", "show", "node"], capture_output=True, text=True).stdout
    assert "CoreSpecCount=" not in node or "CoreSpecCount=0" in node
    # The documented pattern: a whole-node allocation, steps bound to the application cores only.
    proc = live_cluster.exec_cmd(["salloc", "-N1", "--exclusive", "srun", f"-n{env['STACKPROOF_APP_CORES']}",
                                  f"--cpu-bind={env['STACKPROOF_SRUN_CPU_BIND']}",
                                  "grep", "Cpus_allowed_list", "/proc/self/status"],
                                 capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    sets = [parse_list(line.split()[1]) for line in proc.stdout.splitlines()]
    assert sets and set().union(*sets) == parse_list(env["STACKPROOF_APP_CPUS"])


def test_fake_gpus_set_cuda_visible_devices(live_cluster):
    live_cluster.up(cl.Settings(profile="baseline", fake_gpus=2))
    one = srun(live_cluster, "--gpus=1", "printenv", "CUDA_VISIBLE_DEVICES")
    assert one.returncode == 0 and one.stdout.strip() == "0", one.stderr
    two = srun(live_cluster, "-p", "gpu", "--gres=gpu:2", "printenv", "CUDA_VISIBLE_DEVICES")
    assert two.stdout.strip() == "0,1", two.stderr
    # ConstrainDevices: a step without GPUs cannot open the device files
    dev = live_cluster.root / "dev" / "nvidia1"
    denied = srun(live_cluster, "-n1", "sh", "-c", f"exec 3<{dev}")
    assert denied.returncode != 0 and "Operation not permitted" in denied.stderr


def test_three_nodes_in_namespaces_with_mpi_over_tcp(live_cluster, mpi_hello):
    st = live_cluster.up(cl.Settings(profile="baseline", nodes=3))
    assert st.node_names == ["n1", "n2", "n3"] and len(st.netns) == 4
    names = srun(live_cluster, "-N3", "hostname")
    assert names.returncode == 0, names.stderr
    assert sorted(names.stdout.split()) == ["n1", "n2", "n3"]
    addrs = srun(live_cluster, "-N3", "sh", "-c", "ip -4 -o addr show eth0 | awk '{print $4}'")
    assert sorted(addrs.stdout.split()) == [f"{cl.node_addr(live_cluster.root, i)}/24" for i in (1, 2, 3)]
    ompi = srun(live_cluster, "-N3", "-n3", "--mpi=pmix", mpi_hello["openmpi"])
    assert ompi.returncode == 0, ompi.stderr
    assert sorted(re.findall(r"rank \d of 3 on (n\d) cpu \d+ sum 3", ompi.stdout)) == ["n1", "n2", "n3"]
    mpich = srun(live_cluster, "-N3", "-n3", "--mpi=pmi2", mpi_hello["mpich"])
    assert mpich.returncode == 0, mpich.stderr
    assert sorted(re.findall(r"rank \d of 3 on (n\d) cpu \d+ sum 3", mpich.stdout)) == ["n1", "n2", "n3"]
    # Proof that ranks are on separate hosts: shared memory alone cannot connect them.
    env_shm = srun(live_cluster, "-N3", "-n3", "--mpi=pmix", "--export=ALL,OMPI_MCA_btl=self,vader",
                   mpi_hello["openmpi"], timeout=120)
    assert env_shm.returncode != 0


def test_killed_slurmd_is_reported_and_recovered(live_cluster):
    live_cluster.up(cl.Settings(profile="baseline", nodes=3))
    # Kill an idle slurmd: one killed while a step completes leaves that job completing on the node,
    # which only slurmctld's own clean-up resolves (minutes later) -- a different scenario.
    for _ in range(100):
        if not live_cluster.exec_cmd(["squeue", "-h"], capture_output=True, text=True).stdout.strip():
            break
        time.sleep(0.1)
    victim = read_pid(live_cluster.slurmd_pidfile("n2"))
    os.kill(victim, signal.SIGKILL)
    for _ in range(100):  # SIGKILL is asynchronous: wait until the kernel has finished the process
        if not alive(victim):
            break
        time.sleep(0.05)
    proc = stackproof_cli("cluster", "status")
    assert proc.returncode == 1 and re.search(r"slurmd n2 .*DEAD", proc.stdout), proc.stdout
    live_cluster.up(cl.Settings(profile="baseline", nodes=3))
    assert live_cluster.status()["healthy"]
    try:
        names = srun(live_cluster, "-N3", "hostname", timeout=60)
    except subprocess.TimeoutExpired:
        diag = live_cluster.exec_cmd(["sh", "-c", "squeue; sinfo -R; scontrol show node n2"], capture_output=True, text=True)
        pytest.fail(f"srun -N3 after the restart did not run:\n{diag.stdout}")
    assert sorted(names.stdout.split()) == ["n1", "n2", "n3"], names.stderr


def test_down_removes_daemons_namespaces_and_cgroups(live_cluster):
    st = live_cluster.up(cl.Settings(profile="baseline", nodes=2))
    pids = [read_pid(live_cluster.slurmd_pidfile(n)) for n in st.node_names]
    pids += [read_pid(live_cluster.root / "run/slurmctld.pid"), st.munged_pid]
    live_cluster.down()
    assert not any(alive(p) for p in pids)
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(ns in netns for ns in st.netns)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert cl.host_veth(live_cluster.root) not in links
    assert not [cg for n in ("n1", "n2") for cg in cgroups.node_cgroups(n, cgroups.hierarchy())]
    assert live_cluster.status() == {"up": False, "run_dir": str(live_cluster.root)}


# ---- bad input: a clear message, a non-zero exit and nothing half-started -------------------------

def _up_cli(run_dir, *args, user=None):
    cmd = [sys.executable, "-m", "stackproof.cli", "cluster", "--run-dir", str(run_dir), "up", *args]
    if user:
        # `nobody`, keeping only CAP_DAC_READ_SEARCH: it reads the checkout and its venv wherever they
        # live (a 0700 home, `mktemp -d`); what is tested is the refusal of a non-root uid, not where
        # the checkout is
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=+dac_read_search",
               "--ambient-caps=+dac_read_search", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _nothing_started(run_dir):
    out = subprocess.run(["pgrep", "-f", str(run_dir)], capture_output=True, text=True).stdout
    return out.strip() == "" and not (run_dir / "cluster.json").exists()


@pytest.mark.parametrize("args,msg", [
    (["--profile", "corespec", "--k", str(LOCAL.cores_per_socket)], "leaves 0 application cores"),
    (["--profile", "blink"], "unknown profile 'blink'"),
    (["--nodes", "0"], "--nodes must be between 1 and 16"),
])
def test_bad_arguments(tmp_path, args, msg):
    proc = _up_cli(tmp_path, *args, "--ports", "17837,17838")
    assert proc.returncode == 2 and msg in proc.stderr, proc.stderr
    assert _nothing_started(tmp_path)


def test_ports_in_use(tmp_path):
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 17847))
        busy.listen()
        proc = _up_cli(tmp_path, "--ports", "17847,17848")
    assert proc.returncode == 1 and "port 17847 is in use" in proc.stderr
    assert _nothing_started(tmp_path)


def test_not_root(tmp_path):
    tmp_path.chmod(0o777)
    proc = _up_cli(tmp_path, "--ports", "17857,17858", user="nobody")
    assert proc.returncode == 1 and "must run as root" in proc.stderr, proc.stderr
    assert _nothing_started(tmp_path)


def test_missing_packages(tmp_path, monkeypatch):
    monkeypatch.setitem(cl.REQUIRED, "slurmd-that-is-not-installed", "slurmd-imaginary")
    with pytest.raises(StackproofError, match="missing packages: slurmd-imaginary"):
        cl.Cluster(tmp_path).up(cl.Settings(ports=(17867, 17868)))
    assert _nothing_started(tmp_path)


def test_cli_up_keeps_the_running_clusters_other_settings(live_cluster):
    """`up --profile P` (what the ReFrame checks call) switches only the profile."""
    live_cluster.up(cl.Settings(profile="baseline", nodes=2, fake_gpus=2))
    proc = stackproof_cli("cluster", "up", "--profile", "freecore-last", timeout=120)
    assert proc.returncode == 0, proc.stderr
    settings = live_cluster.status()["settings"]
    assert (settings["profile"], settings["nodes"], settings["fake_gpus"]) == ("freecore-last", 2, 2)


@pytest.mark.skipif(LOCAL.cores_per_socket < 2, reason="needs >= 2 cores per socket")
def test_noise_daemon_is_bound_like_the_profiles_daemons(live_cluster):
    from stackproof.noise.run import build_dir
    if not (build_dir() / "fwq-noise").exists():
        pytest.skip("fwq-noise not built (make fwq)")
    st = live_cluster.up(cl.Settings(profile="baseline", noise_daemon="10Hz-2500us"))
    assert allowed_of(st.noise_pid) == LOCAL.all_cpus          # left to the OS
    st = live_cluster.up(cl.Settings(profile="corespec", k=1, noise_daemon="10Hz-2500us"))
    assert allowed_of(st.noise_pid) == parse_list(st.system_cpus)  # moved to the system core
    pid = st.noise_pid
    ctld = read_pid(cl.slurmctld_pidfile(live_cluster.root))
    live_cluster.up(cl.Settings(profile="corespec", k=1))       # no daemon asked: it is stopped
    assert not alive(pid)
    # the daemon alone switched (a Table IV matrix does it between runs): Slurm kept running
    st = live_cluster.up(cl.Settings(profile="corespec", k=1, noise_daemon="10Hz-2500us"))
    assert allowed_of(st.noise_pid) == parse_list(st.system_cpus) and st.noise_pid != pid
    assert live_cluster.status()["settings"]["noise_daemon"] == "10Hz-2500us"
    live_cluster.up(cl.Settings(profile="corespec", k=1))
    assert not alive(st.noise_pid)
    assert read_pid(cl.slurmctld_pidfile(live_cluster.root)) == ctld and live_cluster.status()["healthy"]
    before = live_cluster.status()
    with pytest.raises(StackproofError, match="expected FREQHz-DURATION"):
        live_cluster.up(cl.Settings(profile="baseline", noise_daemon="loud"))
    assert live_cluster.status() == before                      # bad input left the running cluster alone
