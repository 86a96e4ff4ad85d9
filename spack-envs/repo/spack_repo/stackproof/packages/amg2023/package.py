# stackproof: builtin's amg2023 recipe (spack-packages v2025.11.0) with two build fixes found building
# it here; everything else is inherited unchanged.
# 1. AMG2023's CMakeLists.txt does `enable_language(CXX)` and links `amg` with the C++ linker (hypre
#    is C++); without `depends_on("cxx")` Spack's wrapper refuses the C++ compile ("SPACK_CXX_*
#    variables not set"). Upstream spack-packages added the same line later (commit c806b9bbfd,
#    PR #5401, "amg2023: ... fix dependencies").
# 2. hypre is static by default (~shared) and calls BLAS/LAPACK (+lapack), but AMG2023's CMake links
#    only libHYPRE.a, MPI and libm: `amg` fails with undefined dgetrf_, dpotrf_, ddot_, ... The
#    recipe appends hypre's BLAS/LAPACK to the link line (CMAKE_<LANG>_STANDARD_LIBRARIES come after
#    the objects and libHYPRE.a, as a static archive needs).
# Drop this file when the pinned spack-packages release has both.
from spack_repo.builtin.packages.amg2023.package import Amg2023 as BuiltinAmg2023

from spack.package import *


class Amg2023(BuiltinAmg2023):
    """AMG2023 (builtin recipe + its C++ build dependency + static hypre's BLAS/LAPACK at link time)."""

    depends_on("cxx", type="build")

    def cmake_args(self):
        args = super().cmake_args()
        hypre = self.spec["hypre"]
        if hypre.satisfies("~shared +lapack"):
            libs = (hypre["lapack"].libs + hypre["blas"].libs).ld_flags
            args += [self.define("CMAKE_C_STANDARD_LIBRARIES", libs),
                     self.define("CMAKE_CXX_STANDARD_LIBRARIES", libs)]
        return args
