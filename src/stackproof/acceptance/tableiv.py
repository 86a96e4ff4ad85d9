"""`stackproof noise experiment`: the paper's Table IV as a verdict, measured on the local test
cluster; `make acceptance` runs the same matrix as one step (`acceptance_step`).

  stackproof noise experiment [--rounds 8] [--samples N] [--work W] [--conditions daemon,none,injected]
                              [--profile P ...] [--profile-file hunt/proposal/profiles.yaml] [-o DIR]

The matrix: every core-specialization profile of Table III this node type can run (and a noise
hunt's proposed profile, `--profile-file`), each under three noise conditions (stackproof.noise.tableiv:
the cluster's noise daemon, none; an injector inside the job under baseline and corespec), `--rounds`
times (an even number). A round runs
every configuration once; the order is reversed every other round, so a slow spell of the host or a
trend over a round falls on all profiles alike instead of on one. Between runs the test cluster is switched in process
(stackproof.reframe.session's `cluster_up`, the one way a run brings the cluster up in a profile, with
the noise daemon; 0.05-0.8 s here: a change of the daemon alone leaves Slurm running). FWQ (fwq-th, fixed work `-w`)
runs as a Slurm job step, one thread pinned to each of the profile's application cores, shielded
(nice -20 in its own autogroup); the injected condition runs fwq-mpi, one rank per application core,
with libfwq-selfish.so preloaded (each rank's sampling thread takes the SIGALRM detours).

Outputs in DIR (default build/fwq/table-iv): runs.json (one record per run: stackproof.noise.tableiv.Run),
table-iv.md (the table and one sentence per row), table-iv.json (the rows with their calls),
traces/*.dat (kept for the report's plots and the noise projection).

May import: the cluster, the noise package, reframe.session (its cluster switch) and the basics, like the
rest of acceptance/.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from stackproof.cluster import Cluster, Settings
from stackproof.cpulist import format_list, parse_list
from stackproof.errors import InputError, StackproofError
from stackproof.nodes.nodetype import from_host
from stackproof.nodes.profiles import plan, profile_names, read_profile_env, read_profile_file
from stackproof.noise import tableiv
from stackproof.noise.run import binary, selfish_env, shielded
from stackproof.noise.trace import TraceError, load
from stackproof.paths import REPO
from stackproof.reframe import session

SIGNATURE = tableiv.SIGNATURE
SAMPLES, WORK = tableiv.SAMPLES, tableiv.WORK
ROUNDS = 8          # an even number: half the rounds forward, half reversed
DEFAULT_OUT = REPO / "build" / "fwq" / "table-iv"


def profiles_here(profile_file: str | None = None) -> list[str]:
    """The catalog's profiles this node type can run, in the paper's order, plus the profile file's
    own profiles (a hunt's proposal)."""
    nt = from_host("local")
    names = profile_names()
    if profile_file:
        names += [p for p in read_profile_file(profile_file)["profiles"] if p not in names]
    out = []
    for name in names:
        try:
            plan(nt, name, profile_file=profile_file)
        except StackproofError:
            continue
        out.append(name)
    return tableiv.profile_order(out)


def configurations(profiles: list[str], conditions: list[str]) -> list[tuple[str, str]]:
    """(profile, condition) pairs of the matrix: every profile under the daemon and without it; the
    in-job injector, which no profile can move, under baseline and corespec only (two rows show that;
    five would only cost time)."""
    return [(p, c) for p in profiles for c in conditions
            if c != "injected" or p in tableiv.INJECTED_PROFILES or not set(tableiv.INJECTED_PROFILES) & set(profiles)]


def schedule(profiles: list[str], conditions: list[str], rounds: int) -> list[tuple[int, str, str]]:
    """(round, profile, condition) in time order: each round every configuration once, every other
    round in reverse (A B C, C B A, ...), so that a trend over a round lands on every profile; an even
    number of rounds (ValueError otherwise), so that every configuration sits at every position as
    often forward as reversed."""
    if rounds < 2 or rounds % 2:
        raise ValueError(f"Table IV rounds: an even number of at least 2 (half run in reverse order), not {rounds}")
    base = configurations(profiles, conditions)
    out = []
    for r in range(rounds):
        out += [(r, p, c) for p, c in (base if r % 2 == 0 else reversed(base))]
    return out


def fwq_step(penv: dict, nsamples: int, work: int, output: Path, node_cpus: int, mpi: bool = False) -> list[str]:
    """The srun command of one FWQ run on the profile's application cores. The job takes every CPU
    jobs may use (-c: the node's, less the system CPUs of a profile that reserves them) and binds to
    the application cores itself, so freecore's free core stays free; the task(s) at nice -20 in
    their own autogroup. Default: one task running fwq-th, one thread pinned per application core;
    it samples exactly as fwq-mpi does (fwq/README.md) and starts faster than fwq-mpi's PMIx and MPI
    (docs/performance.md, "Measured here, cited by the code"). mpi: fwq-mpi, one rank per application
    core (the in-job injector's SIGALRM handler runs in each rank's sampling thread)."""
    usable = node_cpus - len(parse_list(penv.get("STACKPROOF_SYSTEM_CPUS") or ""))
    common = ["-n", str(nsamples), "-w", str(work)]
    if mpi:
        n = int(penv["STACKPROOF_APP_CORES"])
        cmd = ["srun", "-N1", f"-n{n}", f"-c{max(1, usable // n)}", "--mpi=pmix", "--exclusive",
               f"--cpu-bind={penv['STACKPROOF_SRUN_CPU_BIND']}"]
        fwq = [str(binary("fwq-mpi")), *common]
    else:
        cmd = ["srun", "-N1", "-n1", f"-c{max(1, usable)}", "--exclusive", "--cpu-bind=none"]
        fwq = [str(binary("fwq-th")), *common, "--cpus", penv["STACKPROOF_APP_CPUS"]]
    # slurmstepd starts tasks in its own session: each task shields itself (nice -20, own autogroup)
    return cmd + shielded(fwq + ["-q", "-o", str(output)])


def _task_facts(pid: int | None) -> dict:
    """What the noise daemon really runs as: its threads' scheduling policy and allowed CPUs."""
    if not pid:
        return {}
    facts: dict = {"pid": pid}
    try:
        tasks = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
        policies = {os.sched_getscheduler(t) for t in tasks}
        facts["policy"] = "fifo" if policies == {os.SCHED_FIFO} else \
            "+".join(sorted({"fifo" if p == os.SCHED_FIFO else "other" for p in policies}))
        facts["cpus_allowed"] = format_list(os.sched_getaffinity(pid))
    except OSError as exc:
        facts["error"] = str(exc)
    return facts


def _selfish_summary(path: Path) -> dict:
    """The in-job injector's own report (one JSON line per rank) summed up."""
    try:
        lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    except (OSError, ValueError):
        return {"error": f"{path.name}: no injector report"}
    duty = [x.get("duty_cycle") for x in lines if isinstance(x.get("duty_cycle"), (int, float))]
    return {"ranks": len(lines), "duty_cycle": round(sum(duty) / len(duty), 4) if duty else None}


def run_matrix(cluster: Cluster, outdir: Path, profiles: list[str], conditions: list[str], rounds: int,
               samples: int = SAMPLES, work: int = WORK, signature: str = SIGNATURE,
               profile_file: str | None = None, log=None) -> list[tableiv.Run]:
    """Every (round, profile, condition) of the schedule: switch the cluster, run FWQ, reduce the
    trace to a run record (written to OUTDIR/runs.json after every run). A failed launch is retried
    once; a second failure stops the matrix with the error."""
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    traces = outdir / "traces"
    traces.mkdir(parents=True, exist_ok=True)
    plan_ = schedule(profiles, conditions, rounds)
    freq, duration = signature.split("Hz-")
    runs: list[tableiv.Run] = []
    t0 = time.monotonic()
    env = cluster.env()
    base = Settings(profile_file=profile_file or "")
    for seq, (rnd, prof, cond) in enumerate(plan_):
        t_switch = time.monotonic()
        st = session.cluster_up(prof, signature if cond == "daemon" else "", base=base, cluster=cluster)
        t_switch = time.monotonic() - t_switch
        penv = read_profile_env(cluster.root / "etc/stackproof/profile.env")
        name = f"{prof}-{cond}-r{rnd}"
        trace_path = traces / f"{name}.dat"
        run_env = env
        noise: dict = {}
        if cond == "injected":
            report = traces / f"{name}-injector.jsonl"
            report.unlink(missing_ok=True)
            run_env = selfish_env(float(freq), duration, "all", report=str(report), base=env)
        elif cond == "daemon":
            noise = _task_facts(st.noise_pid)
        started = time.monotonic() - t0
        cmd = fwq_step(penv, samples, work, trace_path, os.cpu_count() or 1, mpi=cond == "injected")
        t_run = time.monotonic()
        for attempt in (1, 2):
            proc = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=600)
            if proc.returncode == 0:
                break
            log(f"  table iv: {name}: srun exit {proc.returncode} (attempt {attempt}): "
                f"{proc.stderr.strip()[-300:]}")
        else:
            raise StackproofError(f"Table IV run {name} failed twice: {' '.join(cmd)}: {proc.stderr.strip()[-500:]}")
        t_run = time.monotonic() - t_run
        if cond == "injected":
            noise = _selfish_summary(traces / f"{name}-injector.jsonl")
        try:
            trace = load(trace_path, label=name)
        except TraceError as exc:
            raise StackproofError(f"Table IV run {name}: {exc}") from None
        allowed = noise.get("cpus_allowed", "")
        every = format_list(set(range(os.cpu_count() or 1)))
        run = tableiv.reduce_trace(trace, profile=prof, condition=cond, round=rnd, seq=seq, t_s=round(started, 2),
                                   cpus=penv["STACKPROOF_APP_CPUS"],
                                   daemon_cpus="" if cond != "daemon" or allowed in ("", every) else allowed,
                                   trace=str(trace_path.relative_to(outdir)), noise=noise)
        runs.append(run)
        (outdir / "runs.json").write_text(json.dumps(_meta_doc(runs, samples, work, signature, rounds), indent=1))
        elapsed = time.monotonic() - t0
        left = elapsed / (seq + 1) * (len(plan_) - seq - 1)
        log(f"  table iv: run {seq + 1}/{len(plan_)} (round {rnd + 1}/{rounds}) {prof}, {cond}: most affected "
            f"CPU {run.cpu}, std {run.std_us:.1f} us, max {run.max_us:.0f} us (switch {t_switch:.1f} s, run "
            f"{t_run:.1f} s); {elapsed:.0f} s, about {left:.0f} s left")
    return runs


