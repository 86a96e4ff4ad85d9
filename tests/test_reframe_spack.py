"""`stackproof spack env`: exports for the pinned Spack and the project's private scopes, so that
ReFrame's Spack build system (plain `spack` from PATH) uses them; without Spack, one error."""
import os
import shlex
import subprocess
import sys

import pytest

from stackproof.paths import REPO


def spack_env(env):
    return subprocess.run([sys.executable, "-m", "stackproof.cli", "spack", "env"], capture_output=True, text=True,
                          env=env)


def test_without_spack_one_error_says_how(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPACK_")}
    proc = spack_env(env)
    assert proc.returncode == 1 and proc.stdout == ""
    assert "Spack is not installed here: set SPACK_ROOT" in proc.stderr and "Traceback" not in proc.stderr


def fake_spack(tmp_path, version="1.1.0"):
    root = tmp_path / "spack"
    (root / "bin").mkdir(parents=True)
    (root / "etc" / "spack").mkdir(parents=True)
    exe = root / "bin" / "spack"
    exe.write_text(f"#!/bin/sh\necho {version}\n")
    exe.chmod(0o755)
    builtin = tmp_path / "spack-packages" / "repos" / "spack_repo" / "builtin"
    builtin.mkdir(parents=True)
    (builtin / "repo.yaml").write_text("repo:\n  namespace: builtin\n")
    return root


def test_exports_put_the_pinned_spack_and_private_scopes_first(tmp_path):
    root = fake_spack(tmp_path)
    env = dict({k: v for k, v in os.environ.items() if not k.startswith("SPACK_")},
               SPACK_ROOT=str(root), SPACK_PYTHON=sys.executable)
    proc = spack_env(env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "unset SPACK_DISABLE_LOCAL_CONFIG"
    exports = dict(shlex.split(line)[1].split("=", 1) for line in lines[1:])
    assert exports["SPACK_ROOT"] == str(root)
    assert exports["PATH"].startswith(f"{root}/bin:")
    user = exports["SPACK_USER_CONFIG_PATH"]
    repos = open(os.path.join(user, "repos.yaml")).read()
    assert "builtin" in repos and "spack_repo/stackproof" in repos
    assert open(os.path.join(user, "mirrors.yaml")).read().startswith("mirrors::")
    assert "enable: false" in open(os.path.join(user, "bootstrap.yaml")).read()


def test_another_spack_version_is_refused(tmp_path):
    root = fake_spack(tmp_path, version="0.23.1")
    env = dict({k: v for k, v in os.environ.items() if not k.startswith("SPACK_")},
               SPACK_ROOT=str(root), SPACK_PYTHON=sys.executable)
    proc = spack_env(env)
    assert proc.returncode == 1 and "the project pins 1.1.0" in proc.stderr


@pytest.mark.live
def test_a_spack_build_system_check_builds_from_the_offline_mirror(tmp_path):
    """Needs a real Spack checkout (SPACK_ROOT: in no registry) and the offline mirror."""
    if not os.environ.get("SPACK_ROOT"):
        pytest.skip("SPACK_ROOT not set: Spack is in no package registry (docs/spack.md)")
    proc = spack_env(dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    script = proc.stdout + (f"\nexec {shlex.quote(str(os.path.join(os.path.dirname(sys.executable), 'reframe')))} "
                            f"-C {REPO}/reframe-tests/config/site.py -c {REPO}/tests/data/reframe_spack/spack_hello.py "
                            f"--system local -r")
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=1800,
                         env=dict(os.environ, STACKPROOF_RFM_PREFIX=str(tmp_path / "prefix"),
                                  STACKPROOF_RESULTS_DB=str(tmp_path / "r.db")))
    assert run.returncode == 0, run.stdout[-3000:]
