"""The osnoise/rtla path of the noise hunt (issue 15), without an osnoise kernel: detection from
tracefs `available_tracers`, the parsers on format-derived samples (tests/data/osnoise, README
there), the tracer set-up and restore on a fake tracefs, and the hunt saying which recorder it used."""
from pathlib import Path

import pytest

from stackproof.errors import StackproofError
from stackproof.noise.hunt import osnoise, tracefs

DATA = Path(__file__).parent / "data" / "osnoise"


def _lines(name):
    return (DATA / name).read_text().splitlines()


def test_tracer_summary_per_cpu():
    s = osnoise.parse_summary(_lines("trace.txt"))
    assert sorted(s) == [0, 1]
    one = s[1]
    assert one["periods"] == 2 and one["runtime_us"] == 2_000_000 and one["noise_us"] == 40_940
    assert one["max_single_us"] == 806 and one["thread"] == 100 and one["irq"] == 2003 and one["hw"] == 1
    assert one["cpu_avail_pct"] == pytest.approx(100 * (1 - 40_940 / 2e6))


def test_tracepoints_and_attribution_of_samples():
    noise, samples = osnoise.parse_events(_lines("trace.txt"))
    assert len(noise) == 5 and len(samples) == 5
    assert noise[1] == {"cpu": 1, "kind": "thread", "source": "fwq-noise:4090", "start_ns": 312_400_150_000,
                        "duration_ns": 798_000}
    att = osnoise.attribute_samples(noise, samples)[1]
    assert att["samples"] == 5 and att["noise_us"] == pytest.approx(805 + 6 + 9 + 10 + 801)
    src = att["by_source"]
    assert list(src)[0] == "thread fwq-noise:4090" and src["thread fwq-noise:4090"] == pytest.approx(1595)
    assert src["irq local_timer:236"] == pytest.approx(4.0)
    assert src["hw (no interference)"] == pytest.approx(9.0)            # the sample with 0 interferences
    assert src["thread kworker/1:1:77"] == pytest.approx(7.0)
    assert sum(src.values()) == pytest.approx(att["noise_us"])


def test_rtla_top():
    top = osnoise.parse_rtla_top((DATA / "rtla-top.txt").read_text())
    assert top[1]["noise_us"] == 183901 and top[1]["period"] == 9 and top[1]["thread"] == 451
    assert top[1]["cpu_avail_pct"] == pytest.approx(100 * (1 - 183901 / 8.1e6), abs=1e-4)
    assert top[0]["max_single_us"] == 812


def test_rtla_hist():
    h = osnoise.parse_rtla_hist((DATA / "rtla-hist.txt").read_text())
    assert h[1]["buckets"] == {0: 8807, 10: 171, 20: 12, 30: 2} and h[1]["over"] == 451
    assert h[1]["count"] == sum(h[1]["buckets"].values()) + h[1]["over"] and h[1]["max"] == 806
    assert h[0]["avg"] == 0.0


@pytest.mark.parametrize("text, msg", [("nothing here\n", "no 'CPU Period"),
                                       ("CPU Period Runtime\n  0 #1 2 3\n", "unexpected row"),
                                       ("CPU Period Runtime\n", "no CPU rows")])
def test_rtla_top_bad_input(text, msg):
    with pytest.raises(StackproofError, match=msg):
        osnoise.parse_rtla_top(text)


@pytest.mark.parametrize("text, msg", [("0 1 2\n", "before the 'Index"), ("Index CPU-000\n0 1 2\n", "1 CPUs"),
                                       ("# only comments\n", "no 'Index")])
def test_rtla_hist_bad_input(text, msg):
    with pytest.raises(StackproofError, match=msg):
        osnoise.parse_rtla_hist(text)


def _fake_tracefs(tmp_path, tracers, events=True):
    root = tmp_path / "tracing"
    (root / "instances").mkdir(parents=True)
    (root / "available_tracers").write_text(" ".join(tracers) + "\n")
    if events:
        (root / "events" / "osnoise").mkdir(parents=True)
    return root


def test_detection_says_which_backend(tmp_path):
    here = tracefs.backend(_fake_tracefs(tmp_path / "a", ["blk", "function", "nop"], events=False))
    assert here["name"] == "tracefs-events" and not here["osnoise"] and "no osnoise tracer" in here["why"]
    rt = tracefs.backend(_fake_tracefs(tmp_path / "b", ["osnoise", "timerlat", "nop"]))
    assert rt["name"] == "tracefs-events+osnoise" and rt["osnoise"] and rt["timerlat_tracer"]
    assert "NO_OSNOISE_WORKLOAD" in rt["why"]


def test_osnoise_setup_and_restore_on_a_fake_tracefs(tmp_path):
    root = _fake_tracefs(tmp_path, ["osnoise", "nop"])
    (root / "osnoise").mkdir()
    (root / "osnoise" / "cpus").write_text("0-1\n")
    (root / "osnoise" / "options").write_text("DEFAULTS OSNOISE_WORKLOAD PANIC_ON_STOP\n")
    inst = root / "instances" / "x"
    for ev in ("sample_threshold", "thread_noise"):
        (inst / "events" / "osnoise" / ev).mkdir(parents=True)
    ts = tracefs.TraceSession({1}, 1024, root=root, name="x", osnoise=True)
    ts._start_osnoise()
    assert ts.osnoise and (root / "osnoise/cpus").read_text() == "1"
    assert (root / "osnoise/options").read_text() == "NO_OSNOISE_WORKLOAD"
    assert (inst / "current_tracer").read_text() == "osnoise"
    assert ts.events == ["osnoise/sample_threshold", "osnoise/thread_noise"]
    ts._restore_osnoise()
    assert (root / "osnoise/cpus").read_text() == "0-1"
    assert (root / "osnoise/options").read_text() == "OSNOISE_WORKLOAD"
    assert (inst / "current_tracer").read_text() == "nop"


def test_osnoise_refused_falls_back_to_events_and_says_so(tmp_path):
    root = _fake_tracefs(tmp_path, ["osnoise", "nop"])          # no osnoise/ directory: writes fail
    ts = tracefs.TraceSession({1}, 1024, root=root, name="x", osnoise=True)
    ts._start_osnoise()
    assert not ts.osnoise and "osnoise" in ts.osnoise_error
    from stackproof.noise.hunt.hunt import _osnoise_report
    doc = {"backend": {"why": "w"}}
    assert _osnoise_report(doc, [], ts) == "tracefs-events" and "could not be started" in doc["backend"]["why"]
    ts.osnoise, ts.osnoise_error = True, ""
    assert _osnoise_report(doc, _lines("trace.txt"), ts) == "tracefs-events+osnoise"
    assert list(doc["osnoise"]["1"]["by_source"])[0] == "thread fwq-noise:4090"


def test_timeline_ignores_osnoise_tracepoints():
    """osnoise lines carry no CPU ownership (they are printed after the noise): the timeline skips them."""
    from stackproof.noise.hunt.timeline import parse
    tl = parse(_lines("trace.txt"))
    assert tl.segments == {} and tl.unparsed == 4        # the 4 tracer summary lines are not events
