"""Sections with figures: size curves (OSU, NetPIPE) of the stacks overlaid, and the node checks,
opened by the paper's Table IV as a verdict (stackproof.noise.tableiv: the same table as `stackproof
noise experiment`) with Fig. 2-style FWQ plots."""
from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

from stackproof.cpulist import format_list
from stackproof.errors import StackproofError
from stackproof.noise import tableiv
from stackproof.noise.trace import load_in
from stackproof.report.curves import curves, human_bytes
from stackproof.report.plots import curve_plot, fwq_plots, slug
from stackproof.report.sections import Context, Section, Table, fmt
from stackproof.report.calls import judge, node_check_keys
from stackproof.report.membw import copy_bandwidth
from stackproof.report.rows import by_key, why_not_measured
from stackproof.report.stats import summarize
from stackproof.report.verdict import direction_text


def curves_section(ctx: Context) -> Section | None:
    data = curves(ctx.cases)
    ctx.data["curves"] = {" | ".join(map(str, k)): {s: {str(sz): v for sz, v in pts.items()} for s, pts in ser.items()}
                          for k, ser in data.items()}
    if not data:
        return None
    sec = Section("Message-size curves", anchor="curves", figures_first=True, text=[
        "Each stack's median over the repeats (line) and min-max (band); below, the ratio to the baseline "
        f"({ctx.baseline}) with its {100 * (1 - ctx.design.alpha):.0f} % interval of that size alone (a description, "
        "not a call: the calls are the verdict's). Every figure uses the same colour per stack and the same "
        "message-size axis."])
    sizes = [sz for ser in data.values() for pts in ser.values() for sz in pts if sz > 0] or [1]
    xlim = (min(sizes), max(sizes))
    for key in sorted(data):
        check, case, system, kind, unit = key
        series = data[key]
        title = f"{case}: {kind}" + (f" on {system}" if len({k[2] for k in data}) > 1 else "")
        limits = ({s: v for (s, sysname), v in copy_bandwidth(ctx).items() if sysname == system and s in series}
                  if kind == "bandwidth" and unit == "MB/s" else None)
        path = curve_plot(title, kind, unit, series, ctx.stacks, ctx.baseline, xlim,
                          ctx.img / f"{slug('osu' if check.startswith('OSU') else check.lower(), case, kind)}.png",
                          limits, ctx.design)
        sec.figures.append((title, path))
        better = "lower" if kind == "latency" else "higher"   # OSU/NetPIPE: a latency or a bandwidth curve
        stacks = [s for s in ctx.stacks if s in series]
        rows = []
        for sz in sorted({sz for pts in series.values() for sz in pts}):
            row = [human_bytes(sz)] + [fmt(float(np.median(series[s][sz]))) if sz in series[s] else "-" for s in stacks]
            for s in stacks:
                if s == ctx.baseline:
                    continue
                b, o = series.get(ctx.baseline, {}).get(sz), series[s].get(sz)
                if b and o:
                    c = judge(b, o, better, ctx.design)
                    row.append(f"{c.ratio:.3g}" + (f" [{c.lo:.3g}, {c.hi:.3g}]" if c.lo is not None else ""))
                else:
                    row.append("-")
            rows.append(row)
        sec.tables.append(Table(["size"] + [f"{s} ({unit})" for s in stacks]
                                + [f"{s} / {ctx.baseline}" for s in stacks if s != ctx.baseline], rows,
                                caption=f"{case}, {kind} per message size", folded=True))
    return sec


TABLE_IV_DIR = "table-iv"          # where `make acceptance` keeps the matrix, next to the report
CALL_CSS = {"better": "better", "worse": "worse", "no difference": "nsd", "inconclusive": "inc", "no verdict": "nm"}


def _condition(signature: str) -> str:
    """A ReFrame FWQNoise case's `%signature` as a Table IV condition."""
    return "none" if signature == "none" else "daemon" if signature.startswith("daemon-") else "injected"


def _in_table_iv(c) -> bool:
    return c.check == "FWQNoise" and c.result == "pass" and "std" in c.perf


