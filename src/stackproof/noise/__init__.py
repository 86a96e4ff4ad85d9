"""Noise analysis for FWQ traces (fwq-mpi / fwq-th), noise injection and FWQ runs.

Python API (times in microseconds unless a name says otherwise):

    from stackproof import noise
    trace = noise.load("run.dat")            # verified read: magic, size, CRC-32; raises TraceError
    trace.durations_us()                     # ndarray (nranks, nsamples)
    trace.starts_us() / starts_aligned_us()  # sample start times (per rank / on one time base)
    trace.ranks                              # [{"rank", "host", "cpu", "cpus", "pid", ...}]
    stats = noise.core_stats(trace)          # [CoreStats]: min/mean/max/std/median/percentiles,
                                             #   noise_fraction, detours, detour histogram,
                                             #   period_ms / detour_us (dominant periodic signature)
    worst = noise.most_affected(stats)       # largest std: the Table IV row
    noise.stats_json(trace)                  # the document `stackproof noise stats --json` prints
    rows = noise.compare({"baseline": t0, "corespec": t1})  # Table IV rows + ratios to baseline
    print(noise.format_table(rows))
    noise.detect_periodicity(starts, detours, span_us, quantum_us)  # on any detour list
    noise.write(path, durations_us)          # write a trace (synthetic data, conversions)

    from stackproof.noise import plot        # matplotlib (Agg): plot_scatter, plot_box, plot_zoom,
                                             #   plot_compare, plot_all -> PNG/SVG files
    from stackproof.noise import run         # run_fwq(output, n, launcher=[...], quantum="1.4ms"),
                                             #   mpirun_launcher(n, cpus), Injector(...), selfish_env(...)

Command line: `stackproof noise stats|plot|compare|inject|run|hunt` (see `stackproof noise -h`); the hunt
(who steals the time, from a kernel trace) is `stackproof.noise.hunt` (docs/noise.md, "Who stole the time").
The trace format and the C programs are described in fwq/README.md; methods in docs/noise.md.

May import: basics, nodes/ (node types and profiles for FWQ runs). The report wraps what noise/
writes as plain data.
"""
from stackproof.noise.stats import (CoreStats, Periodicity, compare, core_stats, detect_periodicity, find_detours,
                    format_table, most_affected, stats_json)
from stackproof.noise.trace import Trace, TraceError, load, write

__all__ = ["CoreStats", "Periodicity", "Trace", "TraceError", "compare", "core_stats", "detect_periodicity",
           "find_detours", "format_table", "load", "most_affected", "stats_json", "write"]
