"""Noise statistics and periodicity on synthetic traces with known detours."""
import json

import numpy as np
import pytest

from stackproof import noise
from stackproof.cli import main
from stackproof.noise.synthetic import Source, simulate_core

RANDOM = Source(rate_hz=8, duration_range_us=(20, 4000))  # unrelated noise of every size


def make_trace(tmp_path, quantum_us, nsamples, sources_per_core, name="t"):
    d = np.vstack([simulate_core(nsamples, quantum_us, srcs, seed=i) for i, srcs in enumerate(sources_per_core)])
    path = noise.write(tmp_path / f"{name}.dat", d, quantum_target_ns=int(quantum_us * 1000),
                       ranks=[{"rank": i, "cpu": 10 + i} for i in range(len(sources_per_core))])
    return noise.load(path)


@pytest.mark.parametrize("quantum_us, nsamples, freq, dur", [
    (1400, 4000, 10, 2500),     # the paper's quantum with the 10 Hz / 2.5 ms signature
    (1400, 3000, 100, 250),
    (100, 30000, 1000, 25),     # 1 kHz / 25 us needs a quantum well below 1 ms
    (4.35, 200000, 100, 250),   # the paper's -w4096 quantum
    (1400, 3000, 33, 700),      # "any other" signature
])
def test_period_and_duration_recovered_within_10_percent(tmp_path, quantum_us, nsamples, freq, dur):
    t = make_trace(tmp_path, quantum_us, nsamples, [[RANDOM], [Source(freq, dur, phase_us=1234.5), RANDOM]])
    stats = noise.core_stats(t)
    noisy = stats[1]
    assert noisy.period_ms == pytest.approx(1e3 / freq, rel=0.10)
    assert noisy.detour_us == pytest.approx(dur, rel=0.10)
    assert stats[0].period_ms is None  # random arrivals only: no period invented


def test_basic_statistics_match_definitions(tmp_path):
    t = make_trace(tmp_path, 1400, 3000, [[Source(10, 2500, 100)], [RANDOM]])
    s = noise.core_stats(t, skip_first=0)[0]
    d = t.durations_us()[0]
    assert s.min_us == pytest.approx(d.min())
    assert s.mean_us == pytest.approx(d.mean())
    assert s.max_us == pytest.approx(d.max())
    assert s.std_us == pytest.approx(d.std())
    assert s.percentiles_us["p99"] == pytest.approx(np.percentile(d, 99))
    assert s.noise_fraction == pytest.approx((d - d.min()).sum() / d.sum())
    # every 100 ms one 2.5 ms detour: count and detour time follow from the run length
    span_s = d.sum() / 1e6
    assert s.detours == pytest.approx(10 * span_s, abs=2)
    assert s.detour_time_us == pytest.approx(2500 * s.detours, rel=0.02)
    assert sum(s.detour_histogram["counts"]) == s.detours
    assert s.cpu == 10 and s.rank == 0


def test_detours_merge_consecutive_samples():
    d = np.full(100, 10.0)
    d[[20, 21, 22, 50]] = [40, 40, 40, 30]
    starts, durations = noise.find_detours(d)
    assert starts.tolist() == [200.0, 50 * 10 + 3 * 30]
    assert durations.tolist() == [90.0, 20.0]


def test_detours_over_a_loop_whose_speed_jumps():
    """On a VM the undisturbed loop runs 1.8x faster or slower in stretches of tens of samples (a
    co-tenant on the sibling hyperthread comes and goes). The 10 Hz / 2.5 ms train must still be found
    at full length in every period, and the speed steps must not count as detours."""
    rng = np.random.default_rng(7)
    quantum, n = 1400.0, 2500
    speed = np.ones(n)
    edge = 0
    while edge < n:                                    # stretches of 20-300 samples at either speed
        run = int(rng.integers(20, 300))
        speed[edge:edge + run] = rng.choice([1.0, 0.55])
        edge += run
    d = quantum * speed + rng.normal(0, 5, n).clip(0)
    starts = np.concatenate(([0.0], np.cumsum(d[:-1])))
    burst_at = np.arange(50_000, starts[-1], 100_000)  # every 100 ms, 2.5 ms
    hit = np.searchsorted(starts, burst_at) - 1
    d[hit] += 2500
    starts = np.concatenate(([0.0], np.cumsum(d[:-1])))
    t, length = noise.find_detours(d, starts)
    assert len(t) == len(hit)
    assert length == pytest.approx(np.full(len(hit), 2500.0), abs=60)
    # against one median over both speeds, the bursts on the fast stretches look 25 % short
    whole = d - np.median(d)
    assert (whole[hit] < 0.8 * 2500).sum() >= 3


