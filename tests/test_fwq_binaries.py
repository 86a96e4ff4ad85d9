"""fwq-th / fwq-mpi / fwq-noise binaries: real runs, metadata, calibration and bad input."""
import json
import os
import subprocess
import time

import numpy as np
import pytest

from conftest import require_files, require_tools
from signatures import MARGIN, SOURCE_FILL, describe, fill
from stackproof import noise
from stackproof.noise.run import binary, build_dir, mpi_env, mpirun_launcher, run_fwq, shielded
from stackproof.errors import StackproofError

NCPUS = os.cpu_count() or 1


@pytest.fixture(scope="module", autouse=True)
def built():
    if not (build_dir() / "fwq-th").exists():
        pytest.fail(f"fwq is not built in {build_dir()}: run `make fwq`")


def run(args, **kw):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120, env=mpi_env(), **kw)


def test_threads_mode_writes_a_valid_trace(tmp_path):
    out = tmp_path / "th.dat"
    p = run([binary("fwq-th"), "-n", "300", "-w", "2000", "--cpus", "0", "-o", out])
    assert p.returncode == 0, p.stderr
    t = noise.load(out)
    assert (t.nranks, t.nsamples) == (1, 300)
    assert t.meta["program"] == "fwq-th" and t.meta["work_iterations"] == 2000
    assert t.meta["timer"] == "monotonic_raw" and t.meta["ticks_per_second"] == 1e9
    assert 0 < t.meta["timer_overhead_ns"] < 10_000
    assert t.ranks[0]["cpu"] == 0 and t.ranks[0]["cpus"] == "0"
    # samples are back to back: their sum is the time between the first and last clock reads
    assert t.ticks.sum(dtype=np.int64) == t.ranks[0]["end_ticks"] - t.ranks[0]["t0_ticks"]


CALIBRATION_TRIES = 60      # tries before a calibration bug is called ...
CALIBRATION_BUDGET_S = 120  # ... or this much time (dozens of tries: a try's time in docs/performance.md)
TOLERANCE = 0.01            # what fwq promises: the quantum within 1 %


@pytest.mark.parametrize("timer", ["monotonic_raw", "tsc"])
def test_quantum_calibration_within_one_percent(tmp_path, timer):
    """fwq calibrates its work loop to the quantum within 1 %. On this shared 2-vCPU VM the loop's speed
    is not one number: a co-tenant on the host takes the hyperthread beside a vCPU and leaves again, and
    the same loop runs faster or slower from one 10 ms to the next, by far more than 1 % in both
    directions (measured: docs/performance.md). Neither direction is a bug, and no per-run bound holds. What a calibration bug cannot
    produce, however the host behaves, is a run whose own calibration check and whose trace both land
    within 1 % of the quantum: the trace's undisturbed samples (10th percentile of the calibrated CPU,
    computed here) would miss by the bug's factor. So the signature is the first such run among up to
    CALIBRATION_TRIES, and the failure message lists every try."""
    if timer == "tsc" and os.uname().machine != "x86_64":
        pytest.skip("TSC timer is x86-64 only")
    seen, start = [], time.monotonic()
    for i in range(CALIBRATION_TRIES):
        # nice -20 in its own autogroup: co-tenants of this shared machine would otherwise hit most samples
        t = run_fwq(tmp_path / f"q{i % 2}.dat", 200, launcher=[], mode="threads", quantum="1ms", timer=timer,
                    nice=-20)
        assert t.meta["quantum_target_ns"] == 1_000_000
        if timer == "tsc":
            assert t.meta["ticks_per_second"] == pytest.approx(t.meta["tsc_hz"])
        error = t.meta["calibration_error"]
        p10 = np.percentile(t.durations_us()[0], 10) / 1000 - 1   # rank 0 runs where fwq calibrated
        seen.append((round(error, 4), round(float(p10), 4)))
        if abs(error) <= TOLERANCE and abs(p10) <= TOLERANCE:
            print(f"\n[{timer}] calibrated within 1 % at try {i + 1}: {seen}")
            break
        if time.monotonic() - start > CALIBRATION_BUDGET_S:
            pytest.fail(f"no run in {CALIBRATION_BUDGET_S} s ({i + 1} tries) calibrated the 1 ms quantum within "
                        f"1 % (calibration error, trace p10 error): {seen}")
    else:
        pytest.fail(f"no run of {CALIBRATION_TRIES} calibrated the 1 ms quantum within 1 % "
                    f"(calibration error, trace p10 error): {seen}")


