"""The ReFrame acceptance suite (reframe-tests/), run as a subprocess the way a site runs it.

- local system, for real, with three site stacks described in a temporary $STACKPROOF_STACKS_DIR
  (all Debian Open MPI 4.1, each with its own bench dir): the identity probe, hello and fwq-mpi
  really built and run; NetPIPE/OSU/AMG/SW4 "binaries" print the recorded outputs of
  ../shared/fixtures and tests/data/netpipe (fake-good: well-formed; fake-bad: malformed, wrong code
  or missing; fake-wrong: a stack file whose MPI version does not match what really runs) --
  exercising the stack's launcher, identity, parsers, deferred sanity, blocks of launches, results DB;
- testcluster and x86gpu with --dry-run: the generated job scripts and block files (launcher line,
  arguments, environment, the stacks' alternating order) without Slurm;
- bad input: unknown system or stack names, a stack that is not ready (run.py's preflight).
Each reframe invocation uses a temporary prefix and results database.
The cheap form of a whole-tree run (issue 44: one acceptance-like run in CI): fixture outputs and job
scripts, no benchmark measured; the checks run for real in the laptop image's acceptance
(tests/test_images_laptop_live.py) and, under plain `reframe -r`, in tests/test_reframe_plain_live.py.
"""
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys

import pytest
from conftest import require_files, require_tools
from stackfiles import compare_rows, write_stack

from stackproof.nodes.nodetype import load
from stackproof.paths import REPO
from stackproof.nodes.profiles import plan
from stackproof.noise import tableiv

SUITE = REPO / "reframe-tests"
CONFIG = SUITE / "config" / "site.py"
REFRAME = shutil.which("reframe", path=os.path.dirname(sys.executable))
NETPIPE = REPO / "tests" / "data" / "netpipe"

# slow: real ReFrame sessions (the local run and the dry runs take minutes together): make test, not make check
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(REFRAME is None, reason="reframe not in the venv: run `make venv`")]

RANK0 = '[ "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}" = 0 ] || exit 0\n'
STACK_VARS = ("RFM_REFERENCE_PREFIX", "STACKPROOF_STACKS_DIR", "STACKPROOF_REPEAT", "STACKPROOF_NOISE_STACK",
              "STACKPROOF_BLOCKS", "STACKPROOF_FIRST_BLOCK", "STACKPROOF_BLOCK_LAUNCHES", "STACKPROOF_BLOCK_STACKS")


def fake_binary(path, text, to_file=None):
    """A script printing recorded output (to stdout, or to `to_file` in the working directory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    redirect = f" > {to_file}" if to_file else ""
    path.write_text("#!/bin/sh\n" + RANK0 + f"cat{redirect} <<'EOF_OUTPUT'\n{text}EOF_OUTPUT\n")
    path.chmod(0o755)


def reframe(tmp, *args, extra_env=None, timeout=600):
    env = dict(os.environ, STACKPROOF_RFM_PREFIX=str(tmp / "prefix"),
               STACKPROOF_RESULTS_DB=str(tmp / "db" / "results.db"), **(extra_env or {}))
    for var in STACK_VARS:
        if var not in (extra_env or {}):
            env.pop(var, None)
    report = tmp / "report.json"
    proc = subprocess.run([REFRAME, "-C", str(CONFIG), "--report-file", str(report), *args],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
    cases = []
    if report.exists():
        cases = [tc for run in json.loads(report.read_text())["runs"] for tc in run["testcases"]]
    return proc, cases


def case(cases, name, environ, partition=None, block=0):
    """The test case `name` (display name without the block parameter) of one stack."""
    found = [c for c in cases if _base(c) == name and c["environ"] == environ
             and (partition is None or c["partition"] == partition) and c.get("block_index", 0) in (block, None)]
    assert len(found) == 1, f"{name} +{environ}: {[(c['display_name'], c['environ']) for c in cases]}"
    return found[0]


def _base(c):
    words = c["display_name"].rsplit(" /", 1)[0].split()
    return " ".join(w for w in words if not w.startswith("%block_index="))


def job_script(c):
    return (open(os.path.join(c["stagedir"], "rfm_job.sh")).read())


def block(c, where="stagedir"):
    """The block file a check of blocks wrote (the launcher runs it inside the job)."""
    return json.loads(open(os.path.join(c[where], "block.json")).read())


def commands(c, where="stagedir"):
    """Every command line of a block (setup steps first), as the shell would show them."""
    doc = block(c, where)
    steps = [st for s in doc["stacks"].values() for st in s["setup"]] + [st for ln in doc["launches"]
                                                                          for st in ln["steps"]]
    return "\n".join(" ".join(st["argv"]) for st in steps)


def site_stack(stacks_dir, root, name, **changes):
    write_stack(stacks_dir, name, description=f"test stack {name}", prefix=str(root / name), **changes)
    return root / name / "bench"


def build_real(bench):
    """The identity probe, hello and fwq-mpi, really built against Debian's Open MPI."""
    bin_ = bench / "bin"
    bin_.mkdir(parents=True, exist_ok=True)
    data, fwq = REPO / "src/stackproof/stacks/data", REPO / "fwq"
    for cmd in (["mpicc.openmpi", "-O2", "-o", bin_ / "mpi_identity", data / "mpi_identity.c", "-ldl"],
                ["mpicc.openmpi", "-O2", "-o", bin_ / "mpi_hello", data / "mpi_hello.c"],
                ["mpicc.openmpi", "-O1", f"-I{fwq}", "-o", bin_ / "fwq-mpi", fwq / "fwq_mpi.c", fwq / "fwq_common.c",
                 "-lm"]):
        subprocess.run([str(c) for c in cmd], check=True, capture_output=True)


