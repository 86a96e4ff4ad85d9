"""`stackproof report`: compare stacks (or sessions) from ReFrame results.

Inputs: ReFrame JSON run reports (`reframe --report-file`, or what `reframe-tests/run.py` leaves) or
sessions of the results database (read with `reframe --describe-stored-sessions`), each optionally
labelled (`--run vendor=report.json`); unlabelled test cases are grouped by their environment
(the stack). FWQ raw traces are read from each FWQ test's output directory (`fwq.dat`).

Outputs, in one directory: `report.html` (self-contained: plots embedded), `report.md` (with the
plots as PNG files beside it) and `report.json` (the extracted numbers).
  - Table IV: FWQ statistics of the most-affected core per stack and configuration, ratios to baseline
  - Fig. 2-style scatter and box plots of the FWQ traces
  - OSU latency / bandwidth against message size (log-log), both stacks, per buffer kind
  - AMG figure of merit and SW4 solve time with the % difference between stacks
  - every test case with its result and its performance variables against their references
"""
from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from .errors import StackproofError
from .paths import REPO

PROFILE_ORDER = ["baseline", "freecore-first", "freecore-last", "corespec", "clean"]


@dataclass
class Case:
    stack: str
    name: str                 # display name, e.g. "FWQNoise %profile=corespec %signature=none"
    check: str                # class name
    params: dict
    system: str
    result: str               # pass | fail | skip | abort
    fail_reason: str
    perf: dict = field(default_factory=dict)   # var -> {value, ref, lower, upper, unit, result}
    outputdir: str | None = None


def _params(display_name: str) -> dict:
    return dict(m.groups() for m in re.finditer(r"%([\w.]+)=(\S+)", display_name))


def cases_from_report(doc: dict, label: str | None, origin: str) -> list[Case]:
    if not isinstance(doc, dict) or "runs" not in doc:
        raise StackproofError(f"{origin}: not a ReFrame run report (no 'runs')")
    out = []
    # With --max-retries a case appears in several runs: the last run has the final verdict.
    final: dict[tuple, dict] = {}
    for run in doc["runs"]:
        for tc in run.get("testcases", []):
            final[(tc.get("unique_name") or tc["name"], tc.get("system"), tc.get("partition"), tc.get("environ"))] = tc
    for tc in final.values():
        display = tc.get("display_name") or tc["name"]
        perf = {}
        for key, vals in (tc.get("perfvalues") or {}).items():
            if not vals:
                continue
            value, ref, lo, hi, unit = vals[:5]
            perf[key.split(":")[-1]] = {"value": value, "ref": ref, "lower": lo, "upper": hi, "unit": unit,
                                        "result": vals[5] if len(vals) > 5 else None}
        out.append(Case(stack=label or tc.get("environ") or "?", name=display, check=display.split()[0],
                        params=_params(display), system=f"{tc.get('system')}:{tc.get('partition')}",
                        result=tc.get("result") or ("fail" if tc.get("fail_phase") else "pass"),
                        fail_reason=tc.get("fail_reason") or "", perf=perf, outputdir=tc.get("outputdir")))
    return out


def load_run(spec: str) -> list[Case]:
    label, _, path = spec.rpartition("=") if "=" in spec else ("", "", spec)
    p = Path(path)
    if not p.is_file():
        raise StackproofError(f"run report not found: {p}")
    try:
        doc = json.loads(p.read_text())
    except ValueError as exc:
        raise StackproofError(f"{p}: not JSON: {exc}") from None
    return cases_from_report(doc, label or None, str(p))


