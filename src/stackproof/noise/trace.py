"""FWQ trace files: read (and, for synthetic tests, write) the format fwq-mpi and fwq-th produce.

Layout (fwq/README.md has the full description):
  text header   "FWQ-TRACE 1\\n", "key=value" lines, one "rank=R host=.. cpu=.. ..." line per rank,
                "header_end\\n"
  payload       nranks * nsamples little-endian uint32: sample durations in timer ticks, rank-major
  trailer       16 bytes: b"FWQ-END\\n", CRC-32 (zlib) of the payload, payload word count (mod 2**32)
Sample i of a rank starts exactly at t0 + the sum of samples 0..i-1 (the sampler reads the clock once
per sample boundary), so start times are stored implicitly and losslessly.
"""
from __future__ import annotations

import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from stackproof import files
from stackproof.errors import InputError, StackproofError

MAGIC = b"FWQ-TRACE 1\n"
HEADER_END = b"header_end\n"
TRAILER_MAGIC = b"FWQ-END\n"
TRAILER_SIZE = 16
MAX_HEADER = 16 << 20  # a header longer than this is not a trace (44 ranks need ~10 KB)


class TraceError(InputError):
    """A file that is not a complete, intact FWQ trace."""


@dataclass
class Trace:
    """One FWQ run: run metadata, per-rank metadata and the samples (ticks, shape nranks x nsamples)."""
    path: str
    meta: dict
    ranks: list[dict]
    ticks: np.ndarray
    label: str = ""
    _us: np.ndarray | None = field(default=None, repr=False)

    @property
    def nranks(self) -> int:
        return self.ticks.shape[0]

    @property
    def nsamples(self) -> int:
        return self.ticks.shape[1]

    @property
    def ticks_per_second(self) -> float:
        return float(self.meta["ticks_per_second"])

    def durations_us(self) -> np.ndarray:
        """Sample durations in microseconds, float64, shape (nranks, nsamples)."""
        if self._us is None:
            self._us = self.ticks.astype(np.float64) * (1e6 / self.ticks_per_second)
        return self._us

    def starts_us(self) -> np.ndarray:
        """Sample start times in microseconds since each rank's first sample (exact cumulative sums)."""
        d = self.durations_us()
        starts = np.zeros_like(d)
        np.cumsum(d[:, :-1], axis=1, out=starts[:, 1:])
        return starts

    def starts_aligned_us(self) -> np.ndarray:
        """Start times on one time base for all ranks of a node (their t0 differences added), so
        detours on different cores can be lined up. Ranks on different hosts use the realtime t0."""
        offsets = np.array([self._t0_offset_us(r) for r in self.ranks])
        return self.starts_us() + offsets[:, None]

    def _t0_offset_us(self, rank: dict) -> float:
        same_host = all(r["host"] == self.ranks[0]["host"] for r in self.ranks)
        if same_host:
            return (int(rank["t0_ticks"]) - min(int(r["t0_ticks"]) for r in self.ranks)) * 1e6 / self.ticks_per_second
        return (int(rank["t0_realtime_ns"]) - min(int(r["t0_realtime_ns"]) for r in self.ranks)) / 1e3

    def name(self) -> str:
        return self.label or Path(self.path).stem


def _parse_header(lines: list[str], path: str) -> tuple[dict, list[dict]]:
    meta: dict = {}
    ranks: list[dict] = []
    for line in lines:
        if line.startswith("rank="):
            fields = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
            try:
                rank = {"rank": int(fields["rank"]), "host": fields.get("host", "?"),
                        "cpu": int(fields.get("cpu", -1)), "cpu_end": int(fields.get("cpu_end", -1)),
                        "cpus": fields.get("cpus", "?"), "pid": int(fields.get("pid", 0)),
                        "t0_ticks": int(fields.get("t0_ticks", 0)), "end_ticks": int(fields.get("end_ticks", 0)),
                        "t0_realtime_ns": int(fields.get("t0_realtime_ns", 0)),
                        "saturated": int(fields.get("saturated", 0))}
            except (KeyError, ValueError) as exc:
                raise TraceError(f"{path}: malformed rank line {line!r}: {exc}") from None
            ranks.append(rank)
        elif "=" in line:
            key, value = line.split("=", 1)
            meta[key] = value
        elif line.strip():
            raise TraceError(f"{path}: malformed header line {line!r}")
    for key in ("nranks", "nsamples", "ticks_per_second"):
        if key not in meta:
            raise TraceError(f"{path}: header lacks {key}=")
    try:
        for key in ("nranks", "nsamples", "work_iterations", "quantum_target_ns"):
            if key in meta:
                meta[key] = int(meta[key])
        for key in ("ticks_per_second", "calibration_error", "ns_per_iteration", "timer_resolution_ns",
                    "timer_overhead_ns", "tsc_hz"):
            if key in meta:
                meta[key] = float(meta[key])
    except ValueError as exc:
        raise TraceError(f"{path}: bad number in header: {exc}") from None
    bad = [k for k in ("ticks_per_second", "calibration_error", "ns_per_iteration", "timer_resolution_ns",
                       "timer_overhead_ns", "tsc_hz") if k in meta and not math.isfinite(meta[k])]
    if bad:
        raise TraceError(f"{path}: header value {bad[0]}={meta[bad[0]]} is not a finite number")
    if meta["nranks"] <= 0 or meta["nsamples"] <= 0 or meta["ticks_per_second"] <= 0:
        raise TraceError(f"{path}: header has nranks={meta['nranks']} nsamples={meta['nsamples']} "
                         f"ticks_per_second={meta['ticks_per_second']}")
    if len(ranks) != meta["nranks"]:
        raise TraceError(f"{path}: header announces {meta['nranks']} ranks but describes {len(ranks)}")
    return meta, ranks


