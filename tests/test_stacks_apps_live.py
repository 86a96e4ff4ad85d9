"""Live: HPCC 1.5.0 and hypre 2.26's ij, built per stack from Debian's source archive by the product
(`stackproof stack build`, which `make build` ran before the tests in CI: here the build is up to
date, elsewhere it builds), then run on 2 ranks with each stack's own launcher.

Signatures that noise cannot fake: each binary links its own stack's math library (the vendor's
MKL, the commodity stack's OpenBLAS) and MPI; provenance.json names the pinned source and the
sha256 of every installed binary; HPCC's own verdict (Success=1, every HPL residual check PASSED)
and BoomerAMG's convergence below the tolerance; a second build rebuilds nothing."""
import json
import os
import subprocess

import pytest

from conftest import require_root, stackproof_cli
from stackproof.benchparse import parse_hpcc, parse_hypre_ij
from stackproof.stacks import benchbuild, environment, install
from stackproof.stacks.fetch import sha256_of
from stackproof.stacks.hpccinput import hpcc_input
from stackproof.stacks.model import load_stack
from stackproof.stacks.recipes import load_recipes

pytestmark = [pytest.mark.live, pytest.mark.slow]

STACKS = {"commodity": "libopenblas", "vendor": "libmkl_rt"}     # the math library each stack links
TARGETS = ("probe", "hpcc", "hypre")
RECIPES = load_recipes()


@pytest.fixture(scope="module")
def stacks():
    require_root()
    ready = {}
    for name in STACKS:
        st = load_stack(name)
        install.install(st)          # up to date after `make build`; installs the pinned wheels otherwise
        environment.check_environment(st)
        lines = list(benchbuild.build_stack(st, only=TARGETS))
        assert not [ln for ln in lines if "not built" in ln], lines
        ready[name] = st
    return ready


def run_env(st):
    return dict(st.run_env(), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")


@pytest.mark.parametrize("name", sorted(STACKS))
def test_binaries_link_the_stacks_own_math_library(stacks, name):
    st = stacks[name]
    for key in ("hpcc", "hypre_ij"):
        binary = st.benchmark(key)
        ldd = subprocess.run(["ldd", str(binary)], env=st.run_env(), capture_output=True, text=True).stdout
        libs = {line.split()[0]: line for line in ldd.splitlines() if "=>" in line}
        assert any(so.startswith(STACKS[name]) for so in libs), (binary, ldd)
        other = [lib for n, lib in STACKS.items() if n != name][0]
        assert not any(so.startswith(other) for so in libs), (binary, ldd)


@pytest.mark.parametrize("name", sorted(STACKS))
def test_provenance_names_the_pinned_source_and_the_binaries(stacks, name):
    st = stacks[name]
    prov = json.loads((st.bench_dir() / "provenance.json").read_text())
    for key, recipe in (("hpcc", RECIPES["hpcc"]), ("hypre_ij", RECIPES["hypre"])):
        entry = prov[key]
        assert entry["version"] == recipe.version and entry["sha256"] == recipe.source.sha256
        assert entry["source"].split()[0] in ("debian", "mirror", "upstream"), entry["source"]
        assert entry["binaries"], entry
        for exe, digest in entry["binaries"].items():
            assert sha256_of(st.bench_dir() / "bin" / exe) == digest, exe


@pytest.mark.parametrize("name", sorted(STACKS))
def test_hpcc_runs_and_verifies_itself(stacks, name, tmp_path):
    st = stacks[name]
    (tmp_path / "hpccinf.txt").write_text(hpcc_input(600, 64, 1, 2, "stackproof live test"))
    cmd = [*st.launch_command("local"), "-np", "2", str(st.benchmark("hpcc"))]
    proc = subprocess.run(cmd, cwd=tmp_path, env=run_env(st), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = parse_hpcc((tmp_path / "hpccoutf.txt").read_text(), str(tmp_path / "hpccoutf.txt"))
    assert result.success and result.procs == 2 and result.hpl_n == 600
    assert {"hpl", "dgemm_star", "stream_triad_star", "ptrans", "fft_mpi"} <= set(result.values)
    assert all(v > 0 for k, v in result.values.items() if k != "randomaccess_mpi")


@pytest.mark.parametrize("name", sorted(STACKS))
def test_hypre_boomeramg_converges(stacks, name, tmp_path):
    st = stacks[name]
    cmd = [*st.launch_command("local"), "-np", "2", str(st.benchmark("hypre_ij")), "-laplacian", "-n", "40", "20",
           "20", "-P", "2", "1", "1", "-solver", "0", "-tol", "1e-8"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=run_env(st), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = parse_hypre_ij(proc.stdout)
    assert result.residual <= 1e-8 and 1 <= result.iterations < 100
    assert (result.grid, result.procs) == ([40, 20, 20], [2, 1, 1])


def test_second_build_rebuilds_nothing(stacks):
    for st in stacks.values():
        lines = list(benchbuild.build_stack(st, only=TARGETS))
        assert all("built in" not in line for line in lines), lines
        assert any("hpcc 1.5.0 up-to-date" in line for line in lines), lines


def test_cli_reports_each_benchmark(stacks):
    proc = stackproof_cli("stack", "build", "--only", ",".join(TARGETS), *STACKS, env=dict(os.environ), timeout=600)
    assert proc.returncode == 0, proc.stderr
    for name in STACKS:
        assert f"stack {name}: hypre 2.26.0 up-to-date" in proc.stdout, proc.stdout
