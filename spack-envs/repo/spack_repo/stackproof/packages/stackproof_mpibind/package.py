# stackproof: Spack recipe for the project's own mpibind (mpibind/ in the stackproof repository).
# Named stackproof-mpibind so it never shadows builtin.mpibind (LLNL upstream, autotools, no Slurm
# variant); both can live in one environment and be compared.
import os

from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *

# The recipe builds the stackproof repository that contains it (spack-envs/repo/spack_repo/
# stackproof/packages/<pkg>/package.py -> six levels up); STACKPROOF_GIT overrides (a URL or path).
_REPO = os.path.realpath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 6))
_GIT = os.environ.get("STACKPROOF_GIT", "file://" + _REPO)


class StackproofMpibind(CMakePackage):
    """mpibind as built by stackproof: a C11 library mapping MPI ranks/threads/GPUs onto the hwloc
    topology, with a Slurm SPANK plugin and a Python module."""

    homepage = "https://mpibind.llnl.gov"
    git = _GIT

    license("MIT")

    version("main", branch="main")

    variant("slurm", default=True, description="Build the Slurm SPANK plugin (lib/mpibind/mpibind_slurm.so)")
    variant("python", default=False, description="Install the Python module into site-packages")
    variant("cuda", default=False, description="Map GPUs: hwloc with CUDA and NVML")

    root_cmakelists_dir = "mpibind"

    depends_on("c", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("pkgconfig", type="build")

    # mpibind/CMakeLists.txt: pkg_check_modules(hwloc>=2.5)
    depends_on("hwloc@2.5:")
    depends_on("hwloc@2.5: +cuda +nvml", when="+cuda")
    # the plugin is built when slurm/spank.h is found (find_path SLURM_INCLUDE_DIR); no slurm.pc needed
    depends_on("slurm", when="+slurm")
    depends_on("python@3.8:", type=("build", "run"), when="+python")
    extends("python", when="+python")
    depends_on("python@3.8:", type="test")

    def cmake_args(self):
        spec = self.spec
        args = [self.define("BUILD_TESTING", self.run_tests)]
        if spec.satisfies("+slurm"):
            args.append(self.define("SLURM_INCLUDE_DIR", spec["slurm"].prefix.include))
        if spec.satisfies("+python"):
            pyver = spec["python"].version.up_to(2)
            args.append(self.define("MPIBIND_PYTHON_INSTALL_DIR",
                                    join_path("lib", f"python{pyver}", "site-packages")))
        return args
