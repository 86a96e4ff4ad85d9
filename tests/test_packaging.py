"""stackproof as an installed package (issue 17, item 1): a wheel built from a copy of the checkout,
installed non-editable into a fresh venv outside the repository, works from a directory outside it;
and every make target brings its own prerequisites (a fresh clone, any order)."""
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from stackproof.paths import source_tree

SRC = source_tree()
pytestmark = pytest.mark.skipif(SRC is None, reason="needs the stackproof source checkout (this is an installed copy)")

# What a fresh clone does not have (ignored by git): the copy leaves them out.
NOT_IN_A_CLONE = shutil.ignore_patterns(".git", ".venv", "build", "reports", ".run", "__pycache__", "*.pyc",
                                        "*.egg-info", ".pytest_cache", "local.yaml")


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "STACKPROOF_DATA", "STACKPROOF_WORK", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def _run(cmd, cwd, **kw):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, env=_clean_env(), **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """The checkout as a fresh clone sees it: no venv, no build/, no .git (like a release tarball)."""
    dst = tmp_path_factory.mktemp("clone") / "stackproof"
    shutil.copytree(SRC, dst, ignore=NOT_IN_A_CLONE, symlinks=True)
    return dst


@pytest.fixture(scope="module")
def installed(clone, tmp_path_factory):
    """A fresh venv with the wheel installed (no network: no build isolation, no index; the
    dependencies come from the project venv through a .pth line, stackproof itself does not)."""
    tmp = tmp_path_factory.mktemp("installed")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
          "--disable-pip-version-check", "-w", tmp / "dist", clone], cwd=tmp)
    wheel, = (tmp / "dist").glob("stackproof-*.whl")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp)
    py = venv / "bin" / "python"
    purelib = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=tmp).stdout.strip())
    deps = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (purelib / "_stackproof_test_deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    _run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--disable-pip-version-check", wheel], cwd=tmp)
    work = tmp / "elsewhere"
    work.mkdir()
    # Spack's way: `pip install --prefix PREFIX`, then PYTHONPATH=PREFIX/lib/pythonX.Y/site-packages
    _run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--disable-pip-version-check",
          "--ignore-installed", "--prefix", tmp / "prefix", wheel], cwd=tmp)
    return venv, work


def test_installed_package_uses_its_installed_data(installed):
    venv, work = installed
    code = ("import json, stackproof.paths as p; print(json.dumps("
            "[p.__file__, str(p.REPO), p.source_tree() and str(p.source_tree()), str(p.work_dir())]))")
    proc = subprocess.run([venv / "bin/python", "-c", code], cwd=work, capture_output=True, text=True,
                          env=_clean_env(XDG_STATE_HOME=str(work / "state")))
    out = proc.stdout
    module, repo, src, outputs = json.loads(out)
    assert Path(module).is_relative_to(venv) and src is None
    assert Path(outputs) == (work / "state" / "stackproof").resolve(), "installed: build outputs in the user's state dir"
    assert Path(repo) == venv / "share" / "stackproof"
    for f in ("slurm-conf/profiles.yaml", "slurm-conf/nodetypes/lassen.yaml", "reframe-tests/run.py",
              "reframe-tests/config/site.py", "images/warewulf/cluster.yaml", "fwq/CMakeLists.txt"):
        assert (Path(repo) / f).is_file(), f"{f} not installed"
    # every non-Python file of the package (templates, C sources it compiles, ...) is package data
    pkg = Path(module).parent
    wanted = [p.relative_to(SRC / "src" / "stackproof") for p in (SRC / "src" / "stackproof").rglob("*")
              if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    missing = [str(w) for w in wanted if not (pkg / w).is_file()]
    assert not missing, f"not in the wheel (add them to package-data in pyproject.toml): {missing}"


def test_prefix_install_finds_its_own_data(installed):
    """Installed with --prefix (Spack) and run by another interpreter: the data of that prefix."""
    venv, work = installed
    prefix = venv.parent / "prefix"
    site, = prefix.glob("lib/python*/site-packages")
    code = "import json, stackproof.paths as p; print(json.dumps([p.__file__, str(p.REPO)]))"
    proc = subprocess.run([venv / "bin/python", "-c", code], cwd=work, capture_output=True, text=True,
                          env=_clean_env(PYTHONPATH=str(site)))
    module, repo = json.loads(proc.stdout)
    assert Path(module).is_relative_to(site) and Path(repo) == prefix / "share" / "stackproof"
    assert (Path(repo) / "slurm-conf" / "profiles.yaml").is_file()


def test_data_root_in_a_checkout_and_overridden(tmp_path):
    code = "import stackproof.paths as p; print(p.REPO, p.work_dir())"
    here = _clean_env(PYTHONPATH=str(SRC / "src"))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=here)
    assert out.stdout.split() == [str(SRC), str(SRC)], out.stderr
    env = dict(here, STACKPROOF_DATA=str(tmp_path), STACKPROOF_WORK=str(tmp_path / "w"))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.stdout.split() == [str(tmp_path.resolve()), str((tmp_path / "w").resolve())], out.stderr


