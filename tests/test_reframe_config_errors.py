"""Plain ReFrame on `--system testcluster` with no cluster up (issue 33, item 7): one line through
ReFrame's own configuration-error path ("failed to load configuration: ..."), naming `stackproof
cluster up`, exit 1, no traceback; the same for a bad override in the environment."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stackproof.paths import REPO

REFRAME = Path(sys.executable).with_name("reframe")


@pytest.mark.parametrize("env, message", [
    ({}, "no test cluster is up"),
    ({"STACKPROOF_CLUSTER_NODES": "three"}, "STACKPROOF_CLUSTER_NODES='three': expected a non-negative integer"),
])
def test_testcluster_config_errors_are_one_line(tmp_path, env, message):
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    full = dict(os.environ, STACKPROOF_RUN_DIR=str(run_dir), TMPDIR=str(tmp_path), RFM_COLORIZE="n",
                XDG_STATE_HOME=str(tmp_path / "state"), **env)
    full.pop("RFM_SYSTEM", None)
    proc = subprocess.run([str(REFRAME), "-C", str(REPO / "reframe-tests/config/site.py"), "--system", "testcluster",
                           "-c", str(REPO / "reframe-tests/checks"), "-n", "NoSuchCheck", "-r"],
                          capture_output=True, text=True, env=full, timeout=300, cwd=tmp_path)
    out = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, out
    errors = [line for line in out if "ERROR" in line]
    assert len(errors) == 1 and f"failed to load configuration: {message}" in errors[0], out
    if not env:
        assert "stackproof cluster up" in errors[0]
    assert len(out) <= 2, out            # the error, and ReFrame's line naming its log file
