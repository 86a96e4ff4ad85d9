"""Shared pytest fixtures: the ../shared data directory, root/live gating, and the skip policy.

Skip policy (issue 27): a test skips only for a prerequisite it checks explicitly *before* the code
under test runs, never because that code failed. Use the `require_*` helpers below. Under
STACKPROOF_STRICT_SKIPS=1 (set by .ci/run) a skip whose reason does not name an unobtainable
prerequisite -- one no package registry serves (Spack, wwctl/Warewulf, Apptainer, upstream benchmark
sources, a GPU) or a property of the machine (CPU count, architecture, kernel features) -- is
reported as a failure: everything `make test` installs must be there in CI.
"""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stackproof.paths import REPO, source_tree


def shared_dir() -> Path:
    """The project's shared test data (topologies, golden mappings, fixtures): $STACKPROOF_SHARED,
    else ../shared beside the checkout. Tests only: the product never reads it."""
    return Path(os.environ.get("STACKPROOF_SHARED", (source_tree() or REPO).parent / "shared")).resolve()

STRICT_SKIPS = os.environ.get("STACKPROOF_STRICT_SKIPS") == "1"

# Skip reasons allowed under STACKPROOF_STRICT_SKIPS=1, one pattern per unobtainable prerequisite.
# Anything else that skips in CI is a missing install step (or a failure turned into a skip): a bug.
UNOBTAINABLE = {
    "unobtainable (require_unobtainable)": r"^unobtainable prerequisite: ",
    "Spack (no registry serves it)": r"\bspack\b",
    "wwctl / Warewulf (no registry serves it)": r"\bwwctl\b|STACKPROOF_WWCTL",
    "Apptainer (no registry serves it)": r"\bapptainer\b",
    "upstream benchmark sources (OSU, AMG, SW4: not in any registry)": r"OSU/AMG/SW4|upstream source",
    "a GPU or none (machine)": r"a GPU is present|\bno GPU\b",
    "a scenario this machine cannot provoke": r"cannot be provoked|never needs lstopo here",
    "optional tools make test does not install (extra checks)": r"\bno chromium\b",
    "CPU count / topology (machine)": r"^needs (>= )?2 (CPUs|cores)\b|cores per socket",
    "CPU architecture (machine)": r"x86-64 only",
    "kernel features (machine)": r"no usable tracefs|SCHED_FIFO is refused",
    "a noise signature this VM cannot resolve (measured)": r"in this VM's corner",
    "a commit a shallow clone lacks": r"is not in this clone",
}
_ALLOWED = re.compile("|".join(f"(?:{p})" for p in UNOBTAINABLE.values()), re.IGNORECASE)


def skip_reason_allowed(reason: str) -> bool:
    """Whether a skip with this reason may stay a skip under STACKPROOF_STRICT_SKIPS=1."""
    return bool(_ALLOWED.search(reason.removeprefix("Skipped: ")))


def _strict(report):
    if not (STRICT_SKIPS and report.skipped) or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if not skip_reason_allowed(reason):
        report.outcome = "failed"
        report.longrepr = (f"STACKPROOF_STRICT_SKIPS=1: skip is not for an unobtainable prerequisite "
                           f"(tests/conftest.py UNOBTAINABLE): {reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _strict(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """Module-level skips (pytest.importorskip at import time) happen while collecting."""
    outcome = yield
    _strict(outcome.get_result())


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Every test of a *_live.py file is `live`, also where the file forgot the marker (test_fwq_live's
    srun runs and test_noise_hunt_live bring the shared test cluster up and take it down at the end),
    and so is every test that uses the live_cluster fixture, wherever it is: `-m "not live"` (make
    check) then never touches a cluster someone else is using. Before `-m` deselects."""
    for item in items:
        if item.path.name.endswith("_live.py") or "live_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.live)


# ---- prerequisites, checked before the code under test runs ---------------------------------------------

def require_root():
    if os.geteuid() != 0:
        pytest.skip("live test needs root (starts daemons, namespaces, cgroups)")


def require_tools(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"missing tools: {', '.join(missing)} (run scripts/install-deps.sh)")


def require_files(*paths, hint):
    """Build outputs a make target produces (`hint` names it): skip when absent -- a failure in CI."""
    missing = [str(p) for p in paths if not os.path.exists(p)]
    if missing:
        pytest.skip(f"not built: {', '.join(missing)} ({hint})")


def require_module(name, hint):
    """A Python module the venv gets from `make`; unlike pytest.importorskip, importing it is not part
    of the check, so an import that fails (the code under test) is an error, not a skip."""
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"Python module {name} not installed ({hint})")


def require_cpus(n):
    if (os.cpu_count() or 1) < n:
        pytest.skip(f"needs {n} CPUs")


def require_unobtainable(what, available, why):
    """A prerequisite no package registry serves (Spack, wwctl, Apptainer, upstream sources): skips
    with its reason in CI too. `available` is the result of the explicit check."""
    if not available:
        pytest.skip(f"unobtainable prerequisite: {what}: {why}")


# ---- fixtures ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def repo():
    return REPO