# ---- local system, real runs -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def local_run(tmp_path_factory, shared):
    require_tools("mpirun.openmpi", "mpicc.openmpi")
    tmp = tmp_path_factory.mktemp("rfm-local")
    stacks, root = tmp / "stacks", tmp / "root"
    stacks.mkdir()
    fx = shared / "fixtures"
    good = site_stack(stacks, root, "fake-good")
    bad = site_stack(stacks, root, "fake-bad")
    wrong = site_stack(stacks, root, "fake-wrong", mpi={"family": "openmpi", "version": "Open MPI v5\\.0",
                                                       "library": "libmpi\\.so\\.40",
                                                       "library_dir": "/usr/lib/x86_64-linux-gnu"})
    for bench in (good, bad, wrong):
        build_real(bench)
    np_good = (NETPIPE / "openmpi-4.1.4.np.out").read_text()
    fake_binary(good / "bin/NPmpi", np_good, to_file="np.out")
    fake_binary(wrong / "bin/NPmpi", np_good, to_file="np.out")
    fake_binary(bad / "bin/NPmpi", "mpirun noticed that process rank 1 exited on signal 11 (Segmentation fault).\n",
                to_file="np.out")
    osu = "libexec/osu-micro-benchmarks/mpi"
    for bench in ("osu_latency", "osu_bibw", "osu_allreduce", "osu_allgather"):
        kind = "collective" if bench in ("osu_allreduce", "osu_allgather") else "pt2pt"
        fake_binary(good / osu / kind / bench, (fx / "osu" / "7.2" / f"{bench}.out").read_text())
        # truncated: header, no rows -> sanity must say so
        fake_binary(bad / osu / kind / bench, "# OSU MPI Latency Test v7.2\n" if bench == "osu_latency"
                    else "mpirun noticed that process rank 1 exited on signal 9 (Killed).\n")
    fake_binary(good / "bin/amg", (fx / "amg" / "amg-n20-P211-p1.out").read_text())
    fake_binary(good / "bin/amg2023", (fx / "amg" / "amg2023-n20-P211-p1.out").read_text())
    fake_binary(bad / "bin/amg2023", (fx / "amg" / "amg-n20-P211-p1.out").read_text())   # wrong code
    fake_binary(good / "bin/sw4", (fx / "sw4" / "flat-twi-1.out").read_text())
    fake_binary(bad / "bin/sw4", "ERROR: could not open input file\n")
    proc, cases = reframe(tmp, "--system", "local", "-r", "-p", "^fake-",
                          "-n", "^(MPIHello|NetPIPE|MemoryBandwidth|OSUBenchmark|AMGBenchmark|SW4Benchmark|FWQNoise)",
                          "-x", "^FWQNoise.*%signature=daemon", "-S", "FWQNoise.samples=2000",
                          "-S", "MemoryBandwidth.mib=8",
                          extra_env={"STACKPROOF_STACKS_DIR": str(stacks), "STACKPROOF_BLOCKS": "2",
                                     "STACKPROOF_BLOCK_LAUNCHES": "1"})
    return tmp, proc, cases


