"""Live: the Table IV matrix on the local test cluster with the noise daemon (issue 35), small: the
profiles baseline and corespec, with the daemon and without it, interleaved rounds. Asserted are
orderings measured in the same run, which a co-tenant of this shared machine cannot produce: the
daemon's phase-locked 100 ms train on the application cores fills baseline's periods and not
corespec's (the daemon is bound to the system core there); the daemon roams, so baseline's CPU 1
carries its train too, and on like cores (CPU 1 against CPU 1) the table calls corespec better;
never a raw time.
Every run is recorded in build/fwq/live-results.json."""
import json
import subprocess

import pytest

from conftest import require_cpus, require_root, require_tools
from signatures import MARGIN, SOURCE_FILL, grid_hits, node_grid_fill
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
    """Table IV compares on like cores: corespec's CPU 1 against baseline's CPU 1. The daemon roams
    (fwq-noise --roam: each burst on a CPU drawn at random from those it may use), so under baseline
    both cores carry its train, about half of its periods each, in every run. Asserted: the row
    compares on CPU 1; pooled over baseline's runs, each core holds the train in at least a quarter of
    its periods (a train on the realtime grid's phase, which no co-tenant keeps); and then the call is
    better, its interval below 1 (docs/noise.md has the live runs)."""
    out, runs, rows = matrix
    row = next(r for r in rows if r.profile == "corespec" and r.condition == "daemon")
    c = row.calls["std"]
    assert (row.compared_cpus, row.like_cores) == ("1", True)
    slots, periods = {0: 0, 1: 0}, 0.0
    for r in runs:
        if r.profile == "baseline" and r.condition == "daemon":
            t = noise.load(out / r.trace)
            for rank, x in enumerate(t.ranks):
                hits, t0, t1 = grid_hits(t, rank, 100, 2500)
                slots[int(x.get("cpu", -1))] += len(hits)
            periods += (t1 - t0) / 100e6
    shares = {cpu: n / periods for cpu, n in slots.items()}
    corespec = sorted(r.std_us for r in runs if r.profile == "corespec" and r.condition == "daemon")
    print(f"\nbaseline's periods holding the daemon's train, pooled: {shares}; corespec std {corespec} us; "
          f"call {c.verdict} {tableiv.ratio_text(c)}")
    assert min(shares.values()) >= 0.25, shares
    assert c.verdict == "better" and c.hi < 1, (c, tableiv.markdown(rows))
