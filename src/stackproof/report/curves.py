"""Curves over message size (OSU, NetPIPE), as the checks declare them: from the per-size performance
variables of every launch that the check names in `perf_curve` (`lat_8B`, `bw_1MiB`:
benchparse.size_label) and from the whole curve a check's launches write to the file it names in
`perf_curve_file` (a CSV bytes,usec,MBps: NetPIPE's netpipe-curve.csv) in their directories of the
test's output, read through stackproof.files (a job writes that directory)."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from stackproof import files
from stackproof.report.rows import Case, is_headline, launch_samples

_SIZE_VAR = re.compile(r"^(lat|bw)_(\d+)(B|KiB|MiB|GiB)$")
_MULT = {"B": 1, "KiB": 1024, "MiB": 1 << 20, "GiB": 1 << 30}
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


def read_curve_file(directory: str | None, name: str) -> list[tuple[int, float, float]]:
    """[(bytes, MB/s, one-way latency us)] from a launch's curve file `name` (a CSV with a header line,
    then bytes,usec,MBps per message size: what a check declares in `perf_curve_file`), [] when absent."""
    if not directory or not name:
        return []
    pts = []
    for line in (_output_text(directory, name) or "").splitlines()[1:]:
        f = line.split(",")
        try:
            size, us, mbs = int(float(f[0])), float(f[1]), float(f[2])
        except (IndexError, ValueError):
            continue
        pts.append((size, mbs, us))
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
            s = size_of_var(var) if is_headline(c.perf_curve, var) else None    # the check's curve variables
            if s:
                kind = "latency" if s[0] == "lat" else "bandwidth"
                out[(c.check, c.name, c.system, kind, c.perf[var]["unit"] or "")][c.stack][s[1]].append(value)
        if c.perf_curve_file:        # the check's whole curve, per launch (NetPIPE's netpipe-curve.csv)
            for size, mbs, us in (p for d in launch_dirs(c) for p in read_curve_file(d, c.perf_curve_file)):
                out[(c.check, c.name + " (curve)", c.system, "bandwidth", "MB/s")][c.stack][size].append(mbs)
                out[(c.check, c.name + " (curve)", c.system, "latency", "us")][c.stack][size].append(us)
    return {k: v for k, v in out.items() if max(len(s) for s in v.values()) >= MIN_POINTS}


def human_bytes(n: int) -> str:
    for unit, m in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1024)):
        if n >= m and n % m == 0:
            return f"{n // m} {unit}"
    return f"{n} B"
