"""Parsers for the acceptance benchmarks' text output: OSU micro-benchmarks (5.x and 7.x), AMG
(LLNL AMG 1.2 and AMG2023), SW4 (master and RAJA branch), HPCC 1.5 (hpccoutf.txt) and hypre's ij
driver (BoomerAMG).

Pure Python and stdlib only, so that the ReFrame checks (reframe-tests/) and the report read the
numbers the same way. Every parser raises BenchParseError naming the file and what it expected
when the output is not what the benchmark prints (truncated run, wrong binary, error message).

  stackproof bench parse osu|amg|sw4|hpcc|hypre FILE     prints the parsed result as JSON
"""
from __future__ import annotations

import json
import math
import re
import statistics
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from stackproof.errors import InputError, StackproofError


class BenchParseError(InputError):
    """The output does not look like what the benchmark prints."""


def _fail(origin: str, expected: str, text: str) -> BenchParseError:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    seen = f"; it starts with {lines[0][:80]!r}" if lines else "; it is empty"
    return BenchParseError(f"{origin}: expected {expected}{seen}")


_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def _measurement(text: str) -> float:
    """A measured time, rate, size or count: finite and not negative (float() accepts nan, inf, -1)."""
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{text!r} is not a finite, non-negative number")
    return value


def _checked(result, origin: str):
    """Every number of a parsed result is a measurement (see _measurement)."""
    for f in fields(result):
        value = getattr(result, f.name)
        values = value if isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, (int, float)) and not isinstance(v, bool) and (not math.isfinite(v) or v < 0):
                raise BenchParseError(f"{origin}: {f.name} = {v}: not a finite, non-negative number")
    return result


# ---- OSU micro-benchmarks --------------------------------------------------------------------------

@dataclass
class OsuResult:
    benchmark: str            # e.g. "MPI Allreduce Latency Test"
    version: str              # "5.7", "7.2"
    metric: str               # "latency" or "bandwidth"
    unit: str                 # "us" or "MB/s"
    columns: list[str]        # value column names after Size, e.g. ["avg", "min", "max", "iterations"]
    rows: dict[int, dict[str, float]] = field(default_factory=dict)   # size (bytes) -> column -> value

    def values(self, column: str | None = None) -> dict[int, float]:
        """size -> the main value (average latency / bandwidth) or a named column."""
        col = column or self.columns[0]
        return {size: row[col] for size, row in self.rows.items()}


def size_label(nbytes: int) -> str:
    """A message size as the performance variables name it: the largest binary unit that divides it
    (8 -> 8B, 4096 -> 4KiB, 1048576 -> 1MiB): OSU's lat_8B / bw_1MiB and NetPIPE's are one name."""
    for unit, m in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= m and nbytes % m == 0:
            return f"{nbytes // m}{unit}"
    return f"{nbytes}B"


_OSU_TITLE = re.compile(r"^#\s*OSU\s+(.+?)\s+v(\d+(?:\.\d+)*)\s*$")


def _osu_columns(header: str) -> tuple[str, str, list[str]]:
    """Column names from '# Size  Avg Latency(us)  Min Latency(us) ...' (5.x and 7.x)."""
    body = header.lstrip("#").strip()
    if not body.lower().startswith("size"):
        raise ValueError(header)
    body = body[4:]
    unit = "MB/s" if "MB/s" in body else "us"
    metric = "bandwidth" if "bandwidth" in body.lower() else "latency"
    cols = []
    # titles are separated by runs of spaces: "Avg Latency(us)", "Bandwidth (MB/s)", "Iterations"
    for title in re.split(r"\s{2,}", body.strip()):
        words = title.lower().split()
        if not words:
            continue
        first = words[0].split("(")[0]
        cols.append("avg" if first in ("latency", "bandwidth") else first)
    if not cols:
        raise ValueError(header)
    return metric, unit, cols


