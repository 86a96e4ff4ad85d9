"""The report's sections, built from rows.

A section is data (title, text, tables, preformatted blocks, figures) that both templates render;
a section may also carry ready Markdown / HTML fragments. A section is built by a callable
`f(ctx) -> Section | None` (build.py lists the report's own; `build(..., extra_sections=[f])` appends
more); `ctx` is the Context below (cases, rows, stacks, baseline, image directory).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from stackproof.report.rows import Case, Row, by_key, failure_detail, why_not_measured
from stackproof.report.stats import LEVEL, Design


@dataclass
class Para:
    """A paragraph that ends with a link to a section of the same report (its anchor)."""
    text: str
    anchor: str
    link: str


@dataclass
class Table:
    header: list[str]
    rows: list[list]          # cells: str, or (str, css class)
    caption: str = ""
    folded: bool = False      # HTML: inside <details>, unfolded on click
    notes: list[str] = field(default_factory=list)   # sentences right after the table (a list)


@dataclass
class Pre:
    title: str
    text: str
    open: bool = False        # HTML: shown unfolded


@dataclass
class Section:
    title: str
    text: list = field(default_factory=list)                # paragraphs: plain text, or Para
    tables: list[Table] = field(default_factory=list)
    pre: list[Pre] = field(default_factory=list)
    figures: list[tuple[str, Path]] = field(default_factory=list)   # (caption, PNG)
    markdown: str = ""        # extra sections: a ready Markdown fragment
    html: str = ""            # ... and its HTML counterpart
    anchor: str = ""
    figures_first: bool = False


@dataclass
class Context:
    cases: list[Case]
    rows: list[Row]
    stacks: list[str]
    baseline: str
    img: Path
    notes: list[str] = field(default_factory=list)
    data: dict = field(default_factory=dict)                # report.json, filled by the builders
    design: Design = field(default_factory=lambda: Design(looks=(0,), alpha=1 - LEVEL))  # how the run sampled
    run_info: dict = field(default_factory=dict)            # the acceptance driver's record (timings, provenance)



def fmt(v, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e7 or a < 1e-3:
        return f"{v:.3e}"
    if a >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def summary_section(ctx: Context, sessions) -> Section:
    rows = []
    for s in ctx.stacks:
        mine = [c for c in ctx.cases if c.stack == s]
        n = {r: sum(1 for c in mine if c.result == r) for r in ("pass", "fail", "skip")}
        n["fail"] += sum(1 for c in mine if c.result == "abort")
        if not mine:
            status = ("not measured (no test case ran)", "nm")
        elif n["pass"] == 0 and n["fail"] == 0:
            status = (f"not measured (all {n['skip']} checks skipped: {mine[0].fail_reason})", "nm")
        elif n["pass"] == 0:
            status = (f"not measured (all {n['fail']} checks failed)", "worse")
        elif n["fail"]:
            status = (f"{n['fail']} failed", "worse")
        else:
            status = ("all ran" + (f", {n['skip']} skipped" if n["skip"] else ""), "")
        rows.append([s + (" (baseline)" if s == ctx.baseline else ""), str(n["pass"]), str(n["fail"]),
                     str(n["skip"]), status])
    sess = [[s.uuid, s.time_start, s.hostname, "+".join(sorted({c.stack for c in ctx.cases if c.session == s.uuid})),
             s.origin] for s in sessions]
    return Section("Stacks and sessions", text=list(ctx.notes), anchor="summary", tables=[
        Table(["stack", "passed", "failed", "skipped", "status"], rows),
        Table(["session", "started", "host", "stacks", "source"], sess)])


def identity_section(ctx: Context) -> Section:
    rows = []
    for s in ctx.stacks:
        libs = sorted({(c.mpi_library, c.mpi_library_path) for c in ctx.cases
                       if c.stack == s and (c.mpi_library or c.mpi_library_path)})
        if not libs:
            rows.append([s, ("not recorded (no test case reported mpi_library)", "nm"), "-"])
        for lib, path in libs:
            rows.append([s, lib or "-", path or "-"])
    text = ["The MPI library each stack really ran with, as its test cases recorded it (first line of "
            "MPI_Get_library_version on rank 0, and the resolved library path)."]
    if any(sum(1 for r in rows if r[0] == s) > 1 for s in ctx.stacks):
        text.append("A stack listed with more than one library ran different libraries in different tests.")
    return Section("MPI library per stack", text=text, tables=[Table(["stack", "MPI library", "path"], rows)],
                   anchor="identity")


def skipped_section(ctx: Context) -> Section | None:
    """One row per cause: the reason, how many test cases gave it, which stacks and which tests."""
    causes: dict[str, list[Case]] = {}
    for c in ctx.cases:
        if c.result == "skip":
            causes.setdefault(c.fail_reason or "no reason recorded", []).append(c)
    if not causes:
        return None
    rows = []
    for reason, cs in sorted(causes.items(), key=lambda kv: -len(kv[1])):
        stacks = sorted({c.stack for c in cs}, key=lambda s: ctx.stacks.index(s) if s in ctx.stacks else 99)
        tests = sorted({c.name for c in cs})
        rows.append([reason, str(len(cs)), ", ".join(stacks),
                     "; ".join(tests[:6]) + (f"; and {len(tests) - 6} more" if len(tests) > 6 else "")])
    return Section("Skipped checks", anchor="skipped", text=[
        "Skipped test cases grouped by cause: the count includes every repeat and stack."],
        tables=[Table(["reason", "test cases", "stacks", "tests"], rows)])


def failed_section(ctx: Context) -> Section | None:
    failed = [c for c in ctx.cases if c.result in ("fail", "abort")]
    if not failed:
        return None
    sec = Section("Failed checks", anchor="failed", text=[
        "Every failed test case: the full reason, the job's standard error and the last lines of its output "
        "(from the stage directory ReFrame keeps for failed tests)."])
    sec.tables.append(Table(["stack", "system", "test", "phase", "reason"],
                            [[c.stack, c.system, c.name, c.fail_phase or "", c.fail_reason] for c in failed]))
    for c in failed:
        d = failure_detail(c)
        head = f"{c.stack} {c.name} on {c.system}" + (f" (repeat {c.repeat})" if c.repeat is not None else "")
        sec.pre.append(Pre(f"{head}: reason ({d['phase'] or 'unknown'} phase)", d["reason"], open=True))
        if d["stderr"] is not None:
            sec.pre.append(Pre(f"{head}: {c.job_stderr}", d["stderr"] or "(empty)"))
        if d["stdout"] is not None:
            sec.pre.append(Pre(f"{head}: last lines of {c.job_stdout}", d["stdout"] or "(empty)"))
        if d["stderr"] is None and d["stdout"] is None:
            sec.pre.append(Pre(f"{head}: job output", f"not available here (stage directory {d['where'] or '?'})"))
    return sec


def references_section(ctx: Context) -> Section | None:
    refs = []
    for c in sorted(ctx.cases, key=lambda c: (ctx.stacks.index(c.stack), c.name, c.repeat or 0)):
        for var, pv in sorted(c.perf.items()):
            if pv["lower"] is None and pv["upper"] is None:
                continue
            res = pv["result"] or ("pass" if c.result == "pass" else c.result)
            refs.append([c.stack, c.name + (f" #{c.repeat}" if c.repeat is not None else ""), var, fmt(pv["value"]),
                         fmt(pv["ref"]), fmt(pv["lower"]), fmt(pv["upper"]), pv["unit"] or "",
                         (res, "worse" if res == "fail" else "")])
    if not refs:
        return None
    return Section("Performance against references", anchor="references", tables=[Table(
        ["stack", "test", "variable", "value", "reference", "lower", "upper", "unit", "result"], refs)])


def not_measured_reason(ctx: Context, row_key: tuple, stack: str) -> str:
    return why_not_measured(by_key(ctx.cases).get(row_key, {}).get(stack, []))
