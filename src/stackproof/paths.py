"""Where things live: the repository, ../shared and the run directory (each overridable by env)."""
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    """The project's shared data (topologies, golden mappings, fixtures); STACKPROOF_SHARED overrides."""
    return Path(os.environ.get("STACKPROOF_SHARED", REPO.parent / "shared")).resolve()


def slurm_conf_dir() -> Path:
    return REPO / "slurm-conf"


def nodetypes_dir() -> Path:
    return slurm_conf_dir() / "nodetypes"
