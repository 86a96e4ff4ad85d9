"""stackproof: a reproducible TOSS-style system stack and the harness that proves it."""

__version__ = "0.1.0"
