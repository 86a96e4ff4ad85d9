"""Slurm hostlists: expand "n[1-3,5]" and compress back (one bracket level, as Slurm writes them)."""
import re

from .errors import StackproofError

_PART = re.compile(r"([^\[,]+)(?:\[([^\]]+)\])?")


def expand(hostlist: str) -> list[str]:
    names: list[str] = []
    pos = 0
    text = hostlist.strip()
    while pos < len(text):
        m = _PART.match(text, pos)
        if not m:
            raise StackproofError(f"bad hostlist {hostlist!r}")
        prefix, ranges = m.group(1), m.group(2)
        if ranges is None:
            names.append(prefix)
        else:
            for r in ranges.split(","):
                lo, _, hi = r.partition("-")
                if not lo.isdigit() or (hi and not hi.isdigit()):
                    raise StackproofError(f"bad range {r!r} in hostlist {hostlist!r}")
                width = len(lo)
                for i in range(int(lo), int(hi or lo) + 1):
                    names.append(f"{prefix}{i:0{width}d}")
        pos = m.end()
        if pos < len(text):
            if text[pos] != ",":
                raise StackproofError(f"bad hostlist {hostlist!r}")
            pos += 1
    if not names or len(set(names)) != len(names):
        raise StackproofError(f"hostlist {hostlist!r} is empty or has duplicates")
    return names


def compress(names: list[str]) -> str:
    """Compress names sharing a prefix and numeric suffix: [n1,n2,n3,x] -> n[1-3],x."""
    groups: dict[tuple[str, int], list[int]] = {}
    order: list[tuple[str, int] | str] = []
    for name in names:
        m = re.match(r"^(.*?)(\d+)$", name)
        if not m:
            order.append(name)
            continue
        key = (m.group(1), len(m.group(2)) if m.group(2).startswith("0") else 0)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(m.group(2)))
    out = []
    for key in order:
        if isinstance(key, str):
            out.append(key)
            continue
        prefix, width = key
        nums = sorted(groups[key])
        if len(nums) == 1:
            out.append(f"{prefix}{nums[0]:0{width}d}")
            continue
        runs, start, prev = [], nums[0], nums[0]
        for n in nums[1:] + [None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            runs.append(f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}")
            if n is not None:
                start = prev = n
        out.append(f"{prefix}[{','.join(runs)}]")
    return ",".join(out)