@pytest.fixture(scope="session")
def shared():
    path = shared_dir()
    if not (path / "topologies").is_dir():
        pytest.fail(f"shared data not found at {path}: set STACKPROOF_SHARED to the shared/ directory")
    return path


@pytest.fixture(scope="session")
def live_cluster():
    """The local Slurm test cluster (real daemons), shared by every live test of the session and
    stopped at the end. Tests call `live_cluster.up(Settings(...))` for the configuration they need;
    `up` is idempotent and reconfigures only when the settings change."""
    require_root()
    require_tools("slurmctld", "slurmd", "munged", "srun")
    from stackproof.cluster import Cluster
    cluster = Cluster()
    yield cluster
    cluster.down(quiet=True)


@pytest.fixture(scope="session")
def mpi_hello(tmp_path_factory):
    """The packaged MPI smoke program built with each MPI: {'openmpi': path, 'mpich': path}."""
    require_tools("mpicc.openmpi", "mpicc.mpich")
    from stackproof.acceptance.driver import build_mpi_hello
    out_dir = tmp_path_factory.mktemp("hello")
    return {mpi: str(build_mpi_hello(mpi, out_dir)) for mpi in ("openmpi", "mpich")}


def stackproof_cli(*args, **kwargs) -> subprocess.CompletedProcess:
    """`python -m stackproof.cli ARGS` in a subprocess, as a shell runs it (text output captured);
    keyword arguments go to subprocess.run (env, cwd, timeout, check)."""
    return subprocess.run([sys.executable, "-m", "stackproof.cli", *args], capture_output=True, text=True, **kwargs)


def run_cli(argv, capsys):
    """`stackproof ARGV` in this process: (exit status, non-empty stderr lines); never a traceback."""
    from stackproof import cli
    try:
        rc = cli.main(argv)
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return rc, [line for line in err.splitlines() if line.strip()]


# ---- the ReFrame configuration (reframe-tests/config/site.py), as ReFrame loads it ----------------------

RFM_CONFIG_LOADER = """
import json, sys
sys.argv = ['reframe'] + sys.argv[1:]
sys.path.insert(0, %r)
from reframe.utility import import_module_from_file
conf = import_module_from_file(%r).site_configuration
import partitions
print(json.dumps({'config': conf, 'unavailable': partitions.UNAVAILABLE}, default=str))
""" % (str(REPO / "reframe-tests" / "config"), str(REPO / "reframe-tests" / "config" / "site.py"))


class LoadedConfig:
    """What loading the ReFrame configuration gave: `proc` (exit status, stderr), `config` (None when it
    failed), `unavailable` (systems left out and why), and views of it."""

    def __init__(self, proc: subprocess.CompletedProcess):
        self.proc = proc
        doc = json.loads(proc.stdout.splitlines()[-1]) if proc.returncode == 0 else {}
        self.config, self.unavailable = doc.get("config"), doc.get("unavailable", {})

    @property
    def systems(self) -> dict[str, list[str]]:
        """system -> its partitions' names."""
        return {s["name"]: [p["name"] for p in s["partitions"]] for s in self.config["systems"]}

    def partitions(self, system: str) -> list[dict]:
        return next(s["partitions"] for s in self.config["systems"] if s["name"] == system)

    @property
    def features(self) -> dict[str, list[str]]:
        """'sys:part' -> the partition's features."""
        return {f"{s['name']}:{p['name']}": p["features"] for s in self.config["systems"] for p in s["partitions"]}

    def environments(self, system: str) -> list[str]:
        """The names of the environments a system's partitions can use (system-wide ones included)."""
        return sorted({e["name"] for e in self.config["environments"] if system in e.get("target_systems", [])})


@pytest.fixture
def reframe_config(tmp_path):
    """load(*REFRAME ARGS, **ENV) -> LoadedConfig: reframe-tests/config/site.py loaded in a fresh process
    (its modules read the command line and the environment when imported), with a private prefix,
    results database and test-cluster run directory under tmp_path, none of the caller's overrides."""
    pytest.importorskip("reframe")

    def load(*argv, **env_extra):
        env = dict(os.environ, STACKPROOF_RFM_PREFIX=str(tmp_path / "prefix"),
                   STACKPROOF_RESULTS_DB=str(tmp_path / "db" / "r.db"), STACKPROOF_RUN_DIR=str(tmp_path / "run"))
        for var in ("STACKPROOF_FAKE_GPUS", "STACKPROOF_CLUSTER_NODES", "STACKPROOF_LOCAL_NODETYPE", "RFM_SYSTEM",
                    "SLURM_CONF"):
            env.pop(var, None)
        env.update(env_extra)
        return LoadedConfig(subprocess.run([sys.executable, "-c", RFM_CONFIG_LOADER, *argv], capture_output=True,
                                           text=True, env=env))
    return load


@pytest.fixture
def stacks_root(tmp_path, monkeypatch):
    """$STACKPROOF_STACKS_ROOT in tmp_path (stacks, source cache) and no source mirror configured."""
    from stackproof.stacks.sources import MIRROR_VAR
    monkeypatch.setenv("STACKPROOF_STACKS_ROOT", str(tmp_path / "root"))
    monkeypatch.delenv(MIRROR_VAR, raising=False)
    return tmp_path / "root"
