"""`stackproof spack env`: exports for the pinned Spack and the project's private scopes, so that
ReFrame's Spack build system (plain `spack` from PATH) uses them; without Spack, one error."""
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import stackproof_cli
from stackproof.paths import REPO


def spack_env(env):
    return stackproof_cli("spack", "env", env=env)


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


def test_a_site_file_becomes_the_system_scope(tmp_path):
    """--site NAME: the site's externals (spack-envs/site/NAME/packages.yaml) in Spack's system scope,
    so that a check builds only what the site does not provide (compiler, gmake... are externals)."""
    root = fake_spack(tmp_path)
    env = dict({k: v for k, v in os.environ.items() if not k.startswith("SPACK_")},
               SPACK_ROOT=str(root), SPACK_PYTHON=sys.executable)
    proc = stackproof_cli("spack", "env", "--site", "debian12", env=env)
    assert proc.returncode == 0, proc.stderr
    exports = dict(shlex.split(line)[1].split("=", 1) for line in proc.stdout.splitlines()[1:])
    system = os.path.join(exports["SPACK_SYSTEM_CONFIG_PATH"], "packages.yaml")
    assert open(system).read() == (REPO / "spack-envs" / "site" / "debian12" / "packages.yaml").read_text()


def test_an_unknown_site_is_bad_input():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPACK_")}
    proc = stackproof_cli("spack", "env", "--site", "nowhere", env=env)
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert "no spack-envs/site/nowhere/packages.yaml (known: debian12, rocky9)" in proc.stderr


def test_another_spack_version_is_refused(tmp_path):
    root = fake_spack(tmp_path, version="0.23.1")
    env = dict({k: v for k, v in os.environ.items() if not k.startswith("SPACK_")},
               SPACK_ROOT=str(root), SPACK_PYTHON=sys.executable)
    proc = spack_env(env)
    assert proc.returncode == 1 and "the project pins 1.1.0" in proc.stderr


LZ4_SOURCE = "_source-cache/archive/0b/0b0e3aa07c8c063ddf40b082bdf7e37a1562bda40a0ff5272957f3e987e0e54b.tar.gz"


@pytest.mark.live
def test_a_spack_build_system_check_builds_from_the_offline_mirror():
    """Needs a real Spack checkout (SPACK_ROOT: in no registry), a Debian 12 host (the check takes
    spack-envs/site/debian12 as the site's externals) and lz4's source in the offline mirror."""
    if not os.environ.get("SPACK_ROOT"):
        pytest.skip("SPACK_ROOT not set: Spack is in no package registry (docs/spack.md)")
    mirror = REPO / "build" / "spack" / "mirror"
    assert (mirror / LZ4_SOURCE).is_file(), (
        f"lz4 1.9.4's source is not in the offline mirror {mirror}: `apt-get source --download-only "
        "lz4/bookworm` (a deb-src line), then `stackproof spack mirror build/spack/mirror --add "
        "lz4_1.9.4.orig.tar.gz` (docs/spack.md \"ReFrame's Spack build system\")")
    proc = stackproof_cli("spack", "env", "--site", "debian12")
    assert proc.returncode == 0, proc.stderr
    script = proc.stdout + (f"\nexec {shlex.quote(str(os.path.join(os.path.dirname(sys.executable), 'reframe')))} "
                            f"-C {REPO}/reframe-tests/config/site.py -c {REPO}/tests/data/reframe_spack/spack_hello.py "
                            f"--system local -r")
    # a short prefix: Spack refuses an install tree whose bin/sbang path is longer than a shebang line
    # may be (127); ReFrame installs into <stage>/rfm_spack_env/opt/spack, and pytest's tmp_path
    # gave 146 characters ("SbangPathError: Install tree root is too long")
    prefix = tempfile.mkdtemp(prefix="rfm-spack-", dir="/tmp")
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=1800,
                         env=dict(os.environ, STACKPROOF_RFM_PREFIX=prefix,
                                  STACKPROOF_RESULTS_DB=os.path.join(prefix, "r.db")))
    assert run.returncode == 0, f"(stage kept in {prefix})\n" + run.stdout[-3000:] + run.stderr[-2000:]
    shutil.rmtree(prefix, ignore_errors=True)
