"""`stackproof report` on real ReFrame 4.10 output: a tiny two-stack suite (tests/data/report/rfm/, no MPI,
numbers set by the stack) run for real into its own results database; then the verdicts, identity,
skip and failure sections, `stackproof report build --compare` after one two-stack session and between two
sessions, and the `--performance-compare` recipe of docs/acceptance.md (issue 11 items 3-5)."""
import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from stackproof.cli import main
from stackproof.errors import StackproofError
from stackproof.report import build, load_run

HERE = Path(__file__).resolve().parent
RFM = HERE / "data" / "report" / "rfm"
REFRAME = Path(sys.executable).parent / "reframe"
DOC = HERE.parent / "docs" / "acceptance.md"

# slow: real ReFrame sessions (make test, not make check)
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not REFRAME.exists(), reason="reframe not in the venv (make venv)")]


def _env(tmp):
    return {**os.environ, "STACKPROOF_RESULTS_DB": str(tmp / "results.db"), "STACKPROOF_RFM_PREFIX": str(tmp / "rfm")}


def _reframe(tmp, *args):
    return subprocess.run([str(REFRAME), "-C", str(RFM / "config.py"), *args], capture_output=True, text=True,
                          env=_env(tmp), timeout=300)


def _stackproof(tmp, *args):
    """`stackproof report build --reframe-config RFM ARGS` in this process (the CLI's own code path)."""
    env = _env(tmp)
    old = {k: os.environ.get(k) for k in ("STACKPROOF_RESULTS_DB", "STACKPROOF_RFM_PREFIX")}
    os.environ.update({k: env[k] for k in old})
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            rc = main(["report", "build", "--reframe-config", str(RFM / "config.py"), *args])
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return subprocess.CompletedProcess(args, rc, "", err.getvalue())


def _doc_recipe(name):
    """The shell block of docs/acceptance.md that follows the marker `<!-- recipe: NAME -->`."""
    m = re.search(rf"<!-- recipe: {name} -->\s*```\w*\n(.*?)```", DOC.read_text(), re.S)
    assert m, f"docs/acceptance.md has no recipe {name}"
    return m.group(1)


def _run_recipe(tmp, name, **env):
    cmd = _doc_recipe(name).replace("reframe-tests/config/site.py", str(RFM / "config.py"))
    cmd = re.sub(r"^reframe ", shlex.quote(str(REFRAME)) + " ", cmd, flags=re.M)
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env={**_env(tmp), **env}, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line.split(",") for line in proc.stdout.strip().splitlines() if "," in line]
    head = rows[0]
    return [dict(zip(head, r)) for r in rows[1:]]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    """Session A: commodity and vendor in one ReFrame session. Session B: vendor alone, later."""
    tmp = tmp_path_factory.mktemp("rfm")
    out = {"tmp": tmp}
    a = _reframe(tmp, "-c", str(RFM / "checks.py"), "-r", "--session-extras", "stack=commodity+vendor",
                 "--report-file", str(tmp / "a.json"))
    assert (tmp / "a.json").exists(), a.stdout[-3000:] + a.stderr[-2000:]
    out["a"] = json.loads((tmp / "a.json").read_text())["session_info"]["uuid"]
    # the report right after the run, as `make acceptance` does: ReFrame's log (the skip messages) is current
    out["data_a"] = build(load_run(str(tmp / "a.json")), tmp / "rep", "real ReFrame")
    # after one two-stack session
    out["compare_one"] = _stackproof(tmp, "--compare", "-o", str(tmp / "cmp1"))
    out["pc_one"] = _run_recipe(tmp, "one-session", S=out["a"])
    b = _reframe(tmp, "-c", str(RFM / "checks.py"), "-r", "-p", "^vendor$", "-n", "NetPIPEFake",
                 "--session-extras", "stack=vendor", "--report-file", str(tmp / "b.json"))
    assert (tmp / "b.json").exists(), b.stdout[-3000:] + b.stderr[-2000:]
    out["b"] = json.loads((tmp / "b.json").read_text())["session_info"]["uuid"]
    return out


