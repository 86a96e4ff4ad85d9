"""Noise on GPU nodes (issue 12, item 6): an FWQ run whose injected signature asked for SCHED_FIFO
and got SCHED_OTHER (root in a cgroup without an RT budget, as on the H100 node) is "not measured
(reason)" in the report, never a pass.

Recorded data (tests/data/fwq-noise/): fwq-noise reports written on the build machine (Debian 12,
kernel 6.18, cgroup v1, root) by `fwq-noise --freq 1 --duration 1us --cpus 0 --seconds 0.01 --seed 7
-o FILE` (the policy is set when the threads start; 0 bursts, so recording them injected no noise):
`fifo-granted.json` in the root cgroup (FIFO granted) and `fifo-refused.json` in a v1 cpu cgroup
whose cpu.rt_runtime_us was set to 0 (the kernel said EPERM; fwq-noise warned on stderr)."""
import json
from pathlib import Path

from stackproof.report import build, load_run
from stackproof.report.outcome import injector_not_measured

DATA = Path(__file__).parent / "data" / "fwq-noise"
FWQ_CASE = "FWQNoise %profile=baseline %signature=10Hz-2500us"


def test_recorded_reports_say_what_the_bursts_ran_at():
    granted = json.loads((DATA / "fifo-granted.json").read_text())
    refused = json.loads((DATA / "fifo-refused.json").read_text())
    assert (granted["policy_requested"], granted["policy"], granted["fifo_errno"]) == ("fifo", "fifo", 0)
    assert (refused["policy_requested"], refused["policy"], refused["fifo_errno"], refused["euid"]) == \
        ("fifo", "other", 1, 0)


def test_fifo_granted_is_measured():
    assert injector_not_measured(str(DATA / "fifo-granted.json")) is None


def test_fifo_refused_is_not_measured_with_the_reason():
    why = injector_not_measured(str(DATA / "fifo-refused.json"))
    assert why.startswith("SCHED_FIFO was requested for the injected noise but refused (EPERM as root: the "
                          "job's cgroup has no real-time budget")
    assert why.endswith("its bursts ran at SCHED_OTHER")


def test_refused_not_root_and_other_errors(tmp_path):
    report = json.loads((DATA / "fifo-refused.json").read_text())
    f = tmp_path / "r.json"
    f.write_text(json.dumps(dict(report, euid=1000)))
    assert "EPERM as uid 1000: SCHED_FIFO needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO" in injector_not_measured(str(f))
    f.write_text(json.dumps(dict(report, fifo_errno=22, fifo_error="Invalid argument")))
    assert "(EINVAL: Invalid argument)" in injector_not_measured(str(f))
    f.write_text(json.dumps(dict(report, policy_requested="other", policy="other")))
    assert injector_not_measured(str(f)) is None          # SCHED_OTHER asked for and got


def test_no_report_or_a_broken_one_is_not_measured(tmp_path):
    assert "the noise injector wrote no report" in injector_not_measured(str(tmp_path / "none.json"))
    cut = tmp_path / "cut.json"
    cut.write_text((DATA / "fifo-refused.json").read_text()[:80])
    assert "is not JSON (cut off?)" in injector_not_measured(str(cut))
    old = tmp_path / "old.json"
    old.write_text('{"mode": "busy", "freq_hz": 10}')
    assert "no policy/policy_requested" in injector_not_measured(str(old))


def test_report_shows_not_measured_with_the_reason_never_pass(tmp_path):
    """The check skips such a case with skip_not_measured(why) (not_measured true); the FWQ check runs with one stack (a node
    check), so the report's Node checks section shows '<why>' for it, never a pass, and the stack verdict
    has no row for it."""
    why = injector_not_measured(str(DATA / "fifo-refused.json"))
    tc = {"name": FWQ_CASE, "display_name": FWQ_CASE, "unique_name": "FWQNoise_x", "system": "local",
          "partition": "gpu", "environ": "commodity", "result": "skip", "fail_phase": None, "fail_reason": None,
          "skip_reason": f"not measured: {why}", "not_measured": True, "perfvalues": {}}
    others = [{"name": "NetPIPE", "unique_name": f"NetPIPE_{s}", "system": "local", "partition": "gpu",
               "environ": s, "result": "pass", "perfvalues": {"local:gpu:lat_8B": [1.0, 0, None, None, "us"]}}
              for s in ("commodity", "vendor")]
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"session_info": {"uuid": "s"}, "runs": [{"testcases": [tc] + others}]}))
    data = build(load_run(str(run)), tmp_path / "rep", "t")
    assert not [r for r in data["verdicts"] if r["check"].startswith("FWQ")]
    md = (tmp_path / "rep" / "report.md").read_text()
    node = md.split("## Node checks")[1].split("\n## ")[0]
    assert FWQ_CASE in node and why in node and "pass" not in node.replace("passed", "")
