# stackproof: Spack recipe for the project's FWQ (fwq/ in the stackproof repository): fwq-mpi,
# the no-MPI threads mode and the noise injector. builtin.fwq is LLNL/system-noise's Makefile build;
# this one uses the project's CMake build, hence its own name.
import os

from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *

_REPO = os.path.realpath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 6))
_GIT = os.environ.get("STACKPROOF_GIT", "file://" + _REPO)


class FwqMpi(CMakePackage):
    """Fixed Work Quanta noise benchmark as built by stackproof: fwq-mpi (MPI), a threads mode
    without MPI and a noise injector."""

    homepage = "https://github.com/LLNL/system-noise"
    git = _GIT

    license("MIT")

    version("main", branch="main")

    variant("mpi", default=True, description="Build fwq-mpi (without it: fwq-th, fwq-noise, libfwq-selfish)")

    root_cmakelists_dir = "fwq"

    depends_on("c", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("mpi", when="+mpi")

    def cmake_args(self):
        # fwq/CMakeLists.txt builds fwq-mpi when find_package(MPI) succeeds
        return [
            self.define("CMAKE_DISABLE_FIND_PACKAGE_MPI", self.spec.satisfies("~mpi")),
            self.define("BUILD_TESTING", self.run_tests),
        ]