def load(path: str | os.PathLike, label: str = "") -> Trace:
    """Read and verify a trace: magic, header, size (truncation), trailer and CRC-32 (corruption)."""
    path = str(path)
    try:
        f = open(path, "rb")
    except OSError as exc:
        # Not bad input but a missing or unreadable file (exit 1 at the CLI, like any OSError).
        raise StackproofError(f"cannot read {path}: {exc.strerror}") from None
    return _read(f, path, label)


def load_in(directory: str | os.PathLike, name: str = "fwq.dat", label: str = "") -> Trace:
    """`load` for a trace in a job's output directory (a job, or a virtual cluster's node on its
    share, writes it): opened through stackproof.files, no link anywhere on the way, a regular file."""
    path = os.path.join(str(directory), name)
    try:
        f, _st = files.open_in(directory, name, files.MAX_OUTPUT)
    except files.UnsafePath as exc:
        raise TraceError(str(exc)) from None
    except OSError as exc:
        raise StackproofError(f"cannot read {path}: {exc.strerror}") from None
    return _read(f, path, label)


def _read(f, path: str, label: str) -> Trace:
    with f:
        size = os.fstat(f.fileno()).st_size
        if f.read(len(MAGIC)) != MAGIC:
            raise TraceError(f"{path}: not an FWQ trace (no 'FWQ-TRACE 1' magic)")
        lines = []
        consumed = len(MAGIC)
        while True:
            raw = f.readline()
            consumed += len(raw)
            if not raw:
                raise TraceError(f"{path}: truncated inside the header (no header_end)")
            if raw == HEADER_END:
                break
            if consumed > MAX_HEADER or not raw.endswith(b"\n"):
                raise TraceError(f"{path}: corrupted header")
            try:
                lines.append(raw.decode("utf-8").rstrip("\n"))
            except UnicodeDecodeError:
                raise TraceError(f"{path}: corrupted header (not text)") from None
        meta, ranks = _parse_header(lines, path)
        nranks, nsamples = meta["nranks"], meta["nsamples"]
        payload_bytes = 4 * nranks * nsamples
        expected = consumed + payload_bytes + TRAILER_SIZE
        if size != expected:
            what = "truncated" if size < expected else "has trailing garbage"
            raise TraceError(f"{path}: {what}: {size} bytes, expected {expected} for {nranks} ranks x "
                             f"{nsamples} samples")
        payload = f.read(payload_bytes)
        trailer = f.read(TRAILER_SIZE)
    if trailer[:8] != TRAILER_MAGIC:
        raise TraceError(f"{path}: corrupted: trailer magic missing")
    crc = int.from_bytes(trailer[8:12], "little")
    words = int.from_bytes(trailer[12:16], "little")
    if words != (nranks * nsamples) & 0xFFFFFFFF:
        raise TraceError(f"{path}: corrupted: trailer counts {words} samples, header {nranks * nsamples}")
    if zlib.crc32(payload) != crc:
        raise TraceError(f"{path}: corrupted: payload CRC-32 mismatch")
    ticks = np.frombuffer(payload, dtype="<u4").reshape(nranks, nsamples)
    return Trace(path=path, meta=meta, ranks=ranks, ticks=ticks, label=label)


def write(path: str | os.PathLike, durations_us, ranks: list[dict] | None = None, *,
          ticks_per_second: float = 1e9, program: str = "synthetic", **meta) -> Path:
    """Write a trace from durations (microseconds, shape nranks x nsamples). Used for synthetic
    traces in tests and for converting other FWQ outputs; the result loads like a real run."""
    d = np.atleast_2d(np.asarray(durations_us, dtype=np.float64))
    if d.size == 0 or np.any(d < 0):
        raise TraceError("durations must be a non-empty array of non-negative times")
    ticks = np.minimum(np.rint(d * ticks_per_second / 1e6), 0xFFFFFFFF).astype("<u4")
    nranks, nsamples = ticks.shape
    ranks = ranks or [{"rank": r, "cpu": r} for r in range(nranks)]
    header = ["version=0.1.0", f"program={program}", "mode=synthetic", f"nranks={nranks}",
              f"nsamples={nsamples}", f"ticks_per_second={ticks_per_second:.3f}"]
    header += [f"{k}={v}" for k, v in meta.items()]
    for i, r in enumerate(ranks):
        header.append(f"rank={r.get('rank', i)} host={r.get('host', 'synthetic')} pid={r.get('pid', 0)} "
                      f"cpu={r.get('cpu', i)} cpu_end={r.get('cpu', i)} cpus={r.get('cpus', r.get('cpu', i))} "
                      f"t0_ticks={r.get('t0_ticks', 0)} end_ticks=0 t0_realtime_ns={r.get('t0_realtime_ns', 0)} "
                      f"saturated=0")
    payload = ticks.tobytes()
    path = Path(path)
    with open(path, "wb") as f:
        f.write(MAGIC + ("\n".join(header) + "\n").encode() + HEADER_END)
        f.write(payload)
        f.write(TRAILER_MAGIC + zlib.crc32(payload).to_bytes(4, "little")
                + ((nranks * nsamples) & 0xFFFFFFFF).to_bytes(4, "little"))
    return path
