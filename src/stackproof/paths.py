"""Where things live: the data root and the source checkout (each overridable by env).

The data root (`REPO`, also `data_root()`) is the one place the package reads its data from:
slurm-conf/ (profiles, node types), reframe-tests/, images/, spack-envs/ and fwq/, in the
repository's layout. It is, in this order:
  1. $STACKPROOF_DATA, when set;
  2. the source checkout this module sits in (src/stackproof/paths.py), as in `make venv`'s
     editable install;
  3. <prefix>/share/stackproof of the installation (setup.py's data-files: a non-editable
     `pip install .`, a wheel, Spack's py-stackproof, the images' venv).
Build outputs (build/, reports/) are not data: `work_dir()` says where they go, `source_tree()`
whether there is a checkout at all.
"""
import os
import sys
import sysconfig
from pathlib import Path

_MARKER = Path("slurm-conf") / "profiles.yaml"
_HERE = Path(__file__).resolve()


def source_tree() -> Path | None:
    """The repository checkout this package runs from, or None for an installed package."""
    root = _HERE.parents[2]
    if (root / "pyproject.toml").is_file() and (root / _MARKER).is_file():
        return root
    return None


def _installed_data() -> Path | None:
    """<prefix>/share/stackproof: the prefix the package is installed in (site-packages is
    <prefix>/lib/pythonX.Y/site-packages, also for `pip install --prefix` and Spack), then the
    interpreter's own data prefix."""
    candidates = [p / "share" / "stackproof" for p in _HERE.parents[1:6]]
    candidates += [Path(sysconfig.get_path("data")) / "share" / "stackproof",
                   Path(sys.prefix) / "share" / "stackproof"]
    return next((c for c in candidates if (c / _MARKER).is_file()), None)


def data_root() -> Path:
    """The directory holding slurm-conf/, reframe-tests/, images/, ... (see the module docstring)."""
    env = os.environ.get("STACKPROOF_DATA")
    if env:
        return Path(env).resolve()
    # Without data anywhere, keep the checkout's path: readers then name the missing file.
    return source_tree() or _installed_data() or _HERE.parents[2]


REPO = data_root()


def work_dir() -> Path:
    """Where build outputs and reports go (build/, reports/): $STACKPROOF_WORK, else the source
    checkout, else $XDG_STATE_HOME/stackproof (~/.local/state/stackproof). An installed package never
    writes into its prefix, and not into "the current directory" either: ReFrame changes into the
    configuration's directory while it loads it."""
    env = os.environ.get("STACKPROOF_WORK")
    if env:
        return Path(env).resolve()
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return source_tree() or Path(state).resolve() / "stackproof"


def slurm_conf_dir() -> Path:
    return REPO / "slurm-conf"


def nodetypes_dir() -> Path:
    return slurm_conf_dir() / "nodetypes"
