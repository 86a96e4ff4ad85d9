"""`make bench-fwq`: measure FWQ itself (a benchmark, not a test; results go to docs/performance.md).

  calibration error  fwq-th --quantum 1.4ms, header calibration_error and the run's 10th percentile
  timer overhead     cost of one timer read (monotonic_raw and tsc), as fwq measures it at start
  gather             44 ranks x 100,000 samples (4.4 M) with fwq-mpi: time from the closing barrier
                     to the written file, and rank 0's peak RSS (reported by fwq-mpi on stderr)
  analysis           load + per-core statistics + periodicity of that 4.4 M-sample trace

    python -m stackproof.noise.bench [--out build/fwq/bench.json] [--ranks 44] [--samples 100000]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from stackproof.noise.run import binary, mpi_env, mpirun_launcher
from stackproof.noise.stats import core_stats
from stackproof.noise.trace import load


def _calibration(tmp: Path, runs: int = 3) -> list[dict]:
    out = []
    for timer in ("monotonic_raw", "tsc"):
        for i in range(runs):
            path = tmp / f"cal-{timer}-{i}.dat"
            subprocess.run([str(binary("fwq-th")), "-n", "1000", "--quantum", "1.4ms", "--timer", timer, "-q",
                            "-o", str(path)], check=True, env=mpi_env())
            t = load(path)
            d = t.durations_us()
            out.append({"timer": timer, "header_calibration_error": t.meta["calibration_error"],
                        "run_p10_error": float(np.percentile(d, 10) / 1400 - 1),
                        "run_median_error": float(np.median(d) / 1400 - 1),
                        "timer_overhead_ns": t.meta["timer_overhead_ns"],
                        "timer_resolution_ns": t.meta["timer_resolution_ns"],
                        "ns_per_iteration": t.meta["ns_per_iteration"]})
    return out


def _gather(tmp: Path, ranks: int, samples: int) -> dict:
    path = tmp / "gather.dat"
    cmd = mpirun_launcher(ranks, oversubscribe=ranks > (os.cpu_count() or 1)) + [
        str(binary("fwq-mpi")), "-n", str(samples), "-w", "1", "-o", str(path)]
    if ranks > (os.cpu_count() or 1):
        cmd.append("--oversubscribe")
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=mpi_env(), timeout=600)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"bench: fwq-mpi failed: {proc.stderr}")
    m = re.search(r"gathered (\d+) samples in ([\d.]+) s, rank 0 max RSS ([\d.]+) MB", proc.stderr)
    return {"ranks": ranks, "samples_per_rank": samples, "samples": int(m.group(1)),
            "gather_s": float(m.group(2)), "rank0_max_rss_mb": float(m.group(3)),
            "file_mb": path.stat().st_size / 2**20, "mpirun_wall_s": wall, "path": str(path)}


def _analysis(path: str) -> dict:
    t0 = time.perf_counter()
    trace = load(path)
    t1 = time.perf_counter()
    stats = core_stats(trace)
    t2 = time.perf_counter()
    return {"load_s": t1 - t0, "stats_s": t2 - t1, "total_s": t2 - t0, "cores": len(stats)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="JSON results file")
    ap.add_argument("--ranks", type=int, default=44)
    ap.add_argument("--samples", type=int, default=100_000)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-fwq-") as tmpdir:
        tmp = Path(tmpdir)
        print("bench-fwq: calibration and timer overhead ...", file=sys.stderr)
        cal = _calibration(tmp)
        print(f"bench-fwq: gather {args.ranks} x {args.samples} ...", file=sys.stderr)
        gather = _gather(tmp, args.ranks, args.samples)
        print("bench-fwq: analysis ...", file=sys.stderr)
        analysis = _analysis(gather.pop("path"))
    with open("/proc/loadavg") as f:
        load_avg = f.read().split()[:3]
    result = {"host": platform.node(), "cpus": os.cpu_count(), "loadavg": load_avg,
              "calibration": cal, "gather": gather, "analysis": analysis}
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))
    print("| measurement | value |\n|---|---|")
    for timer in ("monotonic_raw", "tsc"):
        rows = [c for c in cal if c["timer"] == timer]
        errs = [abs(c["header_calibration_error"]) * 100 for c in rows]
        p10 = [abs(c["run_p10_error"]) * 100 for c in rows]
        print(f"| calibration error, 1.4 ms quantum, {timer} (max of {len(rows)} runs: header / run p10) "
              f"| {max(errs):.3f} % / {max(p10):.3f} % |")
        print(f"| timer read overhead, {timer} | {np.median([c['timer_overhead_ns'] for c in rows]):.1f} ns |")
    g = gather
    print(f"| gather {g['samples']:,} samples ({g['ranks']} ranks) | {g['gather_s']:.3f} s |")
    print(f"| rank 0 peak RSS during gather | {g['rank0_max_rss_mb']:.1f} MB |")
    print(f"| trace file size | {g['file_mb']:.1f} MB |")
    print(f"| analysis (load + stats + periodicity, {analysis['cores']} cores) | {analysis['total_s']:.2f} s "
          f"(load {analysis['load_s']:.2f} s) |")
    print(f"| load average during the run | {' '.join(load_avg)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
