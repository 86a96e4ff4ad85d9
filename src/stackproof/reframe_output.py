"""What ReFrame writes, read in one place: its JSON run report (the reader and its shape check), the
test cases with their one identity key, the rule that makes one report of several sessions, the skip
reason of a case, the stored sessions of the results database, and where the `reframe` executable
and the suite's site configuration are.

Identity: a test case is (name, system, partition, environment). ReFrame's `name` carries every
parameter (`NetPIPE %block_index=4`, `... %.repeat_no=1`), so it names one case across the sessions
of a run; `unique_name` (`NetPIPE_0`) numbers a check's variants within one session and repeats
across sessions.

Skip reasons: ReFrame prints a skip's message but keeps none in its JSON; every stackproof check
skips through StackCheck.skip, which records it as the loggable `skip_reason`. Nothing here reads
ReFrame's console output.

May import: nothing of stackproof but errors and paths (a basic module).
"""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

from stackproof.errors import InputError, StackproofError
from stackproof.paths import REPO

SITE_CONFIG = REPO / "reframe-tests" / "config" / "site.py"
_STRINGS = ("name", "display_name", "unique_name", "system", "partition", "environ", "result", "fail_reason",
            "fail_phase", "stack", "outputdir", "stagedir", "job_stdout", "job_stderr", "skip_reason")


def reframe_executable() -> str:
    """The `reframe` of this Python's environment (the project venv), else PATH's."""
    found = shutil.which("reframe", path=os.path.dirname(sys.executable)) or shutil.which("reframe")
    if found is None:
        raise StackproofError("reframe not found: run `make venv` (reframe-hpc is pinned in requirements-lock.txt)")
    return found


# ---- the report and its shape ------------------------------------------------------------------------

def _bad(origin: str, where: str, what: str):
    return InputError(f"{origin}: not a ReFrame run report: {where} {what}")


def check_shape(doc, origin: str) -> None:
    """Refuse, in one line naming the file and field, a report whose shape or values we cannot use."""
    if not isinstance(doc, dict) or "runs" not in doc:
        raise InputError(f"{origin}: not a ReFrame run report (no 'runs')")
    if not isinstance(doc.get("session_info", {}) or {}, dict):
        raise _bad(origin, "session_info", "is not an object")
    if not isinstance(doc.get("stackproof", {}), dict):
        raise _bad(origin, "stackproof", "is not an object")
    if not isinstance(doc["runs"], list):
        raise _bad(origin, "runs", f"is {type(doc['runs']).__name__}, not a list")
    for i, run in enumerate(doc["runs"]):
        if not isinstance(run, dict) or not isinstance(run.get("testcases", []), list):
            raise _bad(origin, f"runs[{i}]", "is not an object with a testcases list")
        for j, tc in enumerate(run.get("testcases", [])):
            where = f"runs[{i}].testcases[{j}]"
            if not isinstance(tc, dict):
                raise _bad(origin, where, "is not an object")
            for k in _STRINGS:
                if tc.get(k) is not None and not isinstance(tc[k], str):
                    raise _bad(origin, f"{where}.{k}", "is not a string")
            if not isinstance(tc.get("name"), str) or not tc["name"].strip():
                raise _bad(origin, f"{where}.name", "is missing")
            pv = tc.get("perfvalues") or {}
            if not isinstance(pv, dict):
                raise _bad(origin, f"{where}.perfvalues", "is not an object")
            for key, vals in pv.items():
                if vals is None:
                    continue
                if not isinstance(vals, list) or len(vals) < 5:
                    raise _bad(origin, f"{where}.perfvalues[{key!r}]", "is not [value, ref, lower, upper, unit, ...]")
                _number(vals[0], origin, f"{where}.perfvalues[{key!r}]")
                if vals[4] is not None and not isinstance(vals[4], str):
                    raise _bad(origin, f"{where}.perfvalues[{key!r}]", "unit is not a string")
            _check_launches(tc.get("launches"), origin, f"{where}.launches")


def _number(v, origin: str, where: str) -> None:
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
        raise _bad(origin, where, f"value {v!r} is not a finite number")


