# stackproof: Spack recipe for the project's own mpibind (mpibind/ in the stackproof repository).
# Named stackproof-mpibind so it never shadows builtin.mpibind (LLNL upstream, autotools, no Slurm
# variant); both can live in one environment and be compared.
#
# Versions: a release of this project is `git archive --format=tar --prefix=stackproof-<v>/ <commit>`
# of a fixed commit (spack-envs/pins.yaml: stackproof_release). The project publishes no tarball, so
# `url` is a placeholder under the reserved .invalid domain (RFC 2606) and `make spack-mirror` writes
# the tarball into a local Spack source mirror, where Spack finds it and verifies the sha256.
from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *


class StackproofMpibind(CMakePackage):
    """mpibind as built by stackproof: a C11 library mapping MPI ranks/threads/GPUs onto the hwloc
    topology, with a Slurm SPANK plugin and a Python module."""

    homepage = "https://stackproof.invalid/"
    url = "https://stackproof.invalid/releases/stackproof-0.1.0.tar"

    maintainers("stackproof")

    license("MIT")

    version("0.1.0", sha256="97adeec39295e6a8d51372293fff96e353b59d18635e27810a8b94a7c56fd34a")

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
    extends("python", when="+python")
    depends_on("python@3.8:", type=("build", "run"), when="+python")

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
