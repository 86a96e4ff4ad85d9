"""CPU sets: hwloc bitmap strings and Linux/hwloc list strings ("0-3,8,10-11").

Bad input raises CpuListError, an InputError that is also a ValueError (callers catch ValueError to
add the file and field); CPU ids above MAX_CPU are refused so a list such as "0-999999999" or a
10000-word bitmap cannot exhaust memory."""
from typing import Iterable

from stackproof.errors import InputError

MAX_CPU = 65535          # Linux NR_CPUS tops out at 8192 today; 64 Ki leaves room, 1e9 does not
_MAX_DIGITS = 9


class CpuListError(InputError, ValueError):
    """A CPU list or bitmap that is not one (bad id, bad range, id above MAX_CPU)."""


def _cpu_id(text: str, whole: str) -> int:
    text = text.strip()
    if not text.isascii() or not text.isdigit() or len(text) > _MAX_DIGITS:
        raise CpuListError(f"bad CPU id {text!r} in {whole[:40]!r}")
    value = int(text)
    if value > MAX_CPU:
        raise CpuListError(f"CPU id {value} above {MAX_CPU} in {whole[:40]!r}")
    return value


def parse_hwloc_bitmap(text: str) -> set[int]:
    """Parse an hwloc XML bitmap such as "0x0000ffff,,0xffffff00" (32-bit words, most significant
    first, an empty word is zero). A leading "0xf...f" word (infinite set) is rejected: node
    descriptions need finite sets."""
    text = text.strip()
    if not text:
        raise CpuListError("empty bitmap")
    if text.startswith("0xf...f"):
        raise CpuListError(f"infinite bitmap {text!r}")
    words = text.split(",")
    if len(words) > (MAX_CPU + 1) // 32:
        raise CpuListError(f"bitmap of {len(words)} words: CPU ids above {MAX_CPU}")
    bits: set[int] = set()
    for pos, word in enumerate(reversed(words)):
        word = word.strip()
        if word in ("", "0x0"):
            continue
        if not word.startswith("0x") or len(word) > 10:
            raise CpuListError(f"bad bitmap word {word[:20]!r} in {text[:40]!r}")
        value = int(word, 16)
        base = 32 * pos
        bit = 0
        while value:
            if value & 1:
                bits.add(base + bit)
            value >>= 1
            bit += 1
    return bits


def parse_list(text: str) -> set[int]:
    """Parse "0-3,8,10-11" (empty string = empty set)."""
    out: set[int] = set()
    if isinstance(text, int) and not isinstance(text, bool):
        text = str(text)                  # a YAML list "0" written without quotes
    if not isinstance(text, str):
        raise CpuListError(f"CPU list {text!r} is not a string")
    text = text.strip()
    if not text:
        return out
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            lo_i, hi_i = _cpu_id(lo, text), _cpu_id(hi, text)
            if hi_i < lo_i:
                raise CpuListError(f"bad range {part!r}")
            out.update(range(lo_i, hi_i + 1))
        else:
            out.add(_cpu_id(part, text))
    return out


def format_list(cpus: Iterable[int], sep: str = ",") -> str:
    """Compress a set of ints into "0-3,8,10-11" (sorted, ranges for runs of 2 or more)."""
    items = sorted(set(cpus))
    parts = []
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        parts.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return sep.join(parts)


def format_mask(cpus: Iterable[int]) -> str:
    """Hex mask in the form irqbalance and taskset accept (e.g. 0x3, comma-grouped per 32 bits)."""
    value = 0
    for c in cpus:
        value |= 1 << c
    hexstr = f"{value:x}"
    groups = []
    while hexstr:
        groups.insert(0, hexstr[-8:])
        hexstr = hexstr[:-8]
    return ",".join(groups) if groups else "0"
