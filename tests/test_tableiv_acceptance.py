"""Table IV in the acceptance run (issue 35): the driver's step, the report's node section opened by
the paper-shaped table, the projection reading the matrix's traces, and skip reasons that survive
ReFrame's JSON."""
import json

import numpy as np

from stackproof import noise
from stackproof.acceptance import suite
from stackproof.acceptance.driver import parse_args, plan_steps
from stackproof.acceptance.tableiv import fwq_step, schedule
from stackproof.cluster import Cluster
from stackproof.nodes.nodetype import from_host
from stackproof.noise import tableiv
from stackproof.noise.scale.sources import load_run as project_load_run
from stackproof.report import build, load_run
from stackproof.report.rows import cases_from_report


def test_the_acceptance_runs_table_iv_after_the_hunt_and_before_the_projection(tmp_path):
    args = parse_args(["--table-iv-rounds", "4"])
    names = [n for n, _ in plan_steps(args, tmp_path, from_host("local"), Cluster(tmp_path / "run"), tmp_path / "h",
                                      {"profiles": [], "node_docs": [], "costs": {}})]
    t4 = next(i for i, n in enumerate(names) if n.startswith("Table IV"))
    assert "4 interleaved rounds" in names[t4]
    assert max(i for i, n in enumerate(names) if "noise hunt" in n) < t4 < names.index(
        "noise at scale (projection of the FWQ traces)")
    # FWQ per profile is the matrix's: the per-profile node-check sessions no longer run it
    assert "FWQNoise" not in suite.NODE_CHECKS


def test_a_profile_without_node_checks_starts_no_session():
    # a ReFrame session that selects nothing fails (it measured nothing): freecore-* reserve no
    # cores, and the binding check needs the mpibind plugin (the per-profile clusters load it)
    assert suite.node_check_names("freecore-first", reserves=False, mpibind=False) == []
    assert suite.node_check_names("baseline", reserves=False, mpibind=False) == []
    assert suite.node_check_names("baseline", reserves=False, mpibind=True) == ["^MpibindBinding.*%profile=baseline(%|$)"]
    assert suite.node_check_names("freecore-last", reserves=False, mpibind=True) == [
        "^MpibindBinding.*%profile=freecore\\-last(%|$)"]
    assert suite.node_check_names("corespec", reserves=True, mpibind=False) == ["^CoreSpecCheck.*%profile=corespec(%|$)"]
    assert suite.node_check_names("clean", reserves=True, mpibind=True) == [
        "^CoreSpecCheck.*%profile=clean(%|$)", "^MpibindBinding.*%profile=clean(%|$)"]


def test_fwq_step_takes_the_usable_cpus_and_pins_to_the_application_cores():
    free = {"STACKPROOF_APP_CORES": "1", "STACKPROOF_SYSTEM_CPUS": "", "STACKPROOF_APP_CPUS": "1"}
    cmd = fwq_step(free, 1000, 64, "/x/t.dat", 2)
    assert cmd[:6] == ["srun", "-N1", "-n1", "-c2", "--exclusive", "--cpu-bind=none"]
    assert "-c1" in fwq_step(dict(free, STACKPROOF_SYSTEM_CPUS="0"), 1000, 64, "/x/t.dat", 2)
    assert cmd[-9:] == ["-n", "1000", "-w", "64", "--cpus", "1", "-q", "-o", "/x/t.dat"]
    assert cmd[-10].endswith("fwq-th") and "nice" in " ".join(cmd)
    ranks = fwq_step(dict(free, STACKPROOF_APP_CORES="2", STACKPROOF_APP_CPUS="0-1",
                          STACKPROOF_SRUN_CPU_BIND="mask_cpu:0x1,0x2"), 1000, 64, "/x/t.dat", 2, mpi=True)
    assert ranks[:7] == ["srun", "-N1", "-n2", "-c1", "--mpi=pmix", "--exclusive", "--cpu-bind=mask_cpu:0x1,0x2"]
    assert ranks[-8].endswith("fwq-mpi") and ranks[-7:] == ["-n", "1000", "-w", "64", "-q", "-o", "/x/t.dat"]


