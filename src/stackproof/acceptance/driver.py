"""`make acceptance`: compare software stacks on the local test cluster (default: commodity =
Debian Open MPI 4.1 vs vendor = Intel MPI + MKL, baseline commodity), after checking the node
profiles; print and write a summary, tear the cluster down.

  python -m stackproof.acceptance [--stack commodity --stack vendor] [--baseline commodity]
         [--min-pairs 8] [--max-pairs 16] [--looks 2] [--block-launches 4] [--paired] [--rule bh|holm]
         [--margin 0.05] [--budget 9m] [--target-s 2] [--until-decided [--look-step 8] --budget 30m]

Steps: `stackproof stack check` of every stack (a bad set-up stops here, before anything starts);
per core-specialization profile: the test cluster up under it, an MPI smoke job (one rank per
application core, each rank's CPU checked) and the node checks of that profile (core
specialization where it reserves cores; mpibind binding under every profile: the per-profile clusters
load the mpibind SPANK plugin), one ReFrame session each, with the baseline stack; an MPI smoke across
3 namespaced nodes; then the stack comparison in looks (suite.py): blocks of launches, one job each
(A,B,B,A / B,A,A,B), until every metric's call is known or, with --until-decided, every headline
metric's (docs/performance.md), benchmarks sized by time (--target-s per launch). Then the noise hunt,
the node checks under the hunt's proposed profile, Table IV (tableiv.py: every profile, the hunt's
proposal too, with and without a noise daemon and with an in-job injector, in interleaved rounds; FWQ
per profile is measured there, not in the node-check sessions), the noise projection and the report.
The noise hunt, the projection and the report are the functions behind `stackproof noise hunt`,
`noise project` and `report build`, called in this process. Each step prints `[i/n] step ... ok (s)`,
the ReFrame sessions a live line.
SIGINT / SIGTERM: the ReFrame session is stopped (its jobs cancelled), the test cluster taken down,
one line, exit 128 + signal (130 for SIGINT). Outputs in reports/acceptance/ ($STACKPROOF_REPORT_DIR):
summary.md, report.html, report.md, reframe-report.json (merged sessions), reframe.log.

The steps, in order, are plan_steps(): a new step is one line there. The ReFrame sessions are
suite.py's, through stackproof.reframe.session (the one way to run ReFrame).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Callable

from stackproof.cluster import Cluster, Settings, find_built_mpibind_plugin
from stackproof.cpulist import parse_list
from stackproof.errors import InputError, StackproofError
from stackproof.nodes.nodetype import from_host
from stackproof.noise.hunt.hunt import check_cpus, hunt
from stackproof.noise.hunt.tracefs import ensure_tracefs
from stackproof.noise.scale.cli import project, write_outputs as write_projection
from stackproof.paths import REPO
from stackproof.nodes.profiles import plan, profile_names, read_profile_env
from stackproof.reframe import session
from stackproof.reframe_output import merge_reports
from stackproof.report.build import build as build_report
from stackproof.report.rows import load_run
from stackproof.stacks import StackError, load_stack, stack_names
from stackproof.acceptance import suite, tableiv
from stackproof.acceptance.provenance import stack_provenance


def build_mpi_hello(mpi: str, out_dir: Path) -> Path:
    """Compile the packaged MPI smoke program with mpicc.<mpi> (openmpi | mpich)."""
    src = resources.files("stackproof.stacks") / "data" / "mpi_hello.c"
    exe = Path(out_dir) / f"mpi_hello-{mpi}"
    proc = subprocess.run([f"mpicc.{mpi}", "-O2", "-o", str(exe), str(src)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise StackproofError(f"building the MPI smoke program with mpicc.{mpi} failed: {proc.stderr.strip()}")
    return exe


class NotMeasured(StackproofError):
    """A step that could not measure what it is about on this host (no tracefs, no proposal): its row
    says "not measured" with the reason, never "pass"; it fails nothing else."""


@dataclass
class Result:
    step: str
    status: str         # "pass", "not measured" or "fail"
    detail: str
    seconds: float

    @property
    def ok(self) -> bool:
        """Not failed (a step that could not measure says so in its row, and fails no run)."""
        return self.status != "fail"


def profile_env(cluster: Cluster) -> dict[str, str]:
    return read_profile_env(cluster.root / "etc/stackproof/profile.env")


def mpi_smoke(cluster: Cluster, hello: Path, profile: str) -> str:
    """One Open MPI rank per application core; every rank must stay on the application CPUs."""
    st = cluster.load_state()
    if st is None:
        raise StackproofError("the test cluster is not up")
    env = profile_env(cluster)
    n = env["STACKPROOF_APP_CORES"]
    # explicit binding below: keep the mpibind plugin (if loaded) from overriding it
    srun = ["srun", f"-n{n}", "--mpi=pmix"] + (["--mpibind=off"] if st.settings.get("mpibind_plugin") else [])
    if env["STACKPROOF_RESERVED"] == "no":
        # No system change: the job takes the whole node and binds ranks to the application cores.
        cmd = ["salloc", "-N1", "--exclusive"] + srun + [f"--cpu-bind={env['STACKPROOF_SRUN_CPU_BIND']}", str(hello)]
    else:
        cmd = srun + [str(hello)]
    proc = cluster.exec_cmd(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise StackproofError(f"MPI smoke failed under {profile}: {proc.stderr.strip()[-500:]}")
    cpus = {int(c) for c in re.findall(r"cpu (\d+) sum", proc.stdout)}
    app = parse_list(env["STACKPROOF_APP_CPUS"])
    if len(cpus) == 0 or not cpus <= app:
        raise StackproofError(f"{profile}: ranks ran on CPUs {sorted(cpus)}, application CPUs are {sorted(app)}")
    return f"{n} ranks on CPUs {','.join(map(str, sorted(cpus)))} (app CPUs {env['STACKPROOF_APP_CPUS']})"


def multinode_smoke(cluster: Cluster, hello: Path) -> str:
    proc = cluster.exec_cmd(["srun", "-N3", "-n3", "--mpi=pmix", str(hello)], capture_output=True, text=True,
                            timeout=300)
    hosts = sorted(set(re.findall(r" on (\S+) cpu", proc.stdout)))
    if proc.returncode != 0 or hosts != ["n1", "n2", "n3"]:
        raise StackproofError(f"3-node MPI smoke failed (hosts {hosts}): {proc.stderr.strip()[-500:]}")
    return "Open MPI over TCP across n1,n2,n3"


STATUS_WORD = {"pass": "ok", "not measured": "NOT MEASURED", "fail": "FAILED"}
STATUS_CELL = {"pass": "pass", "not measured": "**not measured**", "fail": "**FAIL**"}


def run(steps: list[tuple[str, Callable[[], str]]]) -> list[Result]:
    results = []
    for i, (name, fn) in enumerate(steps, start=1):
        print(f"[{i}/{len(steps)}] {name} ...", end="", flush=True, file=sys.stderr)
        t0 = time.monotonic()
        try:
            detail, status = fn(), "pass"
        except NotMeasured as exc:
            detail, status = str(exc), "not measured"
        except (StackproofError, subprocess.TimeoutExpired) as exc:
            detail, status = str(exc), "fail"
        except Exception as exc:  # a broken step must not hide the others' results
            detail, status = f"{type(exc).__name__}: {exc}", "fail"
        dt = time.monotonic() - t0
        print(f" {STATUS_WORD[status]} ({dt:.1f} s)", file=sys.stderr, flush=True)
        if status != "pass":
            print(f"      {detail}", file=sys.stderr)
        results.append(Result(name, status, detail, dt))
    return results


def summary_markdown(results: list[Result], header: str) -> str:
    lines = ["# stackproof acceptance summary", "", header, "",
             "| step | result | seconds | detail |", "|---|---|---:|---|"]
    for r in results:
        lines.append(f"| {r.step} | {STATUS_CELL[r.status]} | {r.seconds:.1f} | {r.detail} |")
    count = {s: sum(r.status == s for r in results) for s in STATUS_CELL}
    lines += ["", f"{count['pass']} passed, " + (f"{count['not measured']} not measured, " if count["not measured"] else "")
              + f"{count['fail']} failed"]
    return "\n".join(lines) + "\n"


DEFAULT_STACKS = ["commodity", "vendor"]


# OSU's timed loop averages 10^5 messages and more in half a second; a longer loop measured the host
# no better (A/A spreads: docs/performance.md) and OSU's four benchmarks are 64 of a look's 144 launches
OSU_TARGET_S = 0.5


def sizing(target_s: float, full_sweep: bool) -> list[str]:
    """Benchmarks sized by time: each launch aims at `target_s` seconds (OSU: at most OSU_TARGET_S, the
    verdict's sizes only, iterations from a short probe; AMG/SW4: problem size scaled to the target)."""
    out = ["-S", f"OSUBenchmark.time_target={min(target_s, OSU_TARGET_S):g}"]
    for check in ("AMGBenchmark", "SW4Benchmark"):
        out += ["-S", f"{check}.time_target={target_s:g}"]
    out += ["-S", f"OSUBenchmark.full_sweep={'true' if full_sweep else 'false'}"]
    return out


def measure_costs(cluster: Cluster, stack: str) -> dict:
    """The fixed cost of one launch: an empty job (submission) and the stack's identity probe, each the
    median of 3 launches; reported next to the time inside the benchmarks."""
    env = cluster.env()

    def median_of(cmd):
        ts = []
        for _ in range(3):
            t0 = time.monotonic()
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            if proc.returncode != 0:
                return None
            ts.append(time.monotonic() - t0)
        return round(statistics.median(ts), 3)
    out = {"submit_s": median_of(["srun", "-n1", "true"])}
    try:
        st = load_stack(stack)
        probe = st.benchmark("probe")
        launch = list(st.launch_command("slurm"))
        env.update(st.env_changes(env))
        total = median_of(launch + ["-n2", str(probe)])
        out["probe_s"] = None if total is None or out["submit_s"] is None else round(max(0.0, total - out["submit_s"]), 3)
    except (StackError, OSError):
        out["probe_s"] = None
    return out


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m stackproof.acceptance", description=__doc__.split("\n\n")[0])
    p.add_argument("--stack", action="append", metavar="NAME",
                   help=f"a stack to compare (repeatable; default {' and '.join(DEFAULT_STACKS)})")
    p.add_argument("--baseline", metavar="NAME",
                   help="the stack the others are compared with (default: the first --stack, i.e. commodity)")
    suite.add_arguments(p)
    p.add_argument("--target-s", type=float, default=2.0, help="time target of one benchmark launch (default 2 s)")
    p.add_argument("--full-sweep", action="store_true", help="OSU: every message size, not only the verdict's")
    p.add_argument("--node-repeat", type=int, default=int(os.environ.get("STACKPROOF_REPEAT") or 3),
                   help="launches of each node check (core specialization) per profile (default 3)")
    p.add_argument("--table-iv-rounds", type=int, default=tableiv.ROUNDS, metavar="N",
                   help=f"rounds of the Table IV matrix: FWQ runs per profile and noise condition "
                        f"(default {tableiv.ROUNDS}; docs/noise.md)")
    args = p.parse_args(argv)
    args.stack = args.stack or list(DEFAULT_STACKS)
    args.baseline = args.baseline or args.stack[0]
    known = stack_names()
    for name in args.stack:
        if name not in known:
            p.error(f"unknown stack {name!r} (known: {', '.join(known)})")
    if args.baseline not in args.stack:
        p.error(f"--baseline {args.baseline} is not one of the stacks compared ({', '.join(args.stack)})")
    args.stack = [args.baseline] + [s for s in args.stack if s != args.baseline]
    try:
        suite.check_arguments(args)
    except InputError as exc:          # one line, exit 2 (a duration that is not one, one stack to compare...)
        print(f"{p.prog}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if args.node_repeat < 1 or not 0 < args.target_s <= 600:
        p.error("--node-repeat >= 1 and 0 < --target-s <= 600")
    if not 2 <= args.table_iv_rounds <= 100 or args.table_iv_rounds % 2:
        p.error("--table-iv-rounds: an even number in 2..100 (every other round runs in reverse order)")
    return args


class Interrupted(BaseException):
    """SIGINT or SIGTERM: not an error of a step, the end of the run."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _on_signal(signum, frame):
    # a second signal while cleaning up is ignored: the cleanup must finish
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Interrupted(signum)


def main(argv=None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        print("acceptance: must run as root (the test cluster starts daemons)", file=sys.stderr)
        return 1
    try:
        target = session.target(suite.SYSTEM, args.stack)
        for line in session.preflight(target):        # the run's one readiness check
            print(f"acceptance: {line}", file=sys.stderr)
        warning = suite.lone_metric_check(args, target, sizing(args.target_s, args.full_sweep))
        if warning:
            print(f"acceptance: warning: {warning}", file=sys.stderr)
    except (StackError, InputError) as exc:
        print(f"acceptance: error: {exc}", file=sys.stderr)
        return 2
    except StackproofError as exc:
        print(f"acceptance: error: {exc}", file=sys.stderr)
        return 1
    out = Path(os.environ.get("STACKPROOF_REPORT_DIR", REPO / "reports" / "acceptance"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "reframe.log").unlink(missing_ok=True)
    for old in list(out.glob("reframe-look*.json")) + list(out.glob("reframe-node-*.json")):
        old.unlink()
    nt = from_host("local")
    cluster = Cluster()
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    t_start = time.monotonic()
    state: dict = {"node_docs": [], "costs": {}, "profiles": [], "target": target}
    try:
        hello = build_mpi_hello("openmpi", out)
        steps = plan_steps(args, out, nt, cluster, hello, state)
        results = run(steps)
    except Interrupted as exc:
        print(f"\nacceptance: interrupted ({exc}): stopping the ReFrame session and the test cluster",
              file=sys.stderr, flush=True)
        session.stop_sessions()
        cluster.down(quiet=True)
        print(f"acceptance: stopped after {time.monotonic() - t_start:.0f} s; partial results in {out}",
              file=sys.stderr)
        return 128 + exc.signum
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        session.stop_sessions()
        cluster.down(quiet=True)
    total = time.monotonic() - t_start
    header = (f"Stacks {', '.join(args.stack)} (baseline {args.baseline}); looks after "
              f"{', '.join(map(str, args.design.looks))}{f' + every {args.design.step}' if args.design.open else ''} "
              f"launches per stack in blocks of {args.block_launches} ({', '.join(k for k, _ in args.design.plan)}; "
              f"alpha {' + '.join(f'{100 * a:g} %' for a in args.design.alphas)}, {args.design.rule} over all metrics), "
              f"margin ±{100 * args.margin:g} %, "
              f"{args.target_s:g} s per launch. Node type `local`: {nt.num_cpus} CPUs ({len(nt.sockets)} socket x "
              f"{nt.cores_per_socket} cores x {nt.threads_per_core} PUs), corespec "
              f"k={nt.corespec.get('cores_per_socket')}. Total {total:.0f} s.")
    md = summary_markdown(results, header)
    (out / "summary.md").write_text(md)
    (out / "summary.json").write_text(json.dumps({         # for `make bench-acceptance` (acceptance/bench.py)
        "stacks": args.stack, "baseline": args.baseline, "total_s": round(total, 1),
        "steps": [{"step": r.step, "ok": r.ok, "status": r.status, "seconds": round(r.seconds, 1)}
                  for r in results]}, indent=1))
    print("\n" + md, end="")
    print(f"summary: {out / 'summary.md'}; report: {out / 'report.html'} and {out / 'report.md'}", file=sys.stderr)
    return 0 if all(r.ok for r in results) else 1


def plan_steps(args, out: Path, nt, cluster: Cluster, hello: Path, state: dict) -> list[tuple[str, Callable[[], str]]]:
    steps: list[tuple[str, Callable[[], str]]] = []
    try:
        plugin = find_built_mpibind_plugin()
        state["no_mpibind"] = "" if plugin else "the mpibind SPANK plugin is not built (make mpibind-build)"
    except StackproofError as exc:
        plugin, state["no_mpibind"] = None, str(exc)
    for prof in profile_names():
        try:
            plan(nt, prof)
        except StackproofError as exc:
            steps.append((f"{prof}: skipped", lambda exc=exc: f"not applicable here: {exc}"))
            continue
        state["profiles"].append(prof)
        steps.append((f"{prof}: cluster up", lambda p=prof: _up_in(cluster, p, plugin)))
        steps.append((f"{prof}: MPI smoke", lambda p=prof: mpi_smoke(cluster, hello, p)))
        steps.append((f"{prof}: node checks ({args.baseline})", lambda p=prof: _node_checks(cluster, out, args, nt, p, state)))
    steps.append(("3 nodes: cluster up", lambda: _up(cluster, Settings(profile="baseline", nodes=3))))
    steps.append(("3 nodes: MPI smoke", lambda: multinode_smoke(cluster, hello)))
    steps.append(("test cluster for the stacks (1 node, 2 fake GPUs, mpibind)",
                  lambda: _up(cluster, Settings(profile="baseline", fake_gpus=2, mpibind_plugin=plugin))))
    steps.append(("launch costs (empty job, identity probe)", lambda: _costs(cluster, args, state)))
    steps.append((f"stack comparison ({' vs '.join(args.stack)}, looks after "
                  f"{', '.join(map(str, args.design.looks))}{' and more' if args.design.open else ''} launches per "
                  f"stack)", lambda: _compare(cluster, out, args, state)))
    for prof in ("baseline", "corespec"):
        steps.append((f"who stole the time: noise hunt under {prof} (5 s)",
                      lambda p=prof: _hunt(cluster, out, p)))
    proposal = out / "hunt" / "baseline" / "proposal" / "profiles.yaml"
    steps.append(("the hunt's proposal: cluster up and node checks",
                  lambda: _proposal_checks(cluster, out, args, nt, proposal, plugin, state)))
    # after the last ReFrame session: the report holds every node check, the proposal's too
    steps.append(("results merged (reframe-report.json)", lambda: _merge(out, args, nt, state)))
    steps.append((f"Table IV: the profiles against a noise daemon ({args.table_iv_rounds} interleaved rounds)",
                  lambda: tableiv.acceptance_step(cluster, out, args.table_iv_rounds, proposal)))
    steps.append(("noise at scale (projection of the FWQ traces)", lambda: _project(out, args.baseline)))
    steps.append(("report", lambda: _report(out, args.baseline)))
    return steps


def _rfm_env(cluster: Cluster) -> dict:
    st = cluster.load_state()
    if st is None:
        raise StackproofError("the test cluster is not up (see the cluster step above)")
    env = cluster.env()
    env.update(STACKPROOF_CLUSTER_NODES=str(len(st.node_names)), STACKPROOF_FAKE_GPUS=str(st.settings["fake_gpus"]))
    return env


def _node_checks(cluster: Cluster, out: Path, args, nt, profile: str, state: dict, profile_file=None) -> str:
    """The node checks of `profile` (the cluster runs it now) in one ReFrame session: core
    specialization where the profile reserves cores, the mpibind binding under every profile. Fails
    when the binding could not be measured (the plugin is not loaded): nothing unmeasured passes."""
    st = cluster.load_state()
    loaded = bool(st and st.settings.get("mpibind_plugin"))
    names = suite.node_check_names(profile, plan(nt, profile, profile_file=profile_file).reserve, loaded)
    summary = ""
    if names:
        doc, summary = suite.node_checks(state["target"], _rfm_env(cluster), out, args.baseline, profile, names,
                                         [])
        state["node_docs"].append(doc)
        if not doc.get("runs") or suite.failures([doc]):
            raise StackproofError(f"node checks under {profile}: {summary}; see {out / 'reframe.log'}")
    if not loaded:
        raise StackproofError(f"binding under {profile} not measured: "
                              f"{state.get('no_mpibind') or 'the test cluster runs without the mpibind plugin'}"
                              + (f" (other node checks: {summary})" if summary else ""))
    return summary


def _proposal_checks(cluster: Cluster, out: Path, args, nt, proposal: Path, plugin, state: dict) -> str:
    """The node checks under the profile the noise hunt proposed (its proposal/profiles.yaml), on the
    cluster brought up in it; "not measured" with the reason where the hunt proposed none."""
    if not proposal.is_file():
        raise NotMeasured(f"the noise hunt under baseline wrote no proposal ({proposal})")
    names = [n for n in profile_names(proposal) if n not in profile_names()]
    if len(names) != 1:
        raise StackproofError(f"{proposal}: expected one proposed profile, found {', '.join(names) or 'none'}")
    plan(nt, names[0], profile_file=proposal)
    up = _described(session.cluster_up(names[0], base=Settings(mpibind_plugin=plugin, profile_file=str(proposal)),
                                       cluster=cluster))
    return f"{names[0]} ({up}): " + _node_checks(cluster, out, args, nt, names[0], state, profile_file=proposal)


def _costs(cluster: Cluster, args, state: dict) -> str:
    state["costs"] = measure_costs(cluster, args.baseline)
    c = state["costs"]
    return f"empty job {c.get('submit_s')} s, identity probe {c.get('probe_s')} s"


def _compare(cluster: Cluster, out: Path, args, state: dict) -> str:
    env = {**_rfm_env(cluster), "STACKPROOF_NOISE_STACK": args.baseline}
    t0 = time.monotonic()
    merged, looks, summary = suite.compare_stacks(state["target"], env, out, args.design, args.budget_s,
                                                  sizing(args.target_s, args.full_sweep),
                                                  per_stack=args.block_launches, until_decided=args.until_decided)
    state.update(merged=merged, looks=looks, compare_s=time.monotonic() - t0)
    if "failed" in summary:
        raise StackproofError(summary + f" in {time.monotonic() - t0:.0f} s")
    return summary + f" in {time.monotonic() - t0:.0f} s"


def _merge(out: Path, args, nt, state: dict) -> str:
    if not state.get("merged"):
        raise StackproofError("the stack comparison produced no results")
    docs = [state["merged"]] + state["node_docs"]
    ran = sum(1 for lk in state.get("looks") or [] if "decided" in lk)
    record = {"design": replace(args.design, ran=ran).as_dict(),
              "timing": suite.timing([state["merged"]], state["compare_s"], state["looks"],
                                     {**state["costs"], "target_s": args.target_s}),
              "provenance": {s: stack_provenance(s, nt.name, "baseline") for s in args.stack}}
    doc = merge_reports(docs, record=record)
    # every session's output beside the report (the skip reasons are in the JSON: skip_reason)
    info = doc["session_info"]
    info["log_files"] = [*(info.get("log_files") or []), str(out / "reframe.log")]
    (out / "reframe-report.json").write_text(json.dumps(doc, indent=1, default=str))
    n = sum(len(r["testcases"]) for r in doc["runs"])
    t = record["timing"]
    return (f"{n} test cases; stack comparison {t['wall_s']:.0f} s wall, {t['launch_s']:.0f} s in {t['jobs']} jobs "
            f"of {t['launches']} launches")


def _hunt(cluster: Cluster, out: Path, profile: str) -> str:
    """The noise hunt (`stackproof noise hunt`'s function) on the node while the test cluster runs
    `profile` (its daemons bound as the profile says), kept in out/hunt/<profile>/ (its progress in
    hunt.log) for the report's "who stole the time" section. A host without tracefs or root gets
    "not measured" with the reason, not a pass."""
    _up_in(cluster, profile)
    try:
        ensure_tracefs()
    except StackproofError as exc:
        raise NotMeasured(str(exc)) from None
    target = out / "hunt" / profile
    with _stderr_to(target / "hunt.log"):
        hunt(check_cpus(None), 5.0, 60.0, 8192, target)
    return f"{target / 'hunt.md'}"


@contextlib.contextmanager
def _stderr_to(path: Path):
    """What a step's function prints on stderr goes to `path`, not between the driver's step lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh, contextlib.redirect_stderr(fh):
        yield


def _project(out: Path, stack: str) -> str:
    """The noise projection (`stackproof noise project`'s function) of this run's FWQ traces (every
    profile measured without an injected signature), written to out/project/ for the report's "Noise
    at scale" section. A small sweep: 1 to 16,384 nodes, binomial and linear allreduce, 300 iterations."""
    with _stderr_to(out / "project" / "project.log"):
        doc = project(run=str(out), stack=stack, nodes=[1, 64, 1024, 16384], iterations=300,
                      collectives=["binomial", "linear"])
        write_projection(doc, out / "project")
    return f"{out / 'project' / 'project.md'}"


def _report(out: Path, baseline: str) -> str:
    """The report (`stackproof report build`'s function) of reframe-report.json, in out/."""
    report = out / "reframe-report.json"
    if not report.exists():
        raise StackproofError("no ReFrame results to report")
    with _stderr_to(out / "report.log"):
        cases = load_run(str(report))
        data = build_report(cases, out, "stackproof acceptance report", baseline=baseline)
    return (f"{out / 'report.html'}: {len(cases)} test cases, stacks {', '.join(data['stacks'])} "
            f"(baseline {data['baseline']})" + (f", {len(data['notes'])} note(s) in report.md" if data["notes"] else ""))


def _up(cluster: Cluster, settings: Settings) -> str:
    return _described(cluster.up(settings))


def _up_in(cluster: Cluster, profile: str, mpibind_plugin: str | None = None) -> str:
    """The test cluster in `profile` with the mpibind SPANK plugin `mpibind_plugin` (None: none), every
    other setting the default (1 node, no GPUs)."""
    return _described(session.cluster_up(profile, base=Settings(mpibind_plugin=mpibind_plugin), cluster=cluster))


def _described(st) -> str:
    return f"nodes {','.join(st.node_names)}, system CPUs {st.system_cpus or '-'}, app CPUs {st.app_cpus}"


if __name__ == "__main__":
    sys.exit(main())
