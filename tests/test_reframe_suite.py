"""The ReFrame acceptance suite (reframe-tests/), run as a subprocess the way a site runs it.

- local system, for real: MPI hello, FWQ (laptop stack), and OSU/AMG/SW4 against fake stack views
  whose "binaries" print the recorded outputs of ../shared/fixtures (commodity: well-formed,
  vendor: malformed or the wrong code) -- exercising launch, parsers, sanity, references, results DB;
- testcluster and x86gpu with --dry-run: the generated job scripts (launcher line, arguments,
  environment) without Slurm;
- bad input: unknown system or stack names.
Each reframe invocation uses a temporary prefix and results database.
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from stackproof.nodetype import load
from stackproof.paths import REPO
from stackproof.profiles import plan

SUITE = REPO / "reframe-tests"
CONFIG = SUITE / "config" / "site.py"
REFRAME = shutil.which("reframe", path=os.path.dirname(sys.executable))

pytestmark = pytest.mark.skipif(REFRAME is None, reason="reframe not in the venv: run `make venv`")

RANK0 = '[ "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}" = 0 ] || exit 0\n'


def fake_binary(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + RANK0 + f"cat <<'EOF_OUTPUT'\n{text}EOF_OUTPUT\n")
    path.chmod(0o755)


def reframe(tmp, *args, extra_env=None, timeout=300):
    env = dict(os.environ, STACKPROOF_RFM_PREFIX=str(tmp / "prefix"),
               STACKPROOF_RESULTS_DB=str(tmp / "db" / "results.db"), **(extra_env or {}))
    for var in ("OSU_BIN_DIR", "AMG_BIN", "AMG2023_BIN", "SW4_BIN", "STACKPROOF_FWQ", "RFM_REFERENCE_PREFIX",
                "STACKPROOF_COMMODITY_VIEW", "STACKPROOF_VENDOR_VIEW", "STACKPROOF_LAPTOP_VIEW"):
        if var not in (extra_env or {}):
            env.pop(var, None)
    report = tmp / "report.json"
    proc = subprocess.run([REFRAME, "-C", str(CONFIG), "--report-file", str(report), *args],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
    cases = []
    if report.exists():
        cases = [tc for run in json.loads(report.read_text())["runs"] for tc in run["testcases"]]
    return proc, cases


def case(cases, name, environ, partition=None):
    found = [c for c in cases if c["name"] == name and c["environ"] == environ
             and (partition is None or c["partition"] == partition)]
    assert len(found) == 1, f"{name} +{environ}: {[(c['name'], c['environ']) for c in cases]}"
    return found[0]


def job_script(c):
    return (open(os.path.join(c["stagedir"], "rfm_job.sh")).read())


def noise_stats_available():
    return subprocess.run([sys.executable, "-m", "stackproof.cli", "noise", "stats", "--help"],
                          capture_output=True).returncode == 0


# ---- local system, real runs -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def local_run(tmp_path_factory, shared):
    if shutil.which("mpirun") is None or shutil.which("mpicc") is None:
        pytest.skip("mpirun/mpicc not found (run scripts/install-deps.sh: openmpi-bin libopenmpi-dev)")
    tmp = tmp_path_factory.mktemp("rfm-local")
    fx = shared / "fixtures"
    good, bad = tmp / "views" / "good", tmp / "views" / "bad"
    for bench in ("osu_latency", "osu_bibw", "osu_allreduce", "osu_allgather"):
        fake_binary(good / "bin" / bench, (fx / "osu" / "7.2" / f"{bench}.out").read_text())
        # truncated: header, no rows -> sanity must say so
        fake_binary(bad / "bin" / bench, "# OSU MPI Latency Test v7.2\n" if bench == "osu_latency"
                    else "mpirun noticed that process rank 1 exited on signal 9 (Killed).\n")
    fake_binary(good / "bin" / "amg", (fx / "amg" / "amg-n20-P211-p1.out").read_text())
    fake_binary(good / "bin" / "amg2023", (fx / "amg" / "amg2023-n20-P211-p1.out").read_text())
    fake_binary(bad / "bin" / "amg2023", (fx / "amg" / "amg-n20-P211-p1.out").read_text())   # wrong code
    fake_binary(good / "bin" / "sw4", (fx / "sw4" / "flat-twi-1.out").read_text())
    fake_binary(bad / "bin" / "sw4", "ERROR: could not open input file\n")
    proc, cases = reframe(tmp, "--system", "local", "-r", "--exec-policy=async",
                          "-n", "^(MPIHello|OSUBenchmark|AMGBenchmark|SW4Benchmark|FWQNoise)",
                          extra_env={"STACKPROOF_COMMODITY_VIEW": str(good), "STACKPROOF_VENDOR_VIEW": str(bad)})
    return tmp, proc, cases


def test_local_osu_amg_sw4_pass_with_fixture_output(local_run):
    _, proc, cases = local_run
    osu = case(cases, "OSUBenchmark %benchmark=osu_latency %buffers=host", "commodity")
    assert osu["result"] == "pass", osu["fail_reason"]
    assert osu["perfvalues"]["local:default:lat_1B"][0] == 0.40
    # references/commodity/osu.yaml applies (wide sanity bound on the 8 B latency)
    assert osu["perfvalues"]["local:default:lat_8B"][:4] == [13.53, 10.0, None, 9.0]
    bibw = case(cases, "OSUBenchmark %benchmark=osu_bibw %buffers=host", "commodity")
    assert bibw["perfvalues"]["local:default:bw_4194304B"][0] == 2906.7
    coll = case(cases, "OSUBenchmark %benchmark=osu_allreduce %buffers=host", "commodity")
    assert coll["executable_opts"] == ["-m", "2:4194304", "-x", "20", "-f"]
    assert len([k for k in coll["perfvalues"] if k.startswith("local:default:lat_")]) == 22
    amg = case(cases, "AMGBenchmark %code=amg %size=ci", "commodity")
    assert amg["result"] == "pass" and amg["perfvalues"]["local:default:fom"][0] == 8.901626e+07
    assert amg["executable_opts"][:4] == ["-n", "20", "20", "20"]
    amg23 = case(cases, "AMGBenchmark %code=amg2023 %size=ci", "commodity")
    assert amg23["perfvalues"]["local:default:fom"][0] == 2.374211e+07
    sw4 = case(cases, "SW4Benchmark %deck=halfspace-small", "commodity")
    assert sw4["result"] == "pass" and sw4["perfvalues"]["local:default:solve_time"][0] == 0.514944384
    # the paper-size AMG runs only on remote partitions
    assert not [c for c in cases if c["name"] == "AMGBenchmark %code=amg %size=paper"]


def test_local_malformed_output_fails_sanity_naming_file(local_run):
    _, _, cases = local_run
    lat = case(cases, "OSUBenchmark %benchmark=osu_latency %buffers=host", "vendor")
    assert lat["result"] == "fail" and lat["fail_phase"] == "sanity"
    assert os.path.join(lat["stagedir"], "rfm_job.out") in lat["fail_reason"]
    assert "expected an OSU column header" in lat["fail_reason"]
    bibw = case(cases, "OSUBenchmark %benchmark=osu_bibw %buffers=host", "vendor")
    assert "expected an OSU title line" in bibw["fail_reason"] and "signal 9" in bibw["fail_reason"]
    amg23 = case(cases, "AMGBenchmark %code=amg2023 %size=ci", "vendor")
    assert "expected AMG2023" in amg23["fail_reason"] and "got AMG 1.2" in amg23["fail_reason"]
    sw4 = case(cases, "SW4Benchmark %deck=halfspace-small", "vendor")
    assert "expected an SW4 solve-time line" in sw4["fail_reason"]


def test_local_missing_binary_skips_naming_variable(local_run):
    _, proc, cases = local_run
    assert case(cases, "OSUBenchmark %benchmark=osu_bibw %buffers=host", "laptop")["result"] == "skip"
    assert "osu_bibw not found for stack 'laptop'" in proc.stdout
    assert "set OSU_BIN_DIR or STACKPROOF_LAPTOP_VIEW" in proc.stdout
    assert "set AMG2023_BIN or STACKPROOF_LAPTOP_VIEW" in proc.stdout
    assert "set SW4_BIN or STACKPROOF_LAPTOP_VIEW" in proc.stdout
    # vendor's view has no amg: skipped, not failed
    assert case(cases, "AMGBenchmark %code=amg %size=ci", "vendor")["result"] == "skip"


def test_local_mpi_hello_every_stack(local_run):
    _, proc, cases = local_run
    for stack in ("laptop", "commodity", "vendor"):
        c = case(cases, "MPIHello", stack)
        assert c["result"] == "pass", (stack, c["fail_reason"], proc.stdout[-2000:])
        assert c["num_tasks"] == load("local").num_cores


def test_local_fwq_baseline(local_run):
    _, proc, cases = local_run
    if not (REPO / "build/fwq/fwq-mpi").exists():
        pytest.skip("build/fwq/fwq-mpi not built (make build) and STACKPROOF_FWQ not set")
    if not noise_stats_available():
        pytest.skip("`stackproof noise stats` not available in this checkout")
    for sig in ("none", "10Hz-2500us"):
        c = case(cases, f"FWQNoise %profile=baseline %signature={sig}", "laptop")
        assert c["result"] == "pass", c["fail_reason"]
        values = {k.split(":")[-1]: v[0] for k, v in c["perfvalues"].items()}
        assert set(values) == {"min", "mean", "max", "std", "noise_fraction"}
        assert 0 < values["min"] <= values["mean"] <= values["max"]
        assert 0 <= values["noise_fraction"] <= 1
    # other profiles need a switchable cluster: not run on the local system
    assert not [c for c in cases if "%profile=corespec" in c["name"]]


def test_local_results_database(local_run):
    tmp, proc, _ = local_run
    assert proc.returncode != 0          # the vendor cases fail on purpose
    db = tmp / "db" / "results.db"
    with sqlite3.connect(db) as conn:
        tables = {row[0] for row in conn.execute("select name from sqlite_master where type='table'")}
    assert "sessions" in tables, tables
    with sqlite3.connect(db) as conn:
        assert conn.execute("select count(*) from sessions").fetchone()[0] == 1


# ---- dry runs: generated job scripts ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def testcluster_dry(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rfm-tc")
    proc, cases = reframe(tmp, "--system", "testcluster:cpu", "-p", "^laptop$", "--dry-run",
                          extra_env={"STACKPROOF_RUN_DIR": str(tmp / "cluster")})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return cases


def test_dry_run_osu_amg_sw4_scripts(testcluster_dry):
    cases = testcluster_dry
    nodes, cores = 2, load("local").num_cores
    coll = job_script(case(cases, "OSUBenchmark %benchmark=osu_allreduce %buffers=host", "laptop"))
    assert "#SBATCH --partition=cpu" in coll and "export SLURM_MPI_TYPE=pmix" in coll
    assert "export PATH=/opt/stackproof/views/laptop/bin:$PATH" in coll
    assert f"#SBATCH --ntasks={nodes * cores}" in coll
    assert ("srun /opt/stackproof/views/laptop/libexec/osu-micro-benchmarks/mpi/collective/osu_allreduce "
            "-m 2:4194304 -x 20 -f") in coll
    lat = job_script(case(cases, "OSUBenchmark %benchmark=osu_latency %buffers=host", "laptop"))
    assert "#SBATCH --ntasks=2" in lat and "#SBATCH --ntasks-per-node=1" in lat
    assert lat.rstrip().endswith("mpi/pt2pt/osu_latency")
    # no GPU buffers on a partition without CUDA
    assert not [c for c in cases if "%buffers=cuda" in c["name"]]
    amg = job_script(case(cases, "AMGBenchmark %code=amg %size=paper", "laptop"))
    assert "export OMP_NUM_THREADS=1" in amg
    assert "srun /opt/stackproof/views/laptop/bin/amg -n 200 100 100 -P " in amg
    sw4 = job_script(case(cases, "SW4Benchmark %deck=halfspace-small", "laptop"))
    assert "cp " + str(SUITE / "checks/apps/sw4-inputs/halfspace-small.in") + " ." in sw4
    assert "srun /opt/stackproof/views/laptop/bin/sw4 halfspace-small.in" in sw4


def test_dry_run_fwq_uses_profile_app_cores(testcluster_dry):
    nt = load("local")
    for profile in ("baseline", "freecore-last", "corespec"):
        prof = plan(nt, profile)
        c = case(testcluster_dry, f"FWQNoise %profile={profile} %signature=none", "laptop")
        script = job_script(c)
        assert f"#SBATCH --ntasks={len(prof.app_cores)}" in script
        assert "#SBATCH --exclusive" in script
        masks = ",".join(hex(sum(1 << pu for pu in nt.core_pus(s, k))) for s, k in prof.app_cores)
        # explicit binding; the mpibind plugin (partition feature) is switched off for it
        assert f"srun --mpibind=off --cpu-bind=mask_cpu:{masks} " in script, script
        assert "-n 10000 -w 4096 -o fwq.dat" in script
    noisy = job_script(case(testcluster_dry, "FWQNoise %profile=corespec %signature=10Hz-2500us", "laptop"))
    assert "srun --overlap" in noisy and "fwq-noise --freq 10 --duration 2500us --cpus " in noisy


def test_dry_run_corespec_and_binding(testcluster_dry, tmp_path):
    c = case(testcluster_dry, "CoreSpecCheck %profile=clean", "laptop")
    script = job_script(c)
    assert "/usr/local/sbin/stackproof-corespec check > corespec-check.txt" in script
    assert "srun grep Cpus_allowed_list /proc/self/status" in script
    for profile, tasks in (("baseline", len(plan(load("local"), "baseline").app_cores)),
                           ("corespec", len(plan(load("local"), "corespec").app_cores))):
        b = job_script(case(testcluster_dry, f"MpibindBinding %profile={profile}", "laptop"))
        assert "srun --mpibind=on sh -c" in b and "lstopo-no-graphics --of xml > topology.xml" in b
        assert f"#SBATCH --ntasks={tasks}" in b


def test_dry_run_x86gpu_cuda_buffers_and_gpu_health(tmp_path):
    proc, cases = reframe(tmp_path, "--system", "x86gpu", "-p", "^commodity$", "--dry-run",
                          "-n", "^(OSUBenchmark|GPUHealth)")
    assert proc.returncode == 0, proc.stdout[-3000:]
    nt = load("pascal")
    dev = job_script(case(cases, "OSUBenchmark %benchmark=osu_allgather %buffers=cuda-device", "commodity"))
    assert "-m 2:4194304 -x 20 -f -d cuda" in dev
    assert f"#SBATCH --gpus-per-node={len(nt.gpus)}" in dev
    assert "export PATH=/opt/stackproof/views/commodity-gpu/bin:$PATH" in dev
    assert job_script(case(cases, "OSUBenchmark %benchmark=osu_bibw %buffers=cuda-device",
                           "commodity")).rstrip().endswith("osu_bibw D D")
    assert job_script(case(cases, "OSUBenchmark %benchmark=osu_latency %buffers=cuda-managed",
                           "commodity")).rstrip().endswith("osu_latency M M")
    assert "-d managed" in job_script(case(cases, "OSUBenchmark %benchmark=osu_allreduce %buffers=cuda-managed",
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
    (["--system", "nosuch", "--stack", "laptop"], "unknown system 'nosuch' (known: "),
    (["--system", "local", "--stack", "nosuch"], "unknown stack 'nosuch' for system 'local' (known: commodity, laptop, vendor)"),
    (["--system", "lassen", "--stack", "laptop"], "unknown stack 'laptop' for system 'lassen'"),
])
def test_unknown_system_or_stack(args, message, tmp_path):
    env = dict(os.environ, STACKPROOF_RFM_PREFIX=str(tmp_path), STACKPROOF_RESULTS_DB=str(tmp_path / "r.db"))
    proc = subprocess.run([sys.executable, str(SUITE / "run.py"), *args], capture_output=True, text=True, env=env)
    assert proc.returncode == 1 and message in proc.stderr


def test_run_py_command_for_a_stack(tmp_path):
    env = dict(os.environ, STACKPROOF_RFM_PREFIX=str(tmp_path), STACKPROOF_RESULTS_DB=str(tmp_path / "r.db"))
    proc = subprocess.run([sys.executable, str(SUITE / "run.py"), "--system", "testcluster", "--stack", "commodity",
                           "--stack", "vendor", "--dry-run", "--print-command"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "--system testcluster -p ^(commodity|vendor)$ --session-extras stack=commodity+vendor" in proc.stdout
    assert proc.stdout.rstrip().endswith("--dry-run")
