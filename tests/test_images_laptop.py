"""The laptop image's recipe and scripts (issue 37), without building it: the image build is offline
(network only on the host, in build.sh), it installs and builds both stacks with the product's own
`stackproof stack install|build`, `stackproof stack fetch --into` seeds a source cache that a build
without network uses as is, and the scripts' bad input is one line and a non-zero exit. The built
image's acceptance is tests/test_images_laptop_live.py."""
import hashlib
import io
import os
import subprocess
import tarfile
from dataclasses import replace

import pytest

from stackproof.cli import main
from stackproof.paths import REPO
from stackproof.stacks import benchbuild, sources
from stackproof.stacks.recipes import parse_recipe

LAPTOP = REPO / "images" / "laptop"


def _run(*args, env=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **(env or {})))


def test_image_build_is_offline_and_uses_the_products_own_stack_commands():
    build = (LAPTOP / "build.sh").read_text()
    assert "podman build --network=none" in build
    assert "stack fetch" in build and "--download-only" in build and "pip\" download" not in build
    recipe = (LAPTOP / "Containerfile").read_text()
    assert 'ARG STACKS="commodity vendor"' in recipe and "install-stacks.sh --only ${BENCHMARKS} /tmp/laptop ${STACKS}" in recipe
    for word in ("apt-get update", "curl ", "wget ", "pip download", "git clone"):
        assert word not in recipe, word
    inside = (LAPTOP / "install-stacks.sh").read_text()
    assert 'stackproof stack install --wheels "$ctx/stack-wheels" "$@"' in inside
    assert 'stackproof stack build ${only:+--only "$only"} ${reuse:+--reuse "$reuse"} "$@"' in inside
    # the host's builds are offered, never trusted: the image computes each key itself (buildkey.reuse)
    assert '"$ctx/prebuilt/$s"' in build and 'reuse=$ctx/prebuilt' in inside
    assert "--no-index" in inside and "--require-hashes" in build
    # the image runs this tree's stackproof/FWQ, not the code of a kept debian12-compute archive's day
    assert 'source-tree.sh" "$repo" "$ctx/stackproof-src"' in build
    assert 'install-stack.sh" components "$ctx/stackproof-src" /opt/stackproof' in inside
    assert inside.index("components \"$ctx/stackproof-src\"") < inside.index("stackproof stack build ${only")


def test_source_tree_holds_what_components_needs(tmp_path):
    proc = _run(REPO / "images/common/source-tree.sh", REPO, tmp_path / "src")
    assert proc.returncode == 0, proc.stderr
    for f in ("mpibind/CMakeLists.txt", "fwq/CMakeLists.txt", "pyproject.toml", "setup.py",
              "src/stackproof/cli.py", "slurm-conf/profiles.yaml"):
        assert (tmp_path / "src" / f).is_file(), f
    assert not list((tmp_path / "src").rglob("__pycache__"))
    bad = _run(REPO / "images/common/source-tree.sh", tmp_path / "nowhere", tmp_path / "x")
    assert bad.returncode != 0 and bad.stderr.strip().count("\n") == 0 and "not a stackproof source tree" in bad.stderr


@pytest.mark.parametrize("script, args, needle", [
    ("install-stacks.sh", (), "usage: install-stacks.sh [--only T,...] CTX STACK"),
    ("install-stacks.sh", ("/nonexistent", "commodity"), "is not a laptop build context"),
    ("run-acceptance.sh", (), "usage: run-acceptance.sh"),
])
def test_laptop_scripts_bad_input_is_one_line(script, args, needle):
    proc = _run(LAPTOP / script, *args)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr


