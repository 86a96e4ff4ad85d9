"""Fault injection on a live 3-node test cluster: daemons killed during a job (the job's fate and the
recovery), `down` during a job, a corrupt state file, a planted run directory, 100 concurrent jobs.
Every assertion is about an outcome (a state, a pid, a file), never about how long something took."""
import os
import re
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from conftest import stackproof_cli
from stackproof.cluster import cgroups
from stackproof import cluster as cl
from stackproof.cluster.procs import alive, read_pid
from stackproof.cluster import munge, netns

pytestmark = pytest.mark.live
NODES = 3


def sh(c, *cmd, timeout=60):
    return c.exec_cmd(list(cmd), capture_output=True, text=True, timeout=timeout)


def sbatch(c, *args):
    proc = sh(c, "sbatch", "--parsable", "--output=/dev/null", *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().split(";")[0]


def job(c, jobid):
    out = sh(c, "scontrol", "-o", "show", "job", jobid).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def wait_state(c, jobid, states, timeout=90):
    return wait_for(lambda: job(c, jobid).get("JobState") in states and job(c, jobid), timeout,
                    f"job {jobid} to reach {states} (now {job(c, jobid).get('JobState')})")


def kill9(pid):
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not alive(pid), 10, f"pid {pid} to exit")


def pids_with_arg(marker):
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if marker in p.joinpath("cmdline").read_bytes().decode(errors="replace").split("\0"):
                    found.append(int(p.name))
            except OSError:
                pass
    return [p for p in found if alive(p)]


@pytest.fixture
def three(live_cluster):
    st = live_cluster.up(cl.Settings(profile="baseline", nodes=NODES))
    yield live_cluster, st
    # leave a healthy cluster for the next test (a test may have broken it on purpose)
    live_cluster.up(cl.Settings(profile="baseline", nodes=NODES))


# ---- daemons killed during a job ----------------------------------------------------------------

