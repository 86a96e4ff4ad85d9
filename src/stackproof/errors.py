"""One exception type for every user-facing failure: the CLI prints its message and exits 1."""


class StackproofError(Exception):
    """A problem the user can fix (bad input, missing package, busy port...)."""
