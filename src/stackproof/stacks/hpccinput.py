"""HPCC's input deck (hpccinf.txt) from one template, data/hpccinf.txt: the hpcc check and the live
build test write the same deck and differ only in its numbers. HPL reads fixed line positions, so the
values are checked here rather than trusted."""
from __future__ import annotations

from importlib import resources

from stackproof.errors import InputError

LIMIT = 10_000_000      # an HPL order or block size beyond this is a typo, not a machine


# HPL reads at most 20 problem sizes (MAXTESTS), but HPCC 1.5.0's PTRANS, sized from the same deck,
# fails to allocate ("Failed to allocate 4293918785 doubles", PTRANS_GBs=0) with 15 or more (measured)
MAX_REPEAT = 14


def hpcc_input(n: int, nb: int, p: int, q: int, title: str = "written by stackproof", repeat: int = 1) -> str:
    """The deck for an HPL problem of order n, block nb, on a p x q process grid, solved `repeat` times
    in one launch (the same N listed `repeat` times: HPL runs each and prints one WR line per run; HPCC
    sizes its other tests from the largest N, so they do not grow)."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= MAX_REPEAT:
        raise InputError(f"HPCC input: repeat={repeat!r}: expected an integer in 1..{MAX_REPEAT}")
    for name, value in (("n", n), ("nb", nb), ("p", p), ("q", q)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= LIMIT:
            raise InputError(f"HPCC input: {name}={value!r}: expected an integer in 1..{LIMIT}")
    if not title.isprintable() or len(title) > 80:
        raise InputError("HPCC input: the title must be one printable line of at most 80 characters")
    template = (resources.files("stackproof.stacks") / "data" / "hpccinf.txt").read_text()
    return template.format(title=title, count=repeat, ns=" ".join([str(n)] * repeat), nb=nb, p=p, q=q)
