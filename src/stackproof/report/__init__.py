"""`stackproof report`: compare stacks (or sessions) from ReFrame results, with a verdict per benchmark.

Inputs: ReFrame JSON run reports (`reframe --report-file`, or what `reframe-tests/run.py` leaves), or
sessions of the results database; `--compare` finds them in the database. Outputs, in one directory:
`report.html` (self-contained), `report.md` (figures in img/) and `report.json` (the numbers).

  rows.py      read reports/sessions once into cases; labels and sessions; rows of samples
  stats.py     medians, spread, Hodges-Lehmann ratio with an exact Mann-Whitney interval, the sequential design
  verdict.py   the per-metric call and the verdict table (first in the report); node checks; bandwidth
               as a fraction of the memory-copy bandwidth
  runinfo.py   what the acceptance driver recorded: provenance per stack, harness vs benchmark time
  measures.py  message-size curves (OSU, NetPIPE) and system noise (Table IV, Fig. 2)
  sections.py  the section model, the other sections, and EXTRA_SECTIONS (the extension point)
  curves.py, plots.py   curve extraction and figures
  render.py + templates/  one Jinja2 template per format
  compare.py   finding the sessions for --compare in the results database
  cli.py       the `stackproof report` command
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import StackproofError
from ..noise.scale.render import report_section as noise_at_scale_section
from .cli import register
from .measures import curves_section, noise_rows, noise_section
from .render import write
from .rows import Case, load_run, load_session, perf_rows, resolve_labels, sessions_of
from .sections import (EXTRA_SECTIONS, Context, Section, Table, failed_section, identity_section,
                       references_section, skipped_section, summary_section)
from .stats import design_from
from .verdict import bandwidth_fraction_section, node_checks_section, verdict_section
from .runinfo import provenance_section, run_info, timing_section

__all__ = ["build", "load_run", "load_session", "register", "Case", "Context", "Section", "Table",
           "EXTRA_SECTIONS", "noise_rows"]


def who_stole_the_time_section(ctx) -> Section | None:
    """`stackproof noise hunt` results kept next to the report (<report dir>/hunt/<profile>/hunt.json)."""
    from ..noise.hunt import hunt_report_section
    found = hunt_report_section(Path(ctx.img).parent / "hunt")
    if found is None:
        return None
    return Section(title=found.title, markdown=found.markdown, html=found.html, figures=list(found.figures))


def _noise_at_scale(ctx) -> Section | None:
    """The noise-at-scale section with one sentence saying why a relative slowdown falls with scale."""
    sec = noise_at_scale_section(ctx)
    if sec is None:
        return None
    why = ("Why the linear allreduce's relative slowdown falls as nodes grow: its own cost grows with the "
           "node count (the root takes one contribution after another), while a detour delays one contribution "
           "by about the same absolute time, and a late contribution waits in the root's queue instead of "
           "delaying everyone; the same absolute loss over a much longer collective is a smaller percentage. "
           "The binomial tree's own cost barely grows (log2 of the nodes), so once nearly every iteration "
           "meets some node's detour its relative slowdown stays high. Compare absolute iteration times too, "
           "not only slowdowns (docs/noise.md, 'Noise at scale').")
    sec.text.insert(0, why)
    sec.figures = [(f"{cap}: the slowdown each collective would suffer from this node's measured noise as "
                    "nodes grow; the linear curve falls because its own cost grows with the nodes faster "
                    "than the noise it meets", path) for cap, path in sec.figures]
    return sec


def build(cases: list[Case], outdir: Path, title: str, baseline: str | None = None,
          extra_sections=None) -> dict:
    """Reduce the cases into rows once, build every section, write report.{html,md,json}; return the data."""
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
    builders = [verdict_section, provenance_section, timing_section, node_checks_section,
                lambda c: summary_section(c, sessions), identity_section,
                bandwidth_fraction_section, curves_section, noise_section, who_stole_the_time_section,
                _noise_at_scale, skipped_section, failed_section, references_section]
    sections = []
    for b in builders + list(EXTRA_SECTIONS if extra_sections is None else extra_sections):
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
