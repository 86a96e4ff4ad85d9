"""GPU health: the output parser, the model/link limits, and the ReFrame check end to end on
`--system local` with an H100 node type, a stub nvcc (whose "binary" prints a recorded output)
and a stub nvidia-smi. No GPU here: tests/data/gpu_health_h100_synthetic.out is SYNTHETIC, written
to match gpu_health.cu's print format exactly."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import stackproof_cli
from stackproof.gpus import health as gpu_health
from stackproof.errors import StackproofError
from stackproof.paths import REPO

DATA = Path(__file__).parent / "data"
SYNTHETIC = (DATA / "gpu_health_h100_synthetic.out").read_text()
LINKS = "0, 00000000:00:06.0, 5, 16\n"         # what nvidia-smi --query-gpu=... says of the H100 fixture
SUITE = REPO / "reframe-tests"
REFRAME = shutil.which("reframe", path=os.path.dirname(sys.executable))
CU = SUITE / "checks" / "gpu" / "src" / "gpu_health.cu"


def test_synthetic_output_follows_the_program_print_format():
    """Every printf format of gpu_health.cu has a line in the synthetic output and a parser
    pattern, so the two cannot drift apart silently."""
    src = CU.read_text()
    for fmt in ('"gpu_health: version 2 devices %d\\n"', '"device %d pci %04x:%02x:%02x.0 sms %d name %s\\n"',
                '"fma %d %s %s gflops %.1f iterations %ld\\n"', '"copy %d %s %s %s GB/s %.2f\\n"',
                '"p2p %d %d access %s %s GB/s %.2f\\n"', '"migrate %d cpus %zu visited %d %s\\n"',
                '"gpu_health: %s\\n"'):
        assert fmt in src, fmt
    assert SYNTHETIC.startswith("# SYNTHETIC")


def test_parse_and_figures_h100():
    out = gpu_health.parse_output(SYNTHETIC)
    assert gpu_health.problems(out, 1) == []
    figs, notes = gpu_health.figures(out, "NVIDIA H100 80GB HBM3", gpu_health.parse_links(LINKS))
    assert notes == []
    assert figs["fp64_fraction"][0] == pytest.approx(31512.4 / 33500)
    assert figs["fp32_fraction"][0] == pytest.approx(62140.8 / 66900)
    assert figs["h2d_pinned_fraction"][0] == pytest.approx(55.12 / 63.015, rel=1e-4)
    assert figs["d2h_pageable_fraction"][0] == pytest.approx(18.90 / 63.015, rel=1e-4)
    assert figs["d2d_fraction"][0] == pytest.approx(2650.41 / 3352)
    assert figs["migrated_cpus"] == (16, "CPUs") and "p2p_min_gbs" not in figs   # one GPU: no pairs


def test_model_table_and_pcie_limits():
    # the link limits equal what hwloc writes as pci_link_speed for gen3 and gen5 x16 links
    assert gpu_health.pcie_limit_gbs(3, 16) == pytest.approx(15.753846, abs=1e-6)
    assert gpu_health.pcie_limit_gbs(5, 16) == pytest.approx(63.015385, abs=1e-6)
    assert gpu_health.cuda_arch("NVIDIA H100 80GB HBM3") == "sm_90"
    assert gpu_health.model_info("NVIDIA H100 PCIe")["fp64_tflops"] == 25.6
    assert gpu_health.cuda_arch("Tesla V100-SXM2-16GB") == "sm_70"
    assert gpu_health.model_info("Tesla P100-PCIE-16GB")["name"] == "P100 PCIe"
    assert gpu_health.cuda_arch("fake") is None
    with pytest.raises(ValueError):
        gpu_health.pcie_limit_gbs(9, 16)


def test_unknown_model_and_link_leave_fractions_out():
    out = gpu_health.parse_output(SYNTHETIC)
    figs, notes = gpu_health.figures(out, "Mystery GPU", {})
    assert figs["fp64_fraction"][0] is None and figs["h2d_pinned_fraction"][0] is None
    assert figs["fp64_gflops"][0] == 31512.4 and len(notes) == 2


def two_gpus(p2p_ok="ok"):
    text = SYNTHETIC.replace("devices 1", "devices 2")
    gpu1 = [line.replace(" 0 ", " 1 ", 1) for line in text.splitlines()
            if line.split(" ")[0] in ("fma", "copy", "migrate", "device")]
    verdict = "PASS" if p2p_ok == "ok" else "FAIL"
    return (text.replace("gpu_health: PASS", "") + "\n".join(gpu1) +
            f"\np2p 0 1 access yes ok GB/s 48.1\np2p 1 0 access yes {p2p_ok} GB/s 47.3\ngpu_health: {verdict}\n")


def test_two_gpus_p2p_per_pair():
    out = gpu_health.parse_output(two_gpus())
    assert gpu_health.problems(out, 2) == []
    figs, _ = gpu_health.figures(out, "NVIDIA H100 80GB HBM3", gpu_health.parse_links(LINKS + "1, 0:07:00.0, 5, 16\n"))
    assert figs["p2p_min_gbs"] == (47.3, "GB/s")
    assert "GPU pairs without a verified copy: 1->0" in " ".join(gpu_health.problems(gpu_health.parse_output(two_gpus("FAIL")), 2))


@pytest.mark.parametrize("edit, expected", [
    (lambda t: t.replace("fp64 ok", "fp64 FAIL"), "GPU 0: fp64 FMA loop wrong result"),
    (lambda t: t.replace("copy 0 d2h pageable ok GB/s 18.90\n", ""), "GPU 0: d2h pageable copy missing"),
    (lambda t: t.replace("visited 32 ok", "visited 17 FAIL"), "thread migration failed (17 of 32 moves verified)"),
    (lambda t: t.split("migrate")[0], "program verdict missing (cut off?)"),
    (lambda t: t.replace("devices 1", "devices 0"), "the job saw 0 GPUs, the partition has 1"),
])
def test_unhealthy_outputs_name_the_problem(edit, expected):
    assert expected in "; ".join(gpu_health.problems(gpu_health.parse_output(edit(SYNTHETIC)), 1))


def test_not_our_output_is_an_error():
    with pytest.raises(StackproofError, match="no 'gpu_health: version 2 devices N' line"):
        gpu_health.parse_output("deviceQuery, CUDA Driver = CUDART\nResult = PASS\n", "x.out")


# ---- the ReFrame check on --system local with an H100 node type --------------------------------------
# (slow: ReFrame sessions and real nvcc builds, make test only)

@pytest.fixture(scope="module")
def h100_env(tmp_path_factory, shared):
    if REFRAME is None:
        pytest.skip("reframe not in the venv: run `make venv`")
    tmp = tmp_path_factory.mktemp("gpu-rfm")
    nodetype_yaml = tmp / "h100.yaml"
    proc = stackproof_cli("nodetype", "from-xml",
                           str(shared / "topologies" / "device__h100-no-nvml.xml"), "--name", "h100",
                           "--smi-output", str(shared / "fixtures/gpu/h100-nvidia-smi-q.txt"),
                           "-o", str(nodetype_yaml))
    assert proc.returncode == 0, proc.stderr
    return tmp, nodetype_yaml


def stub_bin(tmp, output_text, with_nvcc=True):
    """PATH dir with nvidia-smi (the link query) and, optionally, an nvcc whose output binary
    prints `output_text`."""
    bindir = tmp / f"bin-{abs(hash((output_text, with_nvcc)))}"
    bindir.mkdir(exist_ok=True)
    (bindir / "out.txt").write_text(output_text)
    smi = bindir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nprintf '{LINKS}'\n")
    smi.chmod(0o755)
    if with_nvcc:
        nvcc = bindir / "nvcc"
        nvcc.write_text('#!/bin/sh\nout=a.out\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\n'
                        f'printf \'#!/bin/sh\\ncat "{bindir}/out.txt"\\n\' > "$out" && chmod +x "$out"\n')
        nvcc.chmod(0o755)
    return bindir


def run(tmp, nodetype_yaml, bindir, *args, runner="reframe", extra_env=None):
    prefix = tmp / f"prefix-{bindir.name}-{runner}"
    env = dict(os.environ, STACKPROOF_RFM_PREFIX=str(prefix), STACKPROOF_RESULTS_DB=str(tmp / "db" / "r.db"),
               STACKPROOF_LOCAL_NODETYPE=str(nodetype_yaml), PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
    for var in ("CUDA_HOME", "RFM_REFERENCE_PREFIX", "STACKPROOF_COMMODITY_VIEW"):
        env.pop(var, None)
    env.update(extra_env or {})
    report = tmp / f"report-{bindir.name}-{runner}.json"
    if runner == "reframe":
        cmd = [REFRAME, "-C", str(SUITE / "config" / "site.py"), "--system", "local", "-p", "^commodity$",
               "--report-file", str(report), *args]
    else:
        cmd = [sys.executable, str(SUITE / "run.py"), "--system", "local", "--stack", "commodity", "--", *args]
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    cases = []
    if report.exists():
        cases = [tc for r in json.loads(report.read_text())["runs"] for tc in r["testcases"]]
    return proc, cases


@pytest.mark.slow
def test_local_has_a_gpu_partition_and_dry_run_scripts(h100_env):
    tmp, nt = h100_env
    proc, cases = run(tmp, nt, stub_bin(tmp, SYNTHETIC), "-n", "^GPUHealth$", "--dry-run")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (c,) = cases
    assert (c["system"], c["partition"]) == ("local", "gpu")
    build = open(os.path.join(c["stagedir"], "rfm_build.sh")).read()
    job = open(os.path.join(c["stagedir"], "rfm_job.sh")).read()
    assert "nvcc -O2 -arch=sm_90 gpu_health.cu" in build
    assert "nvidia-smi --query-gpu=index,pci.bus_id,pcie.link.gen.max,pcie.link.width.max" in job
    assert "GPUHealth 256" in job


@pytest.mark.slow
def test_check_passes_on_the_synthetic_output_with_fractions(h100_env):
    tmp, nt = h100_env
    proc, cases = run(tmp, nt, stub_bin(tmp, SYNTHETIC), "-n", "^GPUHealth$", "-r")
    assert proc.returncode == 0, proc.stdout[-3000:]
    (c,) = cases
    assert c["result"] == "pass", c.get("fail_reason")
    perf = {k.split(":")[-1]: v for k, v in c["perfvalues"].items()}
    assert perf["fp64_fraction"][0] == pytest.approx(0.9407, abs=1e-4)
    assert perf["fp64_fraction"][1] == 0.9      # the H100 reference of references/commodity/gpu.yaml
    assert perf["h2d_pinned_fraction"][0] == pytest.approx(0.8747, abs=1e-4)
    assert perf["migrated_cpus"][0] == 16
    assert os.path.isfile(os.path.join(c["outputdir"], "gpu_links.csv"))   # kept beside rfm_job.out


@pytest.mark.slow
def test_check_fails_on_a_failed_program_naming_the_file(h100_env):
    tmp, nt = h100_env
    proc, cases = run(tmp, nt, stub_bin(tmp, SYNTHETIC.replace("fp32 ok", "fp32 FAIL")
                                        .replace("gpu_health: PASS", "gpu_health: FAIL")), "-n", "^GPUHealth$", "-r")
    (c,) = cases
    assert c["result"] == "fail" and "GPU 0: fp32 FMA loop wrong result" in c["fail_reason"]
    assert "rfm_job.out" in c["fail_reason"]


@pytest.mark.slow
def test_slow_gpu_fails_its_reference(h100_env):
    tmp, nt = h100_env
    slow = SYNTHETIC.replace("gflops 31512.4", "gflops 12000.0")     # 0.36 of peak < 0.72
    proc, cases = run(tmp, nt, stub_bin(tmp, slow), "-n", "^GPUHealth$", "-r")
    (c,) = cases
    assert c["result"] == "fail" and c["fail_phase"] == "performance"


@pytest.mark.slow
def test_no_nvcc_skips_and_run_py_fails_the_gpu_partition(h100_env):
    tmp, nt = h100_env
    bindir = stub_bin(tmp, SYNTHETIC, with_nvcc=False)
    if shutil.which("nvcc"):
        pytest.skip("an nvcc is installed here: the skip cannot be provoked")
    proc, _ = run(tmp, nt, bindir, "-n", "^GPUHealth$", "-r", runner="run.py")
    assert proc.returncode == 1
    assert "PASSED" in proc.stdout            # what ReFrame alone says
    assert ("run.py: error: GPU partition local:gpu: all 1 GPU test case(s) were skipped: nvcc not found "
            "(looked in ") in proc.stderr


@pytest.mark.slow
def test_zero_selected_checks_fail(h100_env):
    tmp, nt = h100_env
    proc, _ = run(tmp, nt, stub_bin(tmp, SYNTHETIC), "-n", "^NoSuchCheck$", "-r", runner="run.py")
    assert proc.returncode == 1
    assert "run.py: error: no test case was selected for system local stack commodity" in proc.stderr


# ---- the real CUDA compiler (make cuda-toolchain: NVIDIA's nvcc 13.0 wheels, pinned) ------------------

TOOLCHAIN_NVCC = REPO / "build" / "cuda-toolchain" / "nvidia" / "cu13" / "bin" / "nvcc"


def has_gpu():
    return any(Path("/dev").glob("nvidia[0-9]*"))


@pytest.fixture(scope="module")
def nvcc():
    """The pinned toolchain of `make cuda-toolchain` (part of make build, so CI has it), else an
    nvcc on PATH (a GPU site)."""
    if os.access(TOOLCHAIN_NVCC, os.X_OK):
        return str(TOOLCHAIN_NVCC)
    found = shutil.which("nvcc")
    if found is None:
        if os.environ.get("CI"):      # CI builds it (make build): a missing toolchain there is a bug, not a skip
            pytest.fail(f"{TOOLCHAIN_NVCC} missing in CI: `make cuda-toolchain` is part of make build")
        pytest.skip("no nvcc: run `make cuda-toolchain` (NVIDIA's nvcc wheels into build/cuda-toolchain)")
    return found


@pytest.fixture(scope="module")
def built(nvcc, tmp_path_factory):
    """gpu_health.cu compiled AND linked for A100 (sm_80) and H100 (sm_90), warnings as errors."""
    exe = tmp_path_factory.mktemp("nvcc") / "gpu_health"
    proc = subprocess.run([nvcc, "-O2", "-gencode", "arch=compute_80,code=sm_80",
                           "-gencode", "arch=compute_90,code=sm_90", "-Werror", "all-warnings",
                           "-Xcompiler", "-Wall,-Wextra,-Werror", "-Xptxas", "-v", str(CU), "-o", str(exe)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return exe, proc.stderr


@pytest.mark.slow
def test_cuda_source_compiles_and_links_for_sm80_and_sm90(built):
    exe, log = built
    assert os.access(exe, os.X_OK)
    for arch in ("sm_80", "sm_90"):    # ptxas built every kernel for both targets
        for kernel in ("fma_loopIdE", "fma_loopIfE", "bump"):
            assert re.search(rf"Compiling entry function '\w*{kernel}\w*' for '{arch}'", log), (kernel, arch)
    assert "spill" not in log.replace("0 bytes spill", "")


@pytest.mark.slow
def test_fma_loop_is_real_fma_instructions(nvcc, tmp_path):
    """The FLOP count assumes one FMA per chain and iteration: the PTX of the unrolled loop must be
    FMAs of the right precision (8 chains x unroll 4, plus the remainder loop)."""
    ptx = tmp_path / "gpu_health.ptx"
    subprocess.run([nvcc, "-O2", "-arch=sm_90", "-ptx", str(CU), "-o", str(ptx)], check=True, timeout=300)
    text = ptx.read_text()
    assert text.count("fma.rn.f64") >= 32 and text.count("fma.rn.f32") >= 32


@pytest.mark.slow
def test_binary_never_passes_without_a_gpu(built):
    """Run for real: without a GPU (or driver) it stops with the CUDA error and FAIL, and the
    parser turns that into one error naming it; on a GPU node it must pass and parse cleanly."""
    exe, _ = built
    proc = subprocess.run([str(exe), "16"], capture_output=True, text=True, timeout=600)
    if has_gpu():
        out = gpu_health.parse_output(proc.stdout)
        assert proc.returncode == 0 and gpu_health.problems(out, out.count) == [], proc.stdout
        return
    assert proc.returncode == 1 and proc.stdout.splitlines()[-1] == "gpu_health: FAIL", proc.stdout
    with pytest.raises(StackproofError, match=r"x\.out: gpu_health stopped before measuring: CUDA error "):
        gpu_health.parse_output(proc.stdout, "x.out")


@pytest.mark.slow
def test_reframe_check_builds_with_the_real_nvcc(h100_env, nvcc):
    """The check's own build with the real compiler found through $CUDA_HOME (not on PATH): it
    compiles for the partition's sm_90, runs, and without a GPU fails its sanity naming the CUDA
    error: nothing measured is never a pass."""
    if has_gpu():
        pytest.skip("a GPU is present: the no-GPU failure cannot be provoked")
    tmp, nt = h100_env
    bindir = stub_bin(tmp, SYNTHETIC, with_nvcc=False)
    proc, cases = run(tmp, nt, bindir, "-n", "^GPUHealth$", "-r",
                      extra_env={"CUDA_HOME": str(Path(nvcc).parent.parent)})
    (c,) = cases
    build = open(os.path.join(c["stagedir"], "rfm_build.sh")).read()
    assert f"{nvcc} -O2 -arch=sm_90 gpu_health.cu" in build
    assert c["result"] == "fail" and c["fail_phase"] == "sanity", c.get("fail_reason")
    assert "gpu_health stopped before measuring: CUDA error" in c["fail_reason"]