def test_local_benchmarks_pass_with_fixture_output(local_run):
    _, proc, cases = local_run
    osu = case(cases, "OSUBenchmark %benchmark=osu_latency %buffers=host", "fake-good")
    assert osu["result"] == "pass", osu["fail_reason"]
    assert osu["perfvalues"]["local:default:lat_1B"][0] == 0.40
    assert osu["perfvalues"]["local:default:lat_8B"][1:4] == [0, None, None]    # no invented reference
    bibw = case(cases, "OSUBenchmark %benchmark=osu_bibw %buffers=host", "fake-good")
    assert bibw["perfvalues"]["local:default:bw_4MiB"][0] == 2906.7
    coll = case(cases, "OSUBenchmark %benchmark=osu_allreduce %buffers=host", "fake-good")
    assert block(coll, "outputdir")["launches"][0]["steps"][0]["argv"][-5:] == ["-m", "2:4194304", "-x", "20", "-f"]
    assert len([k for k in coll["perfvalues"] if k.startswith("local:default:lat_")]) == 22
    amg = case(cases, "AMGBenchmark %code=amg %size=ci", "fake-good")
    assert amg["result"] == "pass" and amg["perfvalues"]["local:default:fom"][0] == 8.901626e+07
    assert "/bin/amg -n 20 20 20 -P " in commands(amg, "outputdir")
    amg23 = case(cases, "AMGBenchmark %code=amg2023 %size=ci", "fake-good")
    assert amg23["perfvalues"]["local:default:fom"][0] == 2.374211e+07
    sw4 = case(cases, "SW4Benchmark %deck=halfspace-small", "fake-good")
    assert sw4["result"] == "pass" and sw4["perfvalues"]["local:default:solve_time"][0] == 0.514944384
    np_ = case(cases, "NetPIPE", "fake-good")
    assert np_["result"] == "pass", np_["fail_reason"]
    assert {"local:default:lat_8B", "local:default:bw_1MiB"} <= set(np_["perfvalues"])
    curve = open(os.path.join(np_["outputdir"], "launch-00-fake-good", "netpipe-curve.csv")).read().splitlines()
    assert curve[0] == "bytes,usec,MBps" and len(curve) > 20
    mem = case(cases, "MemoryBandwidth", "fake-good")
    assert mem["result"] == "pass" and mem["perfvalues"]["local:default:copy_bw"][0] > 0
    # the paper-size AMG runs only on remote partitions
    assert not [c for c in cases if _base(c) == "AMGBenchmark %code=amg %size=paper"]


def test_local_results_contract(local_run):
    """Every performance case: environ = stack, `stack`, the MPI library each rank really used, the
    block and every launch's values."""
    _, _, cases = local_run
    measured = [c for c in cases if c["result"] == "pass" and c["perfvalues"]]
    # fake-good alone passes NetPIPE, four OSU benchmarks, AMG and FWQ: a loop over nothing proves nothing
    assert len(measured) >= 4, [(c["display_name"], c["environ"], c["result"]) for c in cases]
    for c in measured:
        assert c["stack"] == c["environ"]
        assert c["mpi_library"].startswith("Open MPI v4.1"), (c["display_name"], c["mpi_library"])
        assert c["mpi_library_path"].endswith("/libmpi.so.40")
        if "block_index" in c:
            assert c["block_index"] in (0, 1)
            assert [(ln["stack"], ln["block"], ln["pair"]) for ln in c["launches"]] == \
                [(c["environ"], c["block_index"], c["block_index"])]
            # the block's figure (ReFrame's, judged against references) is the median of its launches
            assert all(c["perfvalues"][f"local:default:{k}"][0] == v for k, v in c["launches"][0]["values"].items()
                       if f"local:default:{k}" in c["perfvalues"])
    # each benchmark's headline metric(s), declared beside perf_better, name variables it measured
    for c in measured:
        check = _base(c).split()[0]
        if check in ("NetPIPE", "OSUBenchmark", "AMGBenchmark", "SW4Benchmark", "FWQNoise"):
            names = {k.split(":")[-1] for k in c["perfvalues"]}
            assert set(c["perf_headline"]) & names, (c["display_name"], c["perf_headline"], sorted(names))
    blocks = {c["block_index"] for c in cases if _base(c) == "NetPIPE" and c["environ"] == "fake-good"}
    assert blocks == {0, 1}
    kept = os.listdir(case(cases, "NetPIPE", "fake-good")["outputdir"])
    assert {"launches.json", "block.json", "launch-00-fake-good", "setup-fake-good"} <= set(kept), kept


