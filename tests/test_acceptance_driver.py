"""The acceptance driver without a cluster: looks merged into one report, which checks stay open after
a look, the live progress line, provenance, and an interrupted run (SIGINT / SIGTERM to the driver
alone): its ReFrame session is stopped, its test cluster taken down, one line, exit 128 + signal."""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from stackproof.acceptance import suite
from stackproof.acceptance.provenance import read_bench_provenance
from stackproof.errors import InputError
from stackproof.reframe import session
from stackproof.reframe_output import merge_reports
from stackproof.report.stats import design, open_design


def _doc(uuid, values, check="AMGBenchmark", var="fom", better="higher", first=0, per_stack=1):
    """A report of blocks of two stacks (StackCheck's test cases): launch k of each stack is pair k,
    `per_stack` pairs per block, blocks numbered from `first`."""
    stacks = list(values)
    n = len(values[stacks[0]])
    tcs = []
    for b in range(n // per_stack):
        j = first + b
        launches = [{"stack": s, "block": j, "pair": j * per_stack + k, "position": 0, "dir": f"launch-{s}-{k}",
                     "values": {var: values[s][b * per_stack + k]}} for k in range(per_stack) for s in stacks]
        tcs.append({"name": f"{check} %block_index={j}", "display_name": f"{check} %block_index={j}",
                    "unique_name": f"{check}_{b}", "system": "testcluster", "partition": "cpu",
                    "environ": stacks[0], "stack": stacks[0], "block_stacks": stacks, "result": "pass",
                    "block_index": j, "launches": launches,
                    "perfvalues": {f"testcluster:cpu:{var}@{s}": [values[s][b], 0, None, None, "x/s"] for s in stacks},
                    "perf_better": {var: better}})
    return {"session_info": {"uuid": uuid, "stack": "+".join(values)}, "runs": [{"testcases": tcs}]}


def test_looks_merge_into_one_report_with_their_global_blocks(tmp_path):
    """A later look's blocks carry their global index (STACKPROOF_FIRST_BLOCK): the looks merge into
    one report without renaming, every launch with its pair index."""
    a = _doc("s1", {"commodity": [1.0, 1.1, 1.2, 1.05, 1.15], "vendor": [1.0, 1.12, 1.18, 1.04, 1.1]})
    b = _doc("s2", {"commodity": [1.01, 1.11], "vendor": [1.02, 1.09]}, first=5)
    merged = merge_reports([a, b], {"design": {"looks": [5, 7], "alpha": 0.05, "margin": 0.05}})
    tcs = [tc for r in merged["runs"] for tc in r["testcases"]]
    assert sorted(tc["block_index"] for tc in tcs) == list(range(7))
    assert merged["session_info"]["uuid"] == "s1"
    from stackproof.report import build, load_run
    p = tmp_path / "m.json"
    p.write_text(json.dumps(merged))
    data = build(load_run(str(p)), tmp_path / "r", "t")
    (row,) = data["verdicts"]
    assert row["vs"]["vendor"]["n"] == [7, 7]
    assert data["design"]["looks"] == [5, 7]


def test_calls_after_a_look():
    d = design(5, 10, 3, paired=False)
    same = {"commodity": [1.0, 1.001, 1.002, 1.003, 1.004], "vendor": [1.0005, 1.0015, 1.0025, 1.0035, 1.0045]}
    noisy = {"commodity": [1.0, 1.5, 0.7, 1.2, 0.9], "vendor": [1.1, 0.6, 1.4, 0.8, 1.3]}
    worse = {"commodity": [1.0, 1.01, 1.02, 1.03, 1.04], "vendor": [0.5, 0.51, 0.52, 0.53, 0.54]}
    docs = [_doc("s", same, "AMGBenchmark"), _doc("s", worse, "HPCC")] + [
        _doc("s", noisy, check) for check in ("SW4Benchmark", "NetPIPE", "MemoryBandwidth", "OSUBenchmark")]
    noisy_checks = {"SW4Benchmark", "NetPIPE", "MemoryBandwidth", "OSUBenchmark"}
    merged = merge_reports(docs)
    # 5 + 5 launches apart give p = 2/252, above the 4 % / 6 that one of 6 metrics needs alone at the
    # first look (which has 80 % of the 5 %)
    calls = suite.look_calls(merged, ["commodity", "vendor"], d)
    assert calls.open_checks == noisy_checks | {"HPCC"} and (calls.decided, calls.metrics) == (1, 6)
    assert calls.headline == 6 and calls.headline_open      # no check declares headlines: all are
    # two of 7 apart: the second smallest p <= 2 x 4 % / 7, both called
    merged = merge_reports(docs + [_doc("s", worse, "Hypre")])
    calls = suite.look_calls(merged, ["commodity", "vendor"], d)
    assert calls.open_checks == noisy_checks and (calls.decided, calls.metrics) == (3, 7)
    assert set(calls.more) == {f"{c}: fom (vendor)" for c in noisy_checks}


def test_looks_are_whole_blocks_and_each_session_names_its_blocks():
    sizes = list(suite.look_sizes(design(8, 16, 2, blocks=True), 2))
    assert sizes == [(1, 8, 4), (2, 16, 8)]
    from itertools import islice
    assert list(islice(suite.look_sizes(open_design(8, 8, blocks=True), 4), 3)) == [(1, 8, 2), (2, 16, 4), (3, 24, 6)]
    with pytest.raises(Exception, match="not a whole number of blocks"):
        list(suite.look_sizes(design(8, 8, 1, blocks=True), 3))
    assert suite.block_env(["commodity", "vendor"], 4, 2, 2) == {
        "STACKPROOF_BLOCK_STACKS": "commodity,vendor", "STACKPROOF_FIRST_BLOCK": "4", "STACKPROOF_BLOCKS": "2",
        "STACKPROOF_BLOCK_LAUNCHES": "2"}


def test_reframe_runs_the_stacks_in_the_order_asked():
    """ReFrame runs a test's environments in its partition's order; run.py passes its --stack order
    (STACKPROOF_STACK_ORDER), which config/partitions.py puts first: a pair can run B A."""
    pytest.importorskip("reframe")
    from stackproof.paths import REPO
    code = ("import sys; sys.path.insert(0, 'reframe-tests/config'); import partitions; "
            "print(','.join(partitions.STACKS))")
    def order(value):
        env = {k: v for k, v in os.environ.items() if k != "STACKPROOF_STACK_ORDER"}
        if value is not None:
            env["STACKPROOF_STACK_ORDER"] = value
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip().split(",")
    plain = order(None)
    assert plain.index("commodity") < plain.index("vendor")
    swapped = order("vendor,commodity,not-a-stack")
    assert swapped[:2] == ["vendor", "commodity"] and sorted(swapped) == sorted(plain)


def test_the_next_look_selects_exactly_the_open_cases():
    pat = re.compile(suite.case_pattern("OSUBenchmark %benchmark=osu_latency %buffers=host"))
    # ReFrame matches the display name without spaces; the block index comes first
    assert pat.search("OSUBenchmark%block_index=3%benchmark=osu_latency%buffers=host")
    assert not pat.search("OSUBenchmark%block_index=3%benchmark=osu_latency_mt%buffers=host")
    assert not pat.search("OSUBenchmark%block_index=3%benchmark=osu_bibw%buffers=host")
    assert not pat.search("OSUBenchmark%block_index=3%benchmark=osu_latency%buffers=cuda-device")
    plain = re.compile(suite.case_pattern("NetPIPE"))
    assert plain.search("NetPIPE%block_index=0") and plain.search("NetPIPE") and not plain.search("NetPIPEFake")


def test_progress_line_names_check_stack_block_and_time(capsys):
    p = suite.Progress(time.monotonic(), 10, look="look 1/3 (8 launches per stack)", tty=False)
    t: list = []
    p.feed("[\x1b[32m RUN      \x1b[0m] AMGBenchmark %block_index=2 %code=amg %size=ci /1a2b3c4d "
           "@testcluster:cpu+vendor\n", t)
    p.feed("[       OK ] ( 3/20) AMGBenchmark %block_index=2 %code=amg %size=ci /1a2b3c4d "
           "@testcluster:cpu+vendor\n", t)
    err = capsys.readouterr().err.splitlines()
    assert "AMGBenchmark %code=amg %size=ci [vendor], block 3 of at most 10; elapsed 0m00s" in err[0]
    assert "(3/20)" in err[1] and "left" in err[1]


def test_bench_provenance_is_read_and_cleaned(tmp_path):
    assert read_bench_provenance(tmp_path / "provenance.json")[1].startswith("no provenance.json")
    (tmp_path / "provenance.json").write_text(json.dumps({
        "hpcc": {"version": "1.5.0", "source": "debian hpcc_1.5.0.orig.tar.gz", "sha256": "files:" + "a" * 64,
                 "binaries": {"bin/hpcc": "b" * 64, "evil<script>": "c" * 64, "../etc/x": "e" * 64},
                 "inputs": {"share/hpcc/_hpccinf.txt": "d" * 64}},
        "../x": {"version": "1"}, "osu": "not an object"}))
    got, note = read_bench_provenance(tmp_path / "provenance.json")
    assert note is None and list(got) == ["hpcc"]
    assert got["hpcc"]["binaries"] == {"bin/hpcc": "b" * 64}
    assert got["hpcc"]["inputs"] == {"share/hpcc/_hpccinf.txt": "d" * 64}
    assert got["hpcc"]["sha256"] == "files:" + "a" * 64
    (tmp_path / "provenance.json").write_text("{")
    assert "not JSON" in read_bench_provenance(tmp_path / "provenance.json")[1]


DRIVER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import stackproof.acceptance.driver as acc
    from stackproof.acceptance import suite
    from stackproof.reframe import session
    log = Path(sys.argv[1])

    class FakeCluster:
        root = log.parent
        def up(self, settings):
            with open(log, "a") as fh: fh.write("up\\n")
            class St: node_names = ["n1"]; system_cpus = ""; app_cpus = "0-1"; settings = {"fake_gpus": 0}
            return St()
        def down(self, quiet=False):
            with open(log, "a") as fh: fh.write("down\\n")
            return {}
        def load_state(self):
            return self.up(None)
        def env(self):
            import os; return dict(os.environ)

    acc.Cluster = FakeCluster
    session.preflight = lambda target: []
    acc.build_mpi_hello = lambda mpi, out: Path("/bin/true")
    acc.mpi_smoke = lambda *a: "ok"
    acc.multinode_smoke = lambda *a: "ok"
    acc._node_checks = lambda *a, **k: "ok"
    # no srun here: a real one would wait for a controller that does not exist before it fails
    acc.measure_costs = lambda cluster, stack: {"submit_s": 0.1, "probe_s": 0.1}
    acc.profile_names = lambda: ["baseline"]
    acc.plan = lambda nt, p: None
    # the ReFrame session: a child that records the signal it gets, then exits like ReFrame does
    child = ("import signal, sys, time\\n"
             "def h(s, f):\\n"
             "    open(sys.argv[1], 'a').write('reframe got ' + signal.Signals(s).name + '\\\\n'); sys.exit(1)\\n"
             "signal.signal(signal.SIGINT, h)\\n"
             "print('[ RUN      ] FWQNoise %profile=baseline /12345678 @testcluster:cpu+commodity', flush=True)\\n"
             "time.sleep(300)\\n")
    suite.reframe_cmd = lambda *a, **k: [sys.executable, "-c", child, str(log)]
    sys.exit(acc.main(["--stack", "commodity", "--stack", "vendor"]))
""")


@pytest.mark.skipif(os.geteuid() != 0, reason="the driver refuses to run without root")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_stops_the_reframe_session_and_the_cluster(tmp_path, sig):
    log = tmp_path / "events.log"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = {**os.environ, "STACKPROOF_REPORT_DIR": str(tmp_path / "out")}
    proc = subprocess.Popen([sys.executable, str(script), str(log)], stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env)
    rfm_log = tmp_path / "out" / "reframe.log"
    # until the fake ReFrame session runs (its output, not the command); the steps before it are stubs,
    # but a loaded machine (make test's lanes) may take a while to start Python twice
    for _ in range(1800):
        if rfm_log.is_file() and re.search(r"^\[ RUN", rfm_log.read_text(), re.M):
            break
        if proc.poll() is not None:
            pytest.fail("the driver ended before the fake ReFrame session started: " + proc.communicate()[1][-2000:])
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the fake ReFrame session never started: " + proc.communicate()[1][-2000:])
    proc.send_signal(sig)                      # the driver alone, not its process group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err, err
    assert f"acceptance: interrupted ({signal.Signals(sig).name})" in err
    events = log.read_text().splitlines()
    assert "reframe got SIGINT" in events, events          # ReFrame is asked to stop: it cancels its jobs
    assert events[-1] == "down", events                     # and the test cluster is taken down


def test_options_of_the_looks():
    from stackproof.acceptance.driver import parse_args
    a = parse_args([])
    # looks after 8 and 16 launches per stack in blocks of 4 + 4 (A,B,B,A,A,B,B,A / B,A,A,B,B,A,A,B): the
    # first in every run (80 % of the 5 %), the second where the budget allows it
    assert a.design.looks == (8, 16) and a.design.blocks and a.block_launches == 4
    assert a.stack == ["commodity", "vendor"] and a.design.alphas == pytest.approx((0.04, 0.01))
    assert a.design.rule == "bh" and sum(a.design.alphas) == pytest.approx(0.05) and a.budget_s == 540
    # a size that is no whole pair of blocks (the laptop image's --repeat 3): blocks of one launch per stack
    a = parse_args(["--repeat", "3", "--budget-min", "4"])
    assert a.design.looks == (3,) and not a.design.blocks and a.block_launches == 1 and a.budget_s == 240
    a = parse_args(["--repeat", "8", "--paired"])
    assert a.design.looks == (8,) and a.design.plan[0][0] == "pairs"
    a = parse_args(["--min-pairs", "8", "--max-pairs", "16", "--looks", "2", "--unpaired", "--rule", "holm"])
    assert a.design.looks == (8, 16) and not a.design.paired and a.design.rule == "holm"
    a = parse_args(["--stack", "vendor", "--stack", "commodity", "--baseline", "commodity"])
    assert a.stack == ["commodity", "vendor"]            # the baseline first: stack A of every block
    a = parse_args(["--until-decided", "--budget", "1h30m"])
    assert a.design.open and a.design.step == 8 and a.budget_s == 5400 and a.until_decided
    assert parse_args(["--until-decided"]).budget_s == 1800
    for bad in (["--min-pairs", "3", "--max-pairs", "2"], ["--margin", "2"], ["--target-s", "0"],
                ["--min-pairs", "3", "--max-pairs", "5", "--looks", "2"], ["--paired", "--unpaired"],
                ["--rule", "fdr"]):   # 3 + 3 launches: 2/20 > 4 %
        with pytest.raises(SystemExit):
            parse_args(bad)


@pytest.mark.parametrize("args, message", [
    (["--budget", "soon"], "--budget 'soon': not a duration (write it like 30m, 1h, 1h30m or 90s)"),
    (["--budget", "30"], "--budget '30': not a duration"),
    (["--until-decided", "--stack", "commodity"], "--until-decided compares stacks: name at least two"),
    (["--until-decided", "--budget=-5m"], "--budget '-5m': not a duration"),
])
def test_bad_comparison_options_say_one_line_and_exit_2(args, message):
    cmd = [sys.executable, "-m", "stackproof.acceptance", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_progress_estimate_follows_the_session_pace_under_the_async_policy(capsys, monkeypatch):
    """ReFrame's asynchronous policy announces every case (RUN) before the first job ends: the time
    left comes from cases finished per second of the session, not from RUN-to-OK gaps."""
    clock = [100.0]
    monkeypatch.setattr(suite.time, "monotonic", lambda: clock[0])
    p = suite.Progress(100.0, 10, look="look 1/3 (8 launches per stack)", tty=False)
    t: list = []
    for k in range(20):
        p.feed(f"[ RUN      ] NetPIPE %block_index={k} /1a2b3c4d @testcluster:cpu+vendor\n", t)
    for i in range(1, 3):
        clock[0] += 2.0
        p.feed(f"[       OK ] ({i:2d}/20) NetPIPE %block_index={i} /1a2b3c4d @testcluster:cpu+vendor\n", t)
    last = capsys.readouterr().err.splitlines()[-1]
    assert "(2/20)" in last and "elapsed 0m04s, about 0m36s left" in last, last


def test_the_verdict_states_the_error_rate_of_the_whole_comparison(tmp_path):
    """The verdict's method line says what holds for the whole report (any false call of identical
    stacks at most 5 %), with the design the driver recorded, and links to the full method."""
    vals = {"commodity": [1.0, 1.1, 0.9, 1.05, 0.95], "vendor": [1.02, 1.08, 0.93, 1.0, 0.97]}
    docs = [_doc("s", vals, check) for check in ("AMGBenchmark", "SW4Benchmark", "HPCC", "NetPIPE", "Hypre")]
    merged = merge_reports(docs, record={"design": design().as_dict()})
    p = tmp_path / "m.json"
    p.write_text(json.dumps(merged))
    from stackproof.report import build, load_run
    data = build(load_run(str(p)), tmp_path / "r", "t")
    md = (tmp_path / "r" / "report.md").read_text()
    assert ("Benjamini-Hochberg over all metrics at each of looks after 5, 8, 10 launches per stack; identical "
            "stacks get any better or worse call at most 5 % of the time; each \"no difference\" call is controlled "
            "per metric. [How the calls are made]") in md
    assert ("looks after 5 launches per stack (alpha 4.00 %), 8 launches per stack (alpha 0.50 %), 10 launches per "
            "stack (alpha 0.50 %)") in md
    assert data["design"]["rule"] == "bh" and data["design"]["looks"] == [5, 8, 10]


def test_reframe_runs_below_the_jobs_priority():
    """ReFrame's sessions (and the squeue/sbatch it forks) run at nice 19, so its polling yields the
    host's cores to the benchmark ranks slurmd starts at normal priority."""
    rc, lines = session.run_session(["nice"], on_line=lambda line: None, nice=suite.HARNESS_NICE)
    assert rc == 0 and int(lines[0]) == min(19, os.nice(0) + suite.HARNESS_NICE)


