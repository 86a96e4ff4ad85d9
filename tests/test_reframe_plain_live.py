"""`reframe -r` as a ReFrame user runs it (issue 25): `stackproof cluster up [--nodes N]`,
`eval "$(stackproof cluster env)"`, then plain `reframe -C reframe-tests/config/site.py -c DIR
--system testcluster -r`: no failure, nothing left pending (the session ends well inside its time
limit), and every skip has one of the reasons the suite gives on purpose (another profile, no noise
daemon, a stack or tool not installed, a problem sized for real nodes on emulated ones).

What this file proves, and why it runs little (issue 44: one acceptance-like run in CI): the plain
path -- ReFrame started by hand, the site configuration reading the running cluster through `cluster
env`, every installed stack's environment -- under ReFrame's default asynchronous policy on 3 nodes
(MPI hello and the identity probe, memory bandwidth, the node checks, FWQ's rows of the running
profile, NetPIPE between nodes: the across-nodes references) and under --exec-policy=serial on 1 node
(MPI hello on every stack). The rest of the tree runs elsewhere, for real or as job scripts:
  - every benchmark check for real, both stacks, the node checks under every profile and Table IV:
    the laptop image's acceptance (tests/test_images_laptop_live.py, images-test in CI);
  - three stacks through reframe-tests/run.py on this cluster: tests/test_stacks_live.py; HPCC and
    hypre run and verify themselves: tests/test_stacks_apps_live.py;
  - the whole tree's job scripts on the test cluster, both stacks (launcher, sizes, binding):
    tests/test_reframe_suite.py's dry run; every check's parsers on recorded output there too.
One block of one launch per stack (STACKPROOF_BLOCK_LAUNCHES=1) keeps each session short. Skip reasons
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
from stackproof.reframe.identity import identity_rows

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


# (nodes, policy) -> the checks run: the system and noise trees and NetPIPE under the default policy on
# 3 nodes; MPI hello on every stack under the serial policy on 1 node
RUNS = {(3, "async"): ["-c", "reframe-tests/checks/system", "-c", "reframe-tests/checks/noise",
                       "-c", "reframe-tests/checks/microbenchmarks/netpipe.py"],
        (1, "serial"): ["-c", "reframe-tests/checks/system", "-n", "^MPIHello"]}


@pytest.mark.parametrize("nodes, policy", list(RUNS))
def test_plain_reframe_run_on_the_test_cluster(live_cluster, tmp_path, nodes, policy):
    live_cluster.up(cl.Settings(profile="baseline", nodes=nodes))
    env = dict(os.environ, **cluster_env(live_cluster.root), STACKPROOF_BLOCK_LAUNCHES="1",
               STACKPROOF_RFM_PREFIX=str(tmp_path / "prefix"), STACKPROOF_RESULTS_DB=str(tmp_path / "results.db"))
    for var in ("STACKPROOF_FAKE_GPUS", "STACKPROOF_NOISE_STACK", "STACKPROOF_BLOCK_STACKS", "STACKPROOF_BLOCKS"):
        env.pop(var, None)
    report = tmp_path / "report.json"
    selection = [str(REPO / a) if a.startswith("reframe-tests/") else a for a in RUNS[nodes, policy]]
    cmd = [str(Path(sys.executable).with_name("reframe")), "-C", str(REPO / "reframe-tests/config/site.py"),
           *selection, "--report-file", str(report), "-r", f"--max-retries={RETRIES}"] + \
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
    assert all(c["partition"] == "cpu" for c in cases)       # no fake GPUs: no gpu partition
    # MPI hello ran, placed by Slurm, on the stacks make build installs (the others skip, saying so)
    hello = [c for c in cases if c["display_name"].startswith("MPIHello") and c["result"] == "pass"]
    assert {"commodity", "vendor"} <= {c["environ"] for c in hello}, hello
    assert all(c["job_nodelist"] for c in hello), hello
    if (nodes, policy) == (3, "async"):
        # the baseline rows of the node checks and the stack checks ran (not all skipped), NetPIPE between nodes
        assert "FWQNoise %profile=baseline %signature=none" in passed, sorted(passed)
        assert any(n.startswith("MemoryBandwidth") for n in passed), sorted(passed)
        netpipe = [c for c in cases if c["display_name"].startswith("NetPIPE") and c["result"] == "pass"]
        # where the two ranks ran: each stack's identity probe, run with NetPIPE's own launcher in the
        # job (ReFrame's job_nodelist is 'None' when the job ended before ReFrame polled it running)
        hosts = {c["environ"]: {r["host"] for r in identity_rows(os.path.join(
            c["outputdir"], f"setup-{c['environ']}", "identity.out")).values()} for c in netpipe}
        assert netpipe and all(len(h) == 2 for h in hosts.values()), hosts
