"""OSU device/managed buffers run only when the stack's MPI is CUDA-aware, and are skipped with
that reason when it is not (Debian's Open MPI is not): on `--system local` with an H100 node type
(gpu partition), a fake stack view whose ompi_info says yes or no and whose osu_latency prints a
recorded OSU output."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import stackproof_cli
from stackproof.gpus import cuda_aware
from stackproof.paths import REPO

SUITE = REPO / "reframe-tests"
REFRAME = shutil.which("reframe", path=os.path.dirname(sys.executable))
RANK0 = '[ "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}" = 0 ] || exit 0\n'


def ompi_info(bindir, value):
    bindir.mkdir(parents=True, exist_ok=True)
    exe = bindir / "ompi_info"
    exe.write_text("#!/bin/sh\necho 'mca:mpi:base:param:mpi_built_with_cuda_support:value:%s'\n" % value)
    exe.chmod(0o755)


@pytest.mark.parametrize("value, aware", [("true", True), ("false", False)])
def test_ompi_info_decides(tmp_path, monkeypatch, value, aware):
    monkeypatch.delenv("STACKPROOF_COMMODITY_CUDA_AWARE", raising=False)
    ompi_info(tmp_path / "bin", value)
    got, why = cuda_aware.cuda_aware("commodity", str(tmp_path / "bin"))
    assert got is aware and "ompi_info" in why
    if not aware:
        assert "not CUDA-aware" in why


def test_override_and_unknown(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))           # no ompi_info anywhere
    monkeypatch.delenv("STACKPROOF_VENDOR_CUDA_AWARE", raising=False)
    got, why = cuda_aware.cuda_aware("vendor", str(tmp_path / "view" / "bin"))
    assert got is None and "STACKPROOF_VENDOR_CUDA_AWARE=1" in why
    monkeypatch.setenv("STACKPROOF_VENDOR_CUDA_AWARE", "1")
    assert cuda_aware.cuda_aware("vendor", "")[0] is True


def test_debian_open_mpi_is_not_cuda_aware(monkeypatch):
    if shutil.which("ompi_info") is None:
        pytest.skip("no ompi_info (scripts/install-deps.sh installs openmpi-bin)")
    monkeypatch.delenv("STACKPROOF_LAPTOP_CUDA_AWARE", raising=False)
    assert cuda_aware.cuda_aware("laptop", "/nonexistent")[0] is False


@pytest.fixture(scope="module")
def osu_runs(tmp_path_factory, shared):
    if REFRAME is None:
        pytest.skip("reframe not in the venv: run `make venv`")
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun not found (scripts/install-deps.sh: openmpi-bin)")
    tmp = tmp_path_factory.mktemp("osu-gpu")
    nt = tmp / "h100.yaml"
    proc = stackproof_cli("nodetype", "from-xml",
                           str(shared / "topologies" / "device__h100-nvml.xml"), "--name", "h100", "-o", str(nt))
    assert proc.returncode == 0, proc.stderr
    views = {}
    from stackproof.stacks import load_stack
    for stack, value in (("commodity", "true"), ("vendor", "false")):
        bindir = tmp / stack / "bin"
        ompi_info(bindir, value)
        probe = load_stack(stack).benchmark("probe")       # the real identity probe of that stack
        if not probe.is_file():
            pytest.skip(f"{probe} not built: run `make stacks` (stackproof stack build {stack})")
        (bindir / "mpi_identity").symlink_to(probe)
        real = load_stack(stack)
        for name in ("hello", "fwq", "netpipe"):        # the rest of what a built stack has (StackReady)
            dst = tmp / stack / real.benchmarks[name]
            dst.parent.mkdir(parents=True, exist_ok=True)
            if not dst.exists():
                dst.symlink_to(real.benchmark(name))
        osudir = tmp / stack / "libexec/osu-micro-benchmarks/mpi/pt2pt"     # the stack file's benchmarks.osu
        osudir.mkdir(parents=True)
        osu = osudir / "osu_latency"
        osu.write_text("#!/bin/sh\n" + RANK0 + f"cat <<'EOF'\n{(shared / 'fixtures/osu/7.2/osu_latency.out').read_text()}EOF\n")
        osu.chmod(0o755)
        views[stack] = tmp / stack
    env = dict(os.environ, STACKPROOF_RFM_PREFIX=str(tmp / "prefix"), STACKPROOF_RESULTS_DB=str(tmp / "r.db"),
               STACKPROOF_LOCAL_NODETYPE=str(nt), STACKPROOF_COMMODITY_VIEW=str(views["commodity"]),
               STACKPROOF_VENDOR_VIEW=str(views["vendor"]))
    for var in ("OSU_BIN_DIR", "STACKPROOF_COMMODITY_CUDA_AWARE", "STACKPROOF_VENDOR_CUDA_AWARE"):
        env.pop(var, None)
    # the recorded output is from a busy machine (13.5 us at 8 B): this test is about which buffers
    # run, not about this machine's references (an empty reference root: nothing is judged)
    (tmp / "no-references").mkdir()
    env["RFM_REFERENCE_PREFIX"] = str(tmp / "no-references")
    report = tmp / "report.json"
    proc = subprocess.run([REFRAME, "-C", str(SUITE / "config" / "site.py"), "--system", "local:gpu",
                           "-p", "^(commodity|vendor)$", "-n", "OSUBenchmark%block_index=0%benchmark=osu_latency",
                           "--report-file", str(report), "-r"], cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=600)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    cases = [tc for r in json.loads(report.read_text())["runs"] for tc in r["testcases"]]
    return proc, {(c["environ"], c["buffers"] if "buffers" in c else c["name"].split("%buffers=")[-1]): c
                  for c in cases}


@pytest.mark.slow      # ReFrame sessions (osu_runs)
def test_device_buffers_only_with_a_cuda_aware_mpi(osu_runs):
    proc, cases = osu_runs
    assert cases[("commodity", "cuda-device")]["result"] == "pass", proc.stdout[-3000:]
    assert cases[("commodity", "cuda-managed")]["result"] == "pass"
    # the job runs its block of launches from block.json (argv lists, no shell text: reframe.block)
    with open(os.path.join(cases[("commodity", "cuda-device")]["outputdir"], "block.json")) as fh:
        argvs = [step["argv"] for launch in json.load(fh)["launches"] for step in launch["steps"]]
    ran = [a for a in argvs if any(x.endswith("/osu_latency") for x in a)]
    assert ran and all(a[-2:] == ["D", "D"] for a in ran), argvs
    for buffers in ("cuda-device", "cuda-managed"):
        assert cases[("vendor", buffers)]["result"] == "skip"
    assert "stack 'vendor''s MPI is not CUDA-aware" in proc.stdout
    assert cases[("vendor", "host")]["result"] == "pass"
