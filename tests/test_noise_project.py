"""`stackproof noise project` (issue 18): the model's closed forms, seed 004's qualitative findings
within the model, the noise timeline, LogGP fits and bad input. Everything is deterministic (fixed
seeds), so nothing here depends on how busy the machine is."""
import json

import numpy as np
import pytest

from conftest import stackproof_cli
from stackproof.noise import synthetic, trace as fwqtrace
from stackproof.noise.scale import collectives
from stackproof.noise.scale.loggp import LogGP, LogGPError, fit, override
from stackproof.noise.scale.noisemodel import (NoiseModelError, from_intervals, from_signature, from_trace,
                                               parse_signature, quiet)
from stackproof.noise.scale.simulate import Scenario, simulate

FREE = LogGP(L=0.0, o=0.0, g=0.0, G=0.0, source="free messages")


def rel(a, b):
    return abs(a - b) / abs(b)


# ------------------------------------------------------------------ the node timeline

def test_finish_waits_out_detours_and_wraps_periods():
    nz = from_signature(10, 2500)            # detour [0, 2500) every 100 ms
    starts = np.array([0.0, 99000.0, 1000.0, 97600.0, 99500.0])
    got = nz.finish(starts, 1000.0, np.zeros(5))
    # in a detour: wait for its end; ends exactly where a detour begins: no wait; crosses it: + 2500
    assert got.tolist() == [3500.0, 100000.0, 3500.0, 98600.0, 103000.0]
    # a long job crosses several periods: 250 ms of work needs 250 / 0.975 ms of time, +- a detour
    long = nz.finish(np.array([5000.0]), 250000.0, np.zeros(1))[0] - 5000.0
    assert 250000 / 0.975 - 2500 <= long <= 250000 / 0.975 + 2500


def test_phase_shifts_the_timeline():
    nz = from_signature(10, 2500)
    # a node with phase 99000 us is 1 ms before its detour at t = 0
    assert nz.finish(np.array([0.0]), 2000.0, np.array([99000.0]))[0] == 4500.0


def test_intervals_merge_and_wrap():
    nz = from_intervals([10.0, 15.0, 95.0], [10.0, 10.0, 10.0], 100.0)
    assert nz.starts_us.tolist() == [0.0, 10.0, 95.0] and nz.ends_us.tolist() == [5.0, 25.0, 100.0]
    assert nz.fraction == pytest.approx(0.25)


@pytest.mark.parametrize("text,freq,dur", [("10Hz:2.5ms", 10, 2500), ("100 Hz x 25 us", 100, 25)])
def test_signature_parsing(text, freq, dur):
    nz = parse_signature(text)
    assert nz.span_us == pytest.approx(1e6 / freq) and nz.detour_us == pytest.approx(dur)


@pytest.mark.parametrize("text", ["10Hz", "fast:2ms", "10Hz:2.5", "0Hz:1ms", "10Hz:200ms"])
def test_bad_signatures(text):
    with pytest.raises(NoiseModelError):
        parse_signature(text)


def test_trace_timeline_recovers_the_injected_noise(tmp_path):
    # two cores, a 100 Hz x 200 us source on core 1 only: the node loses 2 % of its time
    d0 = synthetic.simulate_core(20000, 100.0, [], seed=1)
    d1 = synthetic.simulate_core(20000, 100.0, [synthetic.Source(freq_hz=100, duration_us=200)], seed=2)
    path = fwqtrace.write(tmp_path / "fwq.dat", np.vstack([d0, d1]))
    nz = from_trace(fwqtrace.load(path))
    assert nz.fraction == pytest.approx(0.02, rel=0.1)
    assert nz.starts_us.size == pytest.approx(nz.span_us / 1e4, abs=2)


# ------------------------------------------------------------------ LogGP

