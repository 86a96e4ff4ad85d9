"""The ReFrame results database lives in a private directory (issue 28, case 3): created 0700,
refused when another user created the path first, when it is a symlink, or group/world writable."""
import importlib.util
import os
import stat
import sys

import pytest

from stackproof.paths import REPO


@pytest.fixture
def common(tmp_path, monkeypatch):
    monkeypatch.setenv("STACKPROOF_RFM_PREFIX", str(tmp_path / "prefix"))
    monkeypatch.setenv("STACKPROOF_RESULTS_DB", str(tmp_path / "import" / "r.db"))
    monkeypatch.syspath_prepend(str(REPO / "reframe-tests" / "config"))
    spec = importlib.util.spec_from_file_location("spk_common_under_test", REPO / "reframe-tests/config/common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.delenv("STACKPROOF_RESULTS_DB")
    yield module
    sys.modules.pop("spk_common_under_test", None)


def test_default_is_a_private_dir_under_xdg_state(common, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    path = common.results_db()
    assert path == str(tmp_path / "state" / "stackproof" / "reframe-results.db")
    st = os.lstat(os.path.dirname(path))
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()


def test_a_dir_someone_else_created_is_refused(common, tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("needs root to create a directory owned by another user")
    hostile = tmp_path / "state" / "stackproof"
    hostile.mkdir(parents=True, mode=0o700)
    os.chown(hostile, 65534, 65534)            # nobody pre-created it
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with pytest.raises(RuntimeError, match="owned by uid 65534, not by you"):
        common.results_db()


def test_a_symlink_is_refused_and_not_followed(common, tmp_path, monkeypatch):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "stackproof").symlink_to(target)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with pytest.raises(RuntimeError, match="is a symlink"):
        common.results_db()
    assert not list(target.iterdir())           # nothing written through the link


def test_a_symlinked_database_file_is_refused(common, tmp_path, monkeypatch):
    d = tmp_path / "db"
    d.mkdir(mode=0o700)
    (d / "r.db").symlink_to(tmp_path / "victim")
    monkeypatch.setenv("STACKPROOF_RESULTS_DB", str(d / "r.db"))
    with pytest.raises(RuntimeError, match="symlink"):
        common.results_db()


def test_a_world_writable_dir_is_refused(common, tmp_path, monkeypatch):
    d = tmp_path / "open"
    d.mkdir()
    d.chmod(0o777)
    monkeypatch.setenv("STACKPROOF_RESULTS_DB", str(d / "r.db"))
    with pytest.raises(RuntimeError, match="writable by group or others"):
        common.results_db()