def test_local_malformed_output_fails_with_the_full_reason(local_run):
    _, _, cases = local_run
    lat = case(cases, "OSUBenchmark %benchmark=osu_latency %buffers=host", "fake-bad")
    assert lat["result"] == "fail" and lat["fail_phase"] == "sanity"
    assert os.path.join(lat["stagedir"], "launch-00-fake-bad", "stdout") in lat["fail_reason"]
    assert "expected an OSU column header" in lat["fail_reason"]
    bibw = case(cases, "OSUBenchmark %benchmark=osu_bibw %buffers=host", "fake-bad")
    assert "expected an OSU title line" in bibw["fail_reason"] and "signal 9" in bibw["fail_reason"]
    amg23 = case(cases, "AMGBenchmark %code=amg2023 %size=ci", "fake-bad")
    assert "expected AMG2023" in amg23["fail_reason"] and "got AMG 1.2" in amg23["fail_reason"]
    sw4 = case(cases, "SW4Benchmark %deck=halfspace-small", "fake-bad")
    assert "expected an SW4 solve-time line" in sw4["fail_reason"]
    np_ = case(cases, "NetPIPE", "fake-bad")
    assert np_["result"] == "fail" and "expected NetPIPE data lines" in np_["fail_reason"]
    assert "Segmentation fault" in np_["fail_reason"]


def test_local_identity_mismatch_names_the_stack_and_fix(local_run):
    _, _, cases = local_run
    c = case(cases, "MPIHello", "fake-wrong")
    assert c["result"] == "fail"
    assert "stack fake-wrong: rank 0 ran with MPI 'Open MPI v4.1.4" in c["fail_reason"]
    assert "the stack file requires a version matching /Open MPI v5\\.0/" in c["fail_reason"]
    assert "stackproof stack build fake-wrong" in c["fail_reason"]
    assert case(cases, "MPIHello", "fake-good")["result"] == "pass"


def test_local_missing_benchmark_skips_naming_stack_and_fix(local_run):
    _, proc, cases = local_run
    assert case(cases, "AMGBenchmark %code=amg %size=ci", "fake-bad")["result"] == "skip"
    wrong = case(cases, "AMGBenchmark %code=amg2023 %size=ci", "fake-wrong")
    assert wrong["result"] == "skip"
    assert "stack fake-wrong provides no amg2023 (" in proc.stdout
    assert "build it with `stackproof stack build fake-wrong`" in proc.stdout
    # the JSON report keeps the reason too (SkipReason), so the report never lacks one
    assert "stack fake-wrong provides no amg2023 (" in wrong["skip_reason"]
    skipped = [c for c in cases if c["result"] == "skip"]
    assert skipped and all(c["skip_reason"] for c in skipped), [c["display_name"] for c in skipped]


def test_local_mpi_hello_every_stack(local_run):
    _, proc, cases = local_run
    c = case(cases, "MPIHello", "fake-good")
    assert c["result"] == "pass", (c["fail_reason"], proc.stdout[-2000:])
    assert c["num_tasks"] == load("local").num_cores
    script = open(os.path.join(c["outputdir"], "rfm_job.sh")).read()
    assert "/usr/bin/mpirun.openmpi --oversubscribe -np " in script        # the stack's own launcher
    assert "/bench/bin/mpi_identity > identity.out 2>&1" in script


def test_local_fwq_baseline(local_run):
    _, proc, cases = local_run
    require_files(REPO / "build/fwq/fwq-noise", hint="make fwq")
    sigs = ("none", "10Hz-2500us")
    for sig in sigs:
        c = case(cases, f"FWQNoise %profile=baseline %signature={sig}", "fake-good")
        assert c["result"] == "pass", c["fail_reason"]
        values = {k.split(":")[-1]: v[0] for k, v in c["perfvalues"].items()}
        assert set(values) == {"min", "mean", "max", "std", "noise_fraction"}
        assert 0 < values["min"] <= values["mean"] <= values["max"]
        assert 0 <= values["noise_fraction"] <= 1
    assert len([c for c in cases if _base(c) == "FWQNoise %profile=baseline %signature=none"
                and c["environ"] == "fake-good"]) == 1
    # other profiles need a switchable cluster: not run on the local system
    assert not [c for c in cases if "%profile=corespec" in c["name"]]


def test_local_results_database(local_run):
    tmp, proc, _ = local_run
    assert proc.returncode != 0          # the fake-bad and fake-wrong cases fail on purpose
    db = tmp / "db" / "results.db"
    with sqlite3.connect(db) as conn:
        tables = {row[0] for row in conn.execute("select name from sqlite_master where type='table'")}
    assert "sessions" in tables, tables
    with sqlite3.connect(db) as conn:
        assert conn.execute("select count(*) from sessions").fetchone()[0] == 1