def test_fit_recovers_parameters_of_a_clean_curve():
    sizes = [1 << k for k in range(0, 23)]
    times = [2.0 + (m - 1) * 1e-4 for m in sizes]       # a = 2 us, G = 0.1 ns/B
    p = fit(sizes, times, "synthetic")
    assert p.G == pytest.approx(1e-4, rel=1e-3) and 2 * p.o + p.L == pytest.approx(2.0, rel=1e-2)


def test_loggp_rejects_bad_values():
    with pytest.raises(LogGPError):
        LogGP(L=float("nan"))
    with pytest.raises(LogGPError):
        override(LogGP(), "Q=1")
    with pytest.raises(LogGPError):
        fit([8], [1.0], "one point")
    assert override(LogGP(), "BW=10GB/s").G == pytest.approx(1e-4)


def test_collectives_on_two_ranks_follow_loggp():
    p = LogGP(L=1.0, o=0.5, g=0.5, G=0.0)
    t = np.zeros(2)
    hop = p.o + p.L + p.o                                 # one message: 2o + L
    assert collectives.recursive_doubling(t, p, 8).tolist() == [hop, hop]
    assert collectives.dissemination(t, p, 8).tolist() == [hop, hop]
    # reduce (rank 1 -> 0), then broadcast back; the root is free after its send overhead
    assert collectives.binomial(t, p, 8).tolist() == [hop + p.o, 2 * hop]
    assert collectives.linear(t, p, 8).tolist() == [hop + p.o, 2 * hop]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64, 100])
