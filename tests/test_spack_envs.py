"""spack-envs/: YAML lint, structural check (always) and the offline concretization driver.

The driver is exercised against a stand-in `spack` executable (records its arguments, environment and
config scope, writes a lockfile), so the plumbing is tested without Spack. A real concretization runs
only when SPACK_ROOT points at a Spack v1.1.0 checkout (test_real_concretization_laptop).
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from stackproof import spackcheck
from stackproof.errors import StackproofError
from stackproof.paths import REPO

ENVS = REPO / "spack-envs"
ALL = ["laptop", "commodity-cpu", "commodity-gpu", "vendor", "container"]


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "stackproof.cli", "spack-check", *args],
                          capture_output=True, text=True, env=env, cwd=REPO)


@pytest.fixture
def envs_copy(tmp_path):
    dst = tmp_path / "spack-envs"
    shutil.copytree(ENVS, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def edit(envs_dir, name, fn):
    path = envs_dir / name / "spack.yaml"
    data = yaml.safe_load(path.read_text())
    fn(data["spack"])
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def errors_of(envs_dir, envs=None):
    return spackcheck.structural_check(envs_dir, envs).errors


# ---- always-run: lint + structure ------------------------------------------------------------

def test_yamllint_clean():
    yamllint = Path(sys.executable).parent / "yamllint"
    if not yamllint.exists():
        pytest.skip("yamllint not in the venv (make venv installs it from requirements-lock.txt)")
    r = subprocess.run([str(yamllint), "--strict", "-c", str(ENVS / ".yamllint"), str(ENVS)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_pins_single_place():
    pins = yaml.safe_load((ENVS / "pins.yaml").read_text())
    assert pins["spack"]["tag"] == "v1.1.0" and pins["spack"]["version"] == "1.1.0"
    assert pins["spack_packages"]["tag"] == "v2025.11.0"
    assert sorted(pins["environments"]) == sorted(ALL)
    clingo = (ENVS / pins["clingo"]["requirements"]).read_text()
    assert "clingo==5.8.3" in clingo


def test_structural_check_passes_on_committed_tree():
    report = spackcheck.structural_check(ENVS)
    assert report.errors == []


def test_cli_structural_ok():
    r = cli()
    assert r.returncode == 0, r.stderr
    assert "structural check ok: 5 environments" in r.stdout


def test_every_env_has_view_under_views_root():
    for name in ALL:
        env = yaml.safe_load((ENVS / name / "spack.yaml").read_text())["spack"]
        assert env["view"]["default"]["root"] == f"/opt/stackproof/views/{name}"


def test_repo_layout_v1():
    root = ENVS / "repo" / "spack_repo" / "stackproof"
    meta = yaml.safe_load((root / "repo.yaml").read_text())["repo"]
    assert meta["namespace"] == "stackproof" and meta["api"].startswith("v2.")
    pkgs = sorted(p.name for p in (root / "packages").iterdir() if (p / "package.py").is_file())
    assert pkgs == ["fwq_mpi", "py_stackproof", "stackproof_mpibind"]


@pytest.mark.parametrize("name, mutate, expected", [
    ("commodity-cpu", lambda e: e["specs"].__setitem__(0, "openmpi@4.1.8 schedulers=slurm"), "fabrics=ucx"),
    ("commodity-cpu", lambda e: e["specs"].__setitem__(1, "ucx@1.19.0 +verbs +rc"), "InfiniBand"),
    ("commodity-cpu", lambda e: e["packages"].__setitem__("all", {"require": "%gcc@12"}), "unsatisfiable"),
    ("commodity-cpu", lambda e: e["packages"].pop("fortran"), "packages:fortran:require"),
    ("commodity-cpu", lambda e: e["specs"].remove("osu-micro-benchmarks@7.5.1"), "osu-micro-benchmarks"),
    ("commodity-cpu", lambda e: e["view"]["default"].__setitem__("root", "/tmp/v"), "view root"),
    ("commodity-cpu", lambda e: e.pop("view"), "view 'default' missing"),
    ("commodity-cpu", lambda e: e["view"]["default"].pop("exclude"), "must exclude amg2013"),
    ("vendor", lambda e: e["view"].pop("amg2013"), "view 'amg2013' must select"),
    ("commodity-cpu", lambda e: e.pop("repos"), "repos does not list"),
    ("commodity-cpu", lambda e: e["packages"]["slurm"].__setitem__("buildable", True), "slurm"),
    ("laptop", lambda e: e["specs"].__setitem__(1, "amg2023@develop +mpi"), "commit="),
    ("commodity-gpu", lambda e: e["packages"]["cuda"].__setitem__("require", ["@12:"]), "CUDA > 12.9"),
    ("commodity-gpu", lambda e: e["specs"].__setitem__(3, "osu-micro-benchmarks@7.5.1 +cuda cuda_arch=90"),
     "cuda_arch=70,90"),
    ("commodity-gpu", lambda e: e["specs"].__setitem__(2, "hwloc@2.12.2 +cuda"), "+nvml"),
    ("container", lambda e: e["specs"].__setitem__(1, "ucx@1.19.0 +cuda cuda_arch=70,90 +verbs +rdmacm +rc "
                                                      "+ud +dc +mlx5_dv"), "+gdrcopy"),
    ("vendor", lambda e: e["packages"]["hpcx-mpi"].__setitem__("buildable", True), "non-buildable external"),
    ("vendor", lambda e: e["packages"]["cuda"]["externals"][0].__setitem__("spec", "cuda@13.0.2"), "CUDA > 12.9"),
    ("container", lambda e: e["container"]["images"].__setitem__("spack", "develop"), "container:images:spack"),
])
def test_structural_check_catches(envs_copy, name, mutate, expected):
    edit(envs_copy, name, mutate)
    errs = errors_of(envs_copy, [name])
    assert any(expected in e for e in errs), errs


def test_compiler_pin_needs_matching_external(envs_copy):
    edit(envs_copy, "laptop", lambda e: e["packages"].__setitem__("c", {"require": ["gcc@13"]}))
    assert any("packages:c requires 'gcc@13'" in e for e in errors_of(envs_copy, ["laptop"]))


def test_repo_class_name_and_api_checked(envs_copy):
    pkg = envs_copy / "repo/spack_repo/stackproof/packages/fwq_mpi/package.py"
    pkg.write_text(pkg.read_text().replace("class FwqMpi(", "class Fwq(", 1))
    meta = envs_copy / "repo/spack_repo/stackproof/repo.yaml"
    meta.write_text("repo:\n  namespace: stackproof\n  api: v1.0\n")
    errs = errors_of(envs_copy, ["laptop"])
    assert any("class FwqMpi" in e for e in errs), errs
    assert any("api must be v2.x" in e for e in errs), errs


def test_lockfile_roots_must_match(envs_copy):
    lock = {"_meta": {"lockfile-version": 6}, "spack": {"version": "1.1.0"},
            "roots": [{"spec": "osu-micro-benchmarks@7.5.1", "hash": "x"}], "concrete_specs": {}}
    (envs_copy / "laptop" / "spack.lock").write_text(json.dumps(lock))
    assert any("roots differ" in e for e in errors_of(envs_copy, ["laptop"]))


def test_cli_bad_input_clear_error(tmp_path):
    r = cli("--envs-dir", str(tmp_path))
    assert r.returncode == 1
    assert "pins.yaml not found" in r.stderr
    r = cli("--env", "nosuchenv")
    assert r.returncode == 1 and "unknown environment 'nosuchenv'" in r.stderr


def test_cli_structural_failure_exits_nonzero(envs_copy):
    edit(envs_copy, "commodity-cpu", lambda e: e.pop("view"))
    r = cli("--envs-dir", str(envs_copy))
    assert r.returncode == 1
    assert "ERROR: commodity-cpu/spack.yaml: view 'default' missing" in r.stderr


def test_concretize_without_spack_root_skips_with_message():
    env = {k: v for k, v in os.environ.items() if k not in ("SPACK_ROOT", "SPACK_PACKAGES_ROOT")}
    r = cli("--concretize", "--skip-missing", env=env)
    assert r.returncode == 0, r.stderr
    assert "concretization SKIPPED: set SPACK_ROOT" in r.stdout
    r = cli("--concretize", env=env)
    assert r.returncode == 1 and "SPACK_ROOT" in r.stderr


# ---- the concretization driver against a stand-in spack --------------------------------------

FAKE_SPACK = textwrap.dedent('''\
    #!{python}
    """stand-in for bin/spack: records how it was called; `concretize` writes a lockfile."""
    import json, os, sys
    args = sys.argv[1:]
    rec = os.environ["FAKE_SPACK_RECORD"]
    with open(rec, "a") as f:
        f.write(json.dumps({{"args": args, "env": {{k: os.environ.get(k) for k in (
            "SPACK_PYTHON", "SPACK_DISABLE_LOCAL_CONFIG", "SPACK_USER_CONFIG_PATH")}}}}) + "\\n")
    if args[-1] == "--version":
        print("1.1.0 (2e907202bc0000000000000000000000000000000)")
        sys.exit(0)
    envdir = args[args.index("-e") + 1]
    if os.environ.get("FAKE_SPACK_FAIL") == os.path.basename(envdir):
        print("==> Error: concretization failed", file=sys.stderr)
        sys.exit(1)
    import yaml
    specs = yaml.safe_load(open(os.path.join(envdir, "spack.yaml")))["spack"]["specs"]
    lock = {{"_meta": {{"lockfile-version": 6}}, "spack": {{"version": "1.1.0"}},
            "roots": [{{"spec": s, "hash": str(i)}} for i, s in enumerate(specs)],
            "concrete_specs": {{str(i): {{}} for i in range(len(specs) + 3)}}}}
    json.dump(lock, open(os.path.join(envdir, "spack.lock"), "w"))
    print("==> Concretized", len(specs), "specs")
''')


@pytest.fixture
def fake_spack(tmp_path, monkeypatch):
    root = tmp_path / "spack"
    (root / "bin").mkdir(parents=True)
    exe = root / "bin" / "spack"
    exe.write_text(FAKE_SPACK.format(python=sys.executable))
    exe.chmod(0o755)
    pkgs = tmp_path / "spack-packages" / "repos" / "spack_repo" / "builtin"
    (pkgs / "packages").mkdir(parents=True)
    (pkgs / "repo.yaml").write_text("repo:\n  namespace: builtin\n  api: v2.2\n")
    record = tmp_path / "calls.jsonl"
    monkeypatch.setenv("SPACK_ROOT", str(root))
    monkeypatch.setenv("SPACK_PACKAGES_ROOT", str(tmp_path / "spack-packages"))
    monkeypatch.setenv("SPACK_PYTHON", sys.executable)  # skip the clingo venv
    monkeypatch.setenv("FAKE_SPACK_RECORD", str(record))
    return {"root": root, "record": record, "builtin": pkgs}


def calls(fake):
    return [json.loads(line) for line in fake["record"].read_text().splitlines()]


def test_driver_offline_config_and_timings(fake_spack, envs_copy, tmp_path):
    work = tmp_path / "work"
    report = spackcheck.concretize(envs_copy, ["laptop", "commodity-gpu"], work, update_lock=False,
                                   offline=spackcheck.can_unshare())
    assert [r["env"] for r in report["results"]] == ["laptop", "commodity-gpu"]
    assert all(r["rc"] == 0 and r["seconds"] >= 0 and r["nodes"] > 0 for r in report["results"])
    scope = work / "config"
    assert yaml.safe_load((scope / "repos.yaml").read_text()) == {"repos::": {"builtin": str(fake_spack["builtin"])}}
    assert yaml.safe_load((scope / "bootstrap.yaml").read_text()) == {"bootstrap": {"enable": False}}
    assert yaml.safe_load((scope / "mirrors.yaml").read_text()) == {"mirrors::": {}}
    cs = calls(fake_spack)
    conc = [c for c in cs if "concretize" in c["args"]]
    assert len(conc) == 2
    for c in conc:
        assert c["args"][:2] == ["-C", str(scope)] and c["args"][-2:] == ["concretize", "-f"]
        assert c["env"]["SPACK_DISABLE_LOCAL_CONFIG"] == "1"
        assert c["env"]["SPACK_USER_CONFIG_PATH"].startswith(str(work))
    # the environments were concretized as copies next to a link to the project repo
    assert (work / "envs" / "repo").resolve() == (envs_copy / "repo").resolve()
    assert not (envs_copy / "laptop" / "spack.lock").exists()  # committed locks untouched
    saved = json.loads((work / "concretize-report.json").read_text())
    assert saved["results"][0]["env"] == "laptop"


def test_driver_update_lock_and_failure(fake_spack, envs_copy, tmp_path, monkeypatch):
    spackcheck.concretize(envs_copy, ["laptop"], tmp_path / "w", update_lock=True, offline=False)
    lock = json.loads((envs_copy / "laptop" / "spack.lock").read_text())
    assert len(lock["roots"]) == len(yaml.safe_load((envs_copy / "laptop" / "spack.yaml").read_text())["spack"]["specs"])
    assert spackcheck.structural_check(envs_copy, ["laptop"]).errors == []
    monkeypatch.setenv("FAKE_SPACK_FAIL", "vendor")
    report = spackcheck.concretize(envs_copy, ["vendor"], tmp_path / "w", offline=False)
    assert report["results"][0]["rc"] == 1
    assert "concretization failed" in Path(report["results"][0]["log"]).read_text()


def test_cli_concretize_reports_failure(fake_spack, envs_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_SPACK_FAIL", "vendor")
    r = cli("--envs-dir", str(envs_copy), "--concretize", "--allow-network", "--workdir", str(tmp_path / "w"),
            env=dict(os.environ))
    assert r.returncode == 1
    assert "concretization failed for vendor" in r.stderr
    assert "spack-check: laptop:" in r.stdout and "nodes, ok" in r.stdout


def test_driver_missing_builtin_is_clear(fake_spack, monkeypatch, tmp_path):
    monkeypatch.setenv("SPACK_PACKAGES_ROOT", str(tmp_path / "nowhere"))
    with pytest.raises(StackproofError, match="SPACK_PACKAGES_ROOT"):
        spackcheck.concretize(ENVS, ["laptop"], tmp_path / "w", offline=False)


# ---- real Spack (only with SPACK_ROOT) -------------------------------------------------------

@pytest.mark.slow
def test_real_concretization_laptop(tmp_path):
    if not os.environ.get("SPACK_ROOT"):
        pytest.skip("set SPACK_ROOT to a Spack v1.1.0 checkout (and SPACK_PACKAGES_ROOT to spack-packages "
                    "v2025.11.0) to concretize for real; `make spack-check` does all environments")
    report = spackcheck.concretize(ENVS, ["laptop"], tmp_path / "w", offline=spackcheck.can_unshare())
    assert report["results"][0]["rc"] == 0, Path(report["results"][0]["log"]).read_text()[-3000:]
