# stackproof: Spack recipe for the stackproof harness itself (pyproject.toml at the repository root,
# setuptools). Dependencies mirror pyproject.toml; exact versions come from the environment's lock.
import os

from spack_repo.builtin.build_systems.python import PythonPackage

from spack.package import *

_REPO = os.path.realpath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 6))
_GIT = os.environ.get("STACKPROOF_GIT", "file://" + _REPO)


class PyStackproof(PythonPackage):
    """TOSS-style HPC system stack harness: node types, Slurm core-specialization profiles, a local
    Slurm test cluster, noise analysis and acceptance reports."""

    git = _GIT

    license("MIT")

    version("main", branch="main")

    variant("reframe", default=False, description="Install ReFrame to run reframe-tests/")

    depends_on("python@3.10:", type=("build", "run"))
    depends_on("py-setuptools@61:", type="build")
    depends_on("py-pyyaml@6:", type=("build", "run"))
    depends_on("py-numpy@1.24:", type=("build", "run"))
    depends_on("py-matplotlib@3.6:", type=("build", "run"))
    depends_on("reframe@4.10", type="run", when="+reframe")
