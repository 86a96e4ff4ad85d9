"""Building the report: reduce the cases into rows once, build every section (the noise sections
wrap plain data that noise/ writes), write report.{html,md,json}."""
from __future__ import annotations

import json
from pathlib import Path

from stackproof.errors import StackproofError
from stackproof.noise.scale.render import MEANING, loggp_line, slowdown_table
from stackproof.report.measures import curves_section, node_section, noise_rows
from stackproof.report.render import write
from stackproof.report.rows import Case, load_run, load_session, perf_rows, resolve_labels, sessions_of
from stackproof.report.sections import (Context, Section, Table, failed_section, identity_section,
                       references_section, skipped_section, summary_section)
from stackproof.report.stats import design_from
from stackproof.report.membw import bandwidth_fraction_section
from stackproof.report.verdict import method_section, verdict_section
from stackproof.report.runinfo import provenance_section, run_info, timing_section



def who_stole_the_time_section(ctx) -> Section | None:
    """`stackproof noise hunt` results kept next to the report (<report dir>/hunt/<profile>/hunt.json)."""
    from stackproof.noise.hunt import hunt_report_section
    found = hunt_report_section(Path(ctx.img).parent / "hunt")
    if found is None:
        return None
    return Section(title=found.title, markdown=found.markdown, html=found.html, figures=list(found.figures))


def noise_at_scale_section(ctx) -> Section | None:
    """The "Noise at scale" section from the projection `make acceptance` writes to <report dir>/project/
    (noise/scale's table, one sentence on why a relative slowdown falls with scale, the figure); None
    when it did not run."""
    outdir = Path(ctx.img).parent / "project"
    doc_path = outdir / "project.json"
    if not doc_path.is_file():
        return None
    doc = json.loads(doc_path.read_text())
    why = ("Why the linear allreduce's relative slowdown falls as nodes grow: its own cost grows with the "
           "node count (the root takes one contribution after another), while a detour delays one contribution "
           "by about the same absolute time, and a late contribution waits in the root's queue instead of "
           "delaying everyone; the same absolute loss over a much longer collective is a smaller percentage. "
           "The binomial tree's own cost barely grows (log2 of the nodes), so once nearly every iteration "
           "meets some node's detour its relative slowdown stays high. Compare absolute iteration times too, "
           "not only slowdowns (docs/noise.md, 'Noise at scale').")
    text = [why, f"Source: {doc['source']}. {loggp_line(doc)}.", MEANING,
            "Model and validation: docs/noise.md, 'Noise at scale'."]
    figure = outdir / "project-slowdown.png"
    caption = ("Projected slowdown versus node count: the slowdown each collective would suffer from this node's "
               "measured noise as nodes grow; the linear curve falls because its own cost grows with the nodes "
               "faster than the noise it meets")
    return Section(title="Noise at scale (projection)", text=text, tables=[Table(*slowdown_table(doc))],
                   figures=[(caption, figure)] if figure.is_file() else [])


def build(cases: list[Case], outdir: Path, title: str, baseline: str | None = None,
          extra_sections=()) -> dict:
    """Reduce the cases into rows once, build every section, write report.{html,md,json}; return the data.
    `extra_sections`: callables f(ctx) -> Section | None, appended after the report's own sections."""
    if not cases:
        raise StackproofError("no test cases to report")
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    img = outdir / "img"
    img.mkdir(exist_ok=True)
    stacks, notes = resolve_labels(cases)
    if baseline is None:
        baseline = stacks[0]
    elif baseline not in stacks:
        raise StackproofError(f"baseline {baseline!r} is not a stack of these results (stacks: {', '.join(stacks)})")
    sessions = sessions_of(cases)
    info = run_info(sessions)
    try:
        design = design_from(info.get("design"))
    except ValueError as exc:
        raise StackproofError(f"{sessions[0].origin}: stackproof.{exc}") from None
    ctx = Context(cases=cases, rows=perf_rows(cases), stacks=stacks, baseline=baseline, img=img, notes=notes,
                  design=design, run_info=info)
    builders = [verdict_section, method_section, provenance_section, timing_section, node_section,
                lambda c: summary_section(c, sessions), identity_section,
                bandwidth_fraction_section, curves_section, who_stole_the_time_section,
                noise_at_scale_section, skipped_section, failed_section, references_section]
    sections = []
    for b in builders + list(extra_sections):
        s = b(ctx)
        if s is not None:
            s.anchor = s.anchor or f"s{len(sections)}"
            sections.append(s)
    intro = (f"Stacks: {', '.join(stacks)} (baseline {baseline}); {len(cases)} test cases from "
             f"{len(sessions)} session(s).")
    write(outdir, title, intro, sections)
    data = {"stacks": stacks, "baseline": baseline, "notes": notes,
            "sessions": [s.__dict__ for s in sessions], **ctx.data,
            "noise": ctx.data.get("noise", []),
            "results": [[c.stack, c.system, c.name, c.repeat, c.result, c.fail_reason] for c in cases]}
    (outdir / "report.json").write_text(json.dumps(data, indent=1, default=str))
    return data


# Re-exported by the package facade (stackproof.report).
__all__ = ["build", "load_run", "load_session", "noise_rows", "Case", "Context", "Section", "Table"]
