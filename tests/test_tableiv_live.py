"""Live: the Table IV matrix on the local test cluster with the noise daemon (issue 35), small: the
profiles baseline and corespec, with the daemon and without it, interleaved rounds. Asserted are
orderings measured in the same run, which a co-tenant of this shared machine cannot produce: the
daemon's phase-locked 100 ms train on the application cores fills baseline's periods and not
corespec's (the daemon is bound to the system core there); on like cores (CPU 1 against CPU 1)
baseline's runs that carry the train there stand above corespec's, and the table never calls
corespec worse (better whenever the train reached CPU 1 in every baseline run); never a raw time.
Every run is recorded in build/fwq/live-results.json."""
import json
import subprocess

import pytest

from conftest import require_cpus, require_root, require_tools
from signatures import MARGIN, SOURCE_FILL, grid_fill, node_grid_fill
from stackproof import noise
from stackproof.acceptance.tableiv import run_matrix
from stackproof.noise import tableiv
from stackproof.noise.run import build_dir

pytestmark = pytest.mark.live

# 8 + 8 runs: one co-tenant stall on this shared machine may land a corespec run above every baseline
# run (docs/performance.md, "Measured here, cited by the code") and the call still
# holds (p = 134/12870 against the headline's 4 %); 5 + 5 runs could not afford a single one.
ROUNDS = 8
RESULTS = build_dir() / "live-results.json"


@pytest.fixture(scope="module")
def matrix(live_cluster, tmp_path_factory):
    require_root()
    require_cpus(2)
    require_tools("srun", "slurmd")
    if subprocess.run(["chrt", "-f", "10", "true"], capture_output=True).returncode != 0:
        pytest.skip("SCHED_FIFO is refused here (chrt -f 10 true failed): the daemon would not preempt")
    out = tmp_path_factory.mktemp("table-iv")
    runs = run_matrix(live_cluster, out, ["baseline", "corespec"], ["daemon", "none"], ROUNDS)
    rows = tableiv.table(runs)
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data.setdefault("table-iv", []).append({"table": tableiv.markdown(rows), "runs": [r.__dict__ for r in runs]})
    RESULTS.write_text(json.dumps(data, indent=1, default=str))
    print("\n" + tableiv.markdown(rows))
    return out, runs, rows


def test_every_configuration_ran_every_round_interleaved(matrix):
    _, runs, _ = matrix
    assert len(runs) == 2 * 2 * ROUNDS
    assert [r.seq for r in runs] == list(range(len(runs)))
    for rnd in range(ROUNDS):
        mine = [(r.profile, r.condition) for r in runs if r.round == rnd]
        assert sorted(mine) == sorted((p, c) for p in ("baseline", "corespec") for c in ("daemon", "none"))
    # the daemon really ran at SCHED_FIFO, bound to the system core under corespec, floating under baseline
    for r in runs:
        if r.condition == "daemon":
            # its burst threads at SCHED_FIFO (its main thread, which only waits, stays SCHED_OTHER)
            assert "fifo" in r.noise.get("policy", "").split("+"), r.noise
            assert r.daemon_cpus == ("0" if r.profile == "corespec" else ""), (r.profile, r.noise)
    assert {r.cpus for r in runs if r.profile == "corespec"} == {"1"}


def test_the_daemon_reaches_the_application_cores_only_under_baseline(matrix):
    """Its phase-locked train (fill of its 100 ms periods) on the cores FWQ ran on, per run."""
    out, runs, _ = matrix
    fills = {p: sorted(node_grid_fill(noise.load(out / r.trace), 100, 2500) for r in runs
                       if r.profile == p and r.condition == "daemon") for p in ("baseline", "corespec")}
    print(f"\ndaemon fills: baseline {fills['baseline']}, corespec {fills['corespec']}")
    base_median = fills["baseline"][len(fills["baseline"]) // 2]
    assert base_median >= SOURCE_FILL, fills
    assert max(fills["corespec"]) <= base_median - MARGIN, fills


def test_corespec_against_baseline_on_like_cores_under_the_daemon(matrix):
    """Table IV compares on like cores: corespec's CPU 1 against baseline's CPU 1. Where baseline's
    floating daemon runs is the OS's choice, per run (it stays on the core it started on; docs/noise.md
    has the live runs and their calls). Asserted: the row compares on CPU 1; in every baseline run whose CPU 1 carries
    the daemon's phase-locked train, CPU 1's std is above the median of corespec's (an ordering in the
    same run, its margin in docs/noise.md); the call is never
    worse; and it is better when the train reached CPU 1 in every baseline run."""
    out, runs, rows = matrix
    row = next(r for r in rows if r.profile == "corespec" and r.condition == "daemon")
    c = row.calls["std"]
    assert (row.compared_cpus, row.like_cores) == ("1", True)
    corespec = sorted(r.std_us for r in runs if r.profile == "corespec" and r.condition == "daemon")
    reached = []
    for r in runs:
        if r.profile == "baseline" and r.condition == "daemon":
            t = noise.load(out / r.trace)
            rank = next(i for i, x in enumerate(t.ranks) if int(x.get("cpu", -1)) == 1)
            if grid_fill(t, rank, 100, 2500) >= SOURCE_FILL:
                reached.append(r.per_cpu["1"]["std_us"])
    print(f"\nbaseline runs with the daemon's train on CPU 1: {len(reached)} of {row.n} (std {sorted(reached)} us); "
          f"corespec std {corespec} us; call {c.verdict} {tableiv.ratio_text(c)}")
    assert all(x > corespec[len(corespec) // 2] for x in reached), (reached, corespec)
    assert c.verdict != "worse", (c, tableiv.markdown(rows))
    if len(reached) == row.n:
        assert c.verdict == "better" and c.hi < 1, (c, tableiv.markdown(rows))
