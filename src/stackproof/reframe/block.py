"""Blocks of launches: what one stack-comparison job runs, as plain data.

A block is one ReFrame test case (one job) holding `per_stack` separate launches of every stack of
the comparison, the stacks alternating so that no stack is always first: with two stacks A,B,B,A in
an even block and B,A,A,B in an odd one; with more, forward then reversed (A,B,C,C,B,A), the next
block the other way round. The k-th launches of the stacks in block j form pair j * per_stack + k:
block j of A,B,B,A holds pairs (A1,B2) = 2j and (A4,B3) = 2j + 1. The unit of the comparison stays
one launch; the pair and block indices travel with every launch (launches.json, the check's loggable
`launches`) so the statistics can pair launches made one right after the other and see which ones
shared a job.

The launcher (stackproof.reframe.launch) runs the block file written by block_file(): per stack its
environment recipe and setup steps, per launch its directory and steps (argv lists, no shell text).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

RECORD = "launches.json"
# the tag of every check that runs in blocks (StackCheck adds it): the checks that compare stacks,
# selected by it (`make acceptance`, `reframe -t compare`)
COMPARE_TAG = "compare"
BLOCK_FILE = "block.json"
# a stack name becomes part of a directory name and of a performance variable's name
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Slot:
    """One launch of a block: its stack, position in the block (0-based), the global pair it belongs
    to and the block's global index."""
    stack: str
    position: int
    pair: int
    block: int

    @property
    def dir(self) -> str:
        return f"launch-{self.position:02d}-{self.stack}"


def check_names(stacks) -> list[str]:
    """The stacks of a block, each once, each a plain name; ValueError naming a bad one."""
    out = []
    for s in stacks:
        if not isinstance(s, str) or not _NAME.match(s):
            raise ValueError(f"block stack {s!r}: expected a stack name (letters, digits, . _ -)")
        if s in out:
            raise ValueError(f"block stack {s!r} named twice")
        out.append(s)
    if not out:
        raise ValueError("a block needs at least one stack")
    return out


def order(stacks, block: int, per_stack: int) -> list[Slot]:
    """The launches of block `block` (global index) in the order they run: round k (pair
    block * per_stack + k) runs the stacks forward when block + k is even, reversed when odd, so
    blocks start with the stacks' order and its reverse in turn."""
    stacks = check_names(stacks)
    if block < 0 or per_stack < 1:
        raise ValueError(f"block {block}, {per_stack} launches per stack: expected block >= 0 and >= 1 launch")
    slots = []
    for k in range(per_stack):
        pair = block * per_stack + k
        for s in (stacks if (block + k) % 2 == 0 else list(reversed(stacks))):
            slots.append(Slot(s, len(slots), pair, block))
    return slots


def block_file(slots: list[Slot], stacks: dict, steps) -> dict:
    """The launcher's block file: `stacks` {name: {env, modules, setup}} and, per slot, the steps
    `steps(slot)` returns (argv lists with their output files)."""
    return {"stacks": stacks, "record": RECORD,
            "launches": [{"stack": s.stack, "dir": s.dir, "block": s.block, "position": s.position, "pair": s.pair,
                          "steps": steps(s)} for s in slots]}