def test_run_acceptance_without_the_image_says_how_to_build_it(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the script refuses non-root first")
    proc = _run(LAPTOP / "run-acceptance.sh", "--out", tmp_path / "out", tmp_path / "reports",
                env={"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"} if _fake_podman(tmp_path) else None)
    assert proc.returncode == 1 and "make images-laptop" in proc.stderr, proc.stderr
    assert not (tmp_path / "reports").exists()


def _fake_podman(tmp_path) -> bool:
    """A podman whose store holds no image (the real one may hold a laptop image already)."""
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "podman"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    return True


# ---- stackproof stack fetch: the host's half of an offline build -------------------------------------

def _tarball(path, top="demo-1.0"):
    with tarfile.open(path, "w:gz") as tar:
        data = b"all:\n"
        info = tarfile.TarInfo(f"{top}/Makefile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def demo(tmp_path, monkeypatch):
    """netpipe's recipe pointed at a tarball made here, served by a mirror directory."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    sha = _tarball(mirror / "demo-1.0.tar.gz")
    body = {"version": "1.0", "spack": "demo", "licence": "MIT", "measures": "nothing",
            "source": {"top": "demo-1.0", "file": "demo-1.0.tar.gz", "sha256": sha},
            "build": [{"run": ["make"]}], "install": {"bin/NPmpi": "NPmpi"}}
    recipe = replace(parse_recipe("netpipe", body, "test"), key="netpipe")
    monkeypatch.setitem(benchbuild.RECIPES, "netpipe", recipe)
    monkeypatch.setattr(benchbuild, "_SOURCES", {})
    monkeypatch.setenv("STACKPROOF_STACKS_ROOT", str(tmp_path / "host-root"))
    monkeypatch.delenv(sources.MIRROR_VAR, raising=False)
    return mirror, sha, recipe


def test_stack_fetch_into_seeds_a_cache_an_offline_build_uses(demo, tmp_path, monkeypatch, capsys):
    mirror, sha, recipe = demo
    seed = tmp_path / "seed"
    rc = main(["stack", "fetch", "commodity", "vendor", "--only", "netpipe", "--source-mirror", str(mirror),
               "--into", str(seed)])
    out = capsys.readouterr().out
    assert rc == 0 and f"fetch netpipe 1.0: mirror {mirror / 'demo-1.0.tar.gz'} (sha256 {sha})" in out, out
    assert out.count("fetch netpipe") == 1                      # once for both stacks
    assert (tmp_path / "host-root" / "sources" / "netpipe" / "demo-1.0.tar.gz").is_file()   # host cache too
    assert sorted(p.name for p in (seed / "netpipe").iterdir()) == ["demo-1.0.tar.gz", "demo-1.0.tar.gz.origin"]
    # the image's side: the seeded directory as its stacks root's cache, no mirror, no network, no apt
    image_root = tmp_path / "image-root"
    (image_root / "sources").mkdir(parents=True)
    os.rename(seed / "netpipe", image_root / "sources" / "netpipe")
    monkeypatch.setenv("STACKPROOF_STACKS_ROOT", str(image_root))

    def no_network(*args, **kwargs):
        raise AssertionError("an offline build must not fetch")
    got = sources.obtain(recipe, log=lambda m: None, runner=no_network, online=False)
    assert got.digest == sha and got.origin == f"mirror {mirror / 'demo-1.0.tar.gz'}"   # provenance kept


def test_stack_fetch_names_what_it_cannot_fetch_and_refuses_wrong_bytes(demo, tmp_path, capsys):
    mirror, sha, recipe = demo
    empty = tmp_path / "empty"
    empty.mkdir()
    seed = tmp_path / "seed"
    rc = main(["stack", "fetch", "commodity", "--only", "fwq,netpipe", "--source-mirror", str(empty),
               "--into", str(seed)])
    out = capsys.readouterr().out
    assert rc == 0 and "fetch fwq 0.1.0: repository fwq/" in out
    assert "fetch netpipe: not available: netpipe 1.0: no source" in out and "set STACKPROOF_SOURCE_MIRROR" in out
    assert not seed.exists()
    (mirror / "demo-1.0.tar.gz").write_bytes(b"not the pinned bytes")
    benchbuild._SOURCES.clear()             # one process, one look-up per recipe: a new command here
    assert main(["stack", "fetch", "commodity", "--only", "netpipe", "--source-mirror", str(mirror)]) == 1
    err = capsys.readouterr().err
    assert "does not match the pinned" in err and len(err.strip().splitlines()) == 1
    assert main(["stack", "fetch", "commodity", "--only", "bogus"]) == 1
    assert "unknown build targets ['bogus']" in capsys.readouterr().err
