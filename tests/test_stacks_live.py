"""Two real stacks on the live test cluster, one ReFrame session (the CI form of `make acceptance`):
commodity (Debian Open MPI 4.1, `srun --mpi=pmix`) and vendor (Intel MPI 2021.17 + MKL, `srun
--mpi=pmi2`), plus the upgrade candidate commodity-next (Open MPI 5.0.11) compared with commodity:
MPI hello + identity, NetPIPE and FWQ, 2 repeats, interleaved. Asserts what noise cannot fake: each
stack ran with its own MPI library (recorded per rank by the identity probe), every measurement is
there once per repeat, and ReFrame's --performance-compare finds both stacks in one session.
Memory bandwidth runs for real on every stack in tests/test_reframe_plain_live.py (the system tree), the
applications in the laptop image's acceptance (commodity and vendor) and tests/test_stacks_apps_live.py:
here only what needs three stacks in one session (issue 44: one acceptance-like run in CI)."""
import json
import os
import subprocess
import sys

import pytest
from conftest import require_files
from stackfiles import compare_rows

from stackproof import cluster as cl
from stackproof.paths import REPO
from stackproof.stacks import load_stack
from stackproof.stacks.preflight import ensure_ready

pytestmark = pytest.mark.live

STACKS = ("commodity", "vendor", "commodity-next")
LIBRARY = {"commodity": "Open MPI v4.1", "vendor": "Intel(R) MPI Library 2021.17", "commodity-next": "Open MPI v5.0"}
REPEAT = 2
CHECKS = r"^(MPIHello|NetPIPE|FWQNoise.*%profile=baseline.*%signature=none)"


@pytest.fixture(scope="module")
def session(live_cluster, tmp_path_factory):
    require_files(*(load_stack(name).benchmark("probe") for name in STACKS), hint="make stacks")
    ensure_ready(STACKS, "slurm")       # built but not ready: the preflight's finding is a failure
    live_cluster.up(cl.Settings(profile="baseline", fake_gpus=0, mpibind_plugin=cl.find_built_mpibind_plugin()))
    tmp = tmp_path_factory.mktemp("stacks-live")
    report = tmp / "report.json"
    env = dict(live_cluster.env(), STACKPROOF_CLUSTER_NODES="1", STACKPROOF_FAKE_GPUS="0",
               STACKPROOF_RFM_PREFIX=str(tmp / "prefix"), STACKPROOF_RESULTS_DB=str(tmp / "results.db"),
               STACKPROOF_BLOCKS=str(REPEAT), STACKPROOF_BLOCK_LAUNCHES="1")
    cmd = [sys.executable, str(REPO / "reframe-tests/run.py"), "--system", "testcluster"]
    for s in STACKS:
        cmd += ["--stack", s]
    cmd += ["--", "--system", "testcluster:cpu", "-n", CHECKS, "-S", "FWQNoise.samples=5000",
            "-S", "NetPIPE.repeats=20", "--report-file", str(report)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    cases = [tc for run in json.loads(report.read_text())["runs"] for tc in run["testcases"]]
    return proc, cases, env


def test_every_case_passes(session):
    proc, cases, _ = session
    failed = {(c["display_name"], c["environ"]): (c.get("fail_reason") or "")[:400]
              for c in cases if c["result"] != "pass"}
    assert not failed, failed
    assert proc.returncode == 0


def test_each_stack_ran_its_own_mpi(session):
    _, cases, _ = session
    for stack in STACKS:
        mine = [c for c in cases if c["environ"] == stack]
        assert mine, stack
        st = load_stack(stack)
        for c in mine:
            assert c["stack"] == stack
            assert c["mpi_library"].startswith(LIBRARY[stack]), (stack, c["display_name"], c["mpi_library"])
            assert os.path.dirname(os.path.realpath(c["mpi_library_path"])) == \
                os.path.realpath(st.mpi_library_dir), (stack, c["mpi_library_path"])
    paths = {c["environ"]: c["mpi_library_path"] for c in cases}
    # Open MPI 4 and 5 share the soname libmpi.so.40: the resolved paths still differ
    assert paths["commodity"] != paths["commodity-next"]


def test_every_measurement_repeated_per_stack(session):
    """Each stack's own blocks (no STACKPROOF_BLOCK_STACKS): REPEAT jobs of one launch each."""
    _, cases, _ = session
    for check in ("NetPIPE",):          # the block checks of this session (FWQ runs each stack alone)
        for stack in STACKS:
            reps = sorted(c["block_index"] for c in cases if c["name"].startswith(check) and c["environ"] == stack)
            assert reps == list(range(REPEAT)), (check, stack, reps)
            assert all([ln["stack"] for ln in c["launches"]] == [stack] for c in cases
                       if c["name"].startswith(check) and c["environ"] == stack)
    np_ = [c for c in cases if c["name"].startswith("NetPIPE")]
    assert all({"testcluster:cpu:lat_8B", "testcluster:cpu:bw_1MiB"} <= set(c["perfvalues"]) for c in np_)


def test_performance_compare_upgrade_within_the_session(session):
    """docs/acceptance.md: the before-rollout comparison (commodity-next against commodity)."""
    _, _, env = session
    proc = subprocess.run(["make", "-s", "-C", str(REPO), "reframe-compare", "RFM_SYSTEM=testcluster",
                           "RFM_TARGET=commodity-next", "RFM_BASELINE=commodity", "RFM_PERIOD=now-1d:now"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = compare_rows(proc.stdout)
    found = {(r["basename"], r["pvar"]) for r in rows}
    assert {("NetPIPE", "lat_8B"), ("NetPIPE", "bw_1MiB"), ("FWQNoise", "max")} <= found, proc.stdout
    lat = next(r for r in rows if (r["basename"], r["pvar"]) == ("NetPIPE", "lat_8B"))
    assert lat["psamples (commodity-next)"] == lat["psamples (commodity)"] == str(REPEAT)
