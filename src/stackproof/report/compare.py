"""`stackproof report build --compare`: find in the results database the session(s) to compare.

  --stack A --stack B   the newest session that ran A and the newest that ran B (one session when
                        one two-stack session ran both)
  --stack A             the two newest sessions that ran A (before/after: A@<old> against A@<new>)
  (no --stack)          the newest session; if it ran a single stack, also the session before it
"""
from __future__ import annotations

from stackproof.errors import StackproofError
from stackproof.reframe_output import stored_sessions
from stackproof.report.rows import Case, cases_from_report


def _stacks(cases: list[Case]) -> list[str]:
    out = []
    for c in cases:
        if c.stack not in out:
            out.append(c.stack)
    return out


def find(config, period: str, stacks: list[str] | None) -> tuple[list[Case], list[str]]:
    """(cases, lines saying which session each stack came from), oldest session first."""
    docs = stored_sessions(config, period)
    sessions = []
    for d in docs:
        info, cases = cases_from_report(d, None, f"session {(d.get('session_info') or {}).get('uuid', '?')}")
        if cases:
            sessions.append((float((d.get("session_info") or {}).get("time_start_unix") or 0), info, cases))
    sessions.sort(key=lambda s: s[0])
    if not sessions:
        raise StackproofError(f"no stored session with test cases in {period} (run the suite first, or widen "
                              "--period)")
    picked: list[tuple] = []          # (info, cases)
    if not stacks:
        newest = sessions[-1]
        picked = [newest[1:]] if len(_stacks(newest[2])) > 1 or len(sessions) == 1 else [sessions[-2][1:], newest[1:]]
    elif len(stacks) == 1:
        having = [s for s in sessions if stacks[0] in _stacks(s[2])]
        if len(having) < 2:
            raise StackproofError(f"stack {stacks[0]!r}: {len(having)} stored session(s) in {period}, need two "
                                  "to compare a stack with itself")
        picked = [(s[1], [c for c in s[2] if c.stack == stacks[0]]) for s in having[-2:]]
    else:
        chosen: dict[str, tuple] = {}
        for want in stacks:
            having = [s for s in sessions if want in _stacks(s[2])]
            if not having:
                known = sorted({st for s in sessions for st in _stacks(s[2])})
                raise StackproofError(f"stack {want!r}: no stored session in {period} ran it "
                                      f"(stacks found: {', '.join(known) or 'none'})")
            chosen[want] = having[-1]
        for s in sorted({id(v): v for v in chosen.values()}.values(), key=lambda s: s[0]):
            mine = [w for w, v in chosen.items() if v is s]
            picked.append((s[1], [c for c in s[2] if c.stack in mine]))
    lines = [f"{'+'.join(_stacks(cs))} from session {info.uuid} ({info.time_start}, {len(cs)} test cases)"
             for info, cs in picked]
    return [c for _, cs in picked for c in cs], lines