# ---- the steps call stackproof's functions (no CLI subprocess); a failing step is one line -------------

def _driver_args(tmp_path):
    from stackproof.acceptance.driver import parse_args, plan_steps
    from stackproof.cluster import Cluster
    from stackproof.nodes.nodetype import from_host
    state = {"profiles": [], "node_docs": [], "costs": {}}
    steps = plan_steps(parse_args([]), tmp_path, from_host("local"), Cluster(tmp_path / "run"), tmp_path / "h", state)
    return steps, state


def test_per_profile_clusters_load_the_mpibind_plugin_and_the_proposal_gets_its_node_checks(tmp_path, monkeypatch):
    from stackproof.acceptance import driver
    monkeypatch.setenv("STACKPROOF_MPIBIND_PLUGIN", "/bin/true")
    ups = []
    monkeypatch.setattr(driver.session, "cluster_up", lambda p, daemon="", *, base=None, cluster=None:
                        ups.append((p, base.mpibind_plugin)) or pytest.skip("recorded"))
    steps, state = _driver_args(tmp_path)
    names = [n for n, _ in steps]
    hunt = max(i for i, n in enumerate(names) if "noise hunt" in n)
    assert names[hunt + 1] == "the hunt's proposal: cluster up and node checks"
    assert names[hunt + 2] == "results merged (reframe-report.json)"      # every ReFrame session's cases
    assert names[hunt + 3].startswith("Table IV")
    up = dict(steps)["baseline: cluster up"]
    with pytest.raises(pytest.skip.Exception):
        up()
    assert ups == [("baseline", "/bin/true")]
    # without a proposal (no tracefs, say) the step says so: nothing is claimed measured
    with pytest.raises(driver.NotMeasured, match="wrote no proposal"):
        dict(steps)["the hunt's proposal: cluster up and node checks"]()


