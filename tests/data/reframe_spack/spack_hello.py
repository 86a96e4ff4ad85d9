# A check in the style of public suites (ReFrame's tutorial "Spack build system", CSCS, EESSI):
# `build_system = 'Spack'`, `valid_prog_environs = ['default']`, `spack` taken from PATH.
# tests/test_reframe_spack.py runs it after `eval "$(stackproof spack env --site debian12)"`.
#
# lz4@1.9.4: a package the site file does not provide as an external (so Spack builds it), whose
# source is obtainable offline byte for byte: Debian's lz4_1.9.4.orig.tar.gz is the upstream tarball,
# sha256 0b0e3aa0… = the sha256 in builtin's recipe (docs/spack.md "ReFrame's Spack build system").
# zlib, the first choice, is neither: Debian repacks it (…dfsg.orig.tar.*) and the site has it.
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_before, sanity_function

LZ4_SHA256 = '0b0e3aa07c8c063ddf40b082bdf7e37a1562bda40a0ff5272957f3e987e0e54b'


@rfm.simple_test
class spack_lz4_check(rfm.RegressionTest):
    descr = 'Build lz4 with the site Spack from its offline mirror and run it'
    valid_systems = ['*']
    valid_prog_environs = ['default']
    build_system = 'Spack'
    executable = 'sh'
    # the host has Debian's /usr/bin/lz4 1.9.4 too: print which lz4 ran
    executable_opts = ['-c', '"command -v lz4 && lz4 -V 2>&1"']
    time_limit = '30m'

    @run_before('compile')
    def setup_build_system(self):
        self.build_system.specs = ['lz4@1.9.4']
        # a source cache of this test's own (relative: inside rfm_spack_env), so that every run
        # fetches from the mirror (sanity below) instead of a copy cached by an earlier run
        self.build_system.config_opts = ['config:source_cache:source-cache']

    @sanity_function
    def validate(self):
        return sn.all([
            # built by Spack into this test's install tree, not the host's lz4
            sn.assert_found(r'rfm_spack_env/opt/spack/.*/lz4-1\.9\.4-\w+/bin/lz4$', self.stdout),
            sn.assert_found(r'LZ4 command line interface .* v1\.9\.4', self.stdout),
            # the source came from the offline mirror, under the sha256 of builtin's recipe
            sn.assert_found(rf'Fetching file://\S*/_source-cache/archive/0b/{LZ4_SHA256}\.tar\.gz',
                            self.build_stdout),
        ])
