"""The exception types for every user-facing failure: the CLI prints the message in one line and exits
2 for bad input (InputError) and 1 for any other problem the user can fix (StackproofError)."""


class StackproofError(Exception):
    """A problem the user can fix (missing package, busy port, a command that failed...)."""


class InputError(StackproofError):
    """Bad input: a file or value that is not what it may be (its shape, a field's type or range, a
    name's characters). The message names the file (or option) and the field; the CLI exits 2."""