def runs_from_cases(cases) -> dict[tuple[str, str], list[tableiv.Run]]:
    """Table IV run records from a ReFrame run's passed FWQNoise cases, per (stack, system): the
    most affected core's values the check reported (repeats are its rounds)."""
    groups: dict[tuple[str, str], list] = defaultdict(list)
    for c in cases:
        if _in_table_iv(c):
            groups[(c.stack, c.system)].append(c)
    out = {}
    for key, cs in groups.items():
        seen: Counter = Counter()
        runs = []
        for i, c in enumerate(cs):
            prof, cond = c.params.get("profile", "?"), _condition(c.params.get("signature", "none"))
            rnd = c.repeat if isinstance(c.repeat, int) else seen[(prof, cond)]
            seen[(prof, cond)] += 1

            def value(k):
                v = (c.perf.get(k) or {}).get("value")
                return float(v) if isinstance(v, (int, float)) else float("nan")
            trace = Path(c.outputdir) / "fwq.dat" if c.outputdir else None
            where = dict(profile=prof, condition=cond, round=rnd, seq=i, t_s=0.0)
            values = dict(min_us=value("min"), mean_us=value("mean"), max_us=value("max"), std_us=value("std"),
                          noise_fraction=value("noise_fraction"))
            try:        # the kept trace adds what the values do not say: the cores, the signature
                t = load_in(c.outputdir)        # a job's directory: through stackproof.files
                run = tableiv.reduce_trace(t, **where, cpus=format_list({int(r["cpu"]) for r in t.ranks}),
                                           trace=str(trace))
                # every core's figures only from a trace that agrees with what the check reported
                same = math.isclose(run.std_us, values["std_us"], rel_tol=0.01)
                runs.append(replace(run, **values, per_cpu=run.per_cpu if same else {}))
            except (StackproofError, OSError, TypeError, ValueError, KeyError):
                runs.append(tableiv.Run(**where, cpus="", rank=0, cpu=-1, samples=0, **values))
        out[key] = runs
    return out


def table_iv_groups(ctx: Context) -> list[dict]:
    """The Table IV data of this report: the acceptance matrix kept next to it
    (<report dir>/table-iv/runs.json), else the run's own FWQNoise cases, one group per stack and
    system. Each: {caption, runs, signature, base (where relative trace paths start)}."""
    path = Path(ctx.img).parent / TABLE_IV_DIR / "runs.json"
    if path.is_file():
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise StackproofError(f"{path}: {exc}") from None
        runs = tableiv.runs_from_json(doc)
        sig = doc.get("signature") if isinstance(doc.get("signature"), str) else tableiv.SIGNATURE
        return [{"caption": f"the Table IV matrix of this run ({len(runs)} FWQ runs, {path.parent.name}/)",
                 "runs": runs, "signature": sig, "base": path.parent, "stack": "", "system": "test cluster"}] if runs else []
    groups = runs_from_cases(ctx.cases)
    return [{"caption": f"{stack} on {system} (ReFrame FWQNoise cases)" if len(groups) > 1 else
             "ReFrame FWQNoise cases of this run", "runs": runs, "signature": tableiv.SIGNATURE, "base": None,
             "stack": stack, "system": system} for (stack, system), runs in sorted(groups.items())]


def _styled(cells: list[str]) -> list:
    return [*cells[:-1], (cells[-1], CALL_CSS.get(cells[-1], ""))]


def noise_rows(cases) -> list[dict]:
    """Table IV rows of a run's FWQNoise cases (report.json's `noise`), per stack and system."""
    out = []
    for (stack, system), runs in sorted(runs_from_cases(cases).items()):
        out += _row_dicts(tableiv.table(runs), stack, system, runs, None)
    return out


def _row_dicts(rows, stack, system, runs, base) -> list[dict]:
    sig = {"none": "none", "daemon": f"daemon-{tableiv.SIGNATURE}", "injected": tableiv.SIGNATURE}
    out = []
    for r, d in zip(rows, tableiv.rows_as_dicts(rows)):
        std = r.calls.get(tableiv.HEADLINE)
        out.append({"stack": stack, "system": system, "signature": sig.get(r.condition, r.condition), **d,
                    "min": r.min_ms * 1e3, "mean": r.mean_ms * 1e3, "max": r.max_ms * 1e3, "std": r.std_ms * 1e3,
                    "noise_fraction": r.noise_pct / 100, "std_ratio": std.ratio if std else (1.0 if r.profile == tableiv.BASELINE else None),
                    "trace": _representative(runs, r, base)})
    return out


