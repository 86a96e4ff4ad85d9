"""LogGP message costs for the projection, and their fit from a stack's measured curve.

LogGP (Alexandrov et al. 1995): a message of m bytes costs the sender o, travels L + (m-1) G, and
costs the receiver o; a process starts two messages at least g apart. A ping-pong measures the
half round trip T(m) = 2o + L + (m-1) G: the slope of T over m is G, the intercept a = 2o + L. A
ping-pong cannot separate o from L, so the fit takes the split LogGPS-style measurements usually
show on a NIC with offloaded transport: the two overheads together equal the wire latency
(o = a/4, L = a/2) and g = o. `--loggp` overrides any of the four.

Defaults (no curve measured): L = 1.0 us, o = 0.3 us, g = 0.3 us, G = 0.08 ns/B (12.5 GB/s), the
order of an InfiniBand EDR/HDR network; documented in docs/noise.md.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from stackproof.errors import StackproofError


class LogGPError(StackproofError):
    """Parameters or a curve that cannot give message costs."""


@dataclass(frozen=True)
class LogGP:
    L: float = 1.0        # us, wire latency
    o: float = 0.3        # us, CPU overhead per message end
    g: float = 0.3        # us, gap between consecutive messages of one process
    G: float = 0.00008    # us per byte (0.08 ns/B = 12.5 GB/s)
    source: str = "defaults (docs/noise.md)"

    def __post_init__(self):
        for name in ("L", "o", "g", "G"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise LogGPError(f"LogGP {name} must be a finite number >= 0, got {v!r}")

    def wire(self, size: int) -> float:
        """Time from the end of the sender's overhead to the message's arrival."""
        return self.L + max(size - 1, 0) * self.G

    def as_dict(self) -> dict:
        return asdict(self)


def fit(sizes, times_us, source: str) -> LogGP:
    """LogGP from a half-round-trip curve: sizes in bytes, times in us (weighted least squares on
    relative error, so the 8-byte latency weighs as much as the 4 MiB transfer)."""
    m = np.asarray(sizes, dtype=np.float64)
    t = np.asarray(times_us, dtype=np.float64)
    ok = np.isfinite(m) & np.isfinite(t) & (m >= 0) & (t > 0)
    m, t = m[ok], t[ok]
    if m.size < 2 or np.unique(m).size < 2:
        raise LogGPError(f"{source}: need the time of at least two message sizes to fit LogGP, got {m.size}")
    slope, intercept = np.polyfit(np.maximum(m - 1, 0), t, 1, w=1.0 / t)
    if slope < 0:
        slope = 0.0
    a = max(float(intercept), float(t[np.argmin(m)]) * 0.5, 1e-3)
    return LogGP(L=a / 2, o=a / 4, g=a / 4, G=float(slope), source=source)


def from_bandwidth(sizes, mbytes_per_s, source: str) -> LogGP:
    """A bandwidth curve (MB/s = bytes/us) read as the time per message, m / bw."""
    m = np.asarray(sizes, dtype=np.float64)
    bw = np.asarray(mbytes_per_s, dtype=np.float64)
    keep = (bw > 0) & np.isfinite(bw)
    return fit(m[keep], m[keep] / bw[keep], source)


def override(base: LogGP, text: str) -> LogGP:
    """'L=1.5,o=0.4' (us; G in us/B, or 'BW=12.5GB/s' for 1/G)."""
    values = base.as_dict()
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, val = item.partition("=")
        key = key.strip()
        if not sep or key not in ("L", "o", "g", "G", "BW"):
            raise LogGPError(f"--loggp {text!r}: expected KEY=VALUE items with KEY in L, o, g, G, BW")
        try:
            if key == "BW":
                num = val.strip().lower().removesuffix("gb/s").removesuffix("gbs")
                gbps = float(num)
                if not (gbps > 0 and math.isfinite(gbps)):
                    raise ValueError
                values["G"] = 1.0 / (gbps * 1e3)
            else:
                values[key] = float(val)
        except ValueError:
            raise LogGPError(f"--loggp {item!r}: not a valid number") from None
    values["source"] = f"{base.source}, overridden by --loggp {text}"
    return LogGP(**values)
