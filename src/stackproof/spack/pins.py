"""spack-envs/pins.yaml and what is derived from it without Spack: the pinned versions, which
environments have a committed lock, the inputs a lock was made from, the project's release tarball.
Imports only the basics (errors, paths, yamlfile)."""
import hashlib
import os
import subprocess
from pathlib import Path

from stackproof.errors import StackproofError
from stackproof.paths import REPO
from stackproof.yamlfile import read_yaml

ENVS_DIR = REPO / "spack-envs"
RECIPES = Path("repo") / "spack_repo" / "stackproof" / "packages"
PIN_KEYS = {"spack": ["version", "tag", "commit"], "spack_packages": ["tag", "commit", "builtin_path"],
            "clingo": ["requirements"], "stackproof_release": ["version", "commit", "sha256", "packages"]}


def load_pins(envs_dir):
    path = Path(envs_dir) / "pins.yaml"
    if not path.is_file():
        raise StackproofError(f"{path} not found: is {envs_dir} the spack-envs/ directory?")
    pins = read_yaml(path, "Spack pins")
    for key, subkeys in PIN_KEYS.items():
        missing = [k for k in subkeys if not (pins.get(key) or {}).get(k)]
        if missing:
            raise StackproofError(f"{path}: {key}: missing {', '.join(missing)}")
    for key in ("environments", "views_root"):
        if not pins.get(key):
            raise StackproofError(f"{path}: missing key '{key}'")
    return pins


def locked_on_host(pins):
    """Environments whose spack.lock is committed (the others are locked where they are built)."""
    return [e for e in pins["environments"] if e not in (pins.get("locked_in_image") or [])]


def release_tarball_sha256(commit, version, repo=REPO):
    """sha256 of `git archive --format=tar --prefix=stackproof-<version>/ <commit>`, or None when
    this clone does not have the commit (a shallow clone)."""
    have = subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{commit}^{{commit}}"],
                          capture_output=True)
    if have.returncode != 0:
        return None
    out = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar",
                          f"--prefix=stackproof-{version}/", commit], capture_output=True, check=True)
    return hashlib.sha256(out.stdout).hexdigest()


def lock_inputs(envs_dir, name):
    """`sha256sum` lines of what a lock was made from: the environment's spack.yaml and our recipes
    (paths relative to the environment directory), written beside the lock as spack.lock.inputs."""
    env_dir = Path(envs_dir) / name
    files = [env_dir / "spack.yaml"] + sorted((Path(envs_dir) / RECIPES).glob("*/package.py"))
    return "".join(f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {os.path.relpath(f, env_dir)}\n"
                   for f in files)
