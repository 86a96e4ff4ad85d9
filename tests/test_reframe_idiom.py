"""The checks read as ReFrame's own (issue 44): `reframe --describe` of the whole tree lists, for every
check that declares directions (`perf_better`), its performance variables, each one a direction
covers and the headline ones among them; sanity is the base's @sanity_function; no check raises
SkipTestError itself (every skip goes through StackCheck.skip, so its reason reaches the JSON)."""
import fnmatch
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stackproof.paths import REPO

pytest.importorskip("reframe")


def _describe(tmp_path, *args, **env):
    run_env = dict(os.environ, STACKPROOF_RFM_PREFIX=str(tmp_path / "prefix"), STACKPROOF_RESULTS_DB=str(tmp_path / "r.db"),
                   **env)
    for var in ("RFM_SYSTEM", "STACKPROOF_BLOCK_STACKS", "STACKPROOF_BLOCKS", "STACKPROOF_FIRST_BLOCK"):
        if var not in env:
            run_env.pop(var, None)
    proc = subprocess.run([str(Path(sys.executable).with_name("reframe")), "-C", str(REPO / "reframe-tests/config/site.py"),
                           "-c", str(REPO / "reframe-tests/checks"), "-R", "--system", "local", "--describe", *args],
                          env=run_env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_describe_lists_performance_variables_of_every_performance_check(tmp_path):
    described = _describe(tmp_path)
    checks = [d for d in described if d.get("perf_better")]
    # NetPIPE, OSU x4, AMG x2, HPCC, hypre, SW4, MemoryBandwidth, FWQ x3 (GPU health needs a GPU partition)
    assert len(checks) >= 14, [d["display_name"] for d in described]
    for d in checks:
        names = d["perf_variables"]
        assert names, d["display_name"]
        for var in names:
            assert any(fnmatch.fnmatchcase(var, pat) for pat in d["perf_better"]), (d["display_name"], var)
        if d["perf_headline"]:      # one declaration per check: OSU's names latency and bandwidth heads
            assert any(fnmatch.fnmatchcase(var, head) for var in names for head in d["perf_headline"]), \
                (d["display_name"], d["perf_headline"], names)
        assert d["pipeline_hooks"].get("pre_performance") == ["record_launches"], d["pipeline_hooks"]
    # the checks that compare stacks are those that run in blocks, tagged so (acceptance selects by it)
    assert {d["@class"] for d in described if "compare" in d["tags"]} == \
        {d["@class"] for d in described if "block_index" in d}
    assert {d["@class"] for d in described if "compare" in d["tags"]} >= {"NetPIPE", "OSUBenchmark", "HPCCBenchmark",
                                                                            "AMGBenchmark", "HypreBoomerAMG"}
    osu = next(d for d in checks if "osu_bibw" in d["display_name"])
    assert "bw_1MiB" in osu["perf_variables"] and "bw_1048576B" not in osu["perf_variables"]


def test_describe_of_a_two_stack_block_names_each_stacks_variables(tmp_path):
    described = _describe(tmp_path, "-n", "^NetPIPE", STACKPROOF_BLOCK_STACKS="commodity,vendor")
    assert described and all(set(d["perf_variables"]) == {"lat_8B@commodity", "bw_1MiB@commodity", "lat_8B@vendor",
                                                          "bw_1MiB@vendor"} for d in described)
    assert all(d["valid_prog_environs"] == ["+mpi +stack-commodity"] for d in described)


def test_no_skip_outside_the_check_base():
    """Every skip goes through StackCheck.skip (the reason is kept in the JSON report)."""
    offenders = []
    for root in (REPO / "src", REPO / "reframe-tests"):
        for path in root.rglob("*.py"):
            if re.search(r"raise\s+SkipTestError|SkipTestError\(", path.read_text()):
                offenders.append(str(path.relative_to(REPO)))
    assert offenders == []
