# stackproof: Spack recipe for the stackproof harness itself (pyproject.toml at the repository root,
# setuptools). Dependencies mirror pyproject.toml [project] dependencies (every third-party module the
# package imports at run time: yaml, numpy, matplotlib, jinja2); exact versions come from the environment's lock.
# Versions: see stackproof_mpibind/package.py (git archive of a fixed commit, served from a mirror).
from spack_repo.builtin.build_systems.python import PythonPackage

from spack.package import *


class PyStackproof(PythonPackage):
    """TOSS-style HPC system stack harness: node types, Slurm core-specialization profiles, a local
    Slurm test cluster, noise analysis and acceptance reports."""

    homepage = "https://stackproof.invalid/"
    url = "https://stackproof.invalid/releases/stackproof-0.1.0.tar"

    maintainers("stackproof")

    license("MIT")

    version("0.1.0", sha256="97adeec39295e6a8d51372293fff96e353b59d18635e27810a8b94a7c56fd34a")

    variant("reframe", default=False, description="Install ReFrame to run reframe-tests/")

    depends_on("python@3.10:", type=("build", "run"))
    depends_on("py-setuptools@61:", type="build")
    depends_on("py-pyyaml@6:", type=("build", "run"))
    depends_on("py-numpy@1.24:", type=("build", "run"))
    depends_on("py-matplotlib@3.6:", type=("build", "run"))
    depends_on("py-jinja2@3.1:", type=("build", "run"))
    # pyproject.toml: reframe-hpc>=4.10,<4.11 (stackproof.reframe adds 4.10.0 to builtin's recipe)
    depends_on("reframe@4.10", type="run", when="+reframe")
