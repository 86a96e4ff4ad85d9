"""Parsers of OSU / AMG / SW4 output (stackproof.benchparse) on the recorded outputs in
../shared/fixtures, of HPCC and hypre ij on outputs recorded here (tests/data), plus malformed input."""
import pytest

from stackproof.benchparse import (BenchParseError, parse_amg, parse_file, parse_hpcc, parse_hypre_ij, parse_osu,
                                   parse_sw4)
from stackproof.cli import main as cli_main


@pytest.mark.parametrize("version", ["5.7", "7.2"])
def test_osu_every_fixture_parses(shared, version):
    for bench, metric, unit, cols in [
            ("osu_latency", "latency", "us", ["avg"]),
            ("osu_bibw", "bandwidth", "MB/s", ["avg"]),
            ("osu_allreduce", "latency", "us", ["avg", "min", "max", "iterations"]),
            ("osu_allgather", "latency", "us", ["avg", "min", "max", "iterations"])]:
        r = parse_file("osu", shared / "fixtures" / "osu" / version / f"{bench}.out")
        assert (r.version, r.metric, r.unit, r.columns) == (version, metric, unit, cols), bench
        assert max(r.rows) == 4194304, bench


def test_osu_version_differences(shared):
    osu = shared / "fixtures" / "osu"
    assert min(parse_file("osu", osu / "5.7/osu_latency.out").rows) == 0
    assert min(parse_file("osu", osu / "7.2/osu_latency.out").rows) == 1
    assert parse_file("osu", osu / "7.2/osu_latency.out").values()[1] == 0.40
    # 5.7 allreduce uses MPI_FLOAT: starts at 4 B even with -m 2:
    assert min(parse_file("osu", osu / "5.7/osu_allreduce.out").rows) == 4
    row = parse_file("osu", osu / "7.2/osu_allreduce.out").rows[4194304]
    assert row == {"avg": 8966.39, "min": 8292.68, "max": 9640.11, "iterations": 100}


def test_amg_both_codes(shared):
    amg = shared / "fixtures" / "amg"
    r = parse_file("amg", amg / "amg-n20-P211-p1.out")
    assert (r.code, r.problem, r.fom, r.fom_setup, r.fom_solve, r.iterations) == \
        ("amg", 1, 8.901626e+07, 1.172338e+07, 1.147806e+08, 18)
    assert (r.grid, r.procs, r.solve_s) == ([40, 20, 20], [2, 1, 1], 0.067465)
    r = parse_file("amg", amg / "amg-n10-P211-p2.out")
    assert (r.code, r.problem, r.fom, r.iterations) == ("amg", 2, 1.628118e+08, 187)
    r = parse_file("amg", amg / "amg2023-n20-P211-p1.out")
    assert (r.code, r.problem, r.fom, r.setup_s, r.solve_s) == ("amg2023", 1, 2.374211e+07, 0.024236, 0.019314)
    r = parse_file("amg", amg / "amg2023-n20-P211-p2.out")
    assert (r.code, r.problem, r.fom, r.iterations) == ("amg2023", 2, 6.428395e+06, 13)


def test_sw4_master_minutes_and_raja(shared):
    r = parse_file("sw4", shared / "fixtures" / "sw4" / "flat-twi-1.out")
    assert (r.variant, r.solve_s, r.time_steps, r.grid_points, r.version) == ("master", 0.514944384, 69, 29791, "3.0")
    r = parse_file("sw4", shared / "fixtures" / "sw4" / "pointsource-sg-1.out")
    assert r.solve_s == pytest.approx(2 * 60 + 21.5476472)
    raja = "   Execution time, solver phase 1 hours 2 minutes 3.5e+00 seconds \n"
    assert parse_sw4(raja).variant == "raja"
    assert parse_sw4(raja).solve_s == pytest.approx(3600 + 120 + 3.5)


def test_malformed_output_names_file_and_expectation(tmp_path):
    bad = tmp_path / "rfm_job.out"
    bad.write_text("mpirun noticed that process rank 0 exited on signal 11\n")
    for kind, expected in [("osu", "OSU title line"), ("amg", "AMG figure of merit line"),
                           ("sw4", "SW4 solve-time line")]:
        with pytest.raises(BenchParseError) as exc:
            parse_file(kind, bad)
        assert str(bad) in str(exc.value) and expected in str(exc.value)
        assert "signal 11" in str(exc.value)      # shows what was there instead
    with pytest.raises(BenchParseError, match="numeric OSU columns"):
        parse_osu("# OSU MPI Latency Test v7.2\n# Size          Latency (us)\n8   nan-ish\n")
    with pytest.raises(BenchParseError, match="at least one"):
        parse_osu("# OSU MPI Latency Test v7.2\n# Size          Latency (us)\n")
    with pytest.raises(BenchParseError, match="empty"):
        parse_amg("")