def test_killed_slurmd_during_a_job_the_job_completes_and_the_node_recovers(three):
    c, st = three
    jobid = sbatch(c, "-N1", "-w", "n2", "--wrap", "sleep 4")
    wait_state(c, jobid, {"RUNNING"})
    kill9(read_pid(c.slurmd_pidfile("n2")))
    # The batch script outlives its slurmd (slurmstepd is a separate process) and ends meanwhile:
    # the job is then COMPLETING on a node without slurmd. `up` restarts it and must not wait on that.
    wait_for(lambda: job(c, jobid).get("JobState") != "RUNNING", 60, "the batch script to end")
    c.up(cl.Settings(profile="baseline", nodes=NODES))
    assert c.status()["healthy"]
    final = wait_state(c, jobid, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL"})
    assert final["JobState"] == "COMPLETED" and final["ExitCode"] == "0:0", final
    names = sh(c, "srun", "-N3", "hostname", timeout=120)
    assert sorted(names.stdout.split()) == ["n1", "n2", "n3"], names.stderr


def test_killed_slurmctld_during_a_job_restarts_with_its_saved_state(three):
    c, st = three
    jobid = sbatch(c, "-N1", "-w", "n1", "--wrap", "sleep 6")
    wait_state(c, jobid, {"RUNNING"})
    # A crash before slurmctld has saved the running job loses it (Slurm's own limit): kill it after.
    started = time.time()
    saved = c.root / "state/job_state"
    wait_for(lambda: saved.exists() and saved.stat().st_mtime > started, 30, "slurmctld to save the job")
    ctl = read_pid(cl.slurmctld_pidfile(c.root))
    kill9(ctl)
    slurmds = [read_pid(c.slurmd_pidfile(n)) for n in st.node_names]
    c.up(cl.Settings(profile="baseline", nodes=NODES))
    assert read_pid(cl.slurmctld_pidfile(c.root)) != ctl
    assert [read_pid(c.slurmd_pidfile(n)) for n in st.node_names] == slurmds   # only the dead one
    # the job survived the restart (no `slurmctld -c`): still known, and it finishes normally
    assert job(c, jobid).get("JobState") in ("RUNNING", "COMPLETING", "COMPLETED"), job(c, jobid)
    final = wait_state(c, jobid, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL"})
    assert final["JobState"] == "COMPLETED", final


def test_killed_munged_during_a_job_is_restarted_with_the_same_key(three):
    c, st = three
    key = munge.paths(c.root)["key"].read_bytes()
    jobid = sbatch(c, "-N1", "-w", "n3", "--wrap", "sleep 3")
    wait_state(c, jobid, {"RUNNING"})
    kill9(st.munged_pid)
    st2 = c.up(cl.Settings(profile="baseline", nodes=NODES))
    assert alive(st2.munged_pid) and st2.munged_pid != st.munged_pid
    assert munge.paths(c.root)["key"].read_bytes() == key
    assert wait_state(c, jobid, {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL"})["JobState"] == "COMPLETED"
    proc = sh(c, "srun", "-N3", "true", timeout=120)
    assert proc.returncode == 0, proc.stderr


# ---- down during a job ----------------------------------------------------------------------------

def test_down_during_a_job_ends_its_tasks_and_removes_everything(three):
    c, st = three
    marker = "3017"          # sleep 3017: a process only this test starts
    jobid = sbatch(c, "-N2", "--wrap", f"srun -N2 sleep {marker}")
    wait_state(c, jobid, {"RUNNING"})
    wait_for(lambda: len(pids_with_arg(marker)) >= 2, 30, "the job's tasks to start")
    daemons = [read_pid(c.slurmd_pidfile(n)) for n in st.node_names] + [st.munged_pid]
    removed = c.down()
    assert removed["jobs"] == [1]
    assert pids_with_arg(marker) == []
    assert not any(alive(p) for p in daemons)
    assert not [cg for n in ("n1", "n2", "n3") for cg in cgroups.node_cgroups(n, cgroups.hierarchy())]
    assert netns.existing(c.root) == []
    assert not munge.paths(c.root)["key"].exists()
    assert c.status() == {"up": False, "run_dir": str(c.root)}
    assert c.down() == {k: [] for k in removed}      # a second down removes (and reports) nothing


# ---- corrupt state --------------------------------------------------------------------------------

@pytest.mark.parametrize("damage", ["truncated", "not-an-object", "deleted"])
def test_corrupt_state_is_detected_and_down_still_removes_everything(three, damage):
    c, st = three
    daemons = [read_pid(c.slurmd_pidfile(n)) for n in st.node_names] + [st.munged_pid]
    text = c.state_file.read_text()
    if damage == "truncated":
        c.state_file.write_text(text[: len(text) // 2])
    elif damage == "not-an-object":
        c.state_file.write_text("[1, 2, 3]\n")
    else:
        c.state_file.unlink()
    proc = stackproof_cli("cluster", "status", timeout=180)
    assert proc.returncode == 1 and "down" not in proc.stdout.split()[:1], proc.stdout
    assert "`stackproof cluster down` removes them" in proc.stdout
    proc = stackproof_cli("cluster", "down", timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert not any(alive(p) for p in daemons)
    assert netns.existing(c.root) == []
    assert not [cg for n in ("n1", "n2", "n3") for cg in cgroups.node_cgroups(n, cgroups.hierarchy())]
    assert stackproof_cli("cluster", "status", timeout=180).returncode == 3


# ---- the run directory and the key ------------------------------------------------------------------

def test_a_fresh_munge_key_per_up_0400_removed_by_down(live_cluster):
    live_cluster.down(quiet=True)
    live_cluster.up(cl.Settings(profile="baseline"))
    key = munge.paths(live_cluster.root)["key"]
    mode = stat.S_IMODE(key.stat().st_mode)
    first = key.read_bytes()
    assert mode == 0o400 and key.stat().st_uid == 0
    assert stat.S_IMODE(live_cluster.root.stat().st_mode) == 0o700
    live_cluster.down(quiet=True)
    assert not key.exists()
    live_cluster.up(cl.Settings(profile="baseline"))
    assert key.read_bytes() != first


@pytest.mark.parametrize("plant", ["other-owner", "symlink"])
def test_a_planted_run_dir_is_refused(tmp_path, plant):
    run = tmp_path / "planted"
    if plant == "other-owner":
        run.mkdir(mode=0o755)
        (run / "munge").mkdir()
        (run / "munge" / "munge.key").write_text("known key\n")
        os.chown(run, 65534, 65534)
        fragment = "owned by uid 65534"
    else:
        (tmp_path / "elsewhere").mkdir()
        run.symlink_to(tmp_path / "elsewhere")
        fragment = "symbolic link"
    proc = stackproof_cli("cluster", "--run-dir", str(run), "up", "--ports", "17877,17878", timeout=180)
    assert proc.returncode == 1 and fragment in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().count("\n") == 0
    assert subprocess.run(["pgrep", "-f", str(run)], capture_output=True).stdout == b""
    if plant == "other-owner":
        assert (run / "munge" / "munge.key").read_text() == "known key\n"
        assert not (run / "cluster.json").exists()


def test_bad_input_leaves_a_running_cluster_alone(three):
    c, st = three
    before = c.status()
    for args in (["--nodes", "0"], ["--noise-daemon", "bogus"], ["--profile", "corespec", "--k", "4096"],
                 ["--fake-gpus", "99"]):
        proc = stackproof_cli("cluster", "up", *args, timeout=180)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert c.status() == before


def test_exec_of_a_missing_program_is_one_line(three):
    proc = stackproof_cli("cluster", "exec", "--", "/nonexistent", timeout=180)
    assert proc.returncode == 1 and proc.stderr.strip() == "stackproof cluster exec: error: /nonexistent: command not found"


# ---- load ---------------------------------------------------------------------------------------------

def test_hundred_concurrent_jobs_all_complete(three):
    c, _ = three
    # submitted 10 at a time (concurrent clients); --mem so that two jobs share a node (a job without
    # it takes the node's memory, so one job per node)
    script = "seq 100 | xargs -P 10 -I{} sbatch --parsable --output=/dev/null -n1 --mem=64M -J load{} --wrap 'echo ok'"
    proc = sh(c, "sh", "-c", script, timeout=300)
    assert proc.returncode == 0, proc.stderr
    ids = proc.stdout.split()
    assert len(set(ids)) == 100

    def all_done():
        out = sh(c, "squeue", "-h", "-o", "%i").stdout.split()
        return not (set(out) & set(ids))
    wait_for(all_done, 240, "100 jobs to leave the queue")
    states = sh(c, "scontrol", "-o", "show", "job").stdout
    done = dict(re.findall(r"JobId=(\d+) .*?JobState=(\S+)", states))
    assert {done.get(i) for i in ids} == {"COMPLETED"}, {i: done.get(i) for i in ids if done.get(i) != "COMPLETED"}
