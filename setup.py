"""Installs the data stackproof reads at run time under <prefix>/share/stackproof/, in the
repository's layout (slurm-conf/, reframe-tests/, images/, spack-envs/, fwq/), so that
stackproof.paths.REPO finds it after a non-editable `pip install .` (or Spack's) exactly as it
finds the source checkout. Everything else about the package is in pyproject.toml."""
import os
import subprocess

from setuptools import setup

# The top-level directories whose files the installed package needs (the one list of them).
DATA_DIRS = ("slurm-conf", "reframe-tests", "images", "spack-envs", "fwq")
# Without git (a release tarball, an image build context): skip what .gitignore keeps out of git.
SKIP_NAMES = {"__pycache__", ".pytest_cache", "local.yaml"}
SKIP_SUFFIXES = (".pyc", ".egg-info")


def _tracked_files(here):
    """The files git tracks (or has staged) under DATA_DIRS; None where this is not a git checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", *DATA_DIRS], cwd=here, check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    files = [f for f in out.split("\0") if f and os.path.isfile(os.path.join(here, f))]
    return files or None


def _walked_files(here):
    files = []
    for top in DATA_DIRS:
        for root, dirs, names in os.walk(os.path.join(here, top)):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_NAMES and not d.endswith(SKIP_SUFFIXES))
            files += [os.path.relpath(os.path.join(root, n), here) for n in sorted(names)
                      if n not in SKIP_NAMES and not n.endswith(SKIP_SUFFIXES)]
    return files


def data_files():
    here = os.path.dirname(os.path.abspath(__file__))
    files = _tracked_files(here) or _walked_files(here)
    by_dir = {}
    for f in files:
        by_dir.setdefault(os.path.join("share", "stackproof", os.path.dirname(f)), []).append(f)
    return sorted(by_dir.items())


setup(data_files=data_files())
