"""HPCC's input deck (hpccinf.txt) from one template, data/hpccinf.txt: the hpcc check and the live
build test write the same deck and differ only in its numbers. HPL reads fixed line positions, so the
values are checked here rather than trusted."""
from __future__ import annotations

from importlib import resources

from stackproof.errors import InputError

LIMIT = 10_000_000      # an HPL order or block size beyond this is a typo, not a machine


def hpcc_input(n: int, nb: int, p: int, q: int, title: str = "written by stackproof") -> str:
    """The deck for one HPL problem of order n, block nb, on a p x q process grid."""
    for name, value in (("n", n), ("nb", nb), ("p", p), ("q", q)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= LIMIT:
            raise InputError(f"HPCC input: {name}={value!r}: expected an integer in 1..{LIMIT}")
    if not title.isprintable() or len(title) > 80:
        raise InputError("HPCC input: the title must be one printable line of at most 80 characters")
    template = (resources.files("stackproof.stacks") / "data" / "hpccinf.txt").read_text()
    return template.format(title=title, n=n, nb=nb, p=p, q=q)
