"""What every part of stackproof.files shares: the link rules, the size cap of each kind of file
another party controls, the flags every open uses, and the one error (UnsafePath)."""
from __future__ import annotations

import os

from stackproof.errors import StackproofError

LINKS_REFUSED = "refused"       # no symbolic link at all below the root
LINKS_BENEATH = "beneath"       # links followed only while they stay below the root (a Spack mirror)

# The size cap of each kind of file another party controls.
MAX_ARCHIVE = 512 << 20         # a source tarball (the largest pinned one is 6.7 MB)
MAX_RECORD = 1 << 20            # a small text file: a cache entry's .origin record, a Debian .dsc
MAX_FIGURE = 32 << 20           # a PNG a report embeds
MAX_OUTPUT = 256 << 20          # a benchmark's output or trace read whole (fwq.dat, np.out)
TAIL_BYTES = 1 << 20            # what a report shows of a job's stderr/stdout: at most its last MiB
MAX_LINK_HOPS = 40              # the kernel's limit on links in one resolution
CHUNK = 1 << 20

FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS, RESOLVE_BENEATH = 0x02, 0x04, 0x08
SYS_OPENAT2 = 437              # one number on every architecture (the unified table since Linux 5.1)
NO_OPENAT2_VAR = "STACKPROOF_NO_OPENAT2"    # "1": always walk component by component (tests use it)


class UnsafePath(StackproofError):
    """A path another party controls that is not what it may be: a link, outside its directory, not
    a regular file, someone else's, over its size cap, a directory others may write."""