def test_most_affected_is_largest_std_and_compare_ratios(tmp_path):
    base = make_trace(tmp_path, 1400, 3000, [[RANDOM], [Source(10, 2500), RANDOM], [RANDOM]], "base")
    spec = make_trace(tmp_path, 1400, 3000, [[RANDOM], [RANDOM], [RANDOM]], "spec")
    stats = noise.core_stats(base)
    worst = noise.most_affected(stats)
    assert worst.cpu == 11 and worst.std_us == max(s.std_us for s in stats)
    rows = noise.compare({"baseline": base, "corespec": spec})
    assert [r["config"] for r in rows] == ["baseline", "corespec"]
    assert rows[0]["std_ratio"] == pytest.approx(1.0)
    assert rows[1]["std_ratio"] == pytest.approx(rows[1]["std_ms"] / rows[0]["std_ms"])
    assert rows[1]["std_ratio"] < 1
    table = noise.format_table(rows)
    assert "| baseline |" in table and "| corespec |" in table
    with pytest.raises(ValueError):
        noise.compare({"a": base}, baseline="nope")


def test_stats_json_cli_schema(tmp_path, capsys):
    t = make_trace(tmp_path, 1400, 3000, [[RANDOM], [Source(10, 2500), RANDOM]])
    assert main(["noise", "stats", "--json", t.path]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["cores"]) == 2
    for core in doc["cores"] + [doc["most_affected"]]:
        for key in ("rank", "cpu", "min_us", "mean_us", "max_us", "std_us", "noise_fraction", "period_ms",
                    "detour_us"):
            assert key in core
    assert doc["most_affected"]["cpu"] == 11
    assert doc["most_affected"]["period_ms"] == pytest.approx(100, rel=0.1)
    assert doc["cores"][0]["period_ms"] is None


def test_compare_and_plot_cli(tmp_path, capsys):
    a = make_trace(tmp_path, 1400, 2000, [[RANDOM], [Source(10, 2500), RANDOM]], "baseline")
    b = make_trace(tmp_path, 1400, 2000, [[RANDOM], [RANDOM]], "clean")
    assert main(["noise", "compare", f"baseline={a.path}", f"clean={b.path}", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[1]["config"] == "clean" and rows[1]["std_ratio"] < 1
    assert main(["noise", "compare", f"baseline={a.path}", "oops"]) == 1
    assert "NAME=FILE" in capsys.readouterr().err
    out = tmp_path / "img"
    assert main(["noise", "plot", a.path, b.path, "-o", str(out), "--compare", "both"]) == 0
    files = sorted(p.name for p in out.iterdir())
    for kind in ("scatter", "box", "zoom"):
        assert f"baseline-{kind}.png" in files and f"baseline-{kind}.svg" in files
    assert "both.png" in files and "both.svg" in files
    assert (out / "baseline-scatter.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (out / "baseline-box.svg").read_bytes()[:2000]
    assert main(["noise", "plot", a.path, "-o", str(out), "--format", "gif"]) == 1


def test_tick_aligned_random_detours_are_not_a_period():
    """Co-tenant preemptions start on the 4 ms scheduler tick: phase-coherent with 4 ms but present
    in only a few of its slots. That is not a periodic noise source."""
    rng = np.random.default_rng(7)
    slots = np.sort(rng.choice(1000, 200, replace=False))  # 20 % of the 4 ms ticks over 4 s
    starts = slots * 4000.0 + rng.uniform(0, 300, slots.size)
    durations = rng.choice([4000.0, 8000.0, 12000.0], slots.size) + rng.normal(0, 50, slots.size)
    assert noise.detect_periodicity(starts, durations, span_us=4e6, quantum_us=1000) is None
    # the same grid fully occupied is periodic
    full = np.arange(1000) * 4000.0 + 100
    p = noise.detect_periodicity(full, np.full(1000, 300.0), span_us=4e6, quantum_us=1000)
    assert p is not None and p.period_ms == pytest.approx(4, rel=0.01)


def test_sleep_loop_source_found_by_its_steady_interval():
    """A daemon that works 4 ms then sleeps 700 ms drifts in phase (the work and wake-up latency add
    up), so it has no strict period, but its intervals are steady: reported with method 'interval'."""
    rng = np.random.default_rng(11)
    gaps = 704 + rng.uniform(0, 100, 80)                    # ms: sleep + work + jittery wake-up
    starts = np.cumsum(gaps) * 1e3
    noise_t = np.sort(rng.uniform(0, starts[-1], 60))         # unrelated random detours
    t = np.concatenate([starts, noise_t])
    d = np.concatenate([4000 + rng.normal(0, 30, starts.size), rng.uniform(20, 600, noise_t.size)])
    order = np.argsort(t)
    p = noise.detect_periodicity(t[order], d[order], span_us=float(starts[-1]), quantum_us=1400)
    assert p is not None and p.method == "interval"
    assert p.period_ms == pytest.approx(754, rel=0.05)
    assert p.detour_us == pytest.approx(4000, rel=0.05)