def test_node_checks_without_the_plugin_fail_saying_why(tmp_path, monkeypatch):
    from stackproof.acceptance import driver

    class Cluster:
        def load_state(self):
            class St:
                settings = {"mpibind_plugin": None}
            return St()
    args = driver.parse_args([])
    nt = driver.from_host("local")
    state = {"no_mpibind": "the mpibind SPANK plugin is not built (make mpibind-build)"}
    (res,) = driver.run([("node checks", lambda: driver._node_checks(Cluster(), tmp_path, args, nt, "baseline",
                                                                      state))])
    assert not res.ok and res.detail == ("binding under baseline not measured: the mpibind SPANK plugin is not "
                                         "built (make mpibind-build)")


def test_report_projection_and_hunt_are_function_calls_with_one_line_failures(tmp_path, monkeypatch, capsys):
    from stackproof.acceptance import driver
    from stackproof.errors import StackproofError
    vals = {"commodity": [1.0, 1.1, 0.9, 1.05, 0.95], "vendor": [1.02, 1.08, 0.93, 1.0, 0.97]}
    (tmp_path / "reframe-report.json").write_text(json.dumps(merge_reports([_doc("s", vals)])))
    monkeypatch.setattr(driver.subprocess, "run", lambda *a, **k: pytest.fail(f"a subprocess: {a}"))
    detail = driver._report(tmp_path, "commodity")
    assert detail.startswith(f"{tmp_path / 'report.html'}: 10 test cases, stacks commodity, vendor (baseline commodity)")
    assert (tmp_path / "report.html").is_file() and (tmp_path / "report.md").is_file()
    (tmp_path / "reframe-report.json").write_text("{not json")
    bad = tmp_path / "empty"
    bad.mkdir()

    def not_measured():
        raise StackproofError("tracefs is not mounted at /x and this is not root")
    monkeypatch.setattr(driver, "_up_in", lambda *a: "up")
    monkeypatch.setattr(driver, "ensure_tracefs", not_measured)
    results = driver.run([("report", lambda: driver._report(tmp_path, "commodity")),
                          ("projection", lambda: driver._project(bad, "commodity")),
                          ("hunt", lambda: driver._hunt(None, tmp_path, "baseline"))])
    assert [r.status for r in results] == ["fail", "fail", "not measured"]
    assert all("\n" not in r.detail and "Traceback" not in r.detail for r in results)
    assert results[2].detail == "tracefs is not mounted at /x and this is not root"
    md = driver.summary_markdown(results, "header")
    assert "| hunt | **not measured** |" in md and "0 passed, 1 not measured, 2 failed" in md
    assert "Traceback" not in capsys.readouterr().err


