# stackproof: Spack recipe for the project's FWQ (fwq/ in the stackproof repository): fwq-mpi,
# the no-MPI threads mode and the noise injector. builtin.fwq is LLNL/system-noise's Makefile build;
# this one uses the project's CMake build, hence its own name.
# Versions: see stackproof_mpibind/package.py (git archive of a fixed commit, served from a mirror).
import os

from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *


class FwqMpi(CMakePackage):
    """Fixed Work Quanta noise benchmark as built by stackproof: fwq-mpi (MPI), a threads mode
    without MPI and a noise injector."""

    homepage = "https://stackproof.invalid/"
    url = "https://stackproof.invalid/releases/stackproof-0.1.0.tar"

    maintainers("stackproof")

    license("MIT")

    version("0.1.0", sha256="97adeec39295e6a8d51372293fff96e353b59d18635e27810a8b94a7c56fd34a")

    variant("mpi", default=True, description="Build fwq-mpi (without it: fwq-th, fwq-noise, libfwq-selfish)")

    root_cmakelists_dir = "fwq"

    depends_on("c", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("mpi", when="+mpi")

    def cmake_args(self):
        # fwq/CMakeLists.txt builds fwq-mpi when find_package(MPI) succeeds. Compile with the stack's
        # own wrapper (FindMPI's own probe loses include/ of Debian's Open MPI under Spack's compiler
        # wrapper), and never let a +mpi build end without fwq-mpi (CMake only warns)
        args = [self.define("BUILD_TESTING", self.run_tests)]
        if self.spec.satisfies("+mpi"):
            args.append(self.define("CMAKE_C_COMPILER", self.spec["mpi"].mpicc))
        else:
            args.append(self.define("CMAKE_DISABLE_FIND_PACKAGE_MPI", True))
        return args

    @run_after("install")
    def check_fwq_mpi(self):
        if self.spec.satisfies("+mpi") and not os.path.isfile(self.prefix.bin.join("fwq-mpi")):
            raise InstallError("fwq-mpi was not built: CMake did not find the MPI of this spec "
                               f"({self.spec['mpi'].format('{name}@{version} {prefix}')})")
