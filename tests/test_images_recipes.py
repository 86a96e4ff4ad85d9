"""Image recipes: shared install steps, lint, bad input, and the secret scan (synthetic images always;
the built Debian image when build/images/debian12-compute.oci.tar exists: `make images-debian`)."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ocitest import layer, oci_archive

from stackproof.provision import images
from stackproof.cli import main

IMG = images.IMAGES_DIR
INSTALL = IMG / "common" / "install-stack.sh"
RECIPES = [IMG / "el9-compute/Containerfile", IMG / "debian12-compute/Containerfile"]
BUILT = images.REPO / "build" / "images" / "debian12-compute.oci.tar"


def _sh(*args, **kw):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)


def test_lint_all_recipes_and_scripts():
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (apt-get install shellcheck, or make images-tools)")
    env = dict(os.environ, PATH=f"{images.REPO / '.venv/bin'}:{os.environ['PATH']}")
    proc = _sh(IMG / "common/lint.sh", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "shellcheck" in proc.stdout


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.parent.name)
def test_every_recipe_uses_the_shared_install_steps(recipe):
    text = recipe.read_text()
    for step in ("install-stack.sh components", "install-stack.sh system-side", "install-stack.sh manifest"):
        assert step in text, f"{recipe}: missing {step}"
    assert "excludes" in text and "image_exit.sh" in text and "/etc/warewulf/" in text   # node-images style
    if "el9" in recipe.parent.name:     # warewulf-node-images style, plus the Spack stack under /opt
        assert "rockylinux" in text and "install-stack.sh install-packages el9" in text
        assert "COPY --from=spack /opt/views /opt/views" in text
        assert "install-stack.sh require-view /opt/views/view" in text


def test_both_distributions_install_the_same_roles():
    lists = {d: _sh(INSTALL, "packages", d).stdout.split() for d in ("el9", "debian12")}
    roles = {"slurmd": ("slurm-slurmd", "slurmd"), "munge": ("munge", "munge"), "hwloc": ("hwloc", "hwloc"),
             "mpi": ("openmpi", "openmpi-bin"), "spank.h": ("slurm-devel", "libslurm-dev"),
             "irqbalance": ("irqbalance", "irqbalance"), "tuna": ("tuna", "tuna"),
             "sshd": ("openssh-server", "openssh-server"), "cmake": ("cmake", "cmake")}
    for role, (el9, deb) in roles.items():
        assert el9 in lists["el9"], role
        assert deb in lists["debian12"], role
    assert "kernel-core" in lists["el9"] and "NetworkManager" in lists["el9"]
    gpu = _sh(INSTALL, "packages", "el9", "gpu").stdout.split()
    assert set(lists["el9"]) < set(gpu)


def test_el9_gpu_image_is_a_variant_of_the_el9_recipe():
    """One recipe for both EL9 images: VARIANT=gpu selects the GPU package set and nvidia-persistenced."""
    text = (IMG / "el9-compute/Containerfile").read_text()
    assert "ARG VARIANT=cpu" in text and 'install-packages el9 "$VARIANT"' in text
    assert 'if [ "$VARIANT" = gpu ]; then systemctl enable nvidia-persistenced.service; fi' in text
    assert "VARIANT=gpu" in (IMG / "el9-compute-gpu/README.md").read_text()


@pytest.mark.parametrize("args, message", [
    (["packages", "arch"], "unknown distribution 'arch'"),
    (["require-view", "/nonexistent/view"], "Spack view not found at /nonexistent/view"),
    (["components", "/nonexistent/src", "/tmp/x"], "missing /nonexistent/src/mpibind/CMakeLists.txt"),
    (["frobnicate"], "usage:"),
])
def test_install_stack_bad_input_fails_clearly(args, message):
    proc = _sh(INSTALL, *args)
    assert proc.returncode != 0
    assert message in proc.stderr


def test_require_view_accepts_a_view_with_mpicc(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "bin").mkdir()
    proc = _sh(INSTALL, "require-view", tmp_path)
    assert proc.returncode == 1 and "no bin/mpicc" in proc.stderr
    (tmp_path / "bin/mpicc").write_text("#!/bin/sh\n")
    (tmp_path / "bin/mpicc").chmod(0o755)
    assert _sh(INSTALL, "require-view", tmp_path).returncode == 0


def test_debian_build_without_tools_or_sources_fails_clearly(tmp_path):
    env = dict(os.environ, PATH="/nonexistent")
    proc = subprocess.run(["/bin/sh", str(IMG / "debian12-compute/build.sh"), "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 1 and "mmdebstrap not found" in proc.stderr
    proc = _sh(IMG / "common/run-smoke.sh", tmp_path / "none.oci.tar")
    assert proc.returncode == 1 and "not found" in proc.stderr


# ---- secret scan -----------------------------------------------------------------------------------

def _rootfs(tmp_path: Path, files: dict[str, bytes]) -> Path:
    root = tmp_path / "rootfs"
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


CLEAN = {"etc/hostname": b"node\n", "etc/ssh/sshd_config": b"PermitRootLogin no\n",
         "usr/lib/python3/dist-packages/x/test_key.pem": b"-----BEGIN PRIVATE KEY-----\n"}


def test_scan_clean_rootfs_passes(tmp_path):
    assert images.scan(_rootfs(tmp_path, CLEAN)) == []


@pytest.mark.parametrize("rel, data, what", [
    ("etc/munge/munge.key", os.urandom(64), "munge key"),
    ("etc/ssh/ssh_host_ed25519_key", b"x", "SSH host private key"),
    ("etc/ssh/ssh_host_rsa_key.pub", b"ssh-rsa AAAA", "SSH host public key"),
    ("root/.ssh/id_ed25519", b"x", "user SSH private key"),
    ("etc/slurm/jwt_hs256.pem", b"-----BEGIN RSA PRIVATE KEY-----\nabc\n", "private key material"),
])
def test_scan_finds_secrets(tmp_path, rel, data, what):
    found = images.scan(_rootfs(tmp_path, {**CLEAN, rel: data}))
    assert [(f.path, f.what) for f in found] == [(rel, what)]


def test_scan_finds_a_key_that_a_later_layer_deletes(tmp_path, capsys):
    """`RUN rm /etc/munge/munge.key` in a later layer leaves the key in the archive: still a leak."""
    archive = oci_archive(tmp_path / "img.oci.tar", [
        layer({"etc/munge/munge.key": os.urandom(32), "etc/hostname": b"x\n"}),
        layer({"etc/munge/.wh.munge.key": b""})])
    found = images.scan(archive)
    assert [f.path for f in found] == ["etc/munge/munge.key"]
    assert main(["images", "scan", str(archive)]) == 1
    assert "SECRET" in capsys.readouterr().out
    clean = oci_archive(tmp_path / "clean.oci.tar", [layer({"etc/hostname": b"x\n"})])
    assert main(["images", "scan", str(clean)]) == 0


def test_scan_rejects_what_is_not_an_image(tmp_path, capsys):
    bad = tmp_path / "x.tar"
    bad.write_text("not a tar")
    assert main(["images", "scan", str(bad)]) == 1
    assert "not a rootfs directory, tar or OCI archive" in capsys.readouterr().err
    assert main(["images", "scan", str(tmp_path / "missing")]) == 1


# ---- the built Debian image -----------------------------------------------------------------------

def _built():
    if not BUILT.is_file():
        pytest.skip(f"{BUILT} not built (make images-debian, or STACKPROOF_IMAGES=1 make images-test)")
    return BUILT


def test_built_debian_image_has_no_secrets():
    assert images.scan(_built()) == []


def test_built_debian_image_has_a_manifest_with_the_stack():
    manifest = (_built().parent / "debian12-compute.manifest.txt").read_text().splitlines()
    names = {ln.split()[0] for ln in manifest if ln and not ln.startswith("#")}
    for pkg in ("munge", "slurmd", "openmpi-bin", "hwloc", "openssh-server"):
        assert pkg in names
    components = [ln for ln in manifest if ln.startswith("stackproof-component")]
    assert any("mpibind" in c for c in components) and any("fwq-mpi" in c for c in components)