def test_installed_slurm_render_outside_the_repo(installed):
    venv, work = installed
    proc = _run([venv / "bin/stackproof", "slurm", "render", "--nodetype", "lassen", "--profile", "corespec",
                 "-o", work / "root"], cwd=work)
    assert "rendered" in proc.stdout + proc.stderr
    conf = (work / "root/etc/slurm/slurm.conf").read_text()
    assert "CpuSpecList=" in conf and (work / "root/etc/stackproof/profile.env").is_file()
    bad = subprocess.run([venv / "bin/stackproof", "slurm", "render", "--nodetype", "no-such-node", "--profile",
                          "corespec"], cwd=work, capture_output=True, text=True, env=_clean_env())
    assert bad.returncode != 0 and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def _testcase(stack, bench, size, value):
    name = f"OSUBenchmark %benchmark={bench} %buffers=host"
    return {"name": name, "display_name": name, "unique_name": f"{name}_{stack}".replace(" ", "_"),
            "system": "site", "partition": "cpu", "environ": stack, "result": "pass", "fail_phase": None,
            "fail_reason": None, "outputdir": None,
            "perfvalues": {f"site:cpu:lat_{size}B": [value, 0, None, None, "us", "pass"]}}


def test_installed_report_outside_the_repo(installed):
    """`stackproof report` on a small ReFrame run report (the format of `reframe --report-file`)."""
    venv, work = installed
    runs = []
    for stack, scale in (("commodity", 1.0), ("vendor", 1.2)):
        f = work / f"{stack}.json"
        cases = [_testcase(stack, "osu_latency", s, v * scale) for s, v in ((8, 1.5), (1024, 3.0))]
        f.write_text(json.dumps({"session_info": {"uuid": stack}, "runs": [{"testcases": cases}]}))
        runs += ["--run", f"{stack}={f}"]
    _run([venv / "bin/stackproof", "report", "build", *runs, "-o", work / "report"], cwd=work,
         timeout=120)
    html = (work / "report/report.html").read_text()
    assert "osu_latency" in html and "commodity" in html and "vendor" in html
    assert (work / "report/report.md").is_file()


# --- make targets from a fresh clone, in any order ---------------------------------------------------

def _phony_targets(root):
    targets = []
    for mk in [root / "Makefile", *sorted((root / "mk").glob("*.mk"))]:
        for m in re.finditer(r"^\.PHONY:(.*)$", mk.read_text(), re.M):
            targets += m.group(1).split()
    return [t for t in dict.fromkeys(targets) if t not in ("help", "clean")]


def test_every_make_target_brings_its_prerequisites(clone):
    """`make -n T` in a fresh clone: the venv is created before anything runs from it, and the
    Debian packages (cmake, hwloc, ...) are checked before anything is configured with CMake."""
    assert shutil.which("make"), "make is needed (build-essential)"
    env = _clean_env(MAKEFLAGS="", STACKPROOF_IMAGES="0")
    for target in _phony_targets(clone):
        # MAKE=: : a dry run still runs recursive $(MAKE) lines, which would need the real build's files
        proc = subprocess.run(["make", "-n", "--no-print-directory", "MAKE=:", target], cwd=clone, capture_output=True,
                              text=True, env=env, timeout=60)
        assert proc.returncode == 0, f"make -n {target}: {proc.stderr}"
        lines = proc.stdout.splitlines()

        def first(pattern):
            return next((i for i, line in enumerate(lines) if re.search(pattern, line)), None)

        made_venv, used_venv = first(r"-m venv "), first(r"^(?!test -x ).*/\.venv/bin/")
        if used_venv is not None:
            assert made_venv is not None and made_venv < used_venv, f"make {target} uses .venv before creating it"
        deps, cmake = first(r"install-deps\.sh"), first(r"cmake -S ")
        if cmake is not None:
            assert deps is not None and deps < cmake, f"make {target} configures with CMake before install-deps"


