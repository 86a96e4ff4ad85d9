"""`make acceptance`: compare software stacks on the local test cluster (default: commodity =
Debian Open MPI 4.1 vs vendor = Intel MPI + MKL, baseline commodity), after checking the node
profiles; print and write a summary, tear the cluster down.

  python -m stackproof.acceptance [--stack commodity --stack vendor] [--baseline commodity] [--repeat N]

Steps: `stackproof stack check` of every stack (a bad set-up stops here, before anything starts),
an MPI smoke job under every core-specialization profile (one rank per application core, each
rank's CPU checked) and across 3 namespaced nodes, then one ReFrame session on the test cluster:
per stack MPI hello + identity, NetPIPE, memory bandwidth, FWQ, OSU/AMG/SW4 where the stack has
them, each performance check repeated N times as separate jobs (--repeat, default 3 here),
stacks interleaved; the node checks (FWQ x profiles x injected signature, core specialization,
mpibind binding) run once, with the baseline stack. Then `stackproof report --baseline B`.
Each step prints `[i/n] step ... ok (s)`. Outputs in reports/acceptance/ ($STACKPROOF_REPORT_DIR):
summary.md, report.html, report.md, reframe-report.json.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Callable

from .cluster import Cluster, Settings, find_mpibind_plugin
from .cpulist import parse_list
from .errors import StackproofError
from .nodetype import from_host
from .paths import REPO
from .profiles import plan, profile_names, read_profile_env
from .stacks import StackError, stack_names
from .stacks.preflight import ensure_ready


def build_mpi_hello(mpi: str, out_dir: Path) -> Path:
    """Compile the packaged MPI smoke program with mpicc.<mpi> (openmpi | mpich)."""
    src = resources.files("stackproof") / "data" / "mpi_hello.c"
    exe = Path(out_dir) / f"mpi_hello-{mpi}"
    proc = subprocess.run([f"mpicc.{mpi}", "-O2", "-o", str(exe), str(src)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise StackproofError(f"building the MPI smoke program with mpicc.{mpi} failed: {proc.stderr.strip()}")
    return exe


@dataclass
class Result:
    step: str
    ok: bool
    detail: str
    seconds: float


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


def run(steps: list[tuple[str, Callable[[], str]]]) -> list[Result]:
    results = []
    for i, (name, fn) in enumerate(steps, start=1):
        print(f"[{i}/{len(steps)}] {name} ...", end="", flush=True, file=sys.stderr)
        t0 = time.monotonic()
        try:
            detail, ok = fn(), True
        except (StackproofError, subprocess.TimeoutExpired) as exc:
            detail, ok = str(exc), False
        except Exception as exc:  # a broken step must not hide the others' results
            detail, ok = f"{type(exc).__name__}: {exc}", False
        dt = time.monotonic() - t0
        print(f" {'ok' if ok else 'FAILED'} ({dt:.1f} s)", file=sys.stderr, flush=True)
        if not ok:
            print(f"      {detail}", file=sys.stderr)
        results.append(Result(name, ok, detail, dt))
    return results


def summary_markdown(results: list[Result], header: str) -> str:
    lines = ["# stackproof acceptance summary", "", header, "",
             "| step | result | seconds | detail |", "|---|---|---:|---|"]
    for r in results:
        lines.append(f"| {r.step} | {'pass' if r.ok else '**FAIL**'} | {r.seconds:.1f} | {r.detail} |")
    passed = sum(r.ok for r in results)
    lines += ["", f"{passed} passed, {len(results) - passed} failed"]
    return "\n".join(lines) + "\n"


# FWQ size for acceptance on a small machine: 50,000 samples of ~7 us quanta (-w 16384) per rank;
# runs with an injected signature sample for at least 5 signature periods (the check's rule).
FWQ_SETTINGS = ["-S", "FWQNoise.samples=50000", "-S", "FWQNoise.work=16384",
                # OSU point-to-point: 1,000 timed iterations per size (default 10,000 small / 1,000 large)
                "-S", "OSUBenchmark.pt2pt_opts=-i,1000,-x,100"]
ACCEPTANCE_CHECKS = ("FWQNoise|CoreSpecCheck|MpibindBinding|MPIHello|NetPIPE|MemoryBandwidth|OSUBenchmark|"
                     "AMGBenchmark|SW4Benchmark|GPUHealth")
DEFAULT_STACKS = ["commodity", "vendor"]


def reframe_suite(cluster: Cluster, out: Path, stacks: list[str], baseline: str, repeat: int) -> str:
    """The ReFrame acceptance checks on the test cluster (output streamed as progress)."""
    report = out / "reframe-report.json"
    st = cluster.load_state()
    if st is None:
        raise StackproofError("the test cluster is not up (see the cluster step above)")
    env = cluster.env()
    env.update(STACKPROOF_CLUSTER_NODES=str(len(st.node_names)), STACKPROOF_FAKE_GPUS=str(st.settings["fake_gpus"]),
               STACKPROOF_REPEAT=str(repeat), STACKPROOF_NOISE_STACK=baseline)
    cmd = [sys.executable, str(REPO / "reframe-tests/run.py"), "--system", "testcluster"]
    for s in stacks:
        cmd += ["--stack", s]
    # The cpu partition: the gpu partition's fake GPUs cannot run CUDA, and the same node would only
    # repeat the CPU measurements.
    # AMG's paper size (2 M points per rank) is for real clusters; the test cluster runs the CI size
    cmd += ["--", "--system", "testcluster:cpu", "-n", ACCEPTANCE_CHECKS, "-x", ".*%size=paper",
            "--report-file", str(report), *FWQ_SETTINGS]
    print(file=sys.stderr)
    proc = subprocess.run(cmd, env=env, stderr=subprocess.STDOUT, text=True, stdout=sys.stderr)
    if not report.exists():
        raise StackproofError(f"ReFrame wrote no report (exit {proc.returncode})")
    doc = json.loads(report.read_text())
    s = doc["session_info"]
    summary = (f"{s.get('num_cases', '?')} cases, {s.get('num_failures', 0)} failed, "
               f"{s.get('num_skipped', 0)} skipped (stacks {', '.join(stacks)})")
    if proc.returncode != 0:
        raise StackproofError(f"ReFrame: {summary}; see {report}")
    return summary


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m stackproof.acceptance", description=__doc__.split("\n\n")[0])
    p.add_argument("--stack", action="append", metavar="NAME",
                   help=f"a stack to compare (repeatable; default {' and '.join(DEFAULT_STACKS)})")
    p.add_argument("--baseline", metavar="NAME",
                   help="the stack the others are compared with (default: the first --stack, i.e. commodity)")
    p.add_argument("--repeat", type=int, default=int(os.environ.get("STACKPROOF_REPEAT") or 3),
                   help="separate launches per performance check and stack (default $STACKPROOF_REPEAT or 3: "
                        "under 10 minutes here; 5 gives the report a 95 %% interval)")
    args = p.parse_args(argv)
    args.stack = args.stack or list(DEFAULT_STACKS)
    args.baseline = args.baseline or args.stack[0]
    known = stack_names()
    for name in args.stack:
        if name not in known:
            p.error(f"unknown stack {name!r} (known: {', '.join(known)})")
    if args.baseline not in args.stack:
        p.error(f"--baseline {args.baseline} is not one of the stacks compared ({', '.join(args.stack)})")
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        print("acceptance: must run as root (the test cluster starts daemons)", file=sys.stderr)
        return 1
    try:
        for line in ensure_ready(args.stack, "slurm"):
            print(f"acceptance: {line}", file=sys.stderr)
    except StackError as exc:
        print(f"acceptance: error: {exc}", file=sys.stderr)
        return 2
    out = Path(os.environ.get("STACKPROOF_REPORT_DIR", REPO / "reports" / "acceptance"))
    out.mkdir(parents=True, exist_ok=True)
    nt = from_host("local")
    cluster = Cluster()
    hello = build_mpi_hello("openmpi", out)
    steps: list[tuple[str, Callable[[], str]]] = []
    for prof in profile_names():
        try:
            plan(nt, prof)
        except StackproofError as exc:
            steps.append((f"{prof}: skipped", lambda exc=exc: f"not applicable here: {exc}"))
            continue
        steps.append((f"{prof}: cluster up", lambda p=prof: _up(cluster, Settings(profile=p))))
        steps.append((f"{prof}: MPI smoke", lambda p=prof: mpi_smoke(cluster, hello, p)))
    steps.append(("3 nodes: cluster up", lambda: _up(cluster, Settings(profile="baseline", nodes=3))))
    steps.append(("3 nodes: MPI smoke", lambda: multinode_smoke(cluster, hello)))
    plugin = find_mpibind_plugin()
    steps.append(("test cluster for ReFrame (1 node, 2 fake GPUs, mpibind)",
                  lambda: _up(cluster, Settings(profile="baseline", fake_gpus=2, mpibind_plugin=plugin))))
    steps.append((f"ReFrame acceptance suite ({' vs '.join(args.stack)}, {args.repeat} repeats)",
                  lambda: reframe_suite(cluster, out, args.stack, args.baseline, args.repeat)))
    for prof in ("baseline", "corespec"):
        steps.append((f"who stole the time: noise hunt under {prof} (5 s)",
                      lambda p=prof: _hunt(cluster, out, p)))
    steps.append(("noise at scale (projection of the FWQ traces)", lambda: _project(out, args.baseline)))
    steps.append(("report", lambda: _report(out, args.baseline)))
    try:
        results = run(steps)
    finally:
        cluster.down(quiet=True)
    header = (f"Stacks {', '.join(args.stack)} (baseline {args.baseline}), {args.repeat} repeats. "
              f"Node type `local`: {nt.num_cpus} CPUs ({len(nt.sockets)} socket x {nt.cores_per_socket} cores x "
              f"{nt.threads_per_core} PUs), corespec k={nt.corespec.get('cores_per_socket')}.")
    md = summary_markdown(results, header)
    (out / "summary.md").write_text(md)
    print("\n" + md, end="")
    print(f"summary: {out / 'summary.md'}; report: {out / 'report.html'} and {out / 'report.md'}", file=sys.stderr)
    return 0 if all(r.ok for r in results) else 1


def _hunt(cluster: Cluster, out: Path, profile: str) -> str:
    """`stackproof noise hunt` on the node while the test cluster runs `profile` (its daemons bound as
    the profile says), kept in out/hunt/<profile>/ for the report's "who stole the time" section. A
    host without tracefs or root gets "not measured" with the reason, not a pass."""
    _up(cluster, Settings(profile=profile))
    target = out / "hunt" / profile
    proc = subprocess.run([sys.executable, "-m", "stackproof.cli", "noise", "hunt", "--duration", "5",
                           "--threshold", "60", "-o", str(target)], capture_output=True, text=True)
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        if "tracefs" in reason or "root" in reason:
            return f"not measured: {reason}"
        raise StackproofError(f"stackproof noise hunt failed: {reason}")
    return f"{target / 'hunt.md'}"


def _project(out: Path, stack: str) -> str:
    """`stackproof noise project` on this run's FWQ traces (every profile measured without an
    injected signature), written to out/project/ for the report's "Noise at scale" section. A small
    sweep: 1 to 16,384 nodes, binomial and linear allreduce, 300 iterations."""
    proc = subprocess.run([sys.executable, "-m", "stackproof.cli", "noise", "project", "--run", str(out),
                           "--stack", stack, "--nodes", "1,64,1024,16384", "--iterations", "300",
                           "--collective", "allreduce:binomial,linear", "-o", str(out / "project")],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise StackproofError(f"stackproof noise project failed: {proc.stderr.strip()[-1000:]}")
    return f"{out / 'project' / 'project.md'}"


def _report(out: Path, baseline: str) -> str:
    report = out / "reframe-report.json"
    if not report.exists():
        raise StackproofError("no ReFrame results to report")
    proc = subprocess.run([sys.executable, "-m", "stackproof.cli", "report", "--run", str(report),
                           "--baseline", baseline, "-o", str(out), "--title", "stackproof acceptance report"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise StackproofError(f"stackproof report failed: {proc.stderr.strip()[-1000:]}")
    return f"{out / 'report.html'}: {proc.stdout.strip()[-300:]}"


def _up(cluster: Cluster, settings: Settings) -> str:
    st = cluster.up(settings)
    return f"nodes {','.join(st.node_names)}, system CPUs {st.system_cpus or '-'}, app CPUs {st.app_cpus}"


if __name__ == "__main__":
    sys.exit(main())
