"""cgroup v1 / v2 / hybrid: detection, Slurm's cgroup.conf, the job cgroups `cluster down` removes,
the cgroup and Slurm step of a task. v1/hybrid are this machine (also verified live by
test_cluster_live); v2 only against fake cgroupfs trees and recorded /proc/<pid>/cgroup lines."""
import subprocess

import pytest

from stackproof.cluster import cgroups
from stackproof.cluster import Cluster, Settings, core, procs
from stackproof.nodes.slurmconf import _cgroup_conf

V1_CONTROLLERS = ["cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids"]
MOUNTS = {
    "v1": "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n" + "".join(
        f"cgroup /sys/fs/cgroup/{c} cgroup rw,{c} 0 0\n" for c in V1_CONTROLLERS),
    # recorded on this project's machine: v1 controllers plus systemd's empty unified mount
    "hybrid": "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n" + "".join(
        f"cgroup /sys/fs/cgroup/{c} cgroup rw,{c} 0 0\n" for c in V1_CONTROLLERS)
        + "cgroup /sys/fs/cgroup/systemd cgroup rw,name=systemd 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n",
    "v2": "proc /proc proc rw 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate,memory_recursiveprot 0 0\n",
}
# /proc/<pid>/cgroup of a task of job 7, step 0 on node n1 (v1/hybrid: recorded in the live test
# cluster; v2: Slurm's cgroup/v2 layout, not run here)
TASK = {
    "v1": "5:devices:/slurm_n1/uid_0/job_7/step_0/task_0\n3:cpuset:/slurm_n1/uid_0/job_7/step_0\n1:cpu:/\n",
    "hybrid": "9:name=systemd:/\n4:memory:/slurm_n1/uid_0/job_7/step_0/task_0\n3:cpuset:/slurm_n1/uid_0/job_7/step_0\n"
              "1:cpu:/\n0::/\n",
    "v2": "0::/system.slice/n1_slurmstepd.scope/job_7/step_0/user/task_0\n",
}