@pytest.mark.parametrize("args, message", [
    (["-n", "0", "-w", "10"], "positive sample count"),
    (["-n", "-5", "-w", "10"], "positive sample count"),
    (["-n", "10"], "exactly one of"),
    (["-n", "10", "-w", "10", "--quantum", "1ms"], "exactly one of"),
    (["-n", "10", "--quantum", "0.3ns"], "below the timer resolution"),
    (["-n", "10", "--quantum", "50ns"], "below the measurable minimum"),
    (["-n", "10", "--quantum", "5"], "unit"),
    (["-n", "10", "-w", "10", "-t", str(NCPUS + 1)], "--oversubscribe"),
    (["-n", "10", "-w", "10", "--cpus", "0-99999"], "bad --cpus"),
    (["-n", "10", "-w", "10", "--bogus"], "unknown"),
    (["-n", "10", "-w", "10", "-o", "/nonexistent/dir/x.dat"], "cannot write"),
])
def test_fwq_th_rejects_bad_input(tmp_path, args, message):
    if "-o" not in args:
        args = args + ["-o", tmp_path / "x.dat"]
    p = run([binary("fwq-th")] + args)
    assert p.returncode != 0
    assert message in p.stderr


def test_fwq_th_oversubscribe_flag_allows_more_threads(tmp_path):
    out = tmp_path / "o.dat"
    p = run([binary("fwq-th"), "-n", "20", "-w", "100", "-t", str(NCPUS + 1), "--oversubscribe", "-o", out])
    assert p.returncode == 0, p.stderr
    assert noise.load(out).nranks == NCPUS + 1


def test_mpi_run_two_ranks_one_per_core(tmp_path):
    require_tools("mpirun")
    require_files(build_dir() / "fwq-mpi", hint="make fwq; CMake builds it when it finds MPI")
    n = min(2, NCPUS)
    t = run_fwq(tmp_path / "mpi.dat", 200, launcher=mpirun_launcher(n), work=5000)
    assert t.nranks == n and t.meta["program"] == "fwq-mpi" and t.meta["mode"] == "mpi"
    assert sorted(r["cpu"] for r in t.ranks) == list(range(n))  # bound: each rank on its own core
    assert all(r["cpus"] == str(r["cpu"]) for r in t.ranks)


def test_mpi_refuses_more_ranks_than_cores(tmp_path):
    require_tools("mpirun")
    require_files(build_dir() / "fwq-mpi", hint="make fwq; CMake builds it when it finds MPI")
    cmd = mpirun_launcher(NCPUS + 1, oversubscribe=True) + [binary("fwq-mpi"), "-n", "10", "-w", "10",
                                                             "-o", tmp_path / "x.dat"]
    p = run(cmd)
    assert p.returncode != 0
    assert "one rank per core" in p.stderr and "--oversubscribe" in p.stderr
    p = run(cmd[:-2] + ["--oversubscribe", "-o", tmp_path / "x.dat"])
    assert p.returncode == 0, p.stderr
    assert noise.load(tmp_path / "x.dat").nranks == NCPUS + 1


def test_injector_reports_achieved_duty_cycle():
    p = run([binary("fwq-noise"), "--freq", "50", "--duration", "2ms", "--cpus", "0", "--seconds", "0.5"])
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    cpu = rep["cpus"][0]
    assert rep["target_duty_cycle"] == pytest.approx(0.1)
    # By the injector's own schedule (20 ms slots from a random phase to the 0.5 s deadline): every slot
    # is an event or counted missed; a SCHED_FIFO burst misses one only when the machine under it stops
    # for a whole slot. (Before the injector set its schedule after its threads were ready, a thread
    # that waited for a CPU on a loaded machine started past its deadline: docs/performance.md.)
    slots = cpu["events"] + cpu["missed"]
    assert 23 <= slots <= 26 and cpu["events"] >= slots - 3, cpu
    # each event holds its CPU for its 2 ms (to its scheduled end); time past the end, when the vCPU
    # was taken away inside a burst, is reported apart
    assert cpu["busy_s"] == pytest.approx(cpu["events"] * 0.002, rel=1e-3)
    assert cpu["overrun_s"] >= 0
    assert rep["duty_cycle"] == pytest.approx(cpu["busy_s"] / cpu["elapsed_s"], rel=1e-3)
    assert rep["duty_cycle"] >= 0.1 * cpu["events"] / 25 * 0.95
    # thread CPU time: bursts + wake-up overhead (+ what the host took inside a burst)
    assert cpu["cpu_s"] <= (cpu["busy_s"] + cpu["overrun_s"]) * 1.1 + 0.002


def test_injector_scaled_and_unscaled_distribution():
    base = [binary("fwq-noise"), "--freq", "10", "--duration", "1ms", "--cpus", "0,1", "--cores", "4",
            "--seconds", "0.05", "--policy", "other"]
    unscaled = json.loads(run(base).stdout)
    scaled = json.loads(run(base + ["--scaled"]).stdout)
    # unscaled: one copy per node split over 2 CPUs; scaled: one copy per core (4) split over 2 CPUs
    assert [c["freq_hz"] for c in unscaled["cpus"]] == [5, 5]
    assert [c["freq_hz"] for c in scaled["cpus"]] == [20, 20]
    assert unscaled["start"] == "uncoordinated"
    assert json.loads(run(base + ["--sync"]).stdout)["start"] == "synchronized"