def test_timed_recipes_keep_the_commands_exit_status():
    """A recipe that prints how long a command took (`cmd; echo took ...`) must still fail when the
    command failed: `echo`'s status would otherwise report a failed image build or acceptance as
    passed in CI."""
    root = source_tree()
    for mk in [root / "Makefile", *sorted((root / "mk").glob("*.mk"))]:
        recipes = re.sub(r"\\\n\s*", " ", mk.read_text())      # one logical line per recipe line
        for line in recipes.splitlines():
            if re.search(r"took \$\$", line):
                assert re.search(r"rc=\$\$\?.*exit \$\$rc", line), f"{mk.name}: {line.strip()[:160]}"


def test_the_fast_tier_leaves_out_daemons_and_sessions():
    """`make check` is pytest -m "not live and not slow" (the Makefile says so): no test of a *_live.py
    file and no test of a module that declares itself slow (ReFrame sessions) is collected there,
    while `make test` runs every tier with the slowest durations printed."""
    root = source_tree()
    make = (root / "Makefile").read_text()
    assert '-m "not live and not slow"' in make and "PYTEST_DURATIONS := --durations=25" in make
    assert re.search(r"^test-python:.*\n.*\n\t@\$\(PY\) -m pytest -ra \$\(PYTEST_DURATIONS\)", make, re.M)
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not live and not slow",
                           "-p", "no:cacheprovider"], cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    assert len(ids) > 500, proc.stdout[-2000:]
    assert not [i for i in ids if i.split("::")[0].endswith("_live.py")]
    assert not [i for i in ids if i.startswith(("tests/test_reframe_suite.py", "tests/test_report_reframe.py"))]


def test_make_test_runs_live_steps_alone_and_the_rest_in_lanes(clone):
    """make test's plan (`make -n`, CI's settings): the laptop acceptance and the live tests never in a
    lane (they bring up the test cluster on the host's ports and measure), the builds and the tests
    without daemons in lanes beside each other."""
    env = _clean_env(MAKEFLAGS="", STACKPROOF_IMAGES="1", STACKPROOF_VCLUSTER="1")
    proc = subprocess.run(["make", "-n", "--no-print-directory", "MAKE=:", "test"], cwd=clone, capture_output=True,
                          text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lanes = [line.split("together.sh", 1)[1].split(";")[0].split() for line in proc.stdout.splitlines()
             if "./scripts/together.sh " in line and not line.startswith("together:")]
    assert lanes == [["build", "images-node"],
                     ["test-python-fast", "test-python-slow", "images-laptop-build", "vcluster-test"]], lanes
    assert "TEST_BUILT=1 laptop-acceptance test-python-live;" in proc.stdout


def test_together_tags_lines_and_fails_when_a_lane_fails(tmp_path):
    (tmp_path / "Makefile").write_text("a:\n\t@echo one; sleep 0.2; echo two\nb:\n\t@echo three; false\nc:\n\t@echo four\n")
    run = lambda *lanes: subprocess.run([str(SRC / "scripts/together.sh"), *lanes], cwd=tmp_path, capture_output=True,
                                        text=True, env=_clean_env(MAKE="make", MAKEFLAGS=""), timeout=60)
    ok = run("a c", "", "c")
    assert ok.returncode == 0, ok.stderr
    assert {"[a] one", "[a] two", "[a] four", "[c] four"} <= set(ok.stdout.splitlines())
    assert re.search(r"^together: \[a\] \(a c\) ok in \d+ s$", ok.stdout, re.M)
    bad = run("a", "b")
    assert bad.returncode == 1 and "[a] two" in bad.stdout          # the other lane ran to its end
    assert re.search(r"^together: \[b\] \(b\) FAILED \(exit 2\) in \d+ s$", bad.stdout, re.M)
    assert bad.stderr.strip() == "together: failed: b"
