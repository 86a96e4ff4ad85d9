"""ReFrame JSON reports of a run's sessions: reading one, its test cases, and merge_reports, the one
rule that makes one report of several sessions (run.py's profiles, `make acceptance`'s looks and node
checks)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from stackproof.errors import StackproofError


def load_report(path) -> dict:
    """A ReFrame JSON report; StackproofError naming the file when it cannot be used."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise StackproofError(f"ReFrame report {path}: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        raise StackproofError(f"{path}: not a ReFrame run report")
    return doc


def testcases(doc: dict) -> list[dict]:
    """Every test case of every run (retry round) of a report."""
    return [tc for run in doc.get("runs") or [] for tc in run.get("testcases") or []]


def _shift_repeat(tc: dict, offset: int) -> dict:
    """The test case as repeat `repeat_index + offset` (a later look's repeats follow the earlier ones)."""
    tc = dict(tc)
    if offset and isinstance(tc.get("repeat_index"), int):
        idx = tc["repeat_index"] + offset
        for k in ("name", "display_name", "unique_name"):
            if isinstance(tc.get(k), str):
                tc[k] = re.sub(r"%repeat_index=\d+", f"%repeat_index={idx}", tc[k])
                if k == "unique_name":
                    tc[k] += f"_r{idx}"
        tc["repeat_index"] = idx
    return tc


def merge_reports(docs: list[dict], offsets: list[int] | None = None, record: dict | None = None) -> dict:
    """One ReFrame report from several sessions, as if one session had run every test case where it
    could. The one rule: run i of every session is the same retry round; a test case (name, system,
    partition, environment) seen again replaces the earlier one unless it was skipped there (a case
    skipped in one session, e.g. for another profile, and run in another keeps the run). `offsets`
    shift each session's repeat indices (a look's repeats follow the earlier looks'; names stay
    unique). Session info: the first session's, with the merged cases' counts, the sessions' UUIDs
    (`stackproof_sessions`) and the last one's end; `record` (the acceptance driver's design,
    timing, provenance) under `stackproof`."""
    offsets = offsets or [0] * len(docs)
    rounds: dict[int, tuple[dict, dict]] = {}
    uuids = []
    for doc, off in zip(docs, offsets):
        info = doc.get("session_info") or {}
        uuids += info.get("stackproof_sessions") or [info.get("uuid")]
        for i, run in enumerate(doc.get("runs") or []):
            cases = rounds.setdefault(i, ({}, dict(run)))[0]
            for tc in run.get("testcases") or []:
                tc = _shift_repeat(tc, off)
                key = (tc.get("name"), tc.get("system"), tc.get("partition"), tc.get("environ"))
                if key not in cases or tc.get("result") != "skip":
                    cases[key] = tc
    runs = [dict(run, testcases=list(cases.values()), num_cases=len(cases))
            for _, (cases, run) in sorted(rounds.items())]
    final = {}                           # the last round a case is in has its result
    for run in runs:
        for tc in run["testcases"]:
            final[(tc.get("name"), tc.get("system"), tc.get("partition"), tc.get("environ"))] = tc
    info = dict((docs[0].get("session_info") or {}) if docs else {})
    info.update(num_cases=len(final), stackproof_sessions=uuids,
                **{f"num_{k}": sum(tc.get("result") == r for tc in final.values())
                   for k, r in (("failures", "fail"), ("aborted", "abort"), ("skipped", "skip"))})
    if docs and (docs[-1].get("session_info") or {}).get("time_end"):
        info["time_end"] = docs[-1]["session_info"]["time_end"]
    out = {**(docs[0] if docs else {}), "session_info": info, "runs": runs}
    if record is not None:
        out["stackproof"] = record
    else:
        out.pop("stackproof", None)
    return out


def report_option(extra) -> tuple[str | None, list[str]]:
    """(the --report-file of REFRAME ARGS or None, REFRAME ARGS without it)."""
    out, report, skip = [], None, False
    for i, a in enumerate(extra):
        if skip:
            skip = False
        elif a.startswith("--report-file="):
            report = a.split("=", 1)[1]
        elif a == "--report-file" and i + 1 < len(extra):
            report, skip = extra[i + 1], True
        else:
            out.append(a)
    return report, out
