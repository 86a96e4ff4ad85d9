"""NetPIPE 3.7 (NPmpi) output: latency and bandwidth over message sizes.

NPmpi writes, with `-o FILE`, one line per message size: `bytes  Mbps  seconds` (one-way time), and
on its standard error `N: B bytes R times -->  X Mbps in Y usec`. Both are read here. NetPIPE's
"Mbps" is 2^20 bits per second (netpipe.c: bits / (t * 1024 * 1024)); bandwidths are returned in
MB/s = 10^6 bytes per second, the unit OSU uses.

Metrics: lat_8B (us, the one-way time of an 8-byte message) and bw_1MiB (MB/s at 1048576 bytes),
taken at exactly those sizes (NetPIPE always measures powers of two); a size the run did not reach
is reported as missing, never interpolated.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_STDERR = re.compile(r"^\s*\d+:\s+(\d+)\s+bytes\s+\d+\s+times\s+-->\s+([0-9.eE+-]+)\s+Mbps\s+in\s+"
                     r"([0-9.eE+-]+)\s+usec\s*$")
_FILE = re.compile(r"^\s*(\d+)\s+([0-9.eE+-]+)\s+([0-9.eE+-]+)\s*$")
MBPS_TO_MBYTES = 1024 * 1024 / 8 / 1e6


@dataclass(frozen=True)
class Point:
    bytes: int
    mbps: float         # NetPIPE's Mbps (2^20 bit/s)
    usec: float         # one-way time

    @property
    def mbytes_per_s(self) -> float:
        return self.mbps * MBPS_TO_MBYTES


class NetpipeError(ValueError):
    pass


def parse(text: str) -> list[Point]:
    """Points of an NPmpi output file or its stderr lines, in the order measured."""
    points = []
    for line in text.splitlines():
        m = _STDERR.match(line)
        if m:
            points.append(Point(int(m.group(1)), float(m.group(2)), float(m.group(3))))
            continue
        m = _FILE.match(line)
        if m:
            points.append(Point(int(m.group(1)), float(m.group(2)), float(m.group(3)) * 1e6))
    if not points:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "(empty)")
        raise NetpipeError(f"no NetPIPE data lines (first line: {first[:200]!r})")
    return points


def at_size(points: list[Point], size: int) -> Point | None:
    for p in points:
        if p.bytes == size:
            return p
    return None


def metrics(points: list[Point]) -> dict[str, float | None]:
    """{'lat_8B': us or None, 'bw_1MiB': MB/s or None}."""
    small, big = at_size(points, 8), at_size(points, 1 << 20)
    return {"lat_8B": small.usec if small else None,
            "bw_1MiB": big.mbytes_per_s if big else None}


def curve(points: list[Point]) -> list[tuple[int, float, float]]:
    """(bytes, usec, MB/s) per size, for plotting or a curve file."""
    return [(p.bytes, p.usec, p.mbytes_per_s) for p in points]
