"""The docs/noise.md experiment: TOSS-paper Table III configurations in miniature on this machine.

CPU 0 plays the system core, the other CPUs the application cores. The "daemon" is fwq-noise with
the 10 Hz / 2.5 ms signature at SCHED_FIFO. FWQ runs at nice -20 in its own autogroup (see
tests/test_fwq_live.py for why). Writes traces, a Table IV-style comparison (Markdown + JSON) and
plots (PNG, SVG) into --outdir / --imgdir.

    python -m stackproof.noise.experiment --samples 10000 --outdir build/fwq/experiment --imgdir docs/img
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from stackproof.noise import plot
from stackproof.noise.run import Injector, mpirun_launcher, run_fwq
from stackproof.noise.stats import compare, core_stats, format_table
from stackproof.noise.trace import load

QUANTUM = "1.4ms"
SIGNATURE = dict(freq_hz=10, duration="2500us")


def configurations(ncpus: int) -> dict:
    """name -> (FWQ cpu list, daemon: None | ("pinned", cpus) | ("floating", cpus))."""
    app = f"1-{ncpus - 1}" if ncpus > 2 else "1"
    every = f"0-{ncpus - 1}"
    return {
        "baseline": (every, None),                  # all cores, no daemon
        "injected": (every, ("pinned", "0")),       # daemon shares CPU 0 with a rank
        "freecore": (app, ("floating", "0")),       # CPU 0 left free, the OS places the daemon
        "corespec": (app, ("pinned", "0")),         # daemon confined to the system core
        "clean": (app, None),                       # application cores only, no daemon
    }


def run_all(samples: int, outdir: Path, launcher: str = "mpirun") -> dict:
    ncpus = os.cpu_count() or 1
    if ncpus < 2:
        raise SystemExit("experiment needs at least 2 CPUs")
    outdir.mkdir(parents=True, exist_ok=True)
    traces, reports = {}, {}
    for name, (cpus, daemon) in configurations(ncpus).items():
        nranks = len(_expand(cpus))
        if launcher == "mpirun":
            words, mode, th_cpus = mpirun_launcher(nranks, cpus), "mpi", None
        else:
            words, mode, th_cpus = [], "threads", cpus
        print(f"experiment: {name}: FWQ on CPUs {cpus}, daemon {daemon}", file=sys.stderr)

        def go():
            return run_fwq(outdir / f"{name}.dat", samples, launcher=words, quantum=QUANTUM, mode=mode,
                           threads_cpus=th_cpus, nice=-20, label=name)
        if daemon:
            with Injector(cpus=daemon[1], floating=daemon[0] == "floating", **SIGNATURE) as inj:
                traces[name] = go()
            reports[name] = inj.report
        else:
            traces[name] = go()
    return {"traces": traces, "injector": reports}


def _expand(cpus: str) -> list[int]:
    out = []
    for part in cpus.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=10000)
    ap.add_argument("--outdir", default="build/fwq/experiment")
    ap.add_argument("--imgdir", default=None, help="write plots here (default: OUTDIR)")
    ap.add_argument("--launcher", choices=("mpirun", "threads"), default="mpirun")
    ap.add_argument("--replot", action="store_true", help="reuse the traces in OUTDIR, only analyse and plot")
    args = ap.parse_args(argv)
    outdir = Path(args.outdir)
    imgdir = Path(args.imgdir or outdir)
    if args.replot:
        names = configurations(os.cpu_count() or 2)
        res = {"traces": {n: load(outdir / f"{n}.dat", label=n) for n in names},
               "injector": json.loads((outdir / "results.json").read_text())["injector"]}
    else:
        res = run_all(args.samples, outdir, args.launcher)
    traces = res["traces"]
    rows = compare(traces, baseline="baseline")
    stats = {name: [s.as_dict() for s in core_stats(t)] for name, t in traces.items()}
    (outdir / "table.md").write_text(format_table(rows) + "\n")
    (outdir / "results.json").write_text(json.dumps({"rows": rows, "cores": stats, "injector": res["injector"],
                                                     "samples": args.samples, "quantum": QUANTUM}, indent=1))
    print(format_table(rows))
    for name, t in traces.items():
        plot.plot_scatter(t, imgdir / f"noise-{name}-scatter.png")
        plot.plot_box(t, imgdir / f"noise-{name}-box.png")
        plot.plot_zoom(t, imgdir / f"noise-{name}-zoom.png")
    plot.plot_compare(list(traces.values()), imgdir / "noise-compare.png")
    plot.plot_compare(list(traces.values()), imgdir / "noise-compare.svg")
    plot.plot_box(traces["injected"], imgdir / "noise-injected-box.svg")
    plot.plot_zoom(traces["corespec"], imgdir / "noise-corespec-zoom.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