def test_a_design_that_cannot_call_a_lone_headline_metric_is_refused(monkeypatch):
    """The driver passes the metrics the checks declare (reframe --describe of the checks tagged
    compare) to the design's lone-metric check: 5 + 5 launches cannot call one of 11 headline metrics
    among 27 alone; the default 8 + 8 can; a fixed --repeat is the smoke form and runs with a warning."""
    pytest.importorskip("reframe")
    from stackproof.acceptance.driver import parse_args, sizing
    target = session.target(suite.SYSTEM, ["commodity", "vendor"])
    total, head = suite.declared_metrics(target, sizing(2.0, False))
    assert total >= 27 and head >= 11, (total, head)       # SW4 and AMG2023 count where their stack lacks them
    monkeypatch.setattr(suite, "declared_metrics", lambda target, extra: (27, 11))
    assert suite.lone_metric_check(parse_args([]), target, []) is None
    with pytest.raises(InputError, match=r"5 launches per stack at the first look cannot call a lone headline "
                                         r"metric: .* at least \d+ launches per stack at the first look"):
        suite.lone_metric_check(parse_args(["--min-pairs", "5", "--max-pairs", "5"]), target, [])
    warning = suite.lone_metric_check(parse_args(["--repeat", "3"]), target, [])
    assert warning and warning.endswith("a smoke run (--repeat)")