def _representative(runs, row, base) -> str | None:
    """The trace of the row's run with the median std (for the figures)."""
    mine = sorted((x for x in runs if x.condition == row.condition and x.profile == row.profile and x.trace),
                  key=lambda x: x.std_us)
    if not mine:
        return None
    t = Path(mine[len(mine) // 2].trace)
    if base is not None and not t.is_absolute():
        t = Path(base) / t
        if ".." in Path(mine[len(mine) // 2].trace).parts:
            return None
    return str(t) if t.is_file() else None


def node_checks_section(ctx: Context) -> Section | None:
    """Table-IV style: the node checks (one stack), each metric's median, spread and n; failures and
    skips with their reason, never as 'not measured' rows of the stack verdict."""
    node = node_check_keys(ctx.cases, ctx.stacks)
    if not node:
        return None
    keyed = by_key(ctx.cases)
    rows = []
    measured = set()
    for r in sorted(ctx.rows, key=lambda r: (r.check, r.case, r.var)):
        if (r.check, r.case, r.system) not in node:
            continue
        (stack, vals), = r.samples.items()
        sm = summarize(vals)
        measured.add((r.check, r.case, r.system))
        rows.append([r.case, stack, f"{r.var} ({r.unit or 'no unit'})", direction_text(r.better),
                     f"{fmt(sm.median)} [{fmt(sm.lo)}–{fmt(sm.hi)}] ({sm.n})"])
    for k in sorted(node - measured):
        (stack, cs), = [(s, cs) for s, cs in keyed[k].items() if cs]
        res = {c.result for c in cs}
        text = why_not_measured(cs) if res != {"pass"} else "passed (no performance value)"
        rows.append([k[1], stack, "-", "-", (text, "" if res == {"pass"} else "nm")])
    return Section("Node checks", anchor="node", text=[
        "Checks that measure the node rather than the stack (FWQ noise under the core-specialization "
        "profiles, core specialization, binding) run with one stack; median [min–max] (n) over the repeats."],
        tables=[Table(["check", "stack", "metric", "direction", "value"], rows)])


def node_section(ctx: Context) -> Section | None:
    """The node checks: Table IV first (the paper's shape, then one sentence per row), then the other
    node checks (core specialization, binding)."""
    groups = table_iv_groups(ctx)
    # FWQ runs that measured are Table IV's; the others (skipped, failed) stay with their reason
    rest = node_checks_section(replace(ctx, cases=[c for c in ctx.cases if not _in_table_iv(c)],
                                       rows=[r for r in ctx.rows if r.check != "FWQNoise"]))
    ctx.data["noise"] = []
    if not groups and rest is None:
        return None
    sec = Section("Node checks", anchor="node")
    if groups:
        sec.text.append(
            "Table IV of the TOSS-2020 paper, measured here: the FWQ statistics of the most affected core "
            "(largest std) per core-specialization profile (Table III), with a noise daemon on the node "
            "(10 Hz x 2.5 ms at SCHED_FIFO: each profile places it like a system daemon), without it, and with "
            "an injector inside the job (noise no profile can move, labelled so). Times in ms, the median over "
            "n runs interleaved in time (an even number of rounds, every other one reversed). Like cores: a profile "
            "is compared with baseline on its own application CPUs (CPUs compared), baseline's figure being the "
            "most affected of those CPUs in baseline's runs; std / baseline is the median of the run-to-run ratios "
            "under the same noise with its exact interval, at the level the table's error control gives each call "
            "(the chance of any false better or worse call in the whole table, max and noise fraction included, "
            "is at most 5 %); baseline's own row gives the interval of its median std over its runs.")
    for g in groups:
        rows = tableiv.table(g["runs"], signature=g["signature"])
        ctx.data["noise"] += _row_dicts(rows, g["stack"], g["system"], g["runs"], g["base"])
        sec.tables.append(Table(tableiv.header(), [_styled(tableiv.cells(r)) for r in rows],
                                caption=f"Table IV: {g['caption']}", notes=tableiv.sentences(rows, g["signature"])))
        second = [tableiv.secondary_cells(r) for r in rows if r.profile != tableiv.BASELINE]
        if second:
            sec.tables.append(Table(tableiv.secondary_header(),
                                    [[*c[:3], (c[3], CALL_CSS.get(c[3], "")), c[4], (c[5], CALL_CSS.get(c[5], ""))]
                                     for c in second],
                                    caption="max and noise fraction of the most affected core, ratio to baseline",
                                    folded=True))
    if ctx.data["noise"]:
        sec.figures = fwq_plots([r for r in ctx.data["noise"] if r["condition"] != "injected"], ctx.img)
    if rest is not None:
        if not groups:
            sec.text += rest.text
        sec.tables += [replace(t, caption=t.caption or "Other node checks (one stack; median [min–max] (n) over "
                                                       "the repeats)") for t in rest.tables]
    return sec
