"""The acceptance report's "Who stole the time" section, from the hunt.json files under a results
directory (one per profile: e.g. results/hunt/<profile>/hunt.json).

    section = hunt_report_section("results")     # None when no hunt was run
    section.title, section.markdown, section.html, section.figures   # figures: [(caption, Path)]
"""
from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path

TITLE = "Who stole the time (noise hunt)"


@dataclass
class Section:
    title: str
    markdown: str
    html: str
    figures: list[tuple[str, Path]] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"title": self.title, "markdown": self.markdown, "html": self.html,
                "figures": [(c, str(p)) for c, p in self.figures]}


def _profile(doc: dict, path: Path) -> str:
    return (doc.get("cluster") or {}).get("profile") or path.parent.name


def hunt_report_section(results_dir) -> Section | None:
    from stackproof.noise.hunt.markdown import culprit_table
    root = Path(results_dir)
    docs = []
    for path in sorted(root.rglob("hunt.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if doc.get("status") == "ok" and doc.get("per_cpu"):
            docs.append((path, doc))
    if not docs:
        return None
    md, hx, figs = [], [], []
    for path, doc in docs:
        prof = _profile(doc, path)
        head = (f"Profile {prof}: {doc['host']}, CPUs {','.join(map(str, doc['cpus']))}, "
                f"{doc['duration_s']:g} s, recorder {doc['backend']['name']}, threshold {doc['threshold_us']:g} us")
        attributed = ", ".join(f"CPU {r['cpu']} {r['attributed_fraction']:.0%} of {r['detour_time_us'] / 1e3:.1f} ms"
                               for r in doc["per_cpu"])
        table = culprit_table(doc["per_cpu"], top=5)
        md += [f"### {head}", "", f"Detour time attributed: {attributed}.", "", table, ""]
        hx += [f"<h3>{html.escape(head)}</h3>", f"<p>Detour time attributed: {html.escape(attributed)}.</p>",
               _html_table(table)]
        png = path.parent / "timeline.png"
        if png.exists():
            figs.append((f"Detours by culprit, profile {prof}", png))
        if doc.get("table_iv"):
            rows = [f"| {r['config']} | {r.get('std_ms', 0):.4f} | {r.get('max_ms', 0):.3f} |" for r in doc["table_iv"]
                    if "config" in r]
            if rows:
                t = "| run | std ms | max ms |\n|---|---|---|\n" + "\n".join(rows)
                md += ["Before/after the proposed profile (most affected core):", "", t, ""]
                hx.append(_html_table(t))
    return Section(TITLE, "\n".join(md), "\n".join(hx), figs)


def _html_table(md: str) -> str:
    lines = [line for line in md.splitlines() if line.startswith("|")]
    if len(lines) < 2:
        return ""
    cells = [[html.escape(c.strip()) for c in line.strip("|").split("|")] for line in lines]
    head = "".join(f"<th>{c}</th>" for c in cells[0])
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in cells[2:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
