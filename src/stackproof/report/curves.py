"""Curves over message size (OSU, NetPIPE): from per-size performance variables (`lat_8B`, `bw_1MiB`:
benchparse.size_label) of every launch and, for NetPIPE, from the curve each launch writes (`np.out`:
bytes, Mbps, seconds; or its stdout lines `N: BYTES bytes REPS times --> MBPS Mbps in USEC usec`) in
its directory of the test's output, read through stackproof.files (a job writes that directory)."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from stackproof import files
from stackproof.report.rows import Case, launch_samples

_SIZE_VAR = re.compile(r"^(lat|bw)_(\d+)(B|KiB|MiB|GiB)$")
_MULT = {"B": 1, "KiB": 1024, "MiB": 1 << 20, "GiB": 1 << 30}
_NP_STDOUT = re.compile(r"^\s*\d+:\s+(\d+)\s+bytes\s+\d+\s+times\s+-->\s+([\d.]+)\s+Mbps\s+in\s+([\d.]+)\s+usec")
MIN_POINTS = 3


def size_of_var(var: str) -> tuple[str, int] | None:
    m = _SIZE_VAR.match(var)
    return (m.group(1), int(m.group(2)) * _MULT[m.group(3)]) if m else None


def _output_text(outputdir: str, name: str) -> str | None:
    """A job's output file, read through stackproof.files (the output directory is a job's, or a
    virtual cluster's share): None when it is not there or not a plain file of it."""
    try:
        return files.read_in(outputdir, name).decode(errors="replace")
    except (OSError, files.UnsafePath):
        return None


def read_netpipe(outputdir: str | None) -> list[tuple[int, float, float]]:
    """[(bytes, MB/s, one-way latency us)] from a NetPIPE run's output directory, [] when absent."""
    if not outputdir:
        return []
    pts = []
    text = _output_text(outputdir, "np.out")
    for line in (text or "").splitlines():
        f = line.split()
        try:
            size, mbps, t = int(float(f[0])), float(f[1]), float(f[2])
        except (IndexError, ValueError):
            continue
        pts.append((size, mbps / 8.0, t * 1e6 if t < 1.0 else t))
    if not pts:
        for line in (_output_text(outputdir, "stdout") or _output_text(outputdir, "rfm_job.out") or "").splitlines():
            m = _NP_STDOUT.match(line)
            if m:
                pts.append((int(m.group(1)), float(m.group(2)) / 8.0, float(m.group(3))))
    return pts


def launch_dirs(c: Case) -> list[str]:
    """Where each of a case's launches left its files: its own directory under the case's output
    (blocks of launches), else the output directory itself."""
    if not c.outputdir:
        return []
    if c.launches:
        return [str(Path(c.outputdir) / ln["dir"]) for ln in c.launches if isinstance(ln.get("dir"), str)
                and ln["dir"] and not Path(ln["dir"]).is_absolute() and ".." not in Path(ln["dir"]).parts]
    return [c.outputdir]


def curves(cases: list[Case]) -> dict[tuple, dict[str, dict[int, list[float]]]]:
    """{(check, case, system, kind, unit): {stack: {bytes: [values over launches]}}}, kind = latency|bandwidth."""
    out: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for c in cases:
        if c.result != "pass":
            continue
        for var, value, _pair, _block in launch_samples(c):
            s = size_of_var(var)
            if s:
                kind = "latency" if s[0] == "lat" else "bandwidth"
                out[(c.check, c.name, c.system, kind, c.perf[var]["unit"] or "")][c.stack][s[1]].append(value)
        if c.check.lower().startswith("netpipe"):
            for size, mbs, us in (p for d in launch_dirs(c) for p in read_netpipe(d)):
                out[(c.check, c.name + " (curve)", c.system, "bandwidth", "MB/s")][c.stack][size].append(mbs)
                out[(c.check, c.name + " (curve)", c.system, "latency", "us")][c.stack][size].append(us)
    return {k: v for k, v in out.items() if max(len(s) for s in v.values()) >= MIN_POINTS}


def headline_var(var: str, sizes_of_check: set[int]) -> bool:
    """In the verdict table, keep curve variables only at 8 B and 1 MiB (else the smallest and largest)."""
    s = size_of_var(var)
    if not s:
        return True
    wanted = {8, 1 << 20} & sizes_of_check or {min(sizes_of_check), max(sizes_of_check)}
    return s[1] in wanted


def human_bytes(n: int) -> str:
    for unit, m in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1024)):
        if n >= m and n % m == 0:
            return f"{n // m} {unit}"
    return f"{n} B"
