"""Which cgroup hierarchy this host has (v1, v2 or hybrid) and the few paths that depend on it.

One place for what the test cluster (Slurm's cgroup.conf, job cgroups removed on `down`) and the
noise hunt (the cgroup and Slurm step of a task) read from cgroupfs and /proc/<pid>/cgroup:

  v1      /sys/fs/cgroup is a tmpfs of per-controller cgroup mounts (cpuset, cpu, ...); Slurm's
          cgroup/v1 makes <controller>/slurm_<node>/uid_<uid>/job_<id>/step_<id>
  v2      /sys/fs/cgroup is the unified hierarchy (cgroup2); Slurm's cgroup/v2 (built with multiple
          slurmd, as Debian's is) makes system.slice/<node>_slurmstepd.scope/job_<id>/step_<id>
  hybrid  v1 controllers plus an empty cgroup2 at /sys/fs/cgroup/unified (systemd's hybrid mode);
          Slurm's `autodetect` picks cgroup/v1 there, so does everything here

Verified live only on v1 (this project's machines); v2 and hybrid against fake cgroupfs trees
and recorded /proc/<pid>/cgroup lines (tests/test_cgroups.py).
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
MOUNTS = Path("/proc/self/mounts")


def hierarchy(root: Path = ROOT, mounts: Path = MOUNTS) -> str:
    """'v1', 'v2' or 'hybrid', from the mount table (the filesystem under `root` when it is unreadable)."""
    try:
        table = [line.split()[1:3] for line in mounts.read_text().splitlines() if len(line.split()) >= 3]
    except OSError:
        table = None
    if table is not None:
        kinds = {Path(where): fs for where, fs in table}
        if kinds.get(root) == "cgroup2":
            return "v2"
        if any(fs == "cgroup" and Path(where).parent == root for where, fs in table):
            return "hybrid" if any(fs == "cgroup2" and Path(where).parent == root for where, fs in table) else "v1"
    if (root / "cgroup.controllers").exists():
        return "v2"
    return "hybrid" if (root / "unified" / "cgroup.controllers").exists() else "v1"


def slurm_cgroup_conf(kind: str, pid1_systemd: bool) -> tuple[str, bool]:
    """(CgroupPlugin, IgnoreSystemd) for Slurm's cgroup.conf on a `kind` host. Without systemd as
    PID 1, cgroup/v2 must not ask systemd for its scope (IgnoreSystemd=yes)."""
    if kind == "v2":
        return "cgroup/v2", not pid1_systemd
    return "autodetect", False          # v1 and hybrid: Slurm picks cgroup/v1


def node_cgroups(node: str, kind: str, root: Path = ROOT) -> list[Path]:
    """The cgroup directories Slurm made for the jobs of node `node` (that exist)."""
    if kind == "v2":
        scope = root / "system.slice" / f"{node}_slurmstepd.scope"
        return [scope] if scope.is_dir() else []
    return sorted(p for p in root.glob(f"*/slurm_{node}") if p.is_dir())


def task_cgroup(lines: str, kind: str) -> str:
    """The cgroup path of a task from its /proc/<pid>/cgroup text: on v1 and hybrid the cpuset
    controller's (else cpu's), on v2 the unified `0::` entry. '' when none is listed."""
    entries = [line.split(":", 2) for line in lines.splitlines() if line.count(":") >= 2]
    if kind == "v2":
        return next((path for _, ctrl, path in entries if ctrl == ""), "")
    by_ctrl = {c: path for _, ctrls, path in entries for c in ctrls.split(",") if c}
    return by_ctrl.get("cpuset") or by_ctrl.get("cpu") or next((p for _, c, p in entries if c == ""), "")


def task_cgroup_of(pid: int | str = "self", kind: str | None = None, proc: Path = Path("/proc")) -> str | None:
    """task_cgroup() of a running process; None when it has exited."""
    try:
        text = (proc / str(pid) / "cgroup").read_text()
    except OSError:
        return None
    return task_cgroup(text, kind or hierarchy())


_SLURM_STEP = re.compile(r"/(?:slurm(?:_[^/]+)?/uid_\d+|[^/]*slurmstepd\.scope)/job_(\d+)(?:/step_([\w.]+))?")


def slurm_step(cgroup: str) -> tuple[str, str] | None:
    """(job id, step or '') of a Slurm task's cgroup path, v1 (`slurm_<node>/uid_N/job_J/step_S`) or
    v2 (`<node>_slurmstepd.scope/job_J/step_S`); None for anything else."""
    m = _SLURM_STEP.search(cgroup)
    return (m.group(1), m.group(2) or "") if m else None