@pytest.mark.parametrize("kind", ["v1", "hybrid", "v2"])
def test_hierarchy_from_the_mount_table(kind, tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text(MOUNTS[kind])
    assert cgroups.hierarchy(root=cgroups.ROOT, mounts=mounts) == kind


@pytest.mark.parametrize("kind, files", [("v2", ["cgroup.controllers"]), ("hybrid", ["unified/cgroup.controllers"]),
                                         ("v1", ["cpuset/tasks"])])
def test_hierarchy_from_the_filesystem_when_mounts_are_unreadable(kind, files, tmp_path):
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("")
    assert cgroups.hierarchy(root=tmp_path, mounts=tmp_path / "no-such-mounts") == kind


def test_this_host_is_v1_or_hybrid():
    assert cgroups.hierarchy() in ("v1", "hybrid", "v2")
    assert procs.cgroup_mode() == cgroups.hierarchy()


@pytest.mark.parametrize("kind, systemd, conf", [
    ("v1", False, ["CgroupPlugin=autodetect"]), ("hybrid", True, ["CgroupPlugin=autodetect"]),
    ("v2", True, ["CgroupPlugin=cgroup/v2"]), ("v2", False, ["CgroupPlugin=cgroup/v2", "IgnoreSystemd=yes"]),
])
def test_cluster_cgroup_conf_follows_the_hierarchy(kind, systemd, conf, monkeypatch, tmp_path):
    monkeypatch.setattr(core, "cgroup_mode", lambda: kind)
    monkeypatch.setattr(core, "pid1_is_systemd", lambda: systemd)
    lines = _cgroup_conf(Cluster(tmp_path / "run")._site(Settings(), ["n1"])).splitlines()
    assert lines[:len(conf)] == conf
    assert ("IgnoreSystemd=yes" in lines) == ("IgnoreSystemd=yes" in conf)


def _fake_v2(root):
    """A unified hierarchy as Slurm's cgroup/v2 leaves it with nodes n1 and n2 (and a foreign scope)."""
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    for node in ("n1", "n2"):
        task = root / "system.slice" / f"{node}_slurmstepd.scope" / "job_7" / "step_0" / "user" / "task_0"
        task.mkdir(parents=True)
        (task / "cgroup.procs").write_text("")
    (root / "system.slice" / "slurmstepd.scope" / "job_9").mkdir(parents=True)   # a host slurmd's: not ours


def _fake_v1(root):
    for ctrl in ("cpuset", "memory"):
        for node in ("n1", "n2"):
            (root / ctrl / f"slurm_{node}" / "uid_0" / "job_7" / "step_0").mkdir(parents=True)
        (root / ctrl / "tasks").write_text("")


@pytest.mark.parametrize("kind, make, want", [
    ("v2", _fake_v2, ["system.slice/n1_slurmstepd.scope"]),
    ("v1", _fake_v1, ["cpuset/slurm_n1", "memory/slurm_n1"]),
    ("hybrid", _fake_v1, ["cpuset/slurm_n1", "memory/slurm_n1"]),
])
def test_node_cgroups_on_each_hierarchy(kind, make, want, tmp_path):
    make(tmp_path)
    assert cgroups.node_cgroups("n1", kind, root=tmp_path) == [tmp_path / w for w in want]
    assert cgroups.node_cgroups("n3", kind, root=tmp_path) == []


def test_down_finds_job_tasks_and_removes_v2_job_cgroups(tmp_path):
    """What `down` does with a node's cgroups (procs_in_cgroups, then remove_cgroup_tree) on a fake
    v2 tree: the task listed in cgroup.procs is found, the scope goes, the foreign scope stays."""
    _fake_v2(tmp_path)
    child = subprocess.Popen(["sleep", "30"])
    try:
        scope = cgroups.node_cgroups("n1", "v2", root=tmp_path)[0]
        procs_file = scope / "job_7" / "step_0" / "user" / "task_0" / "cgroup.procs"
        procs_file.write_text(f"{child.pid}\n")
        assert procs.procs_in_cgroups([scope]) == [child.pid]
    finally:
        child.kill()
        child.wait()
    procs_file.unlink()          # cgroupfs has no real files; a tmp dir needs them gone for rmdir
    assert procs.remove_cgroup_tree(scope)
    assert not scope.exists()
    assert (tmp_path / "system.slice" / "slurmstepd.scope" / "job_9").is_dir()


@pytest.mark.parametrize("kind, path", [
    ("v1", "/slurm_n1/uid_0/job_7/step_0"), ("hybrid", "/slurm_n1/uid_0/job_7/step_0"),
    ("v2", "/system.slice/n1_slurmstepd.scope/job_7/step_0/user/task_0"),
])
def test_task_cgroup_and_slurm_step_from_recorded_proc_lines(kind, path, tmp_path):
    assert cgroups.task_cgroup(TASK[kind], kind) == path
    assert cgroups.slurm_step(path) == ("7", "0")
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text(TASK[kind])
    assert cgroups.task_cgroup_of(4242, kind, proc=tmp_path) == path
    assert cgroups.task_cgroup_of(4243, kind, proc=tmp_path) is None


@pytest.mark.parametrize("path, step", [
    ("/slurm/uid_1000/job_12/step_batch", ("12", "batch")),
    ("/system.slice/slurmstepd.scope/job_12/step_extern", ("12", "extern")),
    ("/system.slice/n2_slurmstepd.scope/job_3", ("3", "")),
    ("/system.slice/cron.service", None), ("/", None),
])
def test_slurm_step_of_any_layout(path, step):
    assert cgroups.slurm_step(path) == step


def test_v2_task_without_unified_entry_and_v1_without_cpuset():
    assert cgroups.task_cgroup("3:cpuset:/a\n", "v2") == ""
    assert cgroups.task_cgroup("1:cpu,cpuacct:/b\n0::/c\n", "v1") == "/b"
    assert cgroups.task_cgroup("0::/c\n", "hybrid") == "/c"