def _check_launches(launches, origin: str, where: str) -> None:
    """A stackproof check's `launches` (StackCheck): each launch's stack, its place in the block and
    its values."""
    if launches in (None, "<undefined>"):
        return
    if not isinstance(launches, list):
        raise _bad(origin, where, "is not a list")
    for i, ln in enumerate(launches):
        if not isinstance(ln, dict) or not isinstance(ln.get("stack"), str) or not isinstance(ln.get("values"), dict):
            raise _bad(origin, f"{where}[{i}]", "is not {stack, values, ...}")
        for k in ("block", "pair", "position"):
            if ln.get(k) is not None and (isinstance(ln[k], bool) or not isinstance(ln[k], int) or ln[k] < 0):
                raise _bad(origin, f"{where}[{i}].{k}", "is not a non-negative integer")
        for var, v in ln["values"].items():
            _number(v, origin, f"{where}[{i}].values[{var!r}]")


def load_report(path, origin: str | None = None) -> dict:
    """A ReFrame JSON report, its shape checked; InputError naming the file when it cannot be used."""
    origin = origin or str(path)
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise StackproofError(f"ReFrame report {origin}: {exc}") from None
    except ValueError as exc:
        raise InputError(f"{origin}: not JSON: {exc}") from None
    check_shape(doc, origin)
    return doc


# ---- test cases --------------------------------------------------------------------------------------

def case_key(tc: dict) -> tuple:
    """The one identity of a test case: (name, system, partition, environment)."""
    return (tc.get("name"), tc.get("system"), tc.get("partition"), tc.get("environ"))


def testcases(doc: dict) -> list[dict]:
    """Every test case of every run (retry round) of a report."""
    return [tc for run in doc.get("runs") or [] for tc in run.get("testcases") or []]


def final_cases(doc: dict) -> list[dict]:
    """Each test case once, as the last run (retry round) it is in left it; fixtures left out."""
    final: dict[tuple, dict] = {}
    for tc in testcases(doc):
        if not tc.get("fixture"):
            final[case_key(tc)] = tc
    return list(final.values())


def skip_reason(tc: dict) -> str:
    """Why a test case was skipped, as the check recorded it (StackCheck.skip), or saying it did not."""
    reason = tc.get("skip_reason")
    if isinstance(reason, str) and reason:
        return reason
    return ("the check recorded no reason (only stackproof checks record one, as skip_reason); ReFrame's "
            "output line [ SKIP ] of the run has it")


# ---- several sessions as one report ------------------------------------------------------------------

def merge_reports(docs: list[dict], record: dict | None = None) -> dict:
    """One ReFrame report from several sessions, as if one session had run every test case where it
    could. The one rule: run i of every session is the same retry round; a test case (case_key) seen
    again replaces the earlier one unless it was skipped there (a case skipped in one session, e.g.
    for another profile, and run in another keeps the run). Session info: the first session's, with
    the merged cases' counts, the sessions' UUIDs (`stackproof_sessions`) and the last one's end;
    `record` (the acceptance driver's design, timing, provenance) under `stackproof`."""
    rounds: dict[int, tuple[dict, dict]] = {}
    uuids = []
    for doc in docs:
        info = doc.get("session_info") or {}
        uuids += info.get("stackproof_sessions") or [info.get("uuid")]
        for i, run in enumerate(doc.get("runs") or []):
            cases = rounds.setdefault(i, ({}, dict(run)))[0]
            for tc in run.get("testcases") or []:
                key = case_key(tc)
                if key not in cases or tc.get("result") != "skip":
                    cases[key] = tc
    runs = [dict(run, testcases=list(cases.values()), num_cases=len(cases))
            for _, (cases, run) in sorted(rounds.items())]
    final = {}                           # the last round a case is in has its result
    for run in runs:
        for tc in run["testcases"]:
            final[case_key(tc)] = tc
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


# ---- the results database ------------------------------------------------------------------------------

def stored_sessions(config: Path | str | None, query: str) -> list[dict]:
    """`reframe --describe-stored-sessions=QUERY`: the stored sessions' full reports."""
    proc = subprocess.run([reframe_executable(), "-C", str(config or SITE_CONFIG),
                           f"--describe-stored-sessions={query}"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise StackproofError(f"results database, query {query}: {proc.stderr.strip()[-300:] or proc.stdout[-300:]}")
    try:
        docs = json.loads(proc.stdout)
    except ValueError:
        raise StackproofError(f"results database, query {query}: unexpected output from reframe: "
                              f"{proc.stdout[:200]!r}") from None
    return docs if isinstance(docs, list) else [docs]