def parse_osu(text: str, origin: str = "<osu output>") -> OsuResult:
    title = header = None
    rows: dict[int, dict[str, float]] = {}
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            m = _OSU_TITLE.match(s)
            if m:
                title = m
            elif re.match(r"#\s*Size\b", s):
                header = s
            continue                      # '# Datatype: MPI_CHAR.' (7.x) and other comments
        if title is None or header is None:
            continue                      # MPI start-up chatter before the header
        parts = s.split()
        if not re.fullmatch(r"\d+", parts[0]):
            continue                      # warnings interleaved by the MPI library
        try:
            metric, unit, cols = _osu_columns(header)
            values = [_measurement(p) for p in parts[1:1 + len(cols)]]
        except ValueError:
            raise _fail(origin, f"numeric OSU columns after the header {header!r}, got {s!r}", text) from None
        if len(values) != len(cols):
            raise _fail(origin, f"{len(cols)} value columns ({', '.join(cols)}) per size, got {s!r}", text)
        rows[int(parts[0])] = dict(zip(cols, values))
    if title is None:
        raise _fail(origin, "an OSU title line '# OSU MPI ... Test vX.Y'", text)
    if header is None:
        raise _fail(origin, "an OSU column header '# Size ...'", text)
    if not rows:
        raise _fail(origin, "at least one '<size> <value>' row after the OSU header", text)
    metric, unit, cols = _osu_columns(header)
    return OsuResult(benchmark=title.group(1), version=title.group(2), metric=metric, unit=unit,
                     columns=cols, rows=dict(sorted(rows.items())))


# ---- AMG ---------------------------------------------------------------------------------------------

@dataclass
class AmgResult:
    code: str                 # "amg" (LLNL AMG 1.2, AMG2013 line) or "amg2023"
    problem: int
    fom: float                # the figure of merit the code prints (FOM_1 / FOM_2 / FOM)
    fom_setup: float | None = None
    fom_solve: float | None = None
    iterations: int | None = None
    setup_s: float | None = None
    solve_s: float | None = None
    grid: list[int] | None = None        # (Nx, Ny, Nz) over all ranks (AMG 1.2 prints it)
    procs: list[int] | None = None


def _num_after(pattern: str, text: str) -> float | None:
    m = re.search(pattern + r"\s*(" + _NUMBER + ")", text)
    return float(m.group(1)) if m else None


def _phase_wall(label: str, text: str) -> float | None:
    """'Problem N: <label> Time:' block followed by '  wall clock time = X seconds'."""
    m = re.search(r"Problem \d+: " + label + r"[^\n]*Time:\s*\n(?:.*\n){0,3}?\s*wall clock time = (" + _NUMBER + ")",
                  text)
    return float(m.group(1)) if m else None


def parse_amg(text: str, origin: str = "<amg output>") -> AmgResult:
    m2023 = re.search(r"^Figure of Merit \(FOM\):[^\n]*?(" + _NUMBER + r")\s*$", text, re.M)
    m12 = re.search(r"^Figure of Merit \(FOM_(\d)\):\s*(" + _NUMBER + ")", text, re.M)
    if m2023:
        code, fom = "amg2023", float(m2023.group(1))
        pm = re.search(r"Problem ID\s*=\s*(\d+)", text)
        problem = int(pm.group(1)) if pm else 0
    elif m12:
        code, fom, problem = "amg", float(m12.group(2)), int(m12.group(1))
    else:
        raise _fail(origin, "an AMG figure of merit line ('Figure of Merit (FOM_1): X' from AMG 1.2 or "
                            "'Figure of Merit (FOM): ... X' from AMG2023)", text)
    iters = re.search(r"^(?:Cum\. No\. of )?Iterations = (\d+)", text, re.M)
    grid = re.search(r"\(Nx, Ny, Nz\) = \((\d+), (\d+), (\d+)\)", text)
    procs = re.search(r"\(Px, Py, Pz\) = \((\d+), (\d+), (\d+)\)", text)
    return _checked(AmgResult(
        code=code, problem=problem, fom=fom,
        fom_setup=_num_after(r"FOM_Setup:[^\n]*?Time:", text),
        fom_solve=_num_after(r"FOM_Solve:[^\n]*?Time:", text),
        iterations=int(iters.group(1)) if iters else None,
        setup_s=_phase_wall("AMG Setup", text),
        solve_s=_phase_wall(r"(?:Cumulative )?AMG-\w+ Solve", text),
        grid=[int(g) for g in grid.groups()] if grid else None,
        procs=[int(p) for p in procs.groups()] if procs else None), origin)


# ---- SW4 ---------------------------------------------------------------------------------------------

