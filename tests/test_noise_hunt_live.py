"""Live noise hunt (issue 15) on this machine: the test cluster runs with its noise daemon, the test
starts fwq-noise with a signature drawn at random on an application CPU, and `stackproof noise hunt
--apply` must name it, recover its signature, account for the detour time, and the applied proposal
must lower that CPU's FWQ std below the un-mitigated run's (same hunt).

Assertions are signatures the shared machine's noise cannot fake: the culprit's identity (its pid),
its period (5 %) and duration (20 %) from the kernel trace, and an ordering measured in the same run.
Every run is recorded in build/fwq/hunt-live-results.json (signature, outcome, numbers).
STACKPROOF_HUNT_SIGNATURE=FREQ,DURATION_US fixes the signature (to reproduce a run).
"""
import json
import math
import os
import random
import subprocess

import pytest

from conftest import require_root, require_tools, stackproof_cli
from stackproof.noise.run import Injector, build_dir

RESULTS = build_dir() / "hunt-live-results.json"
NOISE_DAEMON = "3Hz-300us"      # the cluster's own daemon-like noise (floating, bound by the profile)
MIN_DURATION = 8                # seconds of FWQ per phase (before, traced, after) ...
MIN_OCCURRENCES = 60            # ... and at least this many injector periods in each


# What this VM's background lets a single run show (docs/noise.md, "Who stole the time: the range
# the live test covers"). The signature is drawn log-uniformly from the issue's whole range
# (5-200 Hz x 50-2500 us, duty <= 50 %); each criterion is asserted where this machine's measured
# background cannot decide it, and reported as skipped, with the numbers, in the corner where it can:
#  - period (5 %) and duration (20 %): everywhere (they come from the injector's own trace events);
#  - top culprit: where the injector steals twice what one co-tenant took on a hunted CPU here (a
#    python process at load average 10);
#  - 80 % of the detour time on real culprits: where f x D is 4x (x 1.25 margin) the time no real
#    culprit explains above a threshold the injector clears (BACKGROUND_MS_PER_S at the largest ladder
#    threshold <= D / 2: the unexplained + hypervisor time of the threshold scans of two 10 s hunts
#    on both CPUs with no injector, the worse CPU, plus /proc/stat's steal under that load);
#  - std after < before: where the injector's variance f x D^2 x quantum (10 us) is 5x the spread of
#    the background variance between two back-to-back 10 s FWQ phases and above the worst after-phase
#    background seen at load average 10.
# The measured values behind each floor are in that docs/noise.md table, not here.
# Half of the draws come from the whole range, half from the region where every criterion applies.
TOP_MS_PER_S = 20.0
BACKGROUND_MS_PER_S = {10: 14.0, 15: 10.6, 20: 8.9, 30: 6.8, 50: 4.9, 70: 3.7, 100: 3.0, 150: 3.0, 200: 3.0}
MIN_D2F = 2.5e8
MIN_DURATION_US = 120.0         # 20 % of it is above the wake-up per occurrence the trace adds (docs/noise.md)


def criteria(f: float, d: float) -> dict[str, str | None]:
    """For each criterion, None when it applies to signature (f Hz, d us), else why not."""
    ms = f * d / 1e3
    th = max(t for t in BACKGROUND_MS_PER_S if t <= max(10.0, d / 2))
    bg = BACKGROUND_MS_PER_S[th]
    return {"signature": None,
            "duration": None if d >= MIN_DURATION_US else
            f"{d:g} us: the wake-up and switch-in the trace adds to each occurrence (5-21 us measured) exceed 20 %",
            "top": None if ms >= TOP_MS_PER_S else
            f"injector {ms:.2f} ms/s < {TOP_MS_PER_S:g} ms/s a co-tenant can take on the CPU",
            "attributed": None if ms >= 5 * bg else
            f"injector {ms:.2f} ms/s < 5 x {bg:g} ms/s of background no real culprit explains above {th} us",
            "std": None if d * d * f >= MIN_D2F else
            f"D^2 f = {d * d * f:.3g} us^2/s < {MIN_D2F:.2g}: its std share is within the background's spread"}


def separable(f: float, d: float) -> bool:
    return not any(criteria(f, d).values())


def draw_signature(rng: random.Random) -> tuple[float, float]:
    """Frequency 5-200 Hz and duration 50-2500 us, log-uniform (the issue's ranges), duty <= 50 %;
    every other draw redrawn until all criteria apply."""
    fixed = os.environ.get("STACKPROOF_HUNT_SIGNATURE")
    if fixed:
        f, d = fixed.split(",")
        return float(f), float(d)
    whole = rng.random() < 0.5
    while True:
        f = math.exp(rng.uniform(math.log(5), math.log(200)))
        d = math.exp(rng.uniform(math.log(50), math.log(2500)))
        if f * d * 1e-6 <= 0.5 and (whole or separable(f, d)):
            return round(f, 2), round(d)


def applies(freq: float, dur: float, criterion: str) -> None:
    why = criteria(freq, dur)[criterion]
    if why:
        pytest.skip(f"signature {freq:g} Hz x {dur:g} us is in this VM's corner for this criterion: {why}")


def _record(entry):
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    data.append(entry)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=1))


