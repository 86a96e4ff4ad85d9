"""Slurm hostlists: expand "n[1-3,5]" and compress back (one bracket level, as Slurm writes them).

Ours, not ClusterShell's NodeSet (ReFrame 4.10's nodelist_expand/nodelist_abbrev wrap it): hostlists
come from site files and are treated as hostile, and NodeSet builds every name into a Python set
before its size can be checked (a typo such as n[0-99999999999999] exhausts memory), by default
resolves `@group` through /etc/clustershell/groups.conf, whose upcalls it runs in a shell, and sorts
and de-duplicates, where Slurm keeps a hostlist's order (node addresses count up in it) and a
duplicate is an error here. Bounding, ordering and refusing those needs the parse below anyway."""
import re

from stackproof.errors import InputError

MAX_HOSTS = 65536     # a hostlist naming more hosts than this is a typo, not a cluster
MAX_DIGITS = 18       # host numbers: int() of a 100000-digit string is slow, Python refuses > 4300
MAX_LENGTH = 65536    # characters in one hostlist expression
# One host expression, as Slurm writes them: PREFIX[RANGES]SUFFIX or a plain name, where RANGES
# is N or N-M items separated by commas (zero-padded numbers keep their width).
_EXPR = re.compile(r"([A-Za-z0-9._-]*)(?:\[([0-9,-]+)\]([A-Za-z0-9._-]*))?")
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets; reject unbalanced or nested brackets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise InputError(f"bad hostlist {text!r}: nested '['")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise InputError(f"bad hostlist {text!r}: ']' without '['")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise InputError(f"bad hostlist {text!r}: '[' without ']'")
    parts.append("".join(cur))
    return parts


def expand(hostlist: str) -> list[str]:
    """Expand a Slurm hostlist ("n[1-3,5]", "a,b", "rack[01-02]-ib"); at most MAX_HOSTS names."""
    text = hostlist.strip()
    if not text:
        raise InputError("empty hostlist")
    if len(text) > MAX_LENGTH:
        raise InputError(f"hostlist of {len(text)} characters (more than {MAX_LENGTH})")
    names: list[str] = []
    for part in _split_top(text):
        m = _EXPR.fullmatch(part)
        if not m or not part:
            raise InputError(f"bad hostlist {hostlist!r}: {part!r} is not a host name or NAME[RANGES]")
        prefix, ranges, suffix = m.group(1), m.group(2), m.group(3) or ""
        if ranges is None:
            names.append(prefix)
            continue
        items = []
        for r in ranges.split(","):
            rm = _RANGE.fullmatch(r)
            if not rm:
                raise InputError(f"bad range {r!r} in hostlist {hostlist!r}")
            if max(len(rm.group(1)), len(rm.group(2) or "")) > MAX_DIGITS:
                raise InputError(f"bad range {r[:40]!r} in hostlist {hostlist[:60]!r}: numbers of more "
                                      f"than {MAX_DIGITS} digits")
            lo, hi = int(rm.group(1)), int(rm.group(2) or rm.group(1))
            if hi < lo:
                raise InputError(f"bad range {r!r} in hostlist {hostlist!r}: end before start")
            items.append((lo, hi, len(rm.group(1))))
        if len(names) + sum(hi - lo + 1 for lo, hi, _ in items) > MAX_HOSTS:
            raise InputError(f"hostlist {hostlist!r} names more than {MAX_HOSTS} hosts")
        for lo, hi, width in items:
            names += [f"{prefix}{i:0{width}d}{suffix}" for i in range(lo, hi + 1)]
    if len(set(names)) != len(names):
        raise InputError(f"hostlist {hostlist!r} has duplicates")
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