@dataclass
class Sw4Result:
    variant: str              # "master" ('time stepping phase') or "raja" ('solver phase')
    solve_s: float
    startup_s: float | None = None
    grid_points: float | None = None
    time_steps: int | None = None
    version: str | None = None


# hours and minutes appear only when non-zero: "2 minutes 2.15476472e+01 seconds"
_SW4_DURATION = (r"(?:(?P<h>\d+) hours? )?(?:(?P<m>\d+) minutes? )?(?P<s>" + _NUMBER + r") seconds")


def _sw4_time(phase: str, text: str) -> float | None:
    m = re.search(r"Execution time, " + phase + r" phase " + _SW4_DURATION, text)
    if not m:
        return None
    return int(m.group("h") or 0) * 3600 + int(m.group("m") or 0) * 60 + float(m.group("s"))


def parse_sw4(text: str, origin: str = "<sw4 output>") -> Sw4Result:
    solve = _sw4_time("time stepping", text)
    variant = "master"
    if solve is None:
        solve, variant = _sw4_time("solver", text), "raja"
    if solve is None:
        raise _fail(origin, "an SW4 solve-time line ('Execution time, time stepping phase [H hours ]"
                            "[M minutes ]S seconds' or '..., solver phase ...')", text)
    steps = re.search(r"Number of time steps = (\d+)", text)
    version = re.search(r"sw4 version (\S+)", text)
    return _checked(Sw4Result(variant=variant, solve_s=solve, startup_s=_sw4_time("start up", text),
                     grid_points=_num_after(r"Total number of grid points \(without ghost points\):", text),
                     time_steps=int(steps.group(1)) if steps else None,
                     version=version.group(1) if version else None), origin)


# ---- HPCC 1.5 -----------------------------------------------------------------------------------------

# Summary keys HPCC writes to hpccoutf.txt -> (our name, unit, factor): the quantities a check reports
HPCC_METRICS = {
    "HPL_Tflops": ("hpl", "Gflop/s", 1000.0),
    "StarDGEMM_Gflops": ("dgemm_star", "Gflop/s", 1.0),        # every rank at once, per rank
    "SingleDGEMM_Gflops": ("dgemm_single", "Gflop/s", 1.0),
    "StarSTREAM_Triad": ("stream_triad_star", "GB/s", 1.0),
    "SingleSTREAM_Triad": ("stream_triad_single", "GB/s", 1.0),
    "PTRANS_GBs": ("ptrans", "GB/s", 1.0),
    "MPIRandomAccess_GUPs": ("randomaccess_mpi", "GUP/s", 1.0),
    "MPIFFT_Gflops": ("fft_mpi", "Gflop/s", 1.0),
    "AvgPingPongLatency_usec": ("beff_latency", "us", 1.0),
    "AvgPingPongBandwidth_GBytes": ("beff_bandwidth", "GB/s", 1.0),
    "RandomlyOrderedRingBandwidth_GBytes": ("ring_bandwidth", "GB/s", 1.0),
}


@dataclass
class HpccResult:
    success: bool                 # HPCC's own verdict (Success=1) and every HPL residual check passed
    values: dict[str, float]      # our metric names (HPCC_METRICS) -> value in its unit
    units: dict[str, str]
    hpl_n: int | None = None
    procs: int | None = None
    version: str | None = None
    hpl_runs: list = field(default_factory=list)   # Gflop/s of each HPL run in the launch (its WR lines)


_HPL_WR = re.compile(r"^W[RC]\w+\s+\d+\s+\d+\s+\d+\s+\d+\s+" + r"\S+\s+(" + r"[\d.]+(?:[eE][-+]?\d+)?" + r")\s*$", re.M)