def load_session(spec: str) -> list[Case]:
    label, _, uuid = spec.rpartition("=") if "=" in spec else ("", "", spec)
    reframe = shutil.which("reframe", path=os.path.dirname(sys.executable)) or shutil.which("reframe")
    if reframe is None:
        raise StackproofError("reframe not found (make venv)")
    proc = subprocess.run([reframe, "-C", str(REPO / "reframe-tests/config/site.py"),
                           f"--describe-stored-sessions={uuid}"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise StackproofError(f"session {uuid}: {proc.stderr.strip()[-300:]}")
    try:
        docs = json.loads(proc.stdout)
    except ValueError:
        raise StackproofError(f"session {uuid}: unexpected output from reframe") from None
    docs = docs if isinstance(docs, list) else [docs]
    return [c for d in docs for c in cases_from_report(d, label or None, f"session {uuid}")]


# ---- analysis ------------------------------------------------------------------------------------

def noise_rows(cases: list[Case]) -> list[dict]:
    """Table IV: the most-affected core's statistics per stack, configuration and signature."""
    rows = []
    for c in cases:
        if c.check != "FWQNoise" or c.result != "pass" or "std" not in c.perf:
            continue
        rows.append({"stack": c.stack, "profile": c.params.get("profile", "?"),
                     "signature": c.params.get("signature", "none"), "system": c.system,
                     **{k: c.perf[k]["value"] for k in ("min", "mean", "max", "std", "noise_fraction") if k in c.perf},
                     "trace": _trace_path(c)})
    order = {p: i for i, p in enumerate(PROFILE_ORDER)}
    rows.sort(key=lambda r: (r["stack"], r["system"], r["signature"] != "none", r["signature"],
                             order.get(r["profile"], 99)))
    for r in rows:
        base = next((b for b in rows if b["stack"] == r["stack"] and b["system"] == r["system"]
                     and b["signature"] == r["signature"] and b["profile"] == "baseline"), None)
        r["std_ratio"] = (r["std"] / base["std"]) if base and base.get("std") else None
    return rows


def _trace_path(c: Case) -> str | None:
    for d in (c.outputdir,):
        if d and (Path(d) / "fwq.dat").is_file():
            return str(Path(d) / "fwq.dat")
    return None


def comparisons(cases: list[Case], checks: tuple[str, ...]) -> list[dict]:
    """Performance variables of the same test case side by side across stacks, % difference of
    each stack to the first one."""
    table: dict[tuple, dict] = defaultdict(dict)
    for c in cases:
        if c.check not in checks or c.result != "pass":
            continue
        for var, pv in c.perf.items():
            key = (c.check, re.sub(r"\s*/\w+$", "", c.name), c.system, var, pv["unit"])
            table[key][c.stack] = pv["value"]
    rows = []
    for (check, name, system, var, unit), values in sorted(table.items()):
        rows.append({"check": check, "case": name, "system": system, "var": var, "unit": unit, "values": values})
    return rows


def pct(a, b):
    return None if (a is None or not b) else 100.0 * (a - b) / b


def osu_series(cases: list[Case]) -> dict:
    """{(benchmark, buffers): {stack: [(size, value, unit)]}}"""
    out: dict = defaultdict(lambda: defaultdict(list))
    for c in cases:
        if c.check != "OSUBenchmark" or c.result != "pass":
            continue
        key = (c.params.get("benchmark", "?"), c.params.get("buffers", "host"))
        for var, pv in c.perf.items():
            m = re.match(r"(lat|bw)_(\d+)B$", var)
            if m:
                out[key][c.stack].append((int(m.group(2)), pv["value"], pv["unit"]))
    for key in out:
        for stack in out[key]:
            out[key][stack].sort()
    return out


# ---- plots ---------------------------------------------------------------------------------------

def _osu_plot(key, series, path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    unit = ""
    for stack, pts in sorted(series.items()):
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=stack)
        unit = pts[0][2]
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(unit)
    ax.set_title(f"{key[0]} ({key[1]} buffers)")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _fwq_plots(rows: list[dict], outdir: Path) -> list[tuple[str, Path]]:
    from . import noise
    from .noise import plot
    plots = []
    groups = defaultdict(list)
    for r in rows:
        if r["trace"]:
            groups[(r["stack"], r["system"], r["signature"])].append(r)
    for (stack, system, sig), rs in sorted(groups.items()):
        traces = []
        for r in rs:
            try:
                traces.append(noise.load(r["trace"], label=r["profile"]))
            except StackproofError as exc:
                print(f"report: skipping {r['trace']}: {exc}", file=sys.stderr)
        if not traces:
            continue
        slug = re.sub(r"[^\w.-]+", "_", f"fwq-{stack}-{system}-{sig}")
        plots.append((f"FWQ samples per core, {stack} on {system}, injected signature {sig}",
                      plot.plot_compare(traces, outdir / f"{slug}-scatter.png")))
        for t in traces:
            plots.append((f"FWQ per-core box plot, {stack} {t.name()} ({sig})",
                          plot.plot_box(t, outdir / f"{slug}-{t.name()}-box.png")))
    return plots


# ---- rendering -----------------------------------------------------------------------------------

def _fmt(v, digits=3):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}" if abs(v) >= 1e5 or (v and abs(v) < 1e-3) else f"{v:.{digits}f}"
    return str(v)


def _md_table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def build(cases: list[Case], outdir: Path, title: str) -> dict:
    outdir.mkdir(parents=True, exist_ok=True)
    img = outdir / "img"
    img.mkdir(exist_ok=True)
    stacks = sorted({c.stack for c in cases})
    sections: list[tuple[str, str, list[tuple[str, Path]]]] = []   # (title, markdown body, plots)

    counts = [[s] + [sum(1 for c in cases if c.stack == s and c.result == r) for r in ("pass", "fail", "skip")]
              for s in stacks]
    failures = [[c.stack, c.system, c.name, c.fail_reason.splitlines()[0][:160] if c.fail_reason else ""]
                for c in cases if c.result == "fail"]
    body = _md_table(["stack", "passed", "failed", "skipped"], counts)
    if failures:
        body += "\n\nFailures:\n\n" + _md_table(["stack", "system", "test", "reason"], failures)
    sections.append(("Summary", body, []))

    nrows = noise_rows(cases)
    if nrows:
        table = [[r["stack"], r["system"], r["signature"], r["profile"]]
                 + [r.get(k, 0) / 1e3 if k in r else None for k in ("min", "mean", "max", "std")]
                 + [r.get("noise_fraction"), r.get("std_ratio")] for r in nrows]
        body = ("Statistics of the most-affected core (largest standard deviation), as in the paper's "
                "Table IV; times in milliseconds.\n\n"
                + _md_table(["stack", "system", "injected", "configuration", "min", "mean", "max", "std",
                             "noise fraction", "std / baseline"], table))
        sections.append(("System noise (Table IV)", body, _fwq_plots(nrows, img)))

    osu = osu_series(cases)
    if osu:
        plots, rows = [], []
        for key, series in sorted(osu.items()):
            slug = re.sub(r"[^\w.-]+", "_", f"osu-{key[0]}-{key[1]}")
            plots.append((f"{key[0]}, {key[1]} buffers", _osu_plot(key, series, img / f"{slug}.png")))
            sizes = sorted({p[0] for pts in series.values() for p in pts})
            for size in [s for s in sizes if s in (sizes[0], 8, 1024, 65536, sizes[-1])]:
                vals = {st: next((p[1] for p in pts if p[0] == size), None) for st, pts in series.items()}
                row = [key[0], key[1], size] + [vals.get(s) for s in stacks]
                if len(stacks) == 2:
                    row.append(pct(vals.get(stacks[1]), vals.get(stacks[0])))
                rows.append(row)
        header = ["benchmark", "buffers", "bytes"] + stacks + ([f"{stacks[1]} vs {stacks[0]} (%)"] if len(stacks) == 2 else [])
        sections.append(("Messaging (OSU)", _md_table(header, rows), plots))

    apps = comparisons(cases, ("AMGBenchmark", "SW4Benchmark"))
    if apps:
        rows = []
        for r in apps:
            if r["var"] not in ("fom", "solve_time"):
                continue
            v = [r["values"].get(s) for s in stacks]
            rows.append([r["case"], r["system"], f"{r['var']} ({r['unit']})"] + v
                        + ([pct(v[1], v[0])] if len(stacks) == 2 else []))
        header = ["case", "system", "metric"] + stacks + ([f"{stacks[1]} vs {stacks[0]} (%)"] if len(stacks) == 2 else [])
        sections.append(("Applications (AMG figure of merit, SW4 solve time)", _md_table(header, rows), []))

    refs = []
    for c in sorted(cases, key=lambda c: (c.stack, c.name)):
        for var, pv in sorted(c.perf.items()):
            if pv["lower"] is None and pv["upper"] is None:
                continue
            refs.append([c.stack, c.name, var, pv["value"], pv["ref"], pv["lower"], pv["upper"], pv["unit"],
                         pv["result"] or ("pass" if c.result == "pass" else c.result)])
    if refs:
        sections.append(("Performance against references",
                         _md_table(["stack", "test", "variable", "value", "reference", "lower", "upper", "unit",
                                    "result"], refs), []))

    md = [f"# {title}", "", f"Stacks: {', '.join(stacks)}; {len(cases)} test cases.", ""]
    for name, body, plots in sections:
        md += [f"## {name}", "", body, ""]
        md += [f"![{cap}](img/{p.name})" for cap, p in plots]
        md.append("")
    (outdir / "report.md").write_text("\n".join(md))
    (outdir / "report.html").write_text(_html(title, stacks, cases, sections))
    data = {"stacks": stacks, "noise": nrows, "osu": {f"{k[0]}/{k[1]}": v for k, v in osu.items()},
            "apps": apps, "results": [[c.stack, c.system, c.name, c.result] for c in cases]}
    (outdir / "report.json").write_text(json.dumps(data, indent=1, default=str))
    return data


def _html(title, stacks, cases, sections) -> str:
    def table(md: str) -> str:
        out, rows = [], [l for l in md.splitlines()]
        i = 0
        while i < len(rows):
            line = rows[i]
            if line.startswith("| ") and i + 1 < len(rows) and rows[i + 1].startswith("|---"):
                head = [html.escape(x.strip()) for x in line.strip("|").split("|")]
                out.append("<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>")
                i += 2
                while i < len(rows) and rows[i].startswith("| "):
                    cells = [x.strip() for x in rows[i].strip("|").split("|")]
                    cls = lambda c: ' class="fail"' if c in ("fail", "**FAIL**") else ""
                    out.append("<tr>" + "".join(f"<td{cls(c)}>{html.escape(c)}</td>" for c in cells) + "</tr>")
                    i += 1
                out.append("</table>")
                continue
            if line.strip():
                out.append(f"<p>{html.escape(line)}</p>")
            i += 1
        return "\n".join(out)

    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>"
             "body{font-family:sans-serif;max-width:1200px;margin:2em auto;color:#222}"
             "table{border-collapse:collapse;margin:1em 0;font-size:13px}"
             "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f0f0f0}"
             "td:first-child,th:first-child{text-align:left}.fail{color:#b00;font-weight:bold}"
             "figure{display:inline-block;margin:.5em}figcaption{font-size:12px;color:#555}"
             "img{max-width:100%}</style></head><body>",
             f"<h1>{html.escape(title)}</h1><p>Stacks: {html.escape(', '.join(stacks))}; {len(cases)} test cases.</p>"]
    for name, body, plots in sections:
        parts.append(f"<h2>{html.escape(name)}</h2>")
        parts.append(table(body))
        for cap, p in plots:
            data = base64.b64encode(p.read_bytes()).decode()
            parts.append(f"<figure><img src='data:image/png;base64,{data}'><figcaption>{html.escape(cap)}"
                         "</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _cmd_report(args) -> int:
    cases = []
    for spec in args.run or []:
        cases += load_run(spec)
    for spec in args.session or []:
        cases += load_session(spec)
    if not cases:
        raise StackproofError("no test cases: give --run [LABEL=]REPORT.json or --session [LABEL=]UUID")
    data = build(cases, Path(args.output), args.title)
    print(f"report: {len(cases)} test cases, stacks {', '.join(data['stacks'])}: "
          f"{Path(args.output) / 'report.html'} and report.md", file=sys.stderr)
    return 0


def register(sub) -> None:
    p = sub.add_parser("report", help="HTML + Markdown comparison of stacks from ReFrame results")
    p.add_argument("--run", action="append", metavar="[LABEL=]REPORT.json", help="ReFrame JSON run report")
    p.add_argument("--session", action="append", metavar="[LABEL=]UUID", help="session of the results database")
    p.add_argument("-o", "--output", default="reports/latest", help="output directory")
    p.add_argument("--title", default="stackproof acceptance report")
    p.set_defaults(func=_cmd_report)
