"""spack-envs/ without Spack (CI): pins present, files parse, locks agree with spack.yaml and pins.yaml,
recipes pinned to the project's release; the Spack driver's scope set-up against a stand-in `spack`.
Real Spack: tests/test_spack_real.py (runs when SPACK_ROOT is set)."""
import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import stackproof_cli
from stackproof.spack import check as spack_check, driver, install as spack_install, lock as spack_lock
from stackproof.spack import pins as spack_pins
from stackproof.errors import StackproofError
from stackproof.paths import REPO

ENVS = REPO / "spack-envs"
PINS = yaml.safe_load((ENVS / "pins.yaml").read_text())
RECIPES = ENVS / "repo" / "spack_repo" / "stackproof" / "packages"


def no_spack_env():
    return {k: v for k, v in os.environ.items() if k not in ("SPACK_ROOT", "SPACK_PACKAGES_ROOT")}


@pytest.fixture
def envs_copy(tmp_path):
    dst = tmp_path / "spack-envs"
    shutil.copytree(ENVS, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def edit_yaml(envs_dir, name, fn):
    path = envs_dir / name / "spack.yaml"
    data = yaml.safe_load(path.read_text())
    fn(data["spack"])
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def edit_lock(envs_dir, name, fn):
    path = envs_dir / name / "spack.lock"
    lock = json.loads(path.read_text())
    fn(lock)
    path.write_text(json.dumps(lock))


def errors_of(envs_dir, envs=None):
    return spack_check.consistency_check(envs_dir, envs, verify_tarball=False)[0]


# ---- the committed tree ----------------------------------------------------------------------

def test_yamllint_clean():
    yamllint = Path(sys.executable).parent / "yamllint"
    if not yamllint.exists():
        pytest.skip("yamllint not in the venv (make venv installs it from requirements-lock.txt)")
    r = subprocess.run([str(yamllint), "--strict", "-c", str(ENVS / ".yamllint"), str(ENVS)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_pins():
    assert PINS["spack"]["tag"] == "v1.1.0" and PINS["spack"]["version"] == "1.1.0"
    assert PINS["spack_packages"]["tag"] == "v2025.11.0"
    assert "clingo==5.8.3" in (ENVS / PINS["clingo"]["requirements"]).read_text()
    assert set(PINS["locked_in_image"]) <= set(PINS["environments"])


def test_committed_tree_is_consistent():
    errors, notes = spack_check.consistency_check(ENVS)
    assert errors == []


def test_every_locked_env_has_a_lock_made_by_the_pinned_spack():
    for name in spack_pins.locked_on_host(PINS):
        lock = json.loads((ENVS / name / "spack.lock").read_text())
        assert lock["spack"]["commit"] == PINS["spack"]["commit"], name
        assert lock["_meta"]["file-type"] == "spack-lockfile"


def test_release_tarball_matches_pins():
    rel = PINS["stackproof_release"]
    sha = spack_pins.release_tarball_sha256(rel["commit"], rel["version"])
    if sha is None:
        pytest.skip(f"commit {rel['commit'][:12]} is not in this clone (shallow?): tarball not checked")
    assert sha == rel["sha256"]


EXTENSIONS = ("reframe", "osu_micro_benchmarks", "amg2023")    # builtin's recipe + versions, metadata inherited


def test_every_recipe_is_checked():
    assert {p.parent.name for p in RECIPES.glob("*/package.py")} == \
        {"fwq_mpi", "stackproof_mpibind", "py_stackproof", *EXTENSIONS}
    assert sorted(p.replace("-", "_") for p in driver.OUR_PACKAGES) == \
        sorted(p.parent.name for p in RECIPES.glob("*/package.py"))


@pytest.mark.parametrize("pkg", ["fwq_mpi", "stackproof_mpibind", "py_stackproof", *EXTENSIONS])
def test_recipes_have_metadata_and_no_moving_versions(pkg):
    text = (RECIPES / pkg / "package.py").read_text()
    tree = ast.parse(text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    assigned = {t.id for n in cls.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if pkg not in EXTENSIONS:   # extensions inherit homepage/url/maintainers from builtin's recipe
        assert {"homepage", "url"} <= assigned
        assert "maintainers(" in text and 'homepage = "https://' in text
    assert "branch=" not in text and "file://" not in text and "/work/" not in text
    if pkg == "osu_micro_benchmarks":   # a public https git URL; its versions are commits git checks
        assert 'git = "https://github.com/' in text
        assert re.search(r'version\("7\.2-git", commit="[0-9a-f]{40}"\)', text)
    else:
        assert "git =" not in text


def test_py_stackproof_depends_on_every_runtime_dependency():
    """pyproject.toml [project] dependencies = py-stackproof's run dependencies (PyPI name -> py-<name>)."""
    import tomllib
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    text = (RECIPES / "py_stackproof" / "package.py").read_text()
    for dep in deps:
        name, low = re.match(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9.]+)", dep).groups()
        assert f'depends_on("py-{name.lower()}@{low}:", type=("build", "run"))' in text, dep


def test_py_stackproof_reframe_is_satisfiable_by_our_repo():
    text = (RECIPES / "py_stackproof" / "package.py").read_text()
    assert 'depends_on("reframe@4.10"' in text
    assert 'version(\n        "4.10.0"' in (RECIPES / "reframe" / "package.py").read_text()


def test_vendor_and_next_stacks_are_externals_at_the_stack_prefixes():
    vendor = yaml.safe_load((ENVS / "vendor" / "spack.yaml").read_text())["spack"]["packages"]
    mpi = vendor["intel-oneapi-mpi"]
    mkl = vendor["intel-oneapi-mkl"]
    assert mpi["buildable"] is False and mkl["buildable"] is False
    assert mpi["externals"][0]["spec"].startswith("intel-oneapi-mpi@2021.17.2")
    assert mkl["externals"][0]["spec"].startswith("intel-oneapi-mkl@2025.2.0")
    assert mpi["externals"][0]["prefix"] == mkl["externals"][0]["prefix"] == "/opt/stackproof/stacks/vendor"
    assert vendor["mpi"]["require"] == ["intel-oneapi-mpi"]
    nxt = yaml.safe_load((ENVS / "commodity-next" / "spack.yaml").read_text())["spack"]["packages"]
    assert nxt["openmpi"]["externals"] == [{"spec": "openmpi@5.0.11",
                                            "prefix": "/opt/stackproof/stacks/commodity-next"}]


@pytest.mark.parametrize("site", sorted(PINS["sites"]))
def test_site_file_leaves_mpi_buildable(site):
    """Only what must be the system's is non-buildable; no virtual (mpi, blas, ...) is configured."""
    pkgs = yaml.safe_load((ENVS / "site" / site / "packages.yaml").read_text())["packages"]
    fixed = {name for name, cfg in pkgs.items() if cfg.get("buildable") is False}
    assert fixed == {"gcc", "slurm", "rdma-core"}
    assert not {"mpi", "blas", "lapack", "all"} & set(pkgs)


# ---- what the consistency check catches --------------------------------------------------------

def test_normal_form_ignores_what_spack_normalises():
    nf = spack_check.normal_form
    assert nf("hypre@2.33.0 +mpi") == nf("hypre@2.33.0+mpi")
    assert nf("ucx@1.19.0 +verbs +rc") == nf("ucx@1.19.0+rc+verbs")
    assert nf("amg2023@develop +mpi commit=ab") == nf("amg2023@develop+mpi commit=ab")
    assert nf("hypre@2.33.0 +mpi") != nf("hypre@2.33.0 ~mpi")


@pytest.mark.parametrize("mutate, expected", [
    (lambda e: e["specs"].append("zlib@1.3.1"), "roots differ"),
    (lambda e: e["specs"].__setitem__(e["specs"].index("hypre@2.33.0 +mpi"), "hypre@2.32.0 +mpi"), "roots differ"),
    (lambda e: e["specs"].__setitem__(e["specs"].index("fwq-mpi@0.1.0 +mpi"), "fwq-mpi@main +mpi"),
     "must pin @0.1.0"),
])
def test_yaml_edit_without_relock_is_caught(envs_copy, mutate, expected):
    edit_yaml(envs_copy, "laptop", mutate)
    assert any(expected in e for e in errors_of(envs_copy, ["laptop"])), errors_of(envs_copy, ["laptop"])


def test_config_edit_without_relock_is_caught(envs_copy):
    """A change that keeps the roots (here: a package setting) still needs a new lock."""
    path = envs_copy / "laptop" / "spack.yaml"
    path.write_text(path.read_text().replace("target: [x86_64_v3]", "target: [x86_64_v4]"))
    assert any("changed since the lock was made" in e for e in errors_of(envs_copy, ["laptop"]))


def test_recipe_edit_without_relock_is_caught(envs_copy):
    path = envs_copy / "repo/spack_repo/stackproof/packages/stackproof_mpibind/package.py"
    path.write_text(path.read_text() + "\n# edited\n")
    assert any("changed since the lock was made" in e for e in errors_of(envs_copy, ["vendor"]))


def test_lock_from_other_spack_or_release_is_caught(envs_copy):
    edit_lock(envs_copy, "laptop", lambda lk: lk["spack"].__setitem__("commit", "0" * 40))
    assert any("made by Spack" in e for e in errors_of(envs_copy, ["laptop"]))
    shutil.copy2(ENVS / "laptop" / "spack.lock", envs_copy / "laptop" / "spack.lock")

    def bump(lock):
        for node in lock["concrete_specs"].values():
            if node["name"] == "fwq-mpi":
                node["version"] = "0.0.9"
    edit_lock(envs_copy, "laptop", bump)
    assert any("fwq-mpi@0.0.9 is locked" in e for e in errors_of(envs_copy, ["laptop"]))


def test_recipe_out_of_step_with_pins_is_caught(envs_copy):
    path = envs_copy / "repo/spack_repo/stackproof/packages/fwq_mpi/package.py"
    path.write_text(path.read_text().replace(PINS["stackproof_release"]["sha256"], "ab" * 32))
    assert any("must declare version(" in e for e in errors_of(envs_copy, ["laptop"]))


def test_missing_lock_is_an_error_except_for_image_locked_envs(envs_copy):
    (envs_copy / "laptop" / "spack.lock").unlink()
    assert any("spack.lock: missing" in e for e in errors_of(envs_copy, ["laptop"]))
    assert not (envs_copy / "container" / "spack.lock").exists()
    assert errors_of(envs_copy, ["container"]) == []


def test_cli_ok_and_bad_input(tmp_path, envs_copy):
    r = stackproof_cli("spack", "lint", env=no_spack_env(), cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "consistent:" in r.stdout
    r = stackproof_cli("spack", "lint", "--envs-dir", str(tmp_path), cwd=REPO)
    assert r.returncode == 1 and "pins.yaml not found" in r.stderr and "Traceback" not in r.stderr
    r = stackproof_cli("spack", "lint", "--env", "nosuchenv", cwd=REPO)
    assert r.returncode == 1 and "unknown environment 'nosuchenv'" in r.stderr
    (envs_copy / "vendor" / "spack.yaml").write_text("spack: [unclosed\n")
    r = stackproof_cli("spack", "lint", "--envs-dir", str(envs_copy), "--env", "vendor", cwd=REPO)
    assert r.returncode == 2 and "vendor" in r.stderr and "Traceback" not in r.stderr   # bad input


def test_cli_without_spack_root_skips_with_the_reason():
    r = stackproof_cli("spack", "check", "--skip-missing", env=no_spack_env(), cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "Spack checks SKIPPED: set SPACK_ROOT" in r.stdout
    r = stackproof_cli("spack", "check", env=no_spack_env(), cwd=REPO)
    assert r.returncode == 1 and "SPACK_ROOT" in r.stderr


# ---- the driver's scopes, against a stand-in spack ----------------------------------------------

FAKE_SPACK = """#!/bin/sh
echo "1.1.0 (2e907202bcc8209a6a62243aab50c179b524cc3b)"
"""


@pytest.fixture
def fake_root(tmp_path, monkeypatch):
    root = tmp_path / "spack"
    (root / "bin").mkdir(parents=True)
    (root / "etc" / "spack" / "site").mkdir(parents=True)
    (root / "etc" / "spack" / "include.yaml").write_text("include: []\n")
    exe = root / "bin" / "spack"
    exe.write_text(FAKE_SPACK)
    exe.chmod(0o755)
    builtin = tmp_path / "spack-packages" / PINS["spack_packages"]["builtin_path"]
    builtin.mkdir(parents=True)
    (builtin / "repo.yaml").write_text("repo:\n  namespace: builtin\n  api: v2.2\n")
    monkeypatch.setenv("SPACK_ROOT", str(root))
    monkeypatch.setenv("SPACK_PACKAGES_ROOT", str(tmp_path / "spack-packages"))
    monkeypatch.setenv("SPACK_PYTHON", sys.executable)
    monkeypatch.setenv("SPACK_DISABLE_LOCAL_CONFIG", "1")
    return root


def test_scopes_rank_below_the_environment(fake_root, tmp_path):
    spack = driver.Spack(PINS, tmp_path / "w", offline=False)
    env = spack.scopes(ENVS / "site" / "debian12" / "packages.yaml")
    user, system = Path(env["SPACK_USER_CONFIG_PATH"]), Path(env["SPACK_SYSTEM_CONFIG_PATH"])
    # repos merged (no 'repos::'), so the environment's own stackproof repo is kept
    assert yaml.safe_load((user / "repos.yaml").read_text()) == {"repos": {"builtin": str(spack.builtin)}}
    assert (user / "mirrors.yaml").read_text() == "mirrors:: {}\n"
    assert yaml.safe_load((user / "bootstrap.yaml").read_text()) == {"bootstrap": {"enable": False}}
    assert (system / "packages.yaml").read_text() == (ENVS / "site" / "debian12" / "packages.yaml").read_text()
    assert "SPACK_DISABLE_LOCAL_CONFIG" not in env   # it would switch the private scopes off
    env = spack.scopes()
    assert list(Path(env["SPACK_SYSTEM_CONFIG_PATH"]).iterdir()) == []
    assert spack.version().startswith("1.1.0")


def test_checkout_with_its_own_config_is_refused(fake_root, tmp_path):
    (fake_root / "etc" / "spack" / "site" / "packages.yaml").write_text("packages: {}\n")
    with pytest.raises(StackproofError, match="carries its own configuration"):
        driver.Spack(PINS, tmp_path / "w", offline=False)


def test_missing_builtin_is_clear(fake_root, tmp_path, monkeypatch):
    monkeypatch.setenv("SPACK_PACKAGES_ROOT", str(tmp_path / "nowhere"))
    with pytest.raises(StackproofError, match="SPACK_PACKAGES_ROOT"):
        driver.Spack(PINS, tmp_path / "w", offline=False)


@pytest.mark.parametrize("name", spack_pins.locked_on_host(PINS))
def test_committed_locks_are_in_canonical_order(tmp_path, name):
    """Spack orders roots and specs differently from run to run (same hashes): the committed bytes
    must not depend on that, so the same inputs give the same file."""
    committed = (ENVS / name / "spack.lock").read_text()
    lock = json.loads(committed)
    shuffled = dict(lock, roots=lock["roots"][::-1], concrete_specs=dict(reversed(lock["concrete_specs"].items())))
    spack_lock.write_lock(shuffled, tmp_path / "spack.lock")
    assert (tmp_path / "spack.lock").read_text() == committed


def test_check_copies_keep_no_view():
    """Concretizing regenerates an environment's views: the driver's copies say `view: false`, so a check
    never replaces an installed /opt/stackproof/views/<env> by an empty view."""
    for name in PINS["environments"]:
        text = (ENVS / name / "spack.yaml").read_text()
        data = yaml.safe_load(driver.without_view(text))["spack"]
        orig = yaml.safe_load(text)["spack"]
        assert data["view"] is False
        assert {k: v for k, v in data.items() if k != "view"} == {k: v for k, v in orig.items() if k != "view"}
    assert "python::" in driver.without_view((ENVS / "laptop" / "spack.yaml").read_text())


def test_spack_laptop_stack_is_the_laptop_view(monkeypatch):
    """spack-envs/stacks/spack-laptop.yaml (STACKPROOF_STACKS_DIR) runs the laptop environment's view as
    an acceptance stack: its view is that environment's view root, and every benchmark it takes from
    the view is a root spec of the environment."""
    from stackproof.stacks import load_stack
    monkeypatch.setenv("STACKPROOF_STACKS_DIR", str(ENVS / "stacks"))
    monkeypatch.delenv("STACKPROOF_SPACK_LAPTOP_VIEW", raising=False)
    stack = load_stack("spack-laptop")
    laptop = yaml.safe_load((ENVS / "laptop" / "spack.yaml").read_text())["spack"]
    assert stack.view == Path(laptop["view"]["default"]["root"])
    roots = " ".join(laptop["specs"])
    from_view = {k: v for k, v in stack.benchmarks.items() if not Path(v).is_absolute()}
    package = {"fwq": "fwq-mpi@", "osu": "osu-micro-benchmarks@", "amg2023": "amg2023@"}
    assert set(from_view) == set(package) and all(package[k] in roots for k in from_view)
    assert all(stack.benchmark(k).is_relative_to(stack.prefix) for k in ("probe", "hello", "netpipe"))


def test_install_runs_spack_from_the_lock_with_loopback_up(fake_root, tmp_path):
    """`stackproof spack install ENV --scope DIR`: the committed spack.yaml + spack.lock next to the repo,
    the user's scope on the command line, and (offline) the loopback interface up inside the namespace."""
    record = tmp_path / "argv"
    unshare = tmp_path / "fake-unshare"
    unshare.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {record}\n')
    unshare.chmod(0o755)
    spack = driver.Spack(PINS, tmp_path / "w", offline=False)
    spack.prefix = [str(unshare), "-n"]
    scope = tmp_path / "scope"
    scope.mkdir()
    res = spack_install.install(spack, ENVS, "laptop", scope)
    assert res["rc"] == 0 and spack.prefix == [str(unshare), "-n"]
    dst = tmp_path / "w" / "envs" / "install" / "laptop"
    assert (dst / "spack.lock").read_bytes() == (ENVS / "laptop" / "spack.lock").read_bytes()
    assert (dst.parent / "repo").resolve() == (ENVS / "repo").resolve()
    argv = record.read_text().splitlines()
    assert argv[:5] == ["-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]
    assert argv[5:] == ["nice", "-n", "10", str(fake_root / "bin" / "spack"), "-C", str(scope), "-e", str(dst),
                        "install", "-j2"]
    with pytest.raises(StackproofError, match="no committed spack.lock"):
        spack_install.install(spack, ENVS, "container", scope)
    with pytest.raises(StackproofError, match="not a directory"):
        spack_install.install(spack, ENVS, "laptop", tmp_path / "nosuch")


def test_install_cli_bad_input():
    r = stackproof_cli("spack", "install", "laptop", env=no_spack_env(), cwd=REPO)
    assert r.returncode == 2 and "--scope" in r.stderr and "Traceback" not in r.stderr
    r = stackproof_cli("spack", "install", "nosuchenv", "--scope", "/tmp", cwd=REPO)
    assert r.returncode == 1 and "unknown environment 'nosuchenv'" in r.stderr


def test_old_spack_check_command_names_the_new_verbs():
    r = stackproof_cli("spack-check", "--install", "laptop", cwd=REPO)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "`spack-check` is now `stackproof spack lint|check|lock|mirror|install" in r.stderr