def _matrix(tmp_path, rounds=6):
    """A runs.json as the acceptance step writes it, from synthetic traces: the daemon lands on an
    application core under baseline and freecore-last, on the free or system core otherwise."""
    d = tmp_path / "report" / "table-iv"
    (d / "traces").mkdir(parents=True)
    rng = np.random.default_rng(7)
    runs = []
    for seq, (r, prof, cond) in enumerate(schedule(list(tableiv.PROFILE_ORDER), list(tableiv.CONDITIONS), rounds)):
        cpus = [0, 1] if prof == "baseline" else [0] if prof == "freecore-last" else [1]
        dur = 10.0 + rng.exponential(0.5, (len(cpus), 20000))
        hit = cond == "injected" or (cond == "daemon" and prof in ("baseline", "freecore-last"))
        if hit:         # baseline's floating daemon lands on each of its cores
            for core in range(len(cpus)):
                dur[core, (np.arange(20000) % 10000) == 1 + (seq * 37 + 5000 * core) % 9999] += 2500.0
        path = noise.write(d / "traces" / f"{prof}-{cond}-r{r}.dat", dur,
                           ranks=[{"rank": i, "cpu": c} for i, c in enumerate(cpus)])
        runs.append(tableiv.reduce_trace(noise.load(path), profile=prof, condition=cond, round=r, seq=seq,
                                         t_s=float(seq), cpus=",".join(map(str, cpus)),
                                         daemon_cpus="0" if prof in ("corespec", "clean") and cond == "daemon" else "",
                                         trace=f"traces/{path.name}"))
    (d / "runs.json").write_text(json.dumps(tableiv.runs_to_json(runs, signature="10Hz-2500us")))
    return d


def _session(tmp_path):
    run = tmp_path / "run.json"
    tcs = [{"name": "NetPIPE", "unique_name": f"NetPIPE_{s}", "system": "testcluster", "partition": "cpu",
            "environ": s, "result": "pass", "perfvalues": {"testcluster:cpu:lat_8B": [1.0, 0, None, None, "us"]}}
           for s in ("commodity", "vendor")]
    tcs.append({"name": "CoreSpecCheck %profile=corespec", "unique_name": "cs", "system": "testcluster",
                "partition": "cpu", "environ": "commodity", "result": "skip", "hashcode": "0badcafe",
                "skip_reason": "the partition runs profile baseline"})
    run.write_text(json.dumps({"session_info": {"uuid": "s"}, "runs": [{"testcases": tcs}]}))
    return run


def test_the_node_section_opens_with_the_table_iv_verdict(tmp_path):
    _matrix(tmp_path)
    build(load_run(str(_session(tmp_path))), tmp_path / "report", "t")
    md = (tmp_path / "report" / "report.md").read_text()
    node = md.split("\n## Node checks")[1].split("\n## ")[0]
    first_table = node[node.index("\n| "):].split("\n\n")[0]
    assert first_table.startswith("\n| noise | configuration | CPUs compared | n | Min ms | Mean ms | Max ms | Std ms | "
                                  "noise % | baseline Std ms on these CPUs |")
    rows = [line for line in first_table.splitlines() if line.startswith("| noise daemon |")]
    assert [r.split(" | ")[1] for r in rows] == list(tableiv.PROFILE_ORDER)
    assert [r.split(" | ")[2] for r in rows] == ["0-1", "1", "0", "1", "1"]       # like cores
    calls = {r.split(" | ")[1]: r.rstrip(" |").rsplit(" | ", 1)[1] for r in rows}
    assert calls["corespec"] == calls["clean"] == calls["freecore-first"] == "better", calls
    assert "| in-job injector (no profile can move it) | corespec |" in node
    assert "- corespec, noise daemon: better than baseline on std (" in node
    # the other node checks follow, every skip with its reason (the check's skip_reason in the JSON)
    assert "the partition runs profile baseline" in node
    assert "recorded no reason" not in md and "reason is not in this report" not in md
    html = (tmp_path / "report" / "report.html").read_text()
    assert '<ul class="notes">' in html and "better than baseline on std" in html


def test_the_projection_takes_the_matrix_traces_without_a_daemon(tmp_path):
    d = _matrix(tmp_path, rounds=4)
    (d.parent / "reframe-report.json").write_text(json.dumps(
        {"runs": [{"testcases": [{"name": "NetPIPE", "environ": "commodity", "result": "pass"}]}]}))
    data = project_load_run(str(d.parent))
    assert set(data.traces) == set(tableiv.PROFILE_ORDER)
    assert all("-none-" in p.name and p.is_file() for p in data.traces.values())


def test_a_skip_keeps_its_reason_from_the_check(tmp_path):
    tc = {"name": "X", "system": "s", "partition": "p", "environ": "e", "result": "skip", "skip_reason": "no GPU here"}
    _, (case,) = cases_from_report({"runs": [{"testcases": [tc]}]}, None, "t")
    assert case.fail_reason == "no GPU here"
    _, cases = cases_from_report(json.loads(_session(tmp_path).read_text()), None, "t")
    skipped = next(c for c in cases if c.result == "skip")
    assert skipped.fail_reason == "the partition runs profile baseline"
    # a skip that recorded no reason says so: ReFrame's console is not read
    tc.pop("skip_reason")
    _, (case,) = cases_from_report({"runs": [{"testcases": [tc]}]}, None, "t")
    assert case.fail_reason.startswith("the check recorded no reason")
