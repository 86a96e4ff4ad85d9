"""The identity probe: the stack's probe program (rank, MPI_Get_library_version, the resolved libmpi
path) runs with exactly the benchmark's launcher before the benchmark; every rank must have run with
the stack's own MPI (version and library path, from the stack file)."""
import os
import re

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


def check_identity(rows, path, st, ntasks):
    """SanityError unless every rank 0..ntasks-1 of the probe (`rows` from `path`) ran with stack
    `st`'s own MPI: the version and library the stack file requires, from its library directory."""
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
