"""`stack lock` runs pip as root: an sdist on the index (or in a wheel directory) made pip run its
build backend while resolving, code of whoever published it (issue 42). Now pip takes wheels only
(--only-binary=:all:): an sdist whose in-tree backend would leave a mark is never built; the lock
fails in one line naming the pin. Offline: a wheel directory made here, real pip."""
import json
import os
import tarfile
import io

from conftest import stackproof_cli

BACKEND = """
import pathlib
pathlib.Path({mark!r}).write_text("the sdist's build backend ran as root\\n")
def get_requires_for_build_wheel(config_settings=None):
    return []
def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    raise SystemExit("stop here")
build_wheel = prepare_metadata_for_build_wheel
"""


def make_sdist(directory, mark):
    """spkevil-1.0.tar.gz: an in-tree build backend (no download needed) that leaves `mark`."""
    files = {"pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "evil"\nbackend-path = ["."]\n',
             "evil.py": BACKEND.format(mark=str(mark)),
             "PKG-INFO": "Metadata-Version: 2.1\nName: spkevil\nVersion: 1.0\n"}
    with tarfile.open(directory / "spkevil-1.0.tar.gz", "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"spkevil-1.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_stack_lock_never_builds_an_sdist(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    mark = tmp_path / "ran"
    make_sdist(wheels, mark)
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "demo.yaml").write_text(json.dumps({
        "name": "demo", "prefix": str(tmp_path / "prefix"), "install": {"pip": ["spkevil==1.0"]},
        "compilers": {"cc": "mpicc", "cxx": "mpicxx"}, "mpi": {"family": "openmpi", "version": "x", "library": "libmpi"},
        "launcher": {"local": ["mpirun"]}, "benchmarks": {}}))
    env = dict(os.environ, STACKPROOF_STACKS_DIR=str(stacks), PIP_NO_CACHE_DIR="1")
    proc = stackproof_cli("stack", "lock", "demo", "--wheels", str(wheels), env=env, timeout=300)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(err) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "spkevil==1.0 cannot be resolved from the wheels in" in err[0], err
    assert not mark.exists(), "the sdist's build backend ran"
    assert not (stacks / "demo.pip-lock.txt").exists()
