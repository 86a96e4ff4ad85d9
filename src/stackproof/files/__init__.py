"""Files: the sha256 of a file of ours, and the one way root opens a path another party controls.

A source mirror, the source cache, `stack fetch --into`, ReFrame's stage and output directories, the
virtual cluster's share and a report's inputs hold files someone else writes: a local user, a VM,
whoever fills the mirror. Root following a link there read or overwrote whatever the link named
(issue 42). So each such path is opened here, and only here:

- resolved *beneath* a directory the caller chose (`open_beneath(root, rel)`): a relative name
  without '..', and no symbolic link anywhere on the way (LINKS_REFUSED) or, for a mirror whose Spack
  layout links into its own source cache, only links that stay beneath that directory
  (LINKS_BENEATH). The kernel decides where it can: openat2(2) with RESOLVE_BENEATH
  (| RESOLVE_NO_SYMLINKS), atomic against any rename; where it cannot (no openat2 before Linux 5.6,
  or a seccomp filter answering ENOSYS/EPERM), one component at a time from directory descriptors
  with O_NOFOLLOW, each link read and resolved by us under the same rules;
- opened O_NONBLOCK (a FIFO in place of a file must not hang root), then accepted only as a regular
  file (fstat of the descriptor), optionally of one owner, and never read past the size cap of its
  kind (MAX_*);
- new files are created only in a `Staging` directory: private (0700) inside the target directory,
  each file O_CREAT | O_EXCL | O_NOFOLLOW at mode 0600; the caller verifies what it wrote (a hash)
  and `commit` renames it into place through directory descriptors (a link planted at the final
  name is replaced, never written through);
- a directory root writes into (the source cache, `--into`) must be its own: `check_owned_dir`
  refuses a link, another owner, a directory group or others may write, or a parent they may write
  without the sticky bit.

Every refusal is UnsafePath: one line naming the path and why. A missing file stays an OSError
(FileNotFoundError) for the caller. Standard library only: the hostile tests run it under Debian's
/usr/bin/python3 as well as the venv's interpreter.

Its parts: limits.py (link rules, size caps, UnsafePath), resolve.py (open beneath a directory),
read.py (capped reads and hashes), staging.py (owned directories, Staging, entries).

May import: errors (a basic module).
"""
from __future__ import annotations

from stackproof.files.limits import (CHUNK, LINKS_BENEATH, LINKS_REFUSED, MAX_ARCHIVE, MAX_FIGURE,
                                     MAX_LINK_HOPS, MAX_OUTPUT, MAX_RECORD, NO_OPENAT2_VAR, TAIL_BYTES,
                                     UnsafePath)
from stackproof.files.resolve import open_beneath, open_dir, open_file, open_path, openat2_available
from stackproof.files.read import open_in, read_bytes, read_in, read_tail, read_text, sha256_beneath, sha256_of
from stackproof.files.staging import Staging, check_owned_dir, check_parents, entry_stat, remove_entry, remove_specials

__all__ = ["CHUNK", "LINKS_BENEATH", "LINKS_REFUSED", "MAX_ARCHIVE", "MAX_FIGURE", "MAX_LINK_HOPS", "MAX_OUTPUT",
           "MAX_RECORD", "NO_OPENAT2_VAR", "TAIL_BYTES", "UnsafePath", "open_beneath", "open_dir", "open_file",
           "open_path", "openat2_available", "open_in", "read_bytes", "read_in", "read_tail", "read_text",
           "sha256_beneath", "sha256_of", "Staging", "check_owned_dir", "check_parents", "entry_stat", "remove_entry",
           "remove_specials"]