def _meta_doc(runs, samples, work, signature, rounds) -> dict:
    return tableiv.runs_to_json(runs, samples=samples, work=work, signature=signature, rounds=rounds)


def write_outputs(outdir: Path, runs: list[tableiv.Run], signature: str = SIGNATURE) -> list[tableiv.Row]:
    """table-iv.md (the table, then one sentence per row) and table-iv.json (the rows and calls)."""
    rows = tableiv.table(runs, signature=signature)
    md = [tableiv.markdown(rows), ""] + [f"- {s}" for s in tableiv.sentences(rows, signature)]
    (outdir / "table-iv.md").write_text("\n".join(md) + "\n")
    (outdir / "table-iv.json").write_text(json.dumps({"signature": signature, "rows": tableiv.rows_as_dicts(rows)},
                                                     indent=1, default=str))
    return rows


def write_plots(outdir: Path, runs: list[tableiv.Run], imgdir: Path) -> list[Path]:
    """Per noise condition, the profiles side by side (the paper's Fig. 2-3 style scatter, PNG and
    SVG), one run each: the one whose std is the median of its configuration."""
    from stackproof.noise import plot
    imgdir.mkdir(parents=True, exist_ok=True)
    out = []
    for cond in tableiv.CONDITIONS:
        traces = []
        for prof in tableiv.profile_order({r.profile for r in runs if r.condition == cond}):
            mine = sorted((r for r in runs if r.condition == cond and r.profile == prof), key=lambda r: r.std_us)
            if mine and mine[len(mine) // 2].trace:
                traces.append(load(outdir / mine[len(mine) // 2].trace, label=prof))
        if traces:
            for ext in ("png", "svg"):
                out.append(plot.plot_compare(traces, imgdir / f"table-iv-{cond}.{ext}"))
    return out


def acceptance_step(cluster: Cluster, out: Path, rounds: int = ROUNDS, profile_file: str | Path | None = None) -> str:
    """The node section's Table IV for `make acceptance`: the matrix into OUT/table-iv/ (the report
    reads it there). Returns the step's one-line summary: the std calls under the daemon."""
    outdir = out / "table-iv"
    if outdir.exists():
        for old in list(outdir.glob("traces/*")) + [outdir / n for n in ("runs.json", "table-iv.md", "table-iv.json")]:
            old.unlink(missing_ok=True)
    outdir.mkdir(parents=True, exist_ok=True)
    profile_file = str(profile_file) if profile_file and Path(profile_file).is_file() else None
    runs = run_matrix(cluster, outdir, profiles_here(profile_file), list(tableiv.CONDITIONS), rounds,
                      profile_file=profile_file, log=lambda s: print(s, file=sys.stderr, flush=True))
    rows = write_outputs(outdir, runs)
    calls = [f"{r.profile} {r.calls[tableiv.HEADLINE].verdict}" for r in rows
             if r.condition == "daemon" and tableiv.HEADLINE in r.calls]
    return f"{len(runs)} FWQ runs; std under the daemon vs baseline: {', '.join(calls)} ({outdir / 'table-iv.md'})"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="stackproof noise experiment", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=ROUNDS,
                   help=f"repeats of every configuration, an even number (default {ROUNDS})")
    p.add_argument("--samples", type=int, default=SAMPLES, help=f"FWQ samples per rank and run (default {SAMPLES})")
    p.add_argument("--work", type=int, default=WORK, help=f"FWQ loop iterations per sample (default {WORK})")
    p.add_argument("--conditions", default=",".join(tableiv.CONDITIONS),
                   help="comma list of daemon, none, injected (default: all)")
    p.add_argument("--profile", action="append", help="a profile to run (repeatable; default: every one this "
                                                      "node type can run; baseline is always added)")
    p.add_argument("--profile-file", help="a profile file adding profiles (a noise hunt's proposal)")
    p.add_argument("--signature", default=SIGNATURE, help=f"the daemon's and injector's FREQHz-DURATION "
                                                          f"(default {SIGNATURE})")
    p.add_argument("-o", "--outdir", default=str(DEFAULT_OUT), help="output directory")
    p.add_argument("--imgdir", help="also draw the profiles side by side per noise condition here (PNG, SVG)")
    p.add_argument("--replot", action="store_true", help="no runs: rebuild the table from OUTDIR/runs.json")
    args = p.parse_args(argv)
    if not 2 <= args.rounds <= 100 or args.rounds % 2 or not 100 <= args.samples <= 10_000_000 \
            or not 1 <= args.work <= 10**9:
        p.error("--rounds an even number in 2..100 (half run in reverse order), --samples 100..10,000,000, "
                "--work 1..1e9")
    args.conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    bad = [c for c in args.conditions if c not in tableiv.CONDITIONS]
    if bad or not args.conditions:
        p.error(f"--conditions: one or more of {', '.join(tableiv.CONDITIONS)} (got {args.conditions})")
    Settings(noise_daemon=args.signature).validate(["baseline"])
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    outdir = Path(args.outdir)
    if args.replot:
        try:
            runs = tableiv.runs_from_json(json.loads((outdir / "runs.json").read_text()))
        except (OSError, ValueError) as exc:
            raise InputError(f"{outdir / 'runs.json'}: {exc}") from None
    else:
        known = profiles_here(args.profile_file)
        profiles = known if not args.profile else tableiv.profile_order({"baseline", *args.profile})
        missing = [p for p in profiles if p not in known]
        if missing:
            raise InputError(f"profile {', '.join(missing)}: not one this node type can run ({', '.join(known)})")
        cluster = Cluster()
        before = cluster.load_state()
        try:
            runs = run_matrix(cluster, outdir, profiles, args.conditions, args.rounds, args.samples, args.work,
                              args.signature, args.profile_file)
        finally:
            if before is None:
                cluster.down(quiet=True)
            else:
                cluster.up(Settings(**{**before.settings, "ports": tuple(before.settings["ports"])}))
    rows = write_outputs(outdir, runs, args.signature)
    if args.imgdir:
        write_plots(outdir, runs, Path(args.imgdir))
    print(tableiv.markdown(rows))
    print()
    for s in tableiv.sentences(rows, args.signature):
        print(f"- {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
