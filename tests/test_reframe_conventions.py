"""Site conventions public suites rely on, checked by a check in their style on `local`:
`builtin` and `default` environments on every partition, `python` with numpy in them, the
partition's processor with caches (cscs StreamTest) and CPU count."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stackproof.paths import REPO


def test_builtin_and_default_environments_with_numpy_and_caches(tmp_path):
    pytest.importorskip("reframe")
    report = tmp_path / "report.json"
    env = dict(os.environ, STACKPROOF_RFM_PREFIX=str(tmp_path / "prefix"), STACKPROOF_RESULTS_DB=str(tmp_path / "r.db"))
    env.pop("RFM_SYSTEM", None)
    cmd = [str(Path(sys.executable).with_name("reframe")), "-C", str(REPO / "reframe-tests/config/site.py"),
           "-c", str(REPO / "tests/data/reframe_conventions/site_conventions.py"), "--system", "local",
           "--report-file", str(report), "-r"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    cases = [tc for run in json.loads(report.read_text())["runs"] for tc in run["testcases"]]
    assert sorted(c["environ"] for c in cases) == ["builtin", "default"]
    assert all(c["result"] == "pass" for c in cases), [c.get("fail_reason") for c in cases]
