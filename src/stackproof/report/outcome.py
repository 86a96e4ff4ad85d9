"""The run outcome (not the verdict: that is the per-metric call of stackproof.report.verdict): no silent pass, what makes a ReFrame run that "PASSED" a run that measured nothing.

ReFrame exits 0 and prints PASSED when no check was selected (it then writes no report), and when
every selected case was skipped (e.g. GPU checks on a node whose stack has no nvcc). The
acceptance suite treats both as failures with the reason:
  - a run that selected 0 test cases;
  - a GPU partition of the run whose GPU cases (tag `gpu`) were all skipped, or on which no GPU
    case was selected at all although the run was not narrowed by name or tag.
Skip reasons come from the JSON report (the `skip_reason` every stackproof check records,
stackproof.reframe_output.skip_reason), never from ReFrame's console output.
"""
from __future__ import annotations

from stackproof.reframe_output import skip_reason


def is_gpu_case(case: dict) -> bool:
    return "gpu" in (case.get("tags") or [])


def problems(cases: list[dict] | None, gpu_partitions: list[str], narrowed: bool, what: str) -> list[str]:
    """Reasons this run must fail although ReFrame passed. `cases`: the report's test cases
    (None: ReFrame wrote no report); `gpu_partitions`: 'sys:part' names with the `gpu` feature
    that the run covered; `narrowed`: the user selected checks by name or tag."""
    if not cases:
        return [f"no test case was selected for {what}: nothing was measured (check the system, stack, "
                "tag and name filters; `reframe -l` lists what would run)"]
    found = []
    for part in gpu_partitions:
        sysname, partname = part.split(":")
        gpu = [c for c in cases if c.get("system") == sysname and c.get("partition") == partname
               and is_gpu_case(c)]
        if not gpu:
            if not narrowed:
                found.append(f"GPU partition {part}: no GPU check was selected (no environment with the "
                             "`cuda` feature?): the GPUs were not tested")
            continue
        if all(c.get("result") == "skip" for c in gpu):
            why = sorted({skip_reason(c) for c in gpu})
            found.append(f"GPU partition {part}: all {len(gpu)} GPU test case(s) were skipped: "
                         + "; ".join(why))
    return found


def injector_not_measured(report_path: str) -> str | None:
    """Why a run with an injected noise signature did not measure what it is about, from the
    fwq-noise report (`-o FILE`); None when the signature was injected as asked. A signature asked
    for at SCHED_FIFO (the default: it preempts the application like a kernel thread) that ran at
    SCHED_OTHER is a different, weaker signature: the run is "not measured", never a pass."""
    import errno
    import json
    try:
        with open(report_path) as fh:
            report = json.load(fh)
    except OSError:
        return f"the noise injector wrote no report ({report_path}): the signature was not injected"
    except ValueError:
        return f"{report_path}: the noise injector's report is not JSON (cut off?)"
    wanted, used = report.get("policy_requested"), report.get("policy")
    if wanted is None or used is None:
        return f"{report_path}: no policy/policy_requested in the noise injector's report (an older fwq-noise?)"
    if wanted != "fifo" or used == "fifo":
        return None
    code = int(report.get("fifo_errno") or 0)
    name = errno.errorcode.get(code, str(code))
    euid = report.get("euid")
    if code == errno.EPERM and euid == 0:
        why = ("EPERM as root: the job's cgroup has no real-time budget (cgroup v1 cpu.rt_runtime_us = 0, "
               "RT group scheduling), or a container's policy forbids it")
    elif code == errno.EPERM:
        why = f"EPERM as uid {euid}: SCHED_FIFO needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO above 0"
    else:
        why = f"{name}: {report.get('fifo_error') or 'sched_setscheduler failed'}"
    return (f"SCHED_FIFO was requested for the injected noise but refused ({why}); its bursts ran at "
            f"SCHED_OTHER")