def test_performance_compare_after_one_two_stack_session(local_run):
    """docs/acceptance.md's recipe (make reframe-compare): one session holding both stacks."""
    tmp, _, _ = local_run
    env = dict(os.environ, STACKPROOF_RFM_PREFIX=str(tmp / "prefix"),
               STACKPROOF_RESULTS_DB=str(tmp / "db" / "results.db"), STACKPROOF_STACKS_DIR=str(tmp / "stacks"))
    proc = subprocess.run(["make", "-s", "-C", str(REPO), "reframe-compare", "RFM_TARGET=fake-bad",
                           "RFM_BASELINE=fake-good", "RFM_PERIOD=now-1d:now"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = compare_rows(proc.stdout)
    row = next(r for r in rows if r["basename"] == "MemoryBandwidth" and r["pvar"] == "copy_bw")
    # both stacks' medians over their 2 blocks, side by side
    assert float(row["pval (median) (fake-bad)"]) > 0 and float(row["pval (median) (fake-good)"]) > 0
    assert row["psamples (fake-bad)"] == row["psamples (fake-good)"] == "2"


# ---- dry runs: generated job scripts ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def testcluster_dry(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rfm-tc")
    proc, cases = reframe(tmp, "--system", "testcluster:cpu", "-p", "^(commodity|vendor)$", "--dry-run",
                          extra_env={"STACKPROOF_RUN_DIR": str(tmp / "cluster"),
                                     "STACKPROOF_CLUSTER_NODES": "2",     # no cluster state: as if 2 nodes
                                     "STACKPROOF_STACKS_ROOT": "/stacks", "STACKPROOF_NOISE_STACK": "commodity"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return cases


def test_dry_run_osu_amg_sw4_scripts(testcluster_dry):
    cases = testcluster_dry
    nodes, cores = 2, load("local").num_cores
    c = case(cases, "OSUBenchmark %benchmark=osu_allreduce %buffers=host", "commodity")
    script, coll = job_script(c), commands(c)
    assert "#SBATCH --partition=cpu" in script and "export OMPI_ALLOW_RUN_AS_ROOT=1" in script
    # the emulated nodes share this host's cores: at most one collective rank per host core in all
    used = min(nodes, cores)
    assert f"#SBATCH --ntasks={used * max(1, cores // used)}" in script
    # jobs of the test cluster never overlap (whatever the execution policy) and take whole nodes
    assert "#SBATCH --dependency=singleton" in script and "#SBATCH --exclusive" in script
    # the job runs the block launcher; the block file holds the stack's own launcher, its identity probe
    # first, then its own OSU build; on emulated nodes each launch is sized by time
    # (emulated_time_target): a probe at the largest size gives the iterations
    assert script.rstrip().endswith(f"{shlex.quote(sys.executable)} -m stackproof.reframe.launch block.json")
    osu = "srun --mpi=pmix /stacks/commodity/bench/libexec/osu-micro-benchmarks/mpi"
    assert "srun --mpi=pmix /stacks/commodity/bench/bin/mpi_identity" in coll
    assert f"{osu}/osu_allreduce -f -m 4194304:4194304 -i 100 -x 10" in coll
    assert "awk -v s=4194304 -v t=1 " in coll
    assert f"{osu}/osu_allreduce -m 2:4194304 -f -i {{OSU_ITER}} -x {{OSU_WARMUP}}" in coll
    probe = block(c)["stacks"]["commodity"]["setup"][-1]
    assert probe["capture"] == ["OSU_ITER", "OSU_WARMUP"]
    lat = case(cases, "OSUBenchmark %benchmark=osu_latency %buffers=host", "commodity")
    assert "#SBATCH --ntasks=2" in job_script(lat) and "#SBATCH --ntasks-per-node=1" in job_script(lat)
    assert commands(lat).endswith("mpi/osu_latency -i {OSU_ITER} -x {OSU_WARMUP}")
    # no GPU buffers on a partition without CUDA
    assert not [c for c in cases if "%buffers=cuda" in c["name"]]
    amg = case(cases, "AMGBenchmark %code=amg %size=paper", "vendor")
    assert "export OMP_NUM_THREADS=1" in job_script(amg) and "export I_MPI_ROOT=/stacks/vendor" in job_script(amg)
    assert "export LD_LIBRARY_PATH=/stacks/vendor/lib" in job_script(amg)
    assert "srun --mpi=pmi2 /stacks/vendor/bench/bin/amg -n 200 100 100 -P " in commands(amg)
    assert block(amg)["stacks"]["vendor"]["env"]["set"] == {"I_MPI_ROOT": "/stacks/vendor"}
    sw4 = case(cases, "SW4Benchmark %deck=halfspace-small", "commodity")
    assert "srun --mpi=pmix /stacks/commodity/bench/bin/sw4 halfspace-small.in" in commands(sw4)
    # each launch reads its own copy of the deck
    for ln in block(sw4)["launches"]:
        assert os.path.isfile(os.path.join(sw4["stagedir"], ln["dir"], "halfspace-small.in"))
    np_ = case(cases, "NetPIPE", "vendor")
    assert "srun --mpi=pmi2 /stacks/vendor/bench/bin/NPmpi -l 8 -u 1048576 -p 0 -n 100 -o np.out" in commands(np_)
    # one stack alone: its block is its own launches
    assert [ln["stack"] for ln in block(np_)["launches"]] == ["vendor", "vendor"]


def test_dry_run_two_stack_blocks_alternate_and_run_each_stack_as_itself(tmp_path):
    """STACKPROOF_BLOCK_STACKS=commodity,vendor: one test case per block, under the first stack's
    environment, holding both stacks' launches A,B,B,A then B,A,A,B with global block and pair
    indices; each launch with its own stack's launcher and environment recipe; perf variables per stack."""
    proc, cases = reframe(tmp_path, "--system", "testcluster:cpu", "-p", "^(commodity|vendor)$", "--dry-run",
                          "-n", "^(OSUBenchmark.*osu_latency.*host|HPCC)",
                          extra_env={"STACKPROOF_RUN_DIR": str(tmp_path / "cluster"), "STACKPROOF_CLUSTER_NODES": "1",
                                     "STACKPROOF_STACKS_ROOT": "/stacks", "STACKPROOF_BLOCK_STACKS": "commodity,vendor",
                                     "STACKPROOF_BLOCKS": "2", "STACKPROOF_FIRST_BLOCK": "3",
                                     "STACKPROOF_BLOCK_LAUNCHES": "2"})
    assert proc.returncode == 0, proc.stdout[-3000:]
    osu = [c for c in cases if c["display_name"].startswith("OSUBenchmark")]
    assert sorted(c["block_index"] for c in osu) == [3, 4] and {c["environ"] for c in osu} == {"commodity"}
    orders = {c["block_index"]: [(ln["stack"], ln["pair"], ln["position"]) for ln in block(c)["launches"]]
              for c in osu}
    # global block 3 is odd: B,A,A,B; block 4: A,B,B,A
    assert orders[3] == [("vendor", 6, 0), ("commodity", 6, 1), ("commodity", 7, 2), ("vendor", 7, 3)]
    assert orders[4] == [("commodity", 8, 0), ("vendor", 8, 1), ("vendor", 9, 2), ("commodity", 9, 3)]
    doc = block(osu[0])
    by_stack = {ln["stack"]: " ".join(ln["steps"][0]["argv"]) for ln in doc["launches"]}
    assert by_stack["vendor"].startswith("srun --mpi=pmi2 /stacks/vendor/bench/libexec/")
    assert by_stack["commodity"].startswith("srun --mpi=pmix /stacks/commodity/bench/libexec/")
    # the job starts under commodity's environment: a vendor launch sets its own and drops commodity's
    assert doc["stacks"]["vendor"]["env"]["unset"] == ["OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"]
    assert doc["stacks"]["vendor"]["env"]["prepend"]["PATH"] == ["/stacks/vendor/bin"]
    assert [s["stdout"] for s in doc["stacks"]["vendor"]["setup"][:1]] == ["identity.out"]
    assert set(osu[0]["perfvalues"]) >= {"testcluster:cpu:lat_8B@commodity", "testcluster:cpu:lat_4MiB@vendor"}
    assert osu[0]["block_stacks"] == ["commodity", "vendor"]
    hpcc = next(c for c in cases if c["display_name"].startswith("HPCC"))
    for ln in block(hpcc)["launches"]:        # its input beside each launch: no two launches share a file
        assert os.path.isfile(os.path.join(hpcc["stagedir"], ln["dir"], "hpccinf.txt"))
    assert len({ln["dir"] for ln in block(hpcc)["launches"]}) == 4


def test_dry_run_fwq_uses_profile_app_cores(testcluster_dry):
    nt = load("local")
    for profile in ("baseline", "freecore-last", "corespec"):
        prof = plan(nt, profile)
        c = case(testcluster_dry, f"FWQNoise %profile={profile} %signature=none", "commodity")
        script = job_script(c)
        assert f"#SBATCH --ntasks={len(prof.app_cores)}" in script
        assert "#SBATCH --exclusive" in script
        masks = ",".join(hex(sum(1 << pu for pu in nt.core_pus(s, k))) for s, k in prof.app_cores)
        # explicit binding; the mpibind plugin (partition feature) is switched off for it
        assert f"srun --mpi=pmix --mpibind=off --cpu-bind=mask_cpu:{masks} /stacks/commodity/bench/bin/fwq-mpi " \
            in script, script
        # the identity probe runs with exactly the benchmark's launcher and binding
        assert f"srun --mpi=pmix --mpibind=off --cpu-bind=mask_cpu:{masks} /stacks/commodity/bench/bin/mpi_identity" \
            in script
        # sized like Table IV (stackproof.noise.tableiv: six periods of a 10 Hz daemon)
        assert f"-n {tableiv.SAMPLES} -w {tableiv.WORK} -o fwq.dat" in script
    noisy = job_script(case(testcluster_dry, "FWQNoise %profile=corespec %signature=10Hz-2500us", "commodity"))
    assert "srun --overlap" in noisy and "fwq-noise --freq 10 --duration 2500us --cpus " in noisy
    # the profile x noise matrix measures the nodes: once, with the stack STACKPROOF_NOISE_STACK names
    assert not [c for c in testcluster_dry if "%profile=corespec" in c["display_name"] and c["environ"] == "vendor"]
    assert case(testcluster_dry, "FWQNoise %profile=baseline %signature=none", "vendor")


def test_dry_run_corespec_and_binding(testcluster_dry, tmp_path):
    c = case(testcluster_dry, "CoreSpecCheck %profile=clean", "commodity")
    script = job_script(c)
    assert "/usr/local/sbin/stackproof-corespec check > corespec-check.txt" in script
    assert "srun --mpi=pmix grep Cpus_allowed_list /proc/self/status" in script
    for profile, tasks in (("baseline", len(plan(load("local"), "baseline").app_cores)),
                           ("corespec", len(plan(load("local"), "corespec").app_cores))):
        b = job_script(case(testcluster_dry, f"MpibindBinding %profile={profile}", "commodity"))
        assert "srun --mpi=pmix --mpibind=on sh -c" in b and "lstopo-no-graphics --of xml > topology.xml" in b
        assert f"#SBATCH --ntasks={tasks}" in b
    # every profile has its binding case; a freed core is kept out by the profile's MPIBIND_RESTRICT
    free = job_script(case(testcluster_dry, "MpibindBinding %profile=freecore-first", "commodity"))
    assert f"export MPIBIND_RESTRICT={plan(load('local'), 'freecore-first').app_cpu_list}" in free


def test_dry_run_x86gpu_cuda_buffers_and_gpu_health(tmp_path):
    proc, cases = reframe(tmp_path, "--system", "x86gpu", "-p", "^commodity$", "--dry-run",
                          "-n", "^(OSUBenchmark|GPUHealth)", extra_env={"STACKPROOF_STACKS_ROOT": "/stacks"})
    assert proc.returncode == 0, proc.stdout[-3000:]
    nt = load("pascal")
    c = case(cases, "OSUBenchmark %benchmark=osu_allgather %buffers=cuda-device", "commodity")
    dev = commands(c)
    assert "-m 2:4194304 -x 20 -f -d cuda" in dev
    assert f"#SBATCH --gpus-per-node={len(nt.gpus)}" in job_script(c)
    assert "srun --mpi=pmix /stacks/commodity/bench/libexec/osu-micro-benchmarks/mpi/osu_allgather -m 2:4194304" in dev
    assert commands(case(cases, "OSUBenchmark %benchmark=osu_bibw %buffers=cuda-device",
                         "commodity")).endswith("osu_bibw D D")
    assert commands(case(cases, "OSUBenchmark %benchmark=osu_latency %buffers=cuda-managed",
                         "commodity")).endswith("osu_latency M M")
    assert "-d managed" in commands(case(cases, "OSUBenchmark %benchmark=osu_allreduce %buffers=cuda-managed",
                                         "commodity"))
    health = case(cases, "GPUHealth", "commodity")
    build = open(os.path.join(health["stagedir"], "rfm_build.sh")).read()
    assert "nvcc -O2 -arch=sm_60" in build and "gpu_health.cu" in build
    assert f"#SBATCH --gpus-per-node={len(nt.gpus)}" in job_script(health)


# ---- configuration and bad input ----------------------------------------------------------------------------

def test_real_site_partitions_are_built_from_node_types():
    sys.path.insert(0, str(SUITE / "config"))
    from reframe.utility import import_module_from_file
    os.environ["STACKPROOF_FAKE_GPUS"] = "2"    # the testcluster gpu partition exists only with fake GPUs
    try:
        config = import_module_from_file(str(CONFIG)).site_configuration
    finally:
        del os.environ["STACKPROOF_FAKE_GPUS"]
    systems = {s["name"]: s for s in config["systems"]}
    assert list(systems)[-1] == "local"         # the catch-all hostname comes last
    lassen = load("lassen")
    parts = {p["name"]: p for p in systems["lassen"]["partitions"]}
    proc = parts["pgpu"]["processor"]
    assert (proc["num_cpus"], proc["num_cpus_per_core"], proc["num_sockets"]) == \
        (lassen.num_cpus, lassen.threads_per_core, len(lassen.sockets))
    assert parts["pgpu"]["devices"] == [{"type": "gpu", "model": lassen.gpus[0].model,
                                         "num_devices": len(lassen.gpus), "arch": "sm_70"}]
    assert {"gpu", "cuda"} <= set(parts["pgpu"]["features"]) and "gpu" not in parts["pbatch"]["features"]
    assert parts["pgpu"]["extras"]["topology_xml"].endswith("mpibind__coral-lassen.xml")
    tc = {p["name"]: p for p in systems["testcluster"]["partitions"]}
    assert tc["cpu"]["scheduler"] == "squeue" and tc["cpu"]["launcher"] == "srun"
    assert "fakegpu" in tc["gpu"]["features"] and "cuda" not in tc["gpu"]["features"]
    envs = [e for e in config["environments"] if e["target_systems"] == ["x86gpu:gpu"]]
    assert {e["name"] for e in envs} == {"commodity", "vendor"}
    assert all("cuda" in e["features"] for e in envs)


@pytest.mark.parametrize("args, message", [
    (["--system", "nosuch", "--stack", "commodity"], "unknown system 'nosuch' (known: "),
    (["--system", "local", "--stack", "nosuch"],
     "unknown stack 'nosuch' for system 'local' (known: commodity, commodity-next, mpich, vendor): describe it in "
     "reframe-tests/stacks/NAME.yaml"),
    (["--system", "lassen", "--stack", "mpich"], "unknown stack 'mpich' for system 'lassen'"),
])
def test_unknown_system_or_stack(args, message, tmp_path):
    env = dict(os.environ, STACKPROOF_RFM_PREFIX=str(tmp_path), STACKPROOF_RESULTS_DB=str(tmp_path / "r.db"))
    proc = subprocess.run([sys.executable, str(SUITE / "run.py"), *args], capture_output=True, text=True, env=env)
    assert proc.returncode == 1 and message in proc.stderr


def test_run_py_preflight_stops_before_reframe(tmp_path):
    """A stack that is not installed: one error naming the stack and the fix, nothing run."""
    env = dict(os.environ, STACKPROOF_RFM_PREFIX=str(tmp_path), STACKPROOF_RESULTS_DB=str(tmp_path / "r.db"),
               STACKPROOF_STACKS_ROOT=str(tmp_path / "nothing"))
    proc = subprocess.run([sys.executable, str(SUITE / "run.py"), "--system", "local", "--stack", "vendor"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("run.py: error: stack vendor: its MPI is not installed")
    assert "run `stackproof stack install vendor`" in proc.stderr
    assert not (tmp_path / "stage").exists()


def test_run_py_command_for_a_stack(tmp_path):
    env = dict(os.environ, STACKPROOF_RFM_PREFIX=str(tmp_path), STACKPROOF_RESULTS_DB=str(tmp_path / "r.db"))
    proc = subprocess.run([sys.executable, str(SUITE / "run.py"), "--system", "testcluster", "--stack", "commodity",
                           "--stack", "vendor", "--dry-run", "--print-command"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "--system testcluster -p ^(commodity|vendor)$ --session-extras stack=commodity+vendor" in proc.stdout
    assert proc.stdout.rstrip().endswith("--dry-run")
