# stackproof: builtin's osu-micro-benchmarks recipe (spack-packages v2025.11.0) plus one version from
# git, for sites (like the project's build machine) that cannot download the release tarballs from
# mvapich.cse.ohio-state.edu. github.com/yqin/osu-micro-benchmarks commits each OSU release tarball's
# contents (configure and Makefile.in included); "7.2-git" is the commit "Added release 7.2." and
# git checks it. It is NOT byte-identical to builtin's "7.2" tarball (that sha256 cannot be checked
# here), hence its own version name. Everything else is inherited unchanged; the environments that
# can fetch the tarballs keep osu-micro-benchmarks@7.5.1. A site's mirror of the git repository is
# given in its own config (packages: osu-micro-benchmarks: package_attributes: git: ...), never here.
import os

from spack_repo.builtin.packages.osu_micro_benchmarks.package import (
    OsuMicroBenchmarks as BuiltinOsuMicroBenchmarks,
)

from spack.package import *


class OsuMicroBenchmarks(BuiltinOsuMicroBenchmarks):
    """OSU Micro-Benchmarks (builtin recipe + the 7.2 release contents from a public git history)."""

    git = "https://github.com/yqin/osu-micro-benchmarks.git"

    version("7.2-git", commit="b7fc8c578f1777023ce8a5d41c17f9b0ff0748f0")

    @run_before("configure", when="@7.2-git")
    def _generated_files_newer_than_sources(self):
        """A checkout gives every file the checkout time, in index order (configure.ac after
        configure): make would then run autoconf/automake again. Order the mtimes as the release
        tarball has them: inputs, then aclocal.m4, configure, every Makefile.in."""
        src = self.stage.source_path
        generated = ["aclocal.m4", "configure"]
        for root, _dirs, files in sorted(os.walk(src)):
            generated += [os.path.relpath(os.path.join(root, f), src) for f in files
                          if f == "Makefile.in"]
        stamp = max(os.stat(os.path.join(root, f)).st_mtime
                    for root, _dirs, files in os.walk(src) for f in files) + 1
        for i, rel in enumerate(generated):
            os.utime(os.path.join(src, rel), (stamp + i, stamp + i))
