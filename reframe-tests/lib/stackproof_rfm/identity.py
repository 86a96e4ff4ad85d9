"""IdentityProbe: the stack's identity probe (rank, MPI_Get_library_version, resolved libmpi path)
runs with exactly the benchmark's launcher before the benchmark; sanity checks that every rank ran
with the stack's own MPI (version and library path, from the stack file)."""
import os
import re

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import SanityError

IDENTITY_LINE = r'^identity rank=(\d+) host=(\S+) library=(\S+) version=(.*)$'


def identity_rows(path):
    """rank -> {host, library, version} from the identity probe's output (missing file: {})."""
    rows = {}
    if os.path.isfile(path):
        with open(path, errors='replace') as fh:
            for line in fh:
                m = re.match(IDENTITY_LINE, line.strip())
                if m:
                    rows[int(m.group(1))] = {'host': m.group(2), 'library': m.group(3), 'version': m.group(4)}
    return rows


class IdentityProbe(rfm.RegressionTestPlugin):
    """Needs StackEnvironment (stack_spec, stack_binary) and OutputParsing (stage_file)."""
    #: run the stack's identity probe with the same launcher before the benchmark and check it
    records_identity = False
    #: the MPI library each rank really ran with (rank 0's), for the results database
    mpi_library = variable(str, value='', loggable=True)
    mpi_library_path = variable(str, value='', loggable=True)

    @run_before('run')
    def _identity_probe(self):
        if not self.records_identity:
            return
        probe = self.stack_binary('probe')
        self.job.num_tasks = self.num_tasks      # ReFrame copies it only when the job is prepared
        launch = self.job.launcher.run_command(self.job)
        self.prerun_cmds = [f'{launch} {probe} > identity.out 2>&1'] + list(self.prerun_cmds)

    @run_after('run')
    def _record_identity(self):
        if not self.records_identity or self.is_dry_run():
            return
        rows = identity_rows(self.stage_file('identity.out'))
        if rows:
            first = rows[min(rows)]
            self.mpi_library, self.mpi_library_path = first['version'], first['library']

    def identity_sanity(self):
        """Deferred: every rank of the probe ran with the stack's own MPI (version and library path)."""
        return _identity_ok(self.stage_file('identity.out'), self.stack_spec, self.num_tasks)


@sn.deferrable
def _identity_ok(path, st, ntasks):
    rows = identity_rows(path)
    if not rows:
        tail = ''
        if os.path.isfile(path):
            with open(path, errors='replace') as fh:
                tail = ' | '.join(fh.read().strip().splitlines()[-5:])
        raise SanityError(f'stack {st.name}: the identity probe printed no "identity rank=" line ({path}): '
                          f'{tail or "empty"}')
    missing = sorted(set(range(ntasks)) - set(rows))
    if missing:
        raise SanityError(f'stack {st.name}: identity probe: no line from ranks {missing} ({path})')
    fix = (f'rebuild with `stackproof stack build {st.name}` and check that no other stack\'s library is on '
           f'LD_LIBRARY_PATH ({st.file})')
    for rank, row in sorted(rows.items()):
        lib, version = row['library'], row['version']
        if not re.search(st.mpi_version, version):
            raise SanityError(f'stack {st.name}: rank {rank} ran with MPI {version!r} ({lib}), the stack file '
                              f'requires a version matching /{st.mpi_version}/: {fix}')
        if not re.search(st.mpi_library, os.path.basename(lib)) and not re.search(st.mpi_library, lib):
            raise SanityError(f'stack {st.name}: rank {rank} loaded {lib}, not /{st.mpi_library}/: {fix}')
        if st.mpi_library_dir and os.path.realpath(os.path.dirname(lib)) != os.path.realpath(st.mpi_library_dir):
            raise SanityError(f'stack {st.name}: rank {rank} loaded {lib}, outside {st.mpi_library_dir}: {fix}')
    return True
