"""Run ReFrame's own tutorial checks (shipped in the reframe-hpc wheel, run unchanged) and our
tutorial-style equivalents (tests/data/reframe_examples) with the stackproof configuration."""
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from stackproof.paths import REPO
from stackproof.stacks import StackError, load_stack, stack_names

TUTORIAL = Path(sysconfig.get_paths()["data"]) / "share/doc/reframe-hpc/examples/tutorial"
# Tutorial checks chosen for what they ask of a configuration: `valid_systems=['*']`, `+openmp` with
# the environment's `omp_flag`, a build fixture per environment, the partition's processor info.
# (stream_cpuinfo.py and the other stream_*.py define the same class names: one per run.)
SHIPPED = ("stream/stream_build_run.py", "stream/stream_cpuinfo.py")
EQUIVALENTS = REPO / "tests/data/reframe_examples/tutorial_equivalents.py"
# check name -> whether it reports performance variables
CHECKS = {"stream_build_test": True, "stream_test": True, "hello_any_environ": False,
          "mpi_hello_check": False, "openmp_threads_check": False, "mpi_ranks_perf_check": True}


def installed_stacks():
    """Stacks whose compilers are on this machine (a stack file without its install is not run)."""
    out = []
    for name in stack_names():
        try:
            st = load_stack(name)
        except StackError:
            continue
        if st.cc and os.access(st.cc, os.X_OK):
            out.append(name)
    return out


def run_examples(system, stacks, tmp, env=None):
    """`reframe -C site.py --system SYSTEM -c <checks> -p '^(STACKS)$' -r`; (process, test cases)."""
    files = [str(TUTORIAL / f) for f in SHIPPED] + [str(EQUIVALENTS)]
    report = tmp / "report.json"
    env = dict(os.environ if env is None else env, STACKPROOF_RFM_PREFIX=str(tmp / "prefix"),
               STACKPROOF_RESULTS_DB=str(tmp / "results.db"))
    cmd = [str(Path(sys.executable).with_name("reframe")), "-C", str(REPO / "reframe-tests/config/site.py"), "--system", system,
           "-p", f"^({'|'.join(stacks)})$", "--report-file", str(report), "-r"]
    for f in files:
        cmd[3:3] = ["-c", f]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    cases = [tc for run in json.loads(report.read_text())["runs"] for tc in run["testcases"]]
    return proc, cases


def check_results(proc, cases, partitions, stacks):
    """Every chosen check ran once per (partition, stack), passed, and reported its performance."""
    failed = {(c["display_name"], c["partition"], c["environ"]): (c.get("fail_reason") or "")[:300]
              for c in cases if c["result"] != "pass"}
    assert not failed, failed
    assert proc.returncode == 0, proc.stdout[-3000:]
    ran = {(c["name"].split(" ")[0], c["partition"], c["environ"]) for c in cases}
    want = {(n, p, s) for n in CHECKS for p in partitions for s in stacks}
    assert want <= ran, sorted(want - ran)
    assert {p for _, p, _ in ran} == set(partitions)
    for c in cases:
        if CHECKS.get(c["name"].split(" ")[0]):
            assert c["perfvalues"], c["name"]
        if c["name"].startswith("mpi_ranks_perf_check"):
            (value, ref, *_rest), = c["perfvalues"].values()
            assert value == ref == 2, c["perfvalues"]
