"""`stackproof noise stats|plot|compare|inject|run|hunt`: FWQ noise analysis, injection, runs and
the noise hunt (who steals the time)."""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from stackproof.errors import StackproofError


def register(subparsers) -> None:
    p = subparsers.add_parser("noise", help="FWQ noise benchmark: analyse, plot, compare, inject, run",
                              description="FWQ noise analysis (traces from fwq-mpi / fwq-th), noise "
                                          "injection and FWQ runs. Times are in microseconds.")
    sub = p.add_subparsers(dest="noise_command", required=True, metavar="ACTION")

    s = sub.add_parser("stats", help="per-core statistics, detours and periodicity of FWQ traces")
    s.add_argument("files", nargs="+", metavar="FILE")
    s.add_argument("--json", action="store_true", help="print JSON (one document, or a list for several files)")
    s.set_defaults(func=cmd_stats)

    s = sub.add_parser("plot", help="scatter, box-and-whiskers and zoom plots (PNG/SVG)")
    s.add_argument("files", nargs="+", metavar="FILE")
    s.add_argument("-o", "--outdir", default=".", help="output directory (default: .)")
    s.add_argument("--format", default="png,svg", help="comma list of png, svg, pdf (default png,svg)")
    s.add_argument("--compare", metavar="NAME", help="also draw all files side by side into NAME.<format>")
    s.set_defaults(func=cmd_plot)

    s = sub.add_parser("compare", help="Table IV across configurations, with ratios to the baseline")
    s.add_argument("configs", nargs="+", metavar="NAME=FILE", help="e.g. baseline=base.dat corespec=cs.dat")
    s.add_argument("--baseline", help="configuration the ratios refer to (default: the first)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_compare)

    s = sub.add_parser("inject", help="inject a noise signature (busy threads on CPUs, or SIGALRM in ranks)",
                       description="Busy mode runs fwq-noise (one SCHED_FIFO thread per target CPU, like a "
                                   "daemon) for --seconds or around COMMAND. Signal mode runs COMMAND with "
                                   "libfwq-selfish.so preloaded (SIGALRM detours inside the chosen MPI ranks). "
                                   "Prints the achieved duty cycle as JSON.")
    s.add_argument("--freq", type=float, required=True, help="signature frequency in Hz")
    s.add_argument("--duration", required=True, help="detour length with unit, e.g. 2500us, 2.5ms")
    s.add_argument("--mode", choices=("busy", "signal"), default="busy")
    s.add_argument("--cpus", help="busy mode: target CPUs, e.g. 0 or 0,2-3")
    s.add_argument("--ranks", default="all", help="signal mode: target MPI ranks (default all)")
    s.add_argument("--seconds", type=float, help="busy mode without COMMAND: how long to inject")
    s.add_argument("--scaled", action="store_true", help="one copy of the signature per core (default: per node)")
    s.add_argument("--sync", action="store_true", help="synchronized start on realtime period boundaries "
                                                       "(gang across nodes; default uncoordinated)")
    s.add_argument("--policy", choices=("fifo", "other"), default="fifo")
    s.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS... to run under noise")
    s.set_defaults(func=cmd_inject)

    s = sub.add_parser("run", help="run fwq-mpi (or fwq-th) and print its statistics")
    s.add_argument("-n", "--samples", type=int, required=True)
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--quantum", help="work quantum with unit, e.g. 1.4ms")
    g.add_argument("-w", "--work", type=int, help="loop iterations per quantum")
    s.add_argument("--ranks", type=int, default=os.cpu_count(), help="MPI ranks (default: all CPUs)")
    s.add_argument("--cpus", help="CPU list to run on, e.g. 1 or 2-3")
    s.add_argument("--threads", action="store_true", help="use fwq-th (no MPI)")
    s.add_argument("--launcher", help="launcher words instead of mpirun, e.g. 'srun -n2 --cpu-bind=cores'")
    s.add_argument("--oversubscribe", action="store_true")
    s.add_argument("-o", "--output", required=True)
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("hunt", help="find what steals each CPU's time (FWQ + kernel trace) and propose a profile",
                       description="Runs FWQ (fwq-th) on the CPUs while a private tracefs instance records "
                                   "sched_switch/wakeup/migrate, hard IRQs, softirqs and irq_vectors (local "
                                   "timer, IPIs); attributes every FWQ detour to the task, IRQ, softirq, tick "
                                   "or 'unexplained' that held the CPU; ranks culprits per CPU with their "
                                   "period and duration; proposes a Clean profile (profiles.yaml terms) and "
                                   "renders it. Needs root (tracefs).")
    s.add_argument("--cpus", help="CPU list to measure (default: all CPUs of the node)")
    s.add_argument("--duration", type=float, default=10.0, help="seconds of FWQ under tracing (default 10)")
    s.add_argument("--threshold", type=_threshold, default=None, metavar="US|auto",
                   help="a sample is a detour when it exceeds the undisturbed quantum by this many us; default "
                        "auto: per CPU, from a threshold scan of the run (the lowest threshold at which real "
                        "culprits hold 80 %% of the detour time)")
    s.add_argument("--buffer-kb", type=int, default=8192, metavar="N",
                   help="trace ring buffer per CPU in KB (default 8192); overflow is an error, never partial")
    s.add_argument("--quantum", default="10us", help="FWQ work quantum (default 10us: short enough that a slower CPU (SMT sibling, host) stays under the threshold, so detours are interruptions)")
    s.add_argument("--cost", action="store_true",
                   help="also run FWQ without tracing first (tracing overhead: std and max with vs without)")
    s.add_argument("--apply", action="store_true",
                   help="switch the local test cluster to the proposal, re-run FWQ, report before/after rows")
    s.add_argument("-o", "--outdir", default="hunt", help="output directory (default ./hunt)")
    s.set_defaults(func=cmd_hunt)

    from stackproof.noise.scale.cli import register as register_project
    register_project(sub)


# ------------------------------------------------------------------ stats / plot / compare

def _load(path: str, label: str = ""):
    from stackproof.noise.trace import load
    return load(path, label=label)


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def cmd_stats(args) -> int:
    from stackproof.noise.stats import core_stats, most_affected, stats_json
    docs = []
    for path in args.files:
        trace = _load(path)
        stats = core_stats(trace)
        if args.json:
            docs.append(stats_json(trace, stats))
            continue
        m = trace.meta
        print(f"{path}: {trace.nranks} ranks x {trace.nsamples} samples, {m.get('program')} "
              f"work={m.get('work_iterations')} quantum_target={m.get('quantum_target_ns', 0) / 1e3:g} us "
              f"timer={m.get('timer')} (overhead {m.get('timer_overhead_ns', 0):.1f} ns)")
        print(f"{'rank':>4} {'cpu':>4} {'min_us':>10} {'mean_us':>10} {'max_us':>11} {'std_us':>9} "
              f"{'p99_us':>10} {'noise%':>7} {'detours':>7} {'period_ms':>9} {'detour_us':>9}")
        for s in stats:
            print(f"{s.rank:>4} {s.cpu:>4} {s.min_us:>10.2f} {s.mean_us:>10.2f} {s.max_us:>11.2f} {s.std_us:>9.2f} "
                  f"{s.percentiles_us['p99']:>10.2f} {100 * s.noise_fraction:>7.3f} {s.detours:>7} "
                  f"{_fmt(s.period_ms, '9.2f')} {_fmt(s.detour_us, '9.1f')}")
        w = most_affected(stats)
        print(f"most affected (largest std): rank {w.rank} cpu {w.cpu} std {w.std_us:.2f} us"
              + (f", periodic detours of {w.detour_us:.0f} us every {w.period_ms:.2f} ms "
                 f"({1e3 / w.period_ms:.2f} Hz)" if w.period_ms else ", no periodic detour signature"))
    if args.json:
        json.dump(docs[0] if len(docs) == 1 else docs, sys.stdout, indent=1)
        print()
    return 0


def cmd_plot(args) -> int:
    from stackproof.noise import plot
    formats = [f.strip() for f in args.format.split(",") if f.strip()]
    bad = [f for f in formats if f not in ("png", "svg", "pdf")]
    if bad or not formats:
        raise StackproofError(f"--format must list png, svg or pdf, got {args.format!r}")
    traces = [_load(p) for p in args.files]
    for t in traces:
        for path in plot.plot_all(t, args.outdir, formats):
            print(path)
    if args.compare:
        for fmt in formats:
            print(plot.plot_compare(traces, Path(args.outdir) / f"{args.compare}.{fmt}"))
    return 0


def _parse_configs(items: list[str]) -> dict:
    configs = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise StackproofError(f"expected NAME=FILE, got {item!r}")
        if name in configs:
            raise StackproofError(f"configuration {name!r} given twice")
        configs[name] = _load(path, label=name)
    return configs


def cmd_compare(args) -> int:
    from stackproof.noise.stats import compare, format_table
    configs = _parse_configs(args.configs)
    try:
        rows = compare(configs, baseline=args.baseline)
    except ValueError as exc:
        raise StackproofError(str(exc)) from None
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    else:
        print(format_table(rows))
    return 0


# ------------------------------------------------------------------ inject / run

_DURATION = re.compile(r"^\d+(\.\d+)?(ns|us|ms|s)$")


def cmd_inject(args) -> int:
    from stackproof.noise.run import Injector, mpi_env, selfish_env
    if not _DURATION.match(args.duration):
        raise StackproofError(f"--duration needs a number with a unit (ns, us, ms, s), got {args.duration!r}")
    if args.freq <= 0:
        raise StackproofError("--freq must be positive")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.mode == "signal":
        if not command:
            raise StackproofError("signal mode injects into a program: give -- COMMAND ...")
        with tempfile.TemporaryDirectory(prefix="selfish-") as tmp:
            report = Path(tmp) / "report.jsonl"
            env = selfish_env(args.freq, args.duration, ranks=args.ranks, report=str(report), base=mpi_env())
            rc = subprocess.run(command, env=env).returncode
            lines = report.read_text().splitlines() if report.exists() else []
        ranks = [json.loads(line) for line in lines]
        print(json.dumps({"mode": "signal", "freq_hz": args.freq, "duration": args.duration,
                          "ranks": ranks, "command_exit": rc}, indent=1))
        if not ranks:
            raise StackproofError("no rank reported injected noise (rank list matched nothing, or the "
                                  "command is not dynamically linked)")
        return rc
    if not args.cpus:
        raise StackproofError("busy mode needs --cpus (the CPUs to disturb)")
    if not command and not args.seconds:
        raise StackproofError("give --seconds, or a -- COMMAND to run under noise")
    inj = Injector(args.freq, args.duration, args.cpus, scaled=args.scaled, sync=args.sync,
                   policy=args.policy, seconds=None if command else args.seconds)
    rc = 0
    with inj:
        if command:
            rc = subprocess.run(command, env=mpi_env()).returncode
        else:
            inj.proc.wait()
    print(json.dumps(inj.report, indent=1))
    return rc


def cmd_run(args) -> int:
    from stackproof.noise.run import mpirun_launcher, run_fwq
    from stackproof.noise.stats import core_stats, most_affected
    if args.samples <= 0:
        raise StackproofError("-n must be positive")
    mode = "threads" if args.threads else "mpi"
    if args.launcher:
        launcher = args.launcher.split()
    elif args.threads:
        launcher = []
    else:
        launcher = mpirun_launcher(args.ranks, args.cpus, args.oversubscribe)
    trace = run_fwq(args.output, args.samples, launcher=launcher, quantum=args.quantum, work=args.work,
                    mode=mode, threads_cpus=args.cpus if args.threads else None,
                    oversubscribe=args.oversubscribe)
    w = most_affected(core_stats(trace))
    print(f"{args.output}: {trace.nranks} ranks x {trace.nsamples} samples; most affected rank {w.rank} "
          f"cpu {w.cpu}: mean {w.mean_us:.2f} us, max {w.max_us:.2f} us, std {w.std_us:.2f} us")
    return 0


def _threshold(text: str):
    if text == "auto":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: microseconds (e.g. 50) or auto") from None


def cmd_hunt(args) -> int:
    from stackproof.noise.hunt.hunt import check_cpus, hunt
    cpus = check_cpus(args.cpus)
    if args.buffer_kb < 64:
        raise StackproofError(f"--buffer-kb {args.buffer_kb}: at least 64 KB per CPU")
    doc = hunt(cpus, args.duration, args.threshold, args.buffer_kb, Path(args.outdir), quantum=args.quantum,
               apply=args.apply, cost=args.cost)
    print((Path(args.outdir) / "hunt.md").read_text())
    print(f"{args.outdir}/hunt.json, hunt.md, timeline.png, proposal/ written in {doc['wall_s']:.1f} s")
    return 0
