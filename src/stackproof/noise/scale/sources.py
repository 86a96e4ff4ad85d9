"""Where a run keeps what the projection needs: FWQ traces per profile and a latency curve.

RUN is one of
  - an FWQ trace file (fwq-mpi / fwq-th output): the noise of one node, one configuration;
  - a ReFrame JSON run report (e.g. reports/acceptance/reframe-report.json), or the directory that
    holds one: its FWQ testcases name their profile (`%profile=...`) and keep `fwq.dat` in their
    output directory; the OSU latency testcases of the same stack give the LogGP curve (each launch's
    output, in its own directory for a check that runs in blocks). An
    acceptance report directory keeps its FWQ runs in the Table IV matrix instead (table-iv/runs.json,
    stackproof.noise.tableiv): per profile the run without a daemon whose std is the median.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from stackproof.errors import InputError, StackproofError
from stackproof.noise import tableiv
from stackproof.noise import trace as fwqtrace
from stackproof.reframe_output import final_cases, load_report

REPORT_NAMES = ("reframe-report.json",)


@dataclass
class RunData:
    origin: str
    traces: dict[str, Path] = field(default_factory=dict)          # profile -> fwq.dat
    curves: list[tuple[str, Path]] = field(default_factory=list)   # (kind, output file) latency/bandwidth
    stack: str | None = None


def _params(name: str) -> dict[str, str]:
    return dict(re.findall(r"%(\w+)=(\S+)", name))


def _report_file(path: Path) -> Path | None:
    if path.is_file() and path.suffix == ".json":
        return path
    if path.is_dir():
        for name in REPORT_NAMES:
            if (path / name).is_file():
                return path / name
        found = sorted(path.glob("run-report-*.json")) + sorted(path.glob("reports/run-report-*.json"))
        if found:
            return found[-1]
    return None


def _stacks_of(tc: dict) -> list[str]:
    """The stacks a test case measured: a block's (StackCheck's block_stacks), else its environment's."""
    block = tc.get("block_stacks")
    if isinstance(block, list) and len(block) > 1 and all(isinstance(s, str) for s in block):
        return block
    return [tc["environ"]] if isinstance(tc.get("environ"), str) and tc["environ"] else []


def _launch_dirs(tc: dict, out: Path, stack: str | None) -> list[Path]:
    """Where a test case's launches of `stack` left their output: each launch's directory under the
    output (blocks of launches), else the output directory itself."""
    launches = [ln for ln in tc.get("launches") or [] if isinstance(ln, dict) and (stack is None or ln.get("stack") == stack)]
    if not launches:
        return [out] if out.is_dir() else []
    rel = [Path(ln["dir"]) for ln in launches if isinstance(ln.get("dir"), str) and ln["dir"]]
    return [out / r for r in rel if not r.is_absolute() and ".." not in r.parts and (out / r).is_dir()]


def load_run(spec: str, stack: str | None = None) -> RunData:
    path = Path(spec)
    if not path.exists():
        raise StackproofError(f"--run {spec}: no such file or directory")
    if path.is_file() and path.suffix != ".json":
        path = Path(os.path.realpath(path))              # the user's own path, followed once here
        fwqtrace.load_in(path.parent, path.name)         # a trace: fail now if it is not one
        return RunData(origin=str(path), traces={"measured": path})
    report = _report_file(path)
    if report is None:
        raise StackproofError(f"--run {spec}: neither an FWQ trace nor a ReFrame run report "
                              f"(looked for {', '.join(REPORT_NAMES)} and run-report-*.json)")
    try:
        doc = load_report(report)
    except (StackproofError, InputError) as exc:
        raise StackproofError(f"{report}: not a ReFrame JSON report ({exc})") from None
    cases = final_cases(doc)
    if not cases:
        raise StackproofError(f"{report}: no testcases (is this a ReFrame run report?)")
    stacks = list(dict.fromkeys(s for tc in cases for s in _stacks_of(tc)))
    chosen = stack or (stacks[0] if stacks else None)
    if stack and stack not in stacks:
        raise StackproofError(f"{report}: no testcase of stack {stack!r}; stacks here: {', '.join(sorted(set(stacks)))}")
    data = RunData(origin=str(report), stack=chosen)
    for tc in cases:
        if chosen and chosen not in _stacks_of(tc):
            continue
        name = tc.get("display_name") or tc.get("name") or ""
        params = _params(name)
        out = Path(tc.get("outputdir") or "")
        if name.startswith("FWQ") and params.get("signature", "none") == "none" and (out / "fwq.dat").is_file():
            if tc.get("result", "pass") == "pass":
                data.traces.setdefault(params.get("profile", "measured"), out / "fwq.dat")
        elif "osu_latency" in name:
            # OSU's latency curve (benchparse reads it); NetPIPE's np.out has no parser below stacks/
            for d in _launch_dirs(tc, out, chosen):
                data.curves += [("osu", f) for f in sorted(d.glob("*.out")) + [d / "stdout"] if f.is_file()
                                and f.name != "osu-probe.out"]
    if not data.traces and path.is_dir():
        data.traces = matrix_traces(path / "table-iv")
    if not data.traces:
        raise StackproofError(f"{report}: no passed FWQ testcase without an injected signature kept its "
                              f"trace (fwq.dat) for stack {chosen!r}, and no Table IV matrix (table-iv/runs.json)")
    return data


def matrix_traces(directory: Path) -> dict[str, Path]:
    """profile -> the trace of its run without a daemon whose std is the median, from a Table IV
    matrix directory (runs.json); {} when there is none."""
    runs_file = directory / "runs.json"
    if not runs_file.is_file():
        return {}
    try:
        runs = tableiv.runs_from_json(json.loads(runs_file.read_text()))
    except (OSError, ValueError, InputError) as exc:
        raise StackproofError(f"{runs_file}: {exc}") from None
    out = {}
    for prof in tableiv.profile_order({r.profile for r in runs}):
        mine = sorted((r for r in runs if r.profile == prof and r.condition == "none" and r.trace), key=lambda r: r.std_us)
        if mine:
            rel = Path(mine[len(mine) // 2].trace)
            if not rel.is_absolute() and ".." not in rel.parts and (directory / rel).is_file():
                out[prof] = directory / rel
    return out