def test_verdicts_from_a_real_two_stack_session(sessions):
    tmp, data = sessions["tmp"], sessions["data_a"]
    assert data["stacks"] == ["commodity", "vendor"] and data["baseline"] == "commodity"
    v = {(r["check"], r["var"]): r for r in data["verdicts"]}
    lat, bw = v[("NetPIPEFake", "lat_8B")], v[("NetPIPEFake", "bw_1MiB")]
    assert lat["stacks"]["commodity"]["n"] == 5 and lat["stacks"]["commodity"]["median"] == pytest.approx(5.2)
    # vendor's latency is twice commodity's, its bandwidth half: both worse under the error control over
    # the whole report (5 + 5 launches: p = 2/252 against Benjamini-Hochberg's 2 x 5 % / 3 for two of 3)
    assert lat["vs"]["vendor"]["verdict"] == "worse" and bw["vs"]["vendor"]["verdict"] == "worse"
    assert lat["vs"]["vendor"]["lo"] > 1.85 and lat["vs"]["vendor"]["p"] == pytest.approx(2 / 252)
    # the same copy bandwidth for both
    assert v[("MemoryBandwidth", "copy_bw")]["vs"]["vendor"]["verdict"] in ("inconclusive", "no difference")
    md = (tmp / "rep" / "report.md").read_text()
    verdict = md.split("## Verdict")[1].split("\n## ")[0]
    # the metric with its declared direction, the verdict, the ratio with its interval, n, each stack's median
    assert ("| NetPIPEFake: lat_8B (us, lower is better) | worse | 1.96 [1.89, 2.04] 96.8 % | 5 + 5 "
            "| 5.2 [5–5.4] (5) | 10.2 [10–10.4] (5) |") in verdict
    # identity, skip reasons (the contract's skip_reason: ReFrame's JSON keeps none), full failure output
    assert "Intel(R) MPI Library 2021.17" in md and "Open MPI v4.1.4" in md and "/opt/vendor/lib/libmpi.so" in md
    assert "osu_latency not found for stack 'vendor': set OSU_BIN_DIR" in md
    failed = md.split("## Failed checks")[1]
    assert "sanity error: expected a result line in rfm_job.out" in failed
    assert "mpirun noticed that process rank 1 exited" in failed and "started" in failed
    # bandwidth against the memory copy measured in the same run; the NetPIPE curve from np.out
    assert "| NetPIPEFake | bw_1MiB | vendor | 4,502 | 20,000 | DRAM-sized copy | 22.5 % | vendor |" in md
    assert "NetPIPEFake (curve), latency per message size" in md and "| 1 MiB |" in md


def test_baseline_is_chosen_by_the_user(sessions):
    tmp = sessions["tmp"]
    data = build(load_run(str(tmp / "a.json")), tmp / "rep-v", "t", baseline="vendor")
    lat = next(r for r in data["verdicts"] if r["var"] == "lat_8B")
    assert lat["vs"]["commodity"]["verdict"] == "better" and lat["vs"]["commodity"]["hi"] < 0.55
    with pytest.raises(StackproofError, match="baseline 'mpich' is not a stack"):
        build(load_run(str(tmp / "a.json")), tmp / "rep-x", "t", baseline="mpich")


def test_a_stack_that_measured_nothing_is_not_measured(sessions, tmp_path):
    doc = json.loads((sessions["tmp"] / "a.json").read_text())
    for tc in doc["runs"][0]["testcases"]:
        if tc["environ"] == "vendor":
            tc.update(result="skip", perfvalues={}, fail_phase=None, fail_reason=None)
    (tmp_path / "s.json").write_text(json.dumps(doc))
    data = build(load_run(str(tmp_path / "s.json")), tmp_path / "rep", "t")
    assert all(r["vs"]["vendor"]["verdict"] == "not measured" and r["vs"]["vendor"]["reason"].startswith("vendor: skipped")
               for r in data["verdicts"]), data["verdicts"]
    md = (tmp_path / "rep" / "report.md").read_text()
    assert re.search(r"\| vendor \| 0 \| 0 \| 12 \| not measured \(all 12 checks skipped", md)


def test_compare_after_one_two_stack_session(sessions):
    proc = sessions["compare_one"]
    assert proc.returncode == 0, proc.stderr
    assert f"commodity+vendor from session {sessions['a']}" in proc.stderr
    md = (sessions["tmp"] / "cmp1" / "report.md").read_text()
    assert "| NetPIPEFake: lat_8B (us, lower is better)" in md and "| worse |" in md


def test_compare_between_two_sessions(sessions):
    tmp = sessions["tmp"]
    proc = _stackproof(tmp, "--compare", "--stack", "commodity", "--stack", "vendor", "-o", str(tmp / "cmp2"))
    assert proc.returncode == 0, proc.stderr
    assert f"commodity from session {sessions['a']}" in proc.stderr
    assert f"vendor from session {sessions['b']}" in proc.stderr
    data = json.loads((tmp / "cmp2" / "report.json").read_text())
    assert data["stacks"] == ["commodity", "vendor"] and len(data["sessions"]) == 2
    # the same stack in two sessions is never merged silently: vendor@A against vendor@B
    proc = _stackproof(tmp, "--compare", "--stack", "vendor", "-o", str(tmp / "cmp3"))
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp / "cmp3" / "report.json").read_text())
    assert data["stacks"] == [f"vendor@{sessions['a'][:8]}", f"vendor@{sessions['b'][:8]}"]
    assert any("ran in sessions" in n for n in data["notes"])
    proc = _stackproof(tmp, "--compare", "--stack", "mpich", "--stack", "vendor", "-o", str(tmp / "cmp4"))
    assert proc.returncode == 1 and "stack 'mpich': no stored session" in proc.stderr


def test_performance_compare_recipes_of_the_docs(sessions):
    one = {r["pvar"]: r for r in sessions["pc_one"]}
    assert float(one["lat_8B"]["pdiff (%)"]) == pytest.approx(96.15, abs=0.1)
    assert float(one["bw_1MiB"]["pdiff (%)"]) == pytest.approx(-50.0, abs=0.1)
    assert one["lat_8B"]["psamples (vendor)"] == "5"
    two = {r["pvar"]: r for r in _run_recipe(sessions["tmp"], "two-sessions", NEW=sessions["b"], OLD=sessions["a"])}
    assert float(two["lat_8B"]["pdiff (%)"]) == pytest.approx(96.15, abs=0.1)