def test_bench_cli(shared, capsys, tmp_path):
    assert cli_main(["bench", "parse", "sw4", str(shared / "fixtures/sw4/flat-twi-1.out")]) == 0
    assert '"solve_s": 0.514944384' in capsys.readouterr().out
    assert cli_main(["bench", "parse", "osu", str(tmp_path / "missing.out")]) == 1
    assert "cannot read benchmark output" in capsys.readouterr().err


# ---- HPCC and hypre ij: outputs recorded here (tests/data/{hpcc,hypre}/README.md) -------------------------

DATA = __import__("pathlib").Path(__file__).parent / "data"


def test_hpcc_recorded_output():
    r = parse_file("hpcc", DATA / "hpcc" / "openmpi-4.1.4-openblas.hpccoutf.txt")
    assert r.success and (r.hpl_n, r.procs, r.version) == (2000, 2, "1.5.0")
    assert r.values["hpl"] == pytest.approx(1.01587) and r.units["hpl"] == "Gflop/s"      # HPL_Tflops * 1000
    assert (r.values["dgemm_star"], r.values["stream_triad_star"], r.values["beff_latency"]) == \
        (12.0101, 63.2173, 0.358042)
    assert r.units["stream_triad_star"] == "GB/s" and r.units["beff_latency"] == "us"


def test_hpcc_inner_repetitions_report_the_median_run():
    """A deck solving HPL several times in one launch: HPCC's summary keeps the last run, the parser the
    median of every WR line (one slow run, e.g. a daemon waking up, does not move it)."""
    text = (DATA / "hpcc" / "openmpi-4.1.4-openblas.hpccoutf.txt").read_text()
    line = next(l for l in text.splitlines() if l.startswith("WR"))
    runs = [line, line.replace("1.016e+00", "0.500e+00"), line.replace("1.016e+00", "1.030e+00")]
    r = parse_hpcc(text.replace(line, "\n".join(runs)))
    assert r.hpl_runs == [1.016, 0.5, 1.03] and r.values["hpl"] == 1.016
    assert parse_hpcc(text).hpl_runs == [1.016] and parse_hpcc(text).values["hpl"] == pytest.approx(1.01587)


def test_hpcc_failed_residual_and_truncated_output():
    text = (DATA / "hpcc" / "openmpi-4.1.4-openblas.hpccoutf.txt").read_text()
    failed = text.replace("0 tests completed and failed residual checks", "1 tests completed and failed residual checks")
    assert not parse_hpcc(failed).success
    assert not parse_hpcc(text.replace("Success=1", "Success=0")).success
    with pytest.raises(BenchParseError, match="HPCC's summary"):
        parse_hpcc(text.split("Begin of Summary section.")[0], "hpccoutf.txt")
    with pytest.raises(BenchParseError, match="not a finite"):
        parse_hpcc(text.replace("StarDGEMM_Gflops=12.0101", "StarDGEMM_Gflops=nan"))


def test_hypre_ij_recorded_output():
    r = parse_file("hypre", DATA / "hypre" / "openmpi-4.1.4-openblas.ij.out")
    assert (r.setup_s, r.solve_s, r.iterations, r.residual) == (2.831794, 3.974081, 15, 4.062375e-09)
    assert (r.grid, r.procs) == ([100, 50, 50], [2, 1, 1])
    with pytest.raises(BenchParseError, match="BoomerAMG timings"):
        parse_hypre_ij("mpirun noticed that process rank 0 exited on signal 9\n", "rfm_job.out")


def test_vendor_recordings_parse_like_the_commodity_ones():
    hpcc = parse_file("hpcc", DATA / "hpcc" / "intelmpi-2021.17-mkl.hpccoutf.txt")
    assert hpcc.success and (hpcc.hpl_n, hpcc.procs) == (1000, 2)
    assert hpcc.values["hpl"] == pytest.approx(11.3798) and hpcc.values["dgemm_star"] == 3.86236
    ij = parse_file("hypre", DATA / "hypre" / "intelmpi-2021.17-mkl.ij.out")
    assert (ij.setup_s, ij.solve_s, ij.iterations, ij.grid) == (0.861516, 0.290911, 15, [80, 40, 40])
    assert ij.residual == 2.590075e-09
