"""`make acceptance`: bring up the local test cluster, run the acceptance steps under every
core-specialization profile, print and write a summary, tear the cluster down.

Steps: an MPI smoke job under every profile (one rank per application core, each rank's CPU
checked) and across 3 namespaced nodes, then the ReFrame acceptance suite on the test cluster
(FWQ x profiles x injected signature, core specialization, mpibind binding, MPI; OSU/AMG/SW4 when
their binaries are provided), then `stackproof report`. Each step prints `[i/n] step ... ok (s)`.
Outputs in reports/acceptance/ ($STACKPROOF_REPORT_DIR): summary.md, report.html, report.md,
reframe-report.json.
"""
from __future__ import annotations

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
from .profiles import plan, profile_names


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
    text = (cluster.root / "etc/stackproof/profile.env").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))


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
FWQ_SETTINGS = ["-S", "FWQNoise.samples=50000", "-S", "FWQNoise.work=16384"]
ACCEPTANCE_CHECKS = "FWQNoise|CoreSpecCheck|MpibindBinding|MPIHello|OSUBenchmark|AMGBenchmark|SW4Benchmark|GPUHealth"


def reframe_suite(cluster: Cluster, out: Path, stacks: list[str]) -> str:
    """The ReFrame acceptance checks on the test cluster (output streamed as progress)."""
    report = out / "reframe-report.json"
    st = cluster.load_state()
    if st is None:
        raise StackproofError("the test cluster is not up (see the cluster step above)")
    env = cluster.env()
    env.update(STACKPROOF_CLUSTER_NODES=str(len(st.node_names)), STACKPROOF_FAKE_GPUS=str(st.settings["fake_gpus"]))
    cmd = [sys.executable, str(REPO / "reframe-tests/run.py"), "--system", "testcluster"]
    for s in stacks:
        cmd += ["--stack", s]
    # The cpu partition: the gpu partition's fake GPUs cannot run CUDA, and the same node would only
    # repeat the CPU measurements.
    cmd += ["--", "--system", "testcluster:cpu", "-n", ACCEPTANCE_CHECKS, "--report-file", str(report),
            *FWQ_SETTINGS]
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


def stacks_available() -> list[str]:
    """The laptop stack (this machine's Open MPI) always; commodity/vendor when their views exist."""
    stacks = ["laptop"]
    for stack in ("commodity", "vendor"):
        var = f"STACKPROOF_{stack.upper()}_VIEW"
        if os.environ.get(var) and Path(os.environ[var]).is_dir():
            stacks.append(stack)
    return stacks


def main() -> int:
    if os.geteuid() != 0:
        print("acceptance: must run as root (the test cluster starts daemons)", file=sys.stderr)
        return 1
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
    stacks = stacks_available()
    steps.append(("ReFrame acceptance suite", lambda: reframe_suite(cluster, out, stacks)))
    steps.append(("report", lambda: _report(out)))
    try:
        results = run(steps)
    finally:
        cluster.down(quiet=True)
    header = (f"Node type `local`: {nt.num_cpus} CPUs ({len(nt.sockets)} socket x {nt.cores_per_socket} cores x "
              f"{nt.threads_per_core} PUs), corespec k={nt.corespec.get('cores_per_socket')}.")
    md = summary_markdown(results, header)
    (out / "summary.md").write_text(md)
    print("\n" + md, end="")
    print(f"summary: {out / 'summary.md'}; report: {out / 'report.html'} and {out / 'report.md'}", file=sys.stderr)
    return 0 if all(r.ok for r in results) else 1


def _report(out: Path) -> str:
    from .report import build, load_run
    report = out / "reframe-report.json"
    if not report.exists():
        raise StackproofError("no ReFrame results to report")
    data = build(load_run(str(report)), out, "stackproof acceptance report")
    return f"{out / 'report.html'} ({len(data['results'])} test cases, {len(data['noise'])} noise rows)"


def _up(cluster: Cluster, settings: Settings) -> str:
    st = cluster.up(settings)
    return f"nodes {','.join(st.node_names)}, system CPUs {st.system_cpus or '-'}, app CPUs {st.app_cpus}"


if __name__ == "__main__":
    sys.exit(main())