def parse_hpcc(text: str, origin: str = "<hpcc output>") -> HpccResult:
    m = re.search(r"^Begin of Summary section\.\s*$(.*?)^End of Summary section\.", text, re.M | re.S)
    if not m:
        raise _fail(origin, "HPCC's summary ('Begin of Summary section.' ... 'End of Summary section.' in "
                            "hpccoutf.txt)", text)
    summary = dict(re.findall(r"^(\w+)=(\S+)\s*$", m.group(1), re.M))
    values, units = {}, {}
    for key, (name, unit, factor) in HPCC_METRICS.items():
        if key in summary:
            try:
                values[name] = _measurement(summary[key]) * factor
            except ValueError as exc:
                raise BenchParseError(f"{origin}: {key}={summary[key]}: {exc}") from None
            units[name] = unit
    if "hpl" not in values:
        raise BenchParseError(f"{origin}: HPCC summary without HPL_Tflops (HPL did not run?)")
    # HPCC's summary keeps the last HPL run; a deck that solves the problem several times (inner
    # repetitions) is reported as the median of its runs, which one daemon wake-up cannot move
    runs = [float(g) for g in _HPL_WR.findall(text)]
    if len(runs) > 1:
        values["hpl"] = float(statistics.median(runs))
    failed = re.search(r"^\s*([1-9]\d*) tests completed and failed residual checks", text, re.M)
    version = ".".join(summary.get(k, "?") for k in ("VersionMajor", "VersionMinor", "VersionMicro"))
    return HpccResult(success=summary.get("Success") == "1" and not failed, values=values, units=units,
                      hpl_n=int(summary["HPL_N"]) if summary.get("HPL_N", "").isdigit() else None,
                      procs=int(summary["CommWorldProcs"]) if summary.get("CommWorldProcs", "").isdigit() else None,
                      version=version, hpl_runs=runs)


# ---- hypre ij (BoomerAMG) ------------------------------------------------------------------------------

@dataclass
class HypreIjResult:
    setup_s: float                # BoomerAMG setup, wall clock
    solve_s: float                # BoomerAMG solve, wall clock
    iterations: int
    residual: float               # final relative residual norm
    grid: list[int] | None = None     # global grid (nx, ny, nz)
    procs: list[int] | None = None


def _hypre_wall(phase: str, text: str) -> float | None:
    m = re.search(phase + r":\s*\n\s*wall clock time = (" + _NUMBER + ")", text)
    return float(m.group(1)) if m else None


def parse_hypre_ij(text: str, origin: str = "<hypre ij output>") -> HypreIjResult:
    setup, solve = _hypre_wall("BoomerAMG Setup", text), _hypre_wall("BoomerAMG Solve", text)
    iters = re.search(r"^\s*(?:BoomerAMG )?Iterations = (\d+)", text, re.M)
    resid = re.search(r"Final Relative Residual Norm = (" + _NUMBER + ")", text)
    if setup is None or solve is None or iters is None or resid is None:
        raise _fail(origin, "hypre ij's BoomerAMG timings ('BoomerAMG Setup:' / 'BoomerAMG Solve:' with "
                            "'wall clock time = X seconds', 'Iterations = N', 'Final Relative Residual Norm')", text)
    grid = re.search(r"\(nx, ny, nz\) = \((\d+), (\d+), (\d+)\)", text)
    procs = re.search(r"\(Px, Py, Pz\) = \((\d+), (\d+), (\d+)\)", text)
    return _checked(HypreIjResult(setup_s=setup, solve_s=solve, iterations=int(iters.group(1)),
                                  residual=float(resid.group(1)),
                                  grid=[int(g) for g in grid.groups()] if grid else None,
                                  procs=[int(p) for p in procs.groups()] if procs else None), origin)


# ---- files and CLI -------------------------------------------------------------------------------------

PARSERS = {"osu": parse_osu, "amg": parse_amg, "sw4": parse_sw4, "hpcc": parse_hpcc, "hypre": parse_hypre_ij}


def parse_file(kind: str, path: str | Path):
    if kind not in PARSERS:
        raise InputError(f"unknown benchmark {kind!r} (known: {', '.join(PARSERS)})")
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise StackproofError(f"{path}: cannot read benchmark output: {exc.strerror}") from None
    return PARSERS[kind](text, str(path))


def _cmd_parse(args) -> int:
    result = parse_file(args.kind, args.file)
    json.dump(asdict(result), sys.stdout, indent=1, default=str)
    sys.stdout.write("\n")
    return 0


def register(sub) -> None:
    p = sub.add_parser("bench", help="parse OSU / AMG / SW4 / HPCC / hypre benchmark output")
    bsub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = bsub.add_parser("parse", help="print a benchmark output file's numbers as JSON")
    q.add_argument("kind", choices=sorted(PARSERS))
    q.add_argument("file")
    q.set_defaults(func=_cmd_parse)
