# stackproof: builtin's reframe recipe (spack-packages v2025.11.0 stops at 4.7.3) plus the 4.10.0
# release that the harness needs (pyproject.toml: reframe-hpc>=4.10,<4.11). The version line is the one
# upstream spack-packages added later (commit a508a06a14, "reframe: add version 4.10.0"), with the
# repository's new home; everything else is inherited unchanged. Drop this file when the pinned
# spack-packages release has 4.10.
from spack_repo.builtin.packages.reframe.package import Reframe as BuiltinReframe

from spack.package import *


class Reframe(BuiltinReframe):
    """ReFrame, a framework for writing regression tests for HPC systems (builtin recipe + 4.10.0)."""

    version(
        "4.10.0",
        sha256="3fddf2ab8642a11d35d878ecf07a8912ee4d21f4ab37db8e53ca6c130b1819de",
        url="https://github.com/reframe-hpc/reframe/archive/v4.10.0.tar.gz",
    )
