"""ReFrame's own tutorial checks, unchanged, pass with our configuration on `local`: selected on
every partition, with every installed stack (`+openmp`/`omp_flag`, `+mpi`, processor info)."""
import shutil

import pytest
from reframe_examples import TUTORIAL, check_results, installed_stacks, run_examples


@pytest.mark.slow      # a real ReFrame session that builds and runs the tutorial's checks
def test_tutorial_checks_pass_on_local(tmp_path):
    if not (TUTORIAL / "stream/stream_build_run.py").is_file():
        pytest.skip(f"reframe-hpc's examples are not installed at {TUTORIAL}")
    stacks = installed_stacks()
    if not stacks or shutil.which("mpirun") is None:
        pytest.skip("no stack installed (scripts/install-deps.sh)")
    proc, cases = run_examples("local", stacks, tmp_path)
    check_results(proc, cases, ["default"], stacks)