@pytest.mark.parametrize("args, message", [
    (["--freq", "0", "--duration", "1ms", "--cpus", "0"], "--freq"),
    (["--freq", "10", "--duration", "100ms", "--cpus", "0"], "100%"),
    (["--freq", "10", "--duration", "1ms", "--cpus", "99999"], "--cpus"),
    (["--freq", "10", "--duration", "1", "--cpus", "0"], "unit"),
    (["--freq", "10", "--duration", "1ms"], "required"),
])
def test_injector_rejects_bad_input(args, message):
    p = run([binary("fwq-noise")] + args + ["--seconds", "0.1"])
    assert p.returncode != 0 and message in p.stderr


def test_selfish_signal_mode_disturbs_only_chosen_rank(tmp_path, capsys):
    require_tools("mpirun")
    require_files(build_dir() / "fwq-mpi", hint="make fwq; CMake builds it when it finds MPI")
    from stackproof.cli import main
    out = tmp_path / "sig.dat"
    n = min(2, NCPUS)
    fwq = mpirun_launcher(n) + [str(binary("fwq-mpi")), "-n", "2000", "--quantum", "1ms", "-q", "-o", str(out)]
    # shielded (nice -20, own autogroup) so co-tenants of this shared machine do not bury the signature
    rc = main(["noise", "inject", "--mode", "signal", "--freq", "20", "--duration", "2ms", "--ranks", "0", "--"]
              + shielded(fwq))
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in rep["ranks"]] == [0]
    r0 = rep["ranks"][0]
    # What co-tenants cannot fake: the timer never fires more often than 20 Hz; each event spins at
    # least its 2 ms of wall time (preemption only adds); the CPU time it burns is at most that.
    assert 4 <= r0["events"] <= 20 * r0["elapsed_s"] + 1
    assert r0["duty_cycle"] * r0["elapsed_s"] / r0["events"] >= 0.9 * 0.002
    assert r0["cpu_duty_cycle"] <= 1.1 * 0.04
    # and the trace shows the signature (50 ms period, >= 2 ms detours, phase-locked) on rank 0, and
    # clearly less on rank 1 (same run)
    trace = noise.load(out)
    assert fill(trace, 0, 50, 2000) >= SOURCE_FILL, describe(trace, 50, 2000)
    if trace.nranks > 1:
        assert fill(trace, 1, 50, 2000) <= fill(trace, 0, 50, 2000) - MARGIN, describe(trace, 50, 2000)


def test_cli_run_and_busy_inject(tmp_path, capsys):
    from stackproof.cli import main
    out = tmp_path / "run.dat"
    assert main(["noise", "run", "--threads", "--cpus", "0", "-n", "200", "-w", "3000", "-o", str(out)]) == 0
    assert "1 ranks x 200 samples" in capsys.readouterr().out
    assert noise.load(out).ranks[0]["cpu"] == 0
    assert main(["noise", "inject", "--freq", "20", "--duration", "1ms", "--cpus", "0", "--seconds", "0.3"]) == 0
    cpu = json.loads(capsys.readouterr().out)["cpus"][0]
    # The injector's own schedule (absolute, 50 ms slots over 0.3 s): every slot is an event or, when
    # a co-tenant delayed the wake-up past its slot, counted as missed. Each event spun >= 1 ms.
    assert cpu["cpu"] == 0 and cpu["events"] >= 1
    assert 5 <= cpu["events"] + cpu["missed"] <= 7
    assert cpu["busy_s"] >= cpu["events"] * 0.001 * 0.999
    # bad input: clear message, exit 1
    assert main(["noise", "inject", "--freq", "20", "--duration", "1ms", "--cpus", "0"]) == 1
    assert "--seconds" in capsys.readouterr().err
    assert main(["noise", "inject", "--freq", "20", "--duration", "1", "--cpus", "0", "--seconds", "1"]) == 1
    assert "unit" in capsys.readouterr().err
    assert main(["noise", "inject", "--mode", "signal", "--freq", "20", "--duration", "1ms"]) == 1
    assert "COMMAND" in capsys.readouterr().err
    assert main(["noise", "run", "--threads", "-n", "0", "-w", "10", "-o", str(out)]) == 1


def test_selfish_library_found_in_an_installed_prefix(tmp_path, monkeypatch):
    # an image installs fwq with `cmake --install`: programs in PREFIX/bin, the library in PREFIX/lib
    (tmp_path / "bin").mkdir()
    (tmp_path / "lib").mkdir()
    (tmp_path / "bin" / "fwq-th").write_text("")
    (tmp_path / "lib" / "libfwq-selfish.so").write_text("")
    monkeypatch.setenv("STACKPROOF_FWQ_BUILD", str(tmp_path / "bin"))
    assert binary("libfwq-selfish.so") == tmp_path / "lib" / "libfwq-selfish.so"
    assert binary("fwq-th") == tmp_path / "bin" / "fwq-th"
    with pytest.raises(StackproofError, match="fwq-noise not found"):
        binary("fwq-noise")