def _block_report():
    """A two-stack block report as StackCheck writes it: one test case per block, under the first
    stack's environment, each launch with its stack, block and pair; ReFrame's figure per stack."""
    tcs = []
    for j, vals in enumerate(([1.0, 2.0, 2.2, 1.1], [2.1, 1.05, 0.95, 1.9])):
        order = ["commodity", "vendor", "vendor", "commodity"] if j % 2 == 0 else ["vendor", "commodity", "commodity",
                                                                                  "vendor"]
        launches = [{"stack": s, "block": j, "position": k, "pair": 2 * j + (k in (2, 3)), "dir": f"launch-0{k}-{s}",
                     "values": {"lat_8B": v, "lat_0B": 0.1}} for k, (s, v) in enumerate(zip(order, vals))]
        tcs.append({"name": f"NetPIPE %block_index={j}", "display_name": f"NetPIPE %block_index={j}",
                    "unique_name": f"NetPIPE_{j}", "system": "testcluster", "partition": "cpu", "environ": "commodity",
                    "stack": "commodity", "block_stacks": ["commodity", "vendor"], "block_index": j, "result": "pass",
                    "launches": launches, "perf_better": {"lat_*": "lower"}, "perf_headline": ["lat_8B"],
                    "perfvalues": {"testcluster:cpu:lat_8B@commodity": [1.0, 0, None, None, "us", "pass"],
                                   "testcluster:cpu:lat_8B@vendor": [2.0, 0, None, None, "us", "pass"]}})
    return {"session_info": {"uuid": "u", "stack": "commodity+vendor"}, "runs": [{"testcases": tcs}]}


def test_rows_from_blocks_keep_every_launch_with_its_pair_and_block():
    from stackproof.report.rows import cases_from_report, perf_rows
    _, cases = cases_from_report(_block_report(), None, "t")
    assert sorted((c.stack, c.repeat) for c in cases) == [("commodity", 0), ("commodity", 1), ("vendor", 0),
                                                            ("vendor", 1)]
    assert {c.name for c in cases} == {"NetPIPE"}
    ven = next(c for c in cases if c.stack == "vendor" and c.repeat == 0)
    assert ven.perf["lat_8B"]["value"] == 2.0 and len(ven.launches) == 2
    (row,) = perf_rows(cases)         # lat_0B is no declared figure (no performance variable): not a sample
    assert row.samples == {"commodity": [1.0, 1.1, 1.05, 0.95], "vendor": [2.0, 2.2, 2.1, 1.9]}
    assert row.repeats == {"commodity": [0, 1, 2, 3], "vendor": [0, 1, 2, 3]}
    assert row.blocks == {"commodity": [0, 0, 1, 1], "vendor": [0, 0, 1, 1]}
    assert row.headline and row.better == "lower"
    m = row.metric("commodity", "vendor")
    assert list(m.baseline_pairs) == [0, 1, 2, 3] and list(m.other_blocks) == [0, 0, 1, 1]


def test_each_stack_of_a_block_keeps_its_own_mpi_library():
    """A block case records every stack's identity (mpi_libraries); a case without it never lends the
    first stack's library to the other (the laptop acceptance once showed no vendor library at all)."""
    from stackproof.report.rows import cases_from_report
    doc = _block_report()
    first, second = doc["runs"][0]["testcases"]
    for tc in (first, second):
        tc["mpi_library"], tc["mpi_library_path"] = "Open MPI v4.1.4", "/usr/lib/libmpi.so.40"
    first["mpi_libraries"] = {"commodity": {"version": "Open MPI v4.1.4", "library": "/usr/lib/libmpi.so.40"},
                              "vendor": {"version": "Intel(R) MPI Library 2021.17", "library": "/v/libmpi.so.12"}}
    _, cases = cases_from_report(doc, None, "t")
    got = {(c.stack, c.repeat): c.mpi_library for c in cases}
    assert got == {("commodity", 0): "Open MPI v4.1.4", ("vendor", 0): "Intel(R) MPI Library 2021.17",
                   ("commodity", 1): "Open MPI v4.1.4", ("vendor", 1): ""}


def test_a_report_with_broken_launches_is_refused_in_one_line(tmp_path):
    from stackproof.report.rows import load_run
    doc = _block_report()
    doc["runs"][0]["testcases"][0]["launches"][1]["pair"] = "seven"
    (tmp_path / "r.json").write_text(json.dumps(doc))
    with pytest.raises(StackproofError, match=r"launches\[1\]\.pair is not a non-negative integer"):
        load_run(str(tmp_path / "r.json"))
    doc["runs"][0]["testcases"][0]["launches"][1] = {"stack": "vendor", "values": {"lat_8B": "NaN"}}
    (tmp_path / "r.json").write_text(json.dumps(doc))
    with pytest.raises(StackproofError, match="is not a finite number"):
        load_run(str(tmp_path / "r.json"))
