"""`reframe -r` as a ReFrame user runs it (issue 25): `stackproof cluster up [--nodes N]`,
`eval "$(stackproof cluster env)"`, then plain `reframe -C reframe-tests/config/site.py -c
reframe-tests/checks/system -c reframe-tests/checks/noise --system testcluster -r`, under ReFrame's
default asynchronous policy and under --exec-policy=serial, on 1 and 3 nodes, and the whole checks
tree (`-c reframe-tests/checks`: OSU, NetPIPE, HPCC, hypre, AMG, SW4 too) on 3 nodes under the
asynchronous policy: no failure, nothing left pending (the session ends well inside its time limit),
and every skip has one of the reasons the suite gives on purpose (another profile, no noise daemon, a
stack or tool not installed, a problem sized for real nodes on emulated ones).
One block of one launch per stack (STACKPROOF_BLOCK_LAUNCHES=1) keeps the session short. Skip reasons
are read from the JSON report (`skip_reason`), never from ReFrame's console."""
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import stackproof_cli
from stackproof import cluster as cl
from stackproof.paths import REPO

pytestmark = pytest.mark.live

# why a check may be skipped on the test cluster (each says what would make it run)
EXPECTED_SKIPS = re.compile(
    r"runs profile '[\w-]+'; this check measures|runs (no noise daemon|noise daemon \S+); this check measures|"
    r"not built \(looked in|is not installed here|provides no \w+|mpibind CLI not found|fwq-noise not found|"
    r"not measured: |size=paper is the per-node problem of real nodes")


# Debian's Open MPI 4.1.4 under Slurm 22.05's PMIx, on the emulated nodes: 1-3 % of 3-node launches lose
# one rank in MPI_Init (measured: 6 of 300, 8 of 324, 4 of 400 launches of mpi_identity; every core dump
# the same: the TCP BTL hands a peer's first MPI message, tag 0x41 = ob1 MATCH, to a callback ob1 has not
# registered yet, while this rank still waits in the modex fence; docs/acceptance.md "A known upstream
# race on emulated nodes"). ReFrame's own --max-retries=1 reruns such a case; the test checks each retried failure
# carries that signature (the crash text the check's sanity message quotes) and that no more than a
# few cases needed it.
RETRIES = 1
RETRIED_AT_MOST = 2
MPI_INIT_RACE = re.compile(r"Job step aborted|Segmentation fault|unexpectedly disconnected|MPI_INIT")

def cluster_env(run_dir):
    proc = stackproof_cli("cluster", "--run-dir", str(run_dir), "env", check=True)
    return dict(shlex.split(line)[1].split("=", 1) for line in proc.stdout.splitlines())


@pytest.mark.parametrize("nodes", [1, 3])
@pytest.mark.parametrize("policy", ["async", "serial"])
def test_plain_reframe_run_on_the_test_cluster(live_cluster, tmp_path, nodes, policy):
    live_cluster.up(cl.Settings(profile="baseline", nodes=nodes))
    env = dict(os.environ, **cluster_env(live_cluster.root), STACKPROOF_BLOCK_LAUNCHES="1",
               STACKPROOF_RFM_PREFIX=str(tmp_path / "prefix"), STACKPROOF_RESULTS_DB=str(tmp_path / "results.db"))
    for var in ("STACKPROOF_FAKE_GPUS", "STACKPROOF_NOISE_STACK", "STACKPROOF_BLOCK_STACKS", "STACKPROOF_BLOCKS"):
        env.pop(var, None)
    report = tmp_path / "report.json"
    whole = (nodes, policy) == (3, "async")       # the whole tree once: it adds ~2 min
    trees = ["reframe-tests/checks"] if whole else ["reframe-tests/checks/system", "reframe-tests/checks/noise"]
    cmd = [str(Path(sys.executable).with_name("reframe")), "-C", str(REPO / "reframe-tests/config/site.py"),
           *[a for t in trees for a in ("-c", str(REPO / t))],
           "--report-file", str(report), "-r", f"--max-retries={RETRIES}"] + \
        (["--exec-policy=serial"] if policy == "serial" else [])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=540)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    runs = json.loads(report.read_text())["runs"]
    final = {(c["display_name"], c["partition"], c["environ"]): c for run in runs for c in run["testcases"]}
    cases = list(final.values())
    failed = {f"{c['display_name']} {c['environ']}": (c.get("fail_reason") or "")[:300]
              for c in cases if c["result"] not in ("pass", "skip")}
    assert not failed, failed
    # a failure that passed on its retry must be the upstream start-up race, never anything else
    retried = {f"{c['display_name']} {c['environ']}": c.get("fail_reason") or ""
               for run in runs[:-1] for c in run["testcases"] if c["result"] not in ("pass", "skip")}
    assert len(retried) <= RETRIED_AT_MOST, retried
    assert all(MPI_INIT_RACE.search(reason) for reason in retried.values()), retried
    assert proc.returncode == 0, proc.stdout[-3000:]
    # every skip keeps its reason in the report (StackCheck.skip)
    reasons = {(c["display_name"], c["environ"]): c.get("skip_reason") for c in cases if c["result"] == "skip"}
    unexplained = {k: r for k, r in reasons.items() if not r or not EXPECTED_SKIPS.search(r)}
    assert not unexplained, unexplained
    passed = {c["display_name"].split(" /")[0] for c in cases if c["result"] == "pass"}
    # the baseline rows of the node checks and the stack checks ran (not all skipped)
    assert "FWQNoise %profile=baseline %signature=none" in passed, sorted(passed)
    assert "MPIHello" in passed and any(n.startswith("MemoryBandwidth") for n in passed), sorted(passed)
    assert all(c["partition"] == "cpu" for c in cases)       # no fake GPUs: no gpu partition
    hello = next(c for c in cases if c["display_name"].startswith("MPIHello") and c["result"] == "pass")
    assert hello["job_nodelist"], hello
    if whole:     # the microbenchmarks ran too (NetPIPE is part of every installed stack; OSU, HPCC... when built)
        assert "NetPIPE" in {n.split()[0] for n in passed}, sorted(passed)