def test_collectives_wait_for_the_last_rank(n):
    t = np.zeros(n)
    t[n // 2] = 1000.0                                    # one late rank holds everyone back
    for name in collectives.ALGORITHMS:
        assert collectives.allreduce(name, t, FREE, 8).min() == pytest.approx(1000.0), name


# ------------------------------------------------------------------ closed forms (issue 18)

def test_no_noise_no_slowdown():
    for coll in collectives.ALGORITHMS:
        out = simulate(Scenario(nodes=256, collective=coll, iterations=50), quiet(), LogGP())
        assert abs(out.slowdown) < 1e-12


def test_synchronised_noise_is_not_amplified():
    """Every node in phase: the machine loses what one node loses, f / (1 - f) of its compute time
    (exactly, with free messages; at most that when messages cost time, as detours may then fall
    into the collective)."""
    nz = from_signature(100, 500)                        # 5 %, every node in phase
    share = nz.fraction / (1 - nz.fraction)
    sc = Scenario(nodes=1024, iterations=2000, synchronized=True)
    assert simulate(sc, nz, FREE).slowdown == pytest.approx(share, rel=0.02)
    assert simulate(sc, nz, LogGP()).slowdown <= share * 1.02


def expected_max_delay(n: int, w: float, d: float, period: float) -> float:
    """E[max over n nodes of one iteration's delay], one detour d per period, interval w.
    n = 1: the node sets its own pace and never starts inside its detour; the compute windows tile
    the detour-free time, so one in (period - d) / w windows meets the detour: E = d w / (period - d).
    n > 1: the common start is set by the others, so each node's phase at the start is uniform: its
    delay is d when its detour starts in the window (probability w / period), d - u when the start
    falls u into its detour (density 1 / period), else 0: F(x) = (period - w - d + x) / period on
    [0, d), and E[max] = integral_0^d (1 - F(x)^n) dx."""
    if n == 1:
        return d * w / (period - d)
    x = np.linspace(0.0, d, 200001)
    cdf = (period - w - d + x) / period
    return float(np.trapezoid(1.0 - cdf ** n, x))


@pytest.mark.parametrize("n", [1, 4096])
def test_independent_phases_give_the_expected_maximum(n):
    w, d, period = 100.0, 400.0, 10000.0                  # 100 Hz x 400 us, interval << period
    nz = from_signature(1e6 / period, d)
    out = simulate(Scenario(nodes=n, iterations=20000 if n == 1 else 1500, interval_us=w, seed=3), nz, FREE)
    per_iteration = out.slowdown * w
    assert per_iteration == pytest.approx(expected_max_delay(n, w, d, period), rel=0.02)


def test_a_single_noisy_node_stalls_everyone_but_overlap_hides_it():
    nz = from_signature(10, 2500)
    share = nz.fraction / (1 - nz.fraction)
    n = 1024
    blocking = simulate(Scenario(nodes=n, noisy_fraction=1 / n, placement="block", iterations=3000), nz, FREE)
    overlapped = simulate(Scenario(nodes=n, noisy_fraction=1 / n, placement="block", iterations=3000,
                                   overlap=0.9), nz, FREE)
    everyone = simulate(Scenario(nodes=n, iterations=300), nz, FREE)
    assert blocking.noisy_nodes == 1
    assert blocking.slowdown == pytest.approx(share, rel=0.02)       # the machine runs at its pace
    assert overlapped.slowdown <= share * 1.02                        # never beyond its own share
    assert everyone.slowdown > 10 * blocking.slowdown                # what a blocking code pays at scale


# ------------------------------------------------------------------ seed 004, within the model

def test_slowdown_grows_with_node_count():
    nz = from_signature(10, 2500)
    s = [simulate(Scenario(nodes=n, iterations=400), nz, LogGP()).slowdown for n in (1, 16, 256, 4096)]
    assert s[0] < s[1] < s[2] and s[3] >= 0.98 * s[2]


@pytest.mark.parametrize("n", [64, 4096])
def test_linear_absorbs_low_frequency_noise_better_than_the_binomial_tree(n):
    nz = from_signature(10, 5000)                         # 5 % low-frequency noise
    lin = simulate(Scenario(nodes=n, collective="linear", iterations=400), nz, LogGP()).slowdown
    tree = simulate(Scenario(nodes=n, collective="binomial", iterations=400), nz, LogGP()).slowdown
    assert lin < tree


def test_a_tenth_of_noisy_nodes_keeps_most_of_the_slowdown_at_scale():
    nz = from_signature(10, 2500)
    full = simulate(Scenario(nodes=4096, iterations=300), nz, LogGP()).slowdown
    tenth = simulate(Scenario(nodes=4096, noisy_fraction=0.1, iterations=300), nz, LogGP()).slowdown
    assert tenth >= 0.7 * full


def test_less_bandwidth_absorbs_more_noise():
    nz = from_signature(10, 2500)
    fast = LogGP(G=1e-5)
    slow = LogGP(G=1e-3)
    sc = Scenario(nodes=256, iterations=300, message_bytes=1 << 16)
    assert simulate(sc, nz, slow).slowdown < simulate(sc, nz, fast).slowdown


# ------------------------------------------------------------------ command line

def test_cli_writes_table_json_and_plot(tmp_path):
    proc = stackproof_cli("noise", "project", "--signature", "10Hz:2.5ms", "--nodes", "1,64", "--iterations", "50",
                   "--collective", "allreduce:{binomial,linear}", "-o", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "project.json").read_text())
    assert {(r["collective"], r["nodes"]) for r in doc["rows"]} == {(c, n) for c in ("binomial", "linear")
                                                                   for n in (1, 64)}
    assert (tmp_path / "project-slowdown.png").stat().st_size > 1000
    assert "| 10Hz:2.5ms, binomial |" in proc.stdout and "[4/4]" in proc.stderr