@pytest.fixture(scope="module")
def hunted(live_cluster, tmp_path_factory):
    require_root()
    require_tools("taskset")
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 CPUs (a system CPU and an application CPU)")
    if not (build_dir() / "fwq-noise").exists() or not (build_dir() / "fwq-th").exists():
        pytest.skip("fwq binaries not built (make fwq)")
    from stackproof.noise.hunt.tracefs import ensure_tracefs
    with open("/proc/filesystems") as fh:       # the prerequisite, checked before the code under test
        if "tracefs" not in fh.read().split():
            pytest.skip("no usable tracefs here: the kernel lists no tracefs (CONFIG_TRACING)")
    ensure_tracefs()                            # mounting it is stackproof's job: an error is a failure
    if subprocess.run(["chrt", "-f", "10", "true"], capture_output=True).returncode != 0:
        pytest.skip("SCHED_FIFO is refused here (chrt -f 10 true failed): the injector would not preempt")
    from stackproof.cluster import Settings, find_built_mpibind_plugin
    live_cluster.up(Settings(profile="baseline", noise_daemon=NOISE_DAEMON, mpibind_plugin=find_built_mpibind_plugin()))
    app_cpu = str(max(range(os.cpu_count())))      # the profile's system cores are the first ones
    freq, dur = draw_signature(random.Random())
    duration = max(MIN_DURATION, math.ceil(MIN_OCCURRENCES / freq))
    out = tmp_path_factory.mktemp("hunt")
    with Injector(freq, f"{dur}us", app_cpu, require_fifo=True) as inj:
        proc = stackproof_cli("noise", "hunt", "--cpus", app_cpu,
                               "--duration", str(duration), "--threshold", "auto", "--apply",
                               "-o", str(out), env=live_cluster.env(), timeout=600)
        pid = inj.proc.pid
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((out / "hunt.json").read_text())
    cpu = next(r for r in doc["per_cpu"] if r["cpu"] == int(app_cpu))
    entry = {"signature": [freq, dur], "injector_pid": pid, "injector": inj.report,
             "top": cpu["culprits"][:4], "attributed_fraction": cpu["attributed_fraction"],
             "real_fraction": cpu["real_fraction"], "threshold_us": cpu["threshold_us"], "duration_s": duration,
             "calibration": doc.get("calibration"), "background": doc.get("background"),
             "cluster_profile": (doc.get("apply") or {}).get("cluster_profile"),
             "detour_time_us": cpu["detour_time_us"], "per_cpu_std_us": doc.get("per_cpu_std_us"),
             "apply": doc.get("apply"), "wall_s": doc.get("wall_s")}
    _record(entry)
    return freq, dur, pid, app_cpu, doc, cpu


def test_injector_is_the_top_culprit(hunted):
    freq, dur, pid, app_cpu, doc, cpu = hunted
    applies(freq, dur, "top")
    top = next(c for c in cpu["culprits"] if c["kind"] not in ("unexplained", "hypervisor"))
    assert (top["comm"], top["tgid"]) == ("fwq-noise", pid), \
        f"top culprit on CPU {app_cpu} is {top['label']}, not fwq-noise[{pid}]: {cpu['culprits'][:4]}"


def test_signature_recovered(hunted):
    freq, dur, pid, app_cpu, doc, cpu = hunted
    c = next(c for c in cpu["culprits"] + cpu.get("quiet_culprits", []) if c["tgid"] == pid)
    assert c["periodic"], c
    assert c["period_ms"] == pytest.approx(1e3 / freq, rel=0.05)
    applies(freq, dur, "duration")
    assert c["duration_us"] == pytest.approx(dur, rel=0.20)


def test_detour_time_attributed(hunted):
    """80 % of the detour time on real culprits: the hypervisor (missed ticks) and the unexplained
    do not count."""
    freq, dur, pid, app_cpu, doc, cpu = hunted
    applies(freq, dur, "attributed")
    assert cpu["real_fraction"] >= 0.80, (cpu["real_fraction"], cpu["threshold_us"], cpu["culprits"][:5])


def test_proposal_applied_lowers_std(hunted):
    freq, dur, pid, app_cpu, doc, cpu = hunted
    applies(freq, dur, "std")
    assert any(b["pid"] == pid for b in doc["proposal"]["bind"]), doc["proposal"]
    assert doc["apply"]["cluster_profile"] == doc["proposal"]["profile_name"] == "hunt-clean"
    std = doc["per_cpu_std_us"]
    assert std["after"][app_cpu] < std["before"][app_cpu], std


def test_draws_cover_the_issue_range_but_the_measured_corner():
    """No root needed: the draw spans 5-200 Hz x 50-2500 us, only the corner `separable` excludes
    is left out (its share of the log-uniform range is stated in docs/noise.md)."""
    rng = random.Random(7)
    draws = [draw_signature(rng) for _ in range(400)] if not os.environ.get("STACKPROOF_HUNT_SIGNATURE") else []
    for f, d in draws:
        assert 5 <= f <= 200 and 50 <= d <= 2500 and f * d <= 5e5
    if draws:
        fs, ds = [f for f, _ in draws], [d for _, d in draws]
        assert min(fs) < 6 and max(fs) > 180 and min(ds) < 60 and max(ds) > 2200
        full = sum(separable(f, d) for f, d in draws) / len(draws)
        assert 0.45 < full < 0.8                      # half the draws, plus the whole range's share
    grid = [(math.exp(math.log(5) + i * math.log(40) / 60), math.exp(math.log(50) + j * math.log(50) / 60))
            for i in range(61) for j in range(61)]
    feasible = [(f, d) for f, d in grid if f * d * 1e-6 <= 0.5]
    share = {k: sum(criteria(f, d)[k] is None for f, d in feasible) / len(feasible)
             for k in ("signature", "top", "attributed", "std")}
    assert share["signature"] == 1.0 and all(0.15 < share[k] < 0.6 for k in ("top", "attributed"))
    assert 0.03 < share["std"] < 0.1
    assert criteria(5, 50)["top"] and not separable(5, 50) and separable(200, 2000)
