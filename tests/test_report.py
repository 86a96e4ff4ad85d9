"""`stackproof report`: two stacks from ReFrame run reports -> HTML + Markdown (issue 5, item 3; issue 11)."""
import json

import numpy as np
import pytest

from conftest import stackproof_cli
from stackproof import noise
from stackproof.benchparse import parse_file
from stackproof.errors import StackproofError
from stackproof.report import build, load_run


def _tc(stack, name, perf, result="pass", outputdir=None, reason=None):
    # the message-size checks declare their curve and its headline points, as OSU's and NetPIPE's do
    roles = {"perf_curve": ["lat_*", "bw_*"], "perf_headline": ["lat_8B", "bw_1MiB"]} \
        if name.startswith(("OSU", "NetPIPE")) else {}
    return {"name": name, "display_name": name, "unique_name": name.replace(" ", "_") + stack,
            "system": "site", "partition": "cpu", "environ": stack, "result": result,
            "fail_phase": None if result == "pass" else "sanity", "fail_reason": reason,
            "outputdir": outputdir, **roles,
            "perfvalues": {f"site:cpu:{k}": [v, 0, None, None, u, "pass"] for k, (v, u) in perf.items()}}


def _fwq_trace(path, detour_every=None):
    """A 2-rank synthetic FWQ trace: 5 us quanta, rank 1 with a 2.5 ms detour every `detour_every` samples."""
    d = np.full((2, 20000), 5.0)
    if detour_every:
        d[1, ::detour_every] += 2500.0
    noise.write(path, d)
    return path


@pytest.fixture
def two_stacks(tmp_path, shared):
    fx = shared / "fixtures"
    cases = {"commodity": [], "vendor": []}
    for stack, version, scale in (("commodity", "7.2", 1.0), ("vendor", "5.7", 1.3)):
        for bench in ("osu_latency", "osu_allreduce"):
            res = parse_file("osu", fx / "osu" / version / f"{bench}.out")
            prefix = "bw" if res.metric == "bandwidth" else "lat"
            perf = {f"{prefix}_{size}B": (v * scale, res.unit) for size, v in res.values().items()}
            cases[stack].append(_tc(stack, f"OSUBenchmark %benchmark={bench} %buffers=host", perf))
        amg = parse_file("amg", fx / "amg" / "amg2023-n20-P211-p1.out")
        cases[stack].append(_tc(stack, "AMGBenchmark %code=amg2023 %size=ci", {"fom": (amg.fom * scale, "nnz/s")}))
        for prof, every in (("baseline", 500), ("corespec", None)):
            out = tmp_path / stack / prof
            out.mkdir(parents=True)
            _fwq_trace(out / "fwq.dat", every)
            std = 5.0 if every else 0.1
            cases[stack].append(_tc(stack, f"FWQNoise %profile={prof} %signature=none",
                                    {"min": (5.0, "us"), "mean": (6.0, "us"), "max": (2505.0, "us"),
                                     "std": (std * scale, "us"), "noise_fraction": (0.01, "")},
                                    outputdir=str(out)))
    cases["vendor"].append(_tc("vendor", "CoreSpecCheck %profile=corespec", {}, result="fail",
                               reason="a job step got system CPUs 0"))
    files = []
    for stack, tcs in cases.items():
        f = tmp_path / f"{stack}.json"
        f.write_text(json.dumps({"session_info": {"uuid": stack}, "runs": [{"testcases": tcs}]}))
        files.append(f)
    return files


