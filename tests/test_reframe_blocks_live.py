"""Blocks of launches on the live test cluster, A/A (issue 43): commodity against an identical copy of
itself (reframe-tests/stacks/experiments/commodity-copy.yaml) in four blocks of 4 + 4 launches of
OSU latency and NetPIPE, as plain `reframe -r` with STACKPROOF_BLOCK_STACKS runs them.

What is asserted is a signature noise cannot fake: every launch ran as its own process in its own
directory, in the block's order (A,B,B,A,A,B,B,A then B,A,A,B,B,A,A,B: their start times), each stack's
identity probe saw Open MPI, ReFrame judged each stack's median; and inside a job the two labels are
exchangeable: the block-stratified exact test of the label (comparison.block_test, a job's own level
cancels; an even number of blocks, so a launch's position falls on both labels alike) does not
reject identical stacks at 0.1 % for any of the three metrics. Under
exchangeability that fails at most 0.1 % of the time per metric whatever the host's noise; a launch
that ran with the other stack's environment, a position that always favoured one label, or a block
launcher that shared output files would show as a rejection (docs/performance.md, "Blocks of
launches": the measured A/A components)."""
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import stackproof_cli
from stackproof import cluster as cl
from stackproof.comparison import block_test
from stackproof.paths import REPO

pytestmark = pytest.mark.live

LEVEL = 0.001         # the exact test's false rejection rate per metric when the labels are exchangeable
STACKS = ["commodity", "commodity-copy"]


def osu_built() -> bool:
    """OSU is built only where its source was reachable (a mirror: CI has none); NetPIPE always is."""
    from stackproof.stacks import StackError, load_stack
    try:
        return load_stack(STACKS[0]).benchmark("osu").exists()
    except StackError:
        return False


# the metrics of the exchangeability test: NetPIPE's everywhere, OSU latency's where OSU is built
METRICS = ([("OSUBenchmark", "lat_8B")] if osu_built() else []) + [("NetPIPE", "lat_8B"), ("NetPIPE", "bw_1MiB")]


def cluster_env(run_dir):
    proc = stackproof_cli("cluster", "--run-dir", str(run_dir), "env", check=True)
    return dict(shlex.split(line)[1].split("=", 1) for line in proc.stdout.splitlines())


@pytest.fixture(scope="module")
def aa_blocks(live_cluster, tmp_path_factory):
    live_cluster.up(cl.Settings(profile="baseline"))
    tmp = tmp_path_factory.mktemp("aa-blocks")
    env = dict(os.environ, **cluster_env(live_cluster.root), STACKPROOF_RFM_PREFIX=str(tmp / "prefix"),
               STACKPROOF_RESULTS_DB=str(tmp / "results.db"),
               STACKPROOF_STACKS_DIR=str(REPO / "reframe-tests/stacks/experiments"),
               STACKPROOF_BLOCK_STACKS=",".join(STACKS), STACKPROOF_BLOCKS="4", STACKPROOF_FIRST_BLOCK="0",
               STACKPROOF_BLOCK_LAUNCHES="4", STACKPROOF_NOISE_STACK=STACKS[0])
    env.pop("STACKPROOF_FAKE_GPUS", None)
    report = tmp / "report.json"
    cmd = [str(Path(sys.executable).with_name("reframe")), "-C", str(REPO / "reframe-tests/config/site.py"),
           "-c", str(REPO / "reframe-tests/checks/microbenchmarks"), "--system", "testcluster:cpu",
           "-p", f"^({'|'.join(STACKS)})$",
           "-n", "^(NetPIPE|OSUBenchmark.*osu_latency.*host)" if osu_built() else "^NetPIPE",
           "-S", "OSUBenchmark.time_target=0.5", "-S", "OSUBenchmark.full_sweep=false",
           "--report-file", str(report), "-r"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=540)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    cases = [tc for run in json.loads(report.read_text())["runs"] for tc in run["testcases"]]
    return proc, cases


def test_every_launch_ran_as_its_stack_in_the_blocks_order(aa_blocks):
    proc, cases = aa_blocks
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert len(cases) == (8 if osu_built() else 4) and all(c["result"] == "pass" for c in cases), \
        [(c["display_name"], c.get("fail_reason")) for c in cases]
    a, b = STACKS
    for c in cases:
        assert c["environ"] == a and c["block_stacks"] == STACKS
        launches = sorted(c["launches"], key=lambda ln: ln["position"])
        want = [a, b, b, a, a, b, b, a] if c["block_index"] % 2 == 0 else [b, a, a, b, b, a, a, b]
        assert [ln["stack"] for ln in launches] == want
        assert [ln["pair"] for ln in launches] == [4 * c["block_index"] + k // 2 for k in range(8)]
        # one after the other, each its own process in its own directory
        assert all(x["end"] <= y["start"] for x, y in zip(launches, launches[1:]))
        assert len({ln["dir"] for ln in launches}) == 8 and all(ln["rc"] == 0 for ln in launches)
        assert all(os.path.isfile(os.path.join(c["outputdir"], ln["dir"], "stdout")) for ln in launches)
        # ReFrame judges each stack's median of the block
        names = {k.split(":")[-1] for k in c["perfvalues"]}
        assert {f"lat_8B@{a}", f"lat_8B@{b}"} <= names
        assert c["mpi_library"].startswith("Open MPI v4.1")
        assert set(c["mpi_libraries"]) == set(STACKS)      # each stack's identity recorded apart
        assert all(v["version"].startswith("Open MPI v4.1") for v in c["mpi_libraries"].values())
        for st in STACKS:       # each stack's own identity probe ran in the job
            assert "identity rank=0" in open(os.path.join(c["outputdir"], f"setup-{st}", "identity.out")).read()


def test_the_labels_are_exchangeable_inside_a_job(aa_blocks):
    _, cases = aa_blocks
    seen = 0
    for check, var in METRICS:
        vals = {s: [] for s in STACKS}
        blocks = {s: [] for s in STACKS}
        for c in cases:
            if c["display_name"].startswith(check):
                for ln in c["launches"]:
                    vals[ln["stack"]].append(ln["values"][var])
                    blocks[ln["stack"]].append(ln["block"])
        assert len(vals[STACKS[0]]) == len(vals[STACKS[1]]) == 16
        t = block_test(vals[STACKS[0]], vals[STACKS[1]], blocks[STACKS[0]], blocks[STACKS[1]])
        assert t.p > LEVEL, (check, var, t.p, t.ratio, vals)
        seen += 1
    assert seen == len(METRICS)
