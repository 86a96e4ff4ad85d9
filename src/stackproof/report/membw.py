"""On-node bandwidth as a fraction of a memory copy of the same size measured in the same run
(MemoryBandwidth): the bound an MPI bandwidth is set against, and the copy figures the message-size
curves draw."""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from stackproof.report.calls import verdict_metrics
from stackproof.report.curves import human_bytes, size_of_var
from stackproof.report.sections import Context, Section, Table, fmt


def copy_bandwidth(ctx: Context) -> dict[tuple[str, str], float]:
    """(stack, system) -> median DRAM-sized memory-copy bandwidth (MB/s, copy_bw) measured in the same run."""
    return {k: v[None] for k, v in copy_by_size(ctx).items() if None in v}


def copy_by_size(ctx: Context) -> dict[tuple[str, str], dict]:
    """(stack, system) -> {buffer bytes: median copy bandwidth (MB/s)}: copy_<n>MiB / copy_<n>KiB at
    their size (cache-resident), copy_bw under None (the DRAM-sized copy)."""
    out: dict = defaultdict(dict)
    for r in ctx.rows:
        if not r.check.startswith("MemoryBandwidth") or not r.var.startswith("copy_bw"):
            continue
        size = None if r.var == "copy_bw" else _copy_size(r.var[len("copy_bw_"):])
        if r.var != "copy_bw" and size is None:
            continue
        for s, v in r.samples.items():
            out[(s, r.system)][size] = float(np.median(v))
    return dict(out)


def _copy_size(text: str) -> int | None:
    for unit, mult in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if text.endswith(unit) and text[:-3].isdigit():
            return int(text[:-3]) * mult
    return None


def _copy_for(copies: dict, size: int | None) -> tuple[float | None, str]:
    """The copy a message of `size` bytes is compared with: the smallest cache-resident copy at least as
    large, else the DRAM-sized one; (bandwidth, which copy)."""
    fits = sorted(b for b in copies if b is not None and size is not None and b >= size)
    if fits:
        return copies[fits[0]], f"{human_bytes(fits[0])} copy (in cache)"
    return copies.get(None), "DRAM-sized copy"


def bandwidth_fraction_section(ctx: Context) -> Section | None:
    copies = copy_by_size(ctx)
    ctx.data["copy_bw"] = {f"{s}@{sysname}": {("dram" if b is None else str(b)): v for b, v in per.items()}
                           for (s, sysname), per in copies.items()}
    rows = []
    for r in verdict_metrics(ctx.rows):
        if not r.var.startswith("bw") or r.check.startswith("MemoryBandwidth") or r.unit != "MB/s":
            continue
        size = (size_of_var(r.var) or (None, None))[1]
        for s in ctx.stacks:
            if not r.samples.get(s):
                continue
            med = float(np.median(r.samples[s]))
            mine = copies.get((s, r.system))
            src = s
            if not mine:          # the stack did not run the copy check: the median of the others' copies
                pooled = defaultdict(list)
                for (st, sysname), per in copies.items():
                    if sysname == r.system:
                        for b, v in per.items():
                            pooled[b].append(v)
                mine = {b: float(np.median(v)) for b, v in pooled.items()}
                src = "other stacks" if mine else None
            lim, which = _copy_for(mine or {}, size)
            if lim and med >= lim:        # e.g. a site's MemoryBandwidth without the cache-resident copy
                which += " (not a bound at this size: no copy of the message's size measured)"
            rows.append([r.case, r.var, s, fmt(med), fmt(lim) if lim else ("not measured", "nm"),
                         which if lim else "-", f"{100 * med / lim:.1f} %" if lim else "-", src or "-"])
    if not rows:
        return None
    text = ["On-node bandwidth (two ranks on one node) against a memory copy of the same size measured in the "
            "same run (MemoryBandwidth: every rank copying its own buffer at once, read and write bytes counted "
            "like STREAM Copy): a cache-resident copy for messages that fit in cache (copy_bw_1MiB), the DRAM-sized "
            "copy (copy_bw, 64 MiB) for larger ones. Moving a message reads and writes each of its bytes at least "
            "once, so an MPI bandwidth stays below the copy's figure (at most half of it where the MPI library "
            "copies as fast as memcpy): the bound the fraction is taken of. A row whose copy is no bound for its size (no copy of "
            "that size measured) says so."]
    if not copies:
        text.append("No MemoryBandwidth check ran, so the fraction is not measured.")
    return Section("Bandwidth against a memory copy of the same size", text=text, anchor="membw", tables=[
        Table(["benchmark", "metric", "stack", "median (MB/s)", "memory copy (MB/s)", "copy", "fraction",
               "copy measured by"], rows)])
