"""The skip policy of tests/conftest.py: under STACKPROOF_STRICT_SKIPS=1 a skip that does not name an
unobtainable prerequisite fails, whether it comes from a test, a fixture, a skipif mark, a module-level
importorskip or an empty parametrization; a skip for Spack/wwctl/Apptainer stays a skip."""
import shutil

import pytest

from conftest import skip_reason_allowed

pytest_plugins = ["pytester"]

CASES = '''
import pytest
from conftest import require_tools, require_unobtainable

def test_missing_tool():
    require_tools("no-such-tool-xyz")

def test_spack():
    pytest.skip("Spack is not installed here: set SPACK_ROOT")

def test_unobtainable():
    require_unobtainable("OSU sources", False, "not in any registry")

@pytest.mark.skipif(True, reason="reframe not in the venv")
def test_installable_mark():
    pass

@pytest.fixture
def broken():
    try:
        raise RuntimeError("install failed")
    except RuntimeError as exc:
        pytest.skip(f"cannot install: {exc}")

def test_failure_turned_into_skip(broken):
    pass

@pytest.mark.parametrize("x", [])
def test_zero_items(x):
    pass
'''
MODULE_SKIP = 'import pytest\npytest.importorskip("no_such_module_xyz")\n\ndef test_x():\n    pass\n'


@pytest.fixture
def suite(pytester):
    shutil.copy(__file__.replace("test_skip_policy.py", "conftest.py"), pytester.path / "conftest.py")
    pytester.makepyfile(test_cases=CASES, test_module_skip=MODULE_SKIP)
    return pytester


def test_strict_skips_fail_all_but_unobtainable_prerequisites(suite, monkeypatch):
    monkeypatch.setenv("STACKPROOF_STRICT_SKIPS", "1")
    result = suite.runpytest_subprocess("-rA", "test_cases.py")
    result.assert_outcomes(skipped=2, failed=1, errors=3)      # a skip at setup becomes an error at setup
    result.stdout.fnmatch_lines(["*SKIPPED*Spack is not installed*", "*SKIPPED*unobtainable prerequisite: OSU*"])
    # a module-level importorskip is a collection error: the session stops, red
    result = suite.runpytest_subprocess("-rA", "test_module_skip.py")
    assert result.ret != 0 and "STRICT_SKIPS=1: skip is not for an unobtainable" in result.stdout.str()


def test_without_the_switch_skips_stay_skips(suite, monkeypatch):
    monkeypatch.delenv("STACKPROOF_STRICT_SKIPS", raising=False)
    result = suite.runpytest_subprocess("-rA")
    result.assert_outcomes(skipped=7)


@pytest.mark.parametrize("reason, allowed", [
    ("Skipped: wwctl not found: put it on PATH", True),
    ("no apptainer on PATH and STACKPROOF_APPTAINER unset", True),
    ("scripts/build-osu.sh not present (OSU/AMG/SW4 builds need it)", True),
    ("needs 2 CPUs", True),
    ("no chromium on this machine (apt-get install chromium)", True),
    ("slurm-conf/nodetypes/local.yaml exists: the local node type never needs lstopo here", True),
    ("needs root", False),
    ("shellcheck not installed (apt-get install shellcheck)", False),
    ("missing tools: mpirun (run scripts/install-deps.sh)", False),
    ("mpibind binding not usable (boom)", False),
    ("stack vendor cannot be installed here: pip failed", False),
    ("got empty parameter set ['x']", False),
])
def test_allow_list(reason, allowed):
    assert skip_reason_allowed(reason) is allowed
