"""Shared pytest fixtures: the ../shared data directory and root/live gating."""
import os
import shutil

import pytest

from stackproof.paths import REPO, shared_dir


@pytest.fixture(scope="session")
def repo():
    return REPO


@pytest.fixture(scope="session")
def shared():
    path = shared_dir()
    if not (path / "topologies").is_dir():
        pytest.fail(f"shared data not found at {path}: set STACKPROOF_SHARED to the shared/ directory")
    return path


def require_root():
    if os.geteuid() != 0:
        pytest.skip("live test needs root (starts daemons, namespaces, cgroups)")


def require_tools(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"missing tools: {', '.join(missing)} (run scripts/install-deps.sh)")