def test_report_compares_two_stacks(tmp_path, two_stacks):
    cases = [c for f in two_stacks for c in load_run(str(f))]
    data = build(cases, tmp_path / "out", "test report")
    assert data["stacks"] == ["commodity", "vendor"]
    # Table IV rows with ratios to baseline
    rows = {(r["stack"], r["profile"]): r for r in data["noise"]}
    assert rows[("commodity", "corespec")]["std_ratio"] == pytest.approx(0.1 / 5.0)
    md = (tmp_path / "out" / "report.md").read_text()
    # Table IV opens the node checks: the paper's columns, the ratio to baseline and one sentence per row
    node = md.split("\n## Node checks")[1].split("\n## ")[0]
    assert ("| no daemon | corespec | 0-1 (baseline: its most affected core) | 1 | 0.0050 | 0.0060 | 2.505 | 0.0001 | "
            "1.00 | 0.0050 | 0.02 | no verdict |") in node
    assert "- corespec, no daemon: no verdict on std (1 + 1 launches cannot reach" in node
    # OSU: both stacks, % difference (vendor 30 % slower on the same sizes would need same versions;
    # here: a plot per benchmark and the table)
    assert "osu_latency" in md and "osu_allreduce" in md
    assert "vendor / commodity [interval] level" in md
    assert "[How the calls are made](#how-the-calls-are-made)" in md and "## How the calls are made" in md
    # the verdict is the report's first section
    assert md.split("\n## ")[1].startswith("Verdict")
    amg_line = next(l for l in md.splitlines() if l.startswith("| AMG "))
    assert "| 1.3 [no interval at " in amg_line   # one run per stack: the ratio is shown, no verdict is called
    assert "no verdict: 1 + 1 launches cannot reach the " in amg_line
    # failures are named with their reason
    assert "a job step got system CPUs 0" in md
    html = (tmp_path / "out" / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 4          # self-contained: plots embedded
    assert "src='img/" not in html and "http" not in html.split("<body>")[1]
    assert (tmp_path / "out" / "img").is_dir() and list((tmp_path / "out" / "img").glob("osu-*.png"))


def test_report_cli_and_bad_input(tmp_path, two_stacks):
    proc = stackproof_cli("report", "build", "--run", f"c={two_stacks[0]}",
                           "--run", f"v={two_stacks[1]}", "-o", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    assert "| c |" in (tmp_path / "r" / "report.md").read_text()
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a report"}')
    proc = stackproof_cli("report", "build", "--run", str(bad))
    assert proc.returncode == 2 and "not a ReFrame run report" in proc.stderr
    with pytest.raises(StackproofError, match="not found"):
        load_run(str(tmp_path / "missing.json"))


@pytest.mark.parametrize("args,message", [
    (["--baseline", "mpich"], "baseline 'mpich' is not a stack of these results (stacks: c, v)"),
    (["--stack", "c"], "--stack selects stacks for --compare only"),
    (["--compare"], "--compare finds the sessions itself"),
])
def test_report_cli_bad_options(tmp_path, two_stacks, args, message):
    proc = stackproof_cli("report", "build", "--run", f"c={two_stacks[0]}",
                           "--run", f"v={two_stacks[1]}", "-o", str(tmp_path / "r"), *args)
    assert proc.returncode == 1 and message in proc.stderr and "Traceback" not in proc.stderr


def test_noise_at_scale_section_says_why_the_linear_slowdown_falls(tmp_path):
    """Issue 26: each figure of the noise-at-scale section says what it shows and why."""
    from types import SimpleNamespace

    from stackproof.report.build import noise_at_scale_section
    ctx = SimpleNamespace(img=tmp_path / "img")
    assert noise_at_scale_section(ctx) is None
    proc = stackproof_cli("noise", "project", "--signature", "10Hz:2.5ms",
                           "--nodes", "1,16", "--iterations", "20", "--collective", "allreduce:binomial,linear",
                           "-o", str(tmp_path / "project"))
    assert proc.returncode == 0, proc.stderr
    sec = noise_at_scale_section(ctx)
    assert sec.text[0].startswith("Why the linear allreduce's relative slowdown falls")
    assert sec.figures and all("linear curve falls" in cap for cap, _ in sec.figures)


def test_the_verdict_opens_with_one_sentence_of_counts():
    from stackproof.report.verdict import in_words
    rows = [{"vs": {"vendor": {"verdict": v}}} for v in
            ("better", "worse", "worse", "no difference", "inconclusive", "not measured")]
    assert in_words(rows, ["vendor"], "commodity") == (
        "vendor against commodity, 6 metrics: 2 worse, 1 better, 1 no difference, 1 inconclusive, 1 not measured.")
    rows[0]["headline"], rows[1]["headline"] = True, True
    for r in rows[2:]:
        r["headline"] = False
    assert in_words(rows, ["vendor"], "commodity") == (
        "vendor against commodity: 2 headline metrics: 1 worse, 1 better; 4 secondary: 1 worse, 1 no difference, "
        "1 inconclusive, 1 not measured.")


def test_a_metric_keeps_the_call_of_the_first_look_that_decided_it():
    """Sequential design: a metric decided after 5 pairs is not reopened by launches its check made
    later for another metric (looks 5, 8, 10); an undecided one is judged on every pair up to the last look."""
    from stackproof.comparison import Design, Metric, sequential_calls
    design = Design(looks=(5, 8, 10), alpha=0.05, margin=0.05)
    base = [1.00, 1.01, 0.99, 1.00, 1.02] + [1.0, 3.0, 0.3, 1.0, 2.0]      # pairs 6-10: wild
    other = [1.50, 1.52, 1.49, 1.51, 1.50] + [1.0, 0.3, 3.0, 1.0, 0.5]
    idx = list(range(10))
    c, = sequential_calls([Metric(base, other, idx, idx, "lower")], design)
    assert c.verdict == "worse" and c.n == (5, 5) and c.look == 1
    c, = sequential_calls([Metric(base[5:] * 2, other[5:] * 2, idx, idx, "lower")], design)
    assert c.verdict == "inconclusive" and c.n == (10, 10) and c.look == 3
    c, = sequential_calls([Metric(base, other, [None] * 10, [None] * 10, "lower")], design)
    assert c.n == (10, 10)                                                # no repeat index: all launches


def test_pairs_are_judged_by_their_repeat_index():
    """Pairs matched by repeat index (launched one after the other): with slow spells of the host on
    both launches of a pair, the pairs see a 10 % difference that two samples of the same launches
    cannot; a missing launch drops its pair (the first look judges the 6 pairs left)."""
    from stackproof.comparison import Design, Metric, sequential_calls
    slow = [1, 1, 3, 3, 3, 1, 1, 1, 2.5, 1]                          # the host's slow spells, both stacks
    base = [5.0 * f for f in slow]
    other = [5.5 * f * (1 + 0.002 * i) for i, f in enumerate(slow)]   # 10 % slower in every pair
    idx = list(range(10))
    d = Design(looks=(7, 10), paired=True)
    c, = sequential_calls([Metric(base, other, idx, idx, "lower")], d)
    assert c.verdict == "worse" and c.paired and c.n == (7, 7) and c.p == pytest.approx(2 / 2 ** 7)
    assert 1.09 < c.ratio < 1.12 and 1.0 < c.lo
    c2, = sequential_calls([Metric(base, other, idx, idx, "lower")], Design(looks=(7, 10)))
    assert c2.verdict == "inconclusive"
    gap, = sequential_calls([Metric(base, other[:3] + other[4:], idx, [0, 1, 2, 4, 5, 6, 7, 8, 9], "lower")], d)
    assert gap.verdict == "worse" and gap.n == (6, 6) and gap.look == 1      # 6 pairs reach 2/64 <= 4 %


def test_the_first_screen_is_the_answer(tmp_path):
    """One sentence of counts, the headline table with the decided rows first (worse, better, no
    difference, then inconclusive, which says what it could have seen), the method in one line linking
    to its own section, the secondary metrics after; report.json marks each row headline or not."""
    vals = {"worse": ([1.0, 1.01, 0.99, 1.02, 1.0], [2.0, 2.02, 1.98, 2.01, 2.03]),
            "better": ([1.0, 1.01, 0.99, 1.02, 1.0], [0.5, 0.51, 0.49, 0.5, 0.52]),
            "same": ([1.0, 1.001, 0.999, 1.002, 1.0], [1.001, 1.0, 1.002, 0.999, 1.001]),
            "noisy": ([1.0, 1.5, 0.7, 1.2, 0.9], [1.1, 0.6, 1.4, 0.8, 1.3])}
    tcs = []
    for stack, k in (("commodity", 0), ("vendor", 1)):
        for i in range(5):
            tcs.append({"name": f"HPCC %repeat_index={i}", "display_name": f"HPCC %repeat_index={i}",
                        "system": "s", "partition": "p", "environ": stack, "stack": stack, "result": "pass",
                        "perf_better": {"noisy": "lower", "same": "lower", "worse": "lower", "better": "lower",
                                        "extra": "lower"},
                        "perf_headline": ["noisy", "same", "worse", "better"],
                        "perfvalues": {**{f"s:p:{v}": [x[k][i], 0, None, None, "s"] for v, x in vals.items()},
                                       "s:p:extra": [vals["noisy"][k][i], 0, None, None, "s"]}})
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"session_info": {"uuid": "u", "stack": "commodity+vendor"}, "runs": [{"testcases": tcs}]}))
    data = build(load_run(str(p)), tmp_path / "out", "t")
    md = (tmp_path / "out" / "report.md").read_text()
    verdict = md.split("## Verdict")[1].split("\n## ")[0]
    lines = [l for l in verdict.splitlines() if l.startswith("| HPCC")]
    assert [l.split("|")[1].split(":")[1].split()[0] for l in lines] == ["worse", "better", "same", "noisy", "extra"]
    assert "| worse |" in lines[0] and "| better |" in lines[1] and "| no difference |" in lines[2]
    assert "inconclusive: differences from " in lines[3] and " not excluded (" in lines[3]
    first = verdict.strip().splitlines()
    assert first[0].startswith("vendor against commodity: 4 headline metrics: 1 worse, 1 better, 1 no difference, "
                               "1 inconclusive; 1 secondary: 1 inconclusive.")
    assert first[1].startswith("Method: ") and first[1].endswith("[How the calls are made](#how-the-calls-are-made)")
    assert verdict.index("Headline metrics") < verdict.index("Secondary metrics")
    assert {r["var"]: r["headline"] for r in data["verdicts"]} == {"worse": True, "better": True, "same": True,
                                                                 "noisy": True, "extra": False}