def test_cli_projects_a_run_report(tmp_path):
    out = tmp_path / "FWQNoise"
    out.mkdir()
    cores = [synthetic.simulate_core(5000, 100.0, [synthetic.Source(freq_hz=50, duration_us=300)], seed=s)
             for s in range(2)]
    fwqtrace.write(out / "fwq.dat", np.vstack(cores))
    report = {"runs": [{"testcases": [
        {"name": "FWQNoise %profile=baseline %signature=none", "environ": "commodity", "result": "pass",
         "outputdir": str(out)}]}]}
    (tmp_path / "reframe-report.json").write_text(json.dumps(report))
    proc = stackproof_cli("noise", "project", "--run", str(tmp_path), "--nodes", "1,16", "--iterations", "50", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [r["profile"] for r in doc["rows"]] == ["baseline", "baseline"]


def test_cli_projects_a_run_with_a_netpipe_curve(tmp_path):
    """A run whose NetPIPE check kept its curve (np.out) beside the FWQ trace projects with one line per
    skipped file, never a traceback (CI once failed here with KeyError: 'netpipe')."""
    out = tmp_path / "FWQNoise"
    out.mkdir()
    fwqtrace.write(out / "fwq.dat", np.vstack([synthetic.simulate_core(5000, 100.0, [], seed=s) for s in range(2)]))
    np_dir = tmp_path / "NetPIPE"
    np_dir.mkdir()
    (np_dir / "np.out").write_text("".join(f"{1 << k:>9d} {100.0 * (1 << k) / (2 + (1 << k) / 1000):12.3f} "
                                           f"{(2 + (1 << k) / 1000) * 1e-6:.9f}\n" for k in range(3, 21)))
    (np_dir / "junk.out").write_text("<no data>\n")
    report = {"runs": [{"testcases": [
        {"name": "FWQNoise %profile=baseline %signature=none", "environ": "commodity", "result": "pass",
         "outputdir": str(out)},
        {"name": "NetPIPE", "environ": "commodity", "result": "pass", "outputdir": str(np_dir)}]}]}
    (tmp_path / "reframe-report.json").write_text(json.dumps(report))
    proc = stackproof_cli("noise", "project", "--run", str(tmp_path), "--nodes", "1,16", "--iterations", "50", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    assert [r["profile"] for r in doc["rows"]] == ["baseline", "baseline"]


@pytest.mark.parametrize("args,message", [
    (["--signature", "10Hz:2.5ms", "--nodes", "0"], "node count 0"),
    (["--signature", "10Hz:2.5ms", "--collective", "allreduce:ring"], "unknown algorithm ring"),
    (["--signature", "10Hz:2.5ms", "--collective", "bcast:linear"], "only allreduce"),
    (["--signature", "10Hz:2.5ms", "--noisy-fraction", "1.5"], "[0, 1]"),
    (["--signature", "10Hz:2.5ms", "--interval", "1"], "with a unit"),
    (["--run", "/nonexistent/run"], "no such file"),
])
def test_cli_bad_input_is_one_line(args, message):
    proc = stackproof_cli("noise", "project", *args)
    assert proc.returncode != 0
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_cli_rejects_runs_without_usable_traces(tmp_path):
    empty = tmp_path / "empty.dat"
    empty.write_bytes(b"")
    assert "Traceback" not in stackproof_cli("noise", "project", "--run", str(empty)).stderr
    assert stackproof_cli("noise", "project", "--run", str(empty)).returncode != 0
    (tmp_path / "reframe-report.json").write_text(json.dumps({"runs": [{"testcases": [
        {"name": "FWQNoise %profile=baseline %signature=none", "environ": "commodity", "result": "pass",
         "outputdir": str(tmp_path / "missing")}]}]}))
    proc = stackproof_cli("noise", "project", "--run", str(tmp_path))
    assert proc.returncode != 0 and "kept its trace" in proc.stderr


def test_report_section_from_the_projection_output(tmp_path):
    from types import SimpleNamespace
    from stackproof.report.build import noise_at_scale_section as report_section
    ctx = SimpleNamespace(img=tmp_path / "img")
    assert report_section(ctx) is None                   # the projection did not run: no section
    proc = stackproof_cli("noise", "project", "--signature", "10Hz:2.5ms", "--nodes", "1,16", "--iterations", "20",
                   "-o", str(tmp_path / "project"))
    assert proc.returncode == 0, proc.stderr
    section = report_section(ctx)
    assert section.title.startswith("Noise at scale")
    assert section.tables[0].header[-2:] == ["1 nodes", "16 nodes"] and section.figures