def test_no_row_exceeds_the_copy_it_is_compared_with(tmp_path):
    """Issue 34 (e): an on-node bandwidth is set against a memory copy of its own size (a 1 MiB message
    against the cache-resident 1 MiB copy), never against a copy it cannot meet; with the numbers of this host's vendor run (a 1 MiB bibw of 23 GB/s, above the
    21 GB/s DRAM copy and far below the 78 GB/s cache-resident one) no row reaches 100 %, and nothing in
    the report is called a limit."""
    perf = {"MemoryBandwidth": {"copy_bw": (20_595.0, "MB/s"), "copy_bw_1MiB": (77_609.0, "MB/s")},
            "OSUBenchmark %benchmark=osu_bibw %buffers=host": {"bw_1048576B": (23_031.0, "MB/s")},
            "NetPIPE": {"bw_1MiB": (22_446.0, "MB/s"), "lat_8B": (2.4, "us")}}
    better = {"MemoryBandwidth": {"copy_bw*": "higher"}, "NetPIPE": {"lat_*": "lower", "bw_*": "higher"},
              "OSUBenchmark %benchmark=osu_bibw %buffers=host": {"bw_*": "higher"}}
    md, data = _bandwidth_report(tmp_path / "both", perf, better)
    section = md.split("## Bandwidth against a memory copy of the same size")[1].split("\n## ")[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| benchmark")]
    assert len(rows) == 4, section                  # 2 bandwidths x 2 stacks
    for case, var, stack, median, copy, which, fraction, _ in rows:
        assert which == "1 MiB copy (in cache)", (var, which)
        value, bound = (float(x.replace(",", "")) for x in (median, copy))
        assert value < bound and float(fraction.rstrip(" %")) < 100, (case, var, stack, median, copy, fraction)
    assert "limit" not in md.lower() and "limit" not in (tmp_path / "both" / "report" / "report.html").read_text().lower()
    assert data["copy_bw"]["vendor@s:p"] == {"dram": pytest.approx(20_595.0 * 1.02),
                                             "1048576": pytest.approx(77_609.0 * 1.02)}
    # a MemoryBandwidth that measured only the DRAM-sized copy (a site's older check): the 1 MiB
    # messages beat it, and their rows say that copy is no bound at their size
    perf["MemoryBandwidth"] = {"copy_bw": (20_595.0, "MB/s")}
    md, _ = _bandwidth_report(tmp_path / "dram", perf, better)
    section = md.split("## Bandwidth against a memory copy of the same size")[1].split("\n## ")[0]
    over = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| benchmark")]
    assert len(over) == 4 and all("DRAM-sized copy (not a bound at this size" in line for line in over), section


def _bandwidth_report(out, perf, better):
    tcs = [{"name": f"{check} %repeat_index={i}", "display_name": f"{check} %repeat_index={i}", "system": "s",
            "partition": "p", "environ": stack, "stack": stack, "result": "pass", "perf_better": better[check],
            "perfvalues": {f"s:p:{var}": [v * (1 + 0.01 * i) * (0.9 if stack == "commodity" else 1.0), 0, None, None, u]
                           for var, (v, u) in vars_.items()}}
           for stack in ("commodity", "vendor") for i in range(5) for check, vars_ in perf.items()]
    out.mkdir(parents=True)
    p = out / "r.json"
    p.write_text(json.dumps({"session_info": {"uuid": "u", "stack": "commodity+vendor"}, "runs": [{"testcases": tcs}]}))
    data = build(load_run(str(p)), out / "report", "t")
    return (out / "report" / "report.md").read_text(), data
