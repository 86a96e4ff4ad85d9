"""Read ReFrame JSON run reports (or stored sessions) into test cases, once, and reduce them into rows.

A *case* is one stack's part of one ReFrame test case of one session: a test case of a check that
runs in blocks (StackCheck) holds the launches of every stack of its block, one Case each. Its
*launches* (stack, block, pair, values) are the *samples* of a *row*: (benchmark, parameters
without the block or repeat, system, performance variable, unit) -> {stack: [values]}, each with its
pair and block index. A test case without launches (ReFrame's own `--repeat`, `.repeat_no`, or a
report from before blocks) gives one sample per case.

Stacks are labelled by `--run LABEL=...` (a test case of one stack), else by the launch's stack /
the test case's `stack` variable, else its environment. One label never silently mixes sessions: an
implicit label seen in several sessions becomes `label@<session>` per session; an explicit LABEL
given to several inputs is merged and the report says which sessions it merged. Reading and checking
the JSON is stackproof.reframe_output's.
"""
from __future__ import annotations

import fnmatch
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from stackproof import files
from stackproof.comparison import Metric
from stackproof.errors import InputError, StackproofError
from stackproof.reframe_output import check_shape, final_cases, load_report, skip_reason, stored_sessions

# the parameters that number a case's launches, not what it measures
REPEAT_PARAMS = ("block_index", "repeat_index", ".repeat_no")


@dataclass
class Case:
    stack: str
    name: str                 # display name without the repeat, e.g. "FWQNoise %profile=corespec %signature=none"
    check: str                # class name
    params: dict
    system: str               # "sys:part"
    result: str               # pass | fail | skip | abort
    fail_reason: str
    perf: dict = field(default_factory=dict)   # var -> {value, ref, lower, upper, unit, result}
    outputdir: str | None = None
    session: str = "?"
    repeat: int | None = None     # the block (ReFrame's repeat) the case ran as
    environ: str = ""
    mpi_library: str = ""
    mpi_library_path: str = ""
    stagedir: str | None = None
    job_stdout: str | None = None
    job_stderr: str | None = None
    fail_phase: str | None = None
    not_measured: bool = False    # skipped because it ran but could not measure (StackCheck.skip_not_measured)
    explicit_label: bool = False
    perf_better: dict = field(default_factory=dict)   # var or fnmatch pattern -> higher | lower (the check's)
    perf_headline: list = field(default_factory=list)  # the check's headline variables (names or patterns)
    perf_margin: dict = field(default_factory=dict)    # var or pattern -> equivalence margin (fraction)
    perf_curve: list = field(default_factory=list)     # variables forming a curve over message size (patterns)
    perf_curve_file: str = ""                          # each launch's whole-curve CSV (bytes,usec,MBps), if any
    info: "Session | None" = None     # the session it came from (shared object)
    launches: list = field(default_factory=list)      # this stack's launches: {block, pair, position, values}

    @property
    def key(self) -> tuple:
        """What identifies the measurement across stacks and repeats."""
        return (self.check, self.name, self.system)


@dataclass
class Session:
    uuid: str
    origin: str
    time_start: str = ""
    hostname: str = ""
    cmdline: str = ""
    stacks_recorded: list = field(default_factory=list)   # session extras stack=A+B, in that order
    log_files: list = field(default_factory=list)
    stackproof: dict = field(default_factory=dict)        # the acceptance driver's record (report JSON key)


def _params(display_name: str) -> dict:
    return dict(m.groups() for m in re.finditer(r"%([\w.]+)=(\S+)", display_name))


def strip_repeat(display_name: str) -> str:
    for p in REPEAT_PARAMS:
        display_name = re.sub(rf"\s*%{re.escape(p)}=\S+", "", display_name)
    return display_name.strip()


def cases_from_report(doc: dict, label: str | None, origin: str) -> tuple[Session, list[Case]]:
    check_shape(doc, origin)
    info = doc.get("session_info") or {}
    stack_extra = info.get("stack")
    session = Session(uuid=str(info.get("uuid") or origin), origin=origin,
                      time_start=str(info.get("time_start") or ""), hostname=str(info.get("hostname") or ""),
                      cmdline=str(info.get("cmdline") or ""),
                      stacks_recorded=stack_extra.split("+") if isinstance(stack_extra, str) and stack_extra else [],
                      log_files=[f for f in info.get("log_files") or [] if isinstance(f, str)],
                      stackproof=doc.get("stackproof") if isinstance(doc.get("stackproof"), dict) else {})
    out = []
    for tc in final_cases(doc):
        display = tc.get("display_name") or tc["name"]
        params = _params(display)
        repeat = next((tc.get(p) for p in REPEAT_PARAMS if isinstance(tc.get(p), int)), None)
        if repeat is None:
            rp = next((params[p] for p in REPEAT_PARAMS if p in params), None)
            repeat = int(rp) if rp is not None and str(rp).isdigit() else None
        for p in REPEAT_PARAMS:
            params.pop(p, None)
        result = tc.get("result") or ("fail" if tc.get("fail_phase") else "pass")
        reason = tc.get("fail_reason") or (skip_reason(tc) if result == "skip" else "")
        own = (tc.get("stack") if isinstance(tc.get("stack"), str) and tc.get("stack") else None) \
            or tc.get("environ") or "?"
        block = tc.get("block_stacks")
        stacks = list(block) if isinstance(block, list) and len(block) > 1 and all(isinstance(s, str) for s in block) \
            else [own]
        launches = tc.get("launches") if isinstance(tc.get("launches"), list) else []
        for st in stacks:
            perf = {}
            for key, vals in (tc.get("perfvalues") or {}).items():
                var = key.split(":")[-1]
                if len(stacks) > 1:
                    var, _, of = var.rpartition("@")
                    if of != st:
                        continue
                if not vals or vals[0] is None:
                    continue
                value, ref, lo, hi, unit = vals[:5]
                perf[var] = {"value": value, "ref": ref, "lower": lo, "upper": hi, "unit": unit,
                             "result": vals[5] if len(vals) > 5 else None}
            out.append(Case(stack=(label if label and len(stacks) == 1 else None) or st, name=strip_repeat(display),
                            check=display.split()[0], params=params,
                            system=f"{tc.get('system')}:{tc.get('partition')}", result=result, fail_reason=reason,
                            perf=perf, outputdir=tc.get("outputdir"), session=session.uuid, repeat=repeat,
                            environ=tc.get("environ") or "", mpi_library=_identity(tc, st, own)[0],
                            mpi_library_path=_identity(tc, st, own)[1], stagedir=tc.get("stagedir"),
                            job_stdout=tc.get("job_stdout"), job_stderr=tc.get("job_stderr"),
                            fail_phase=tc.get("fail_phase"), not_measured=tc.get("not_measured") is True,
                            explicit_label=bool(label) and len(stacks) == 1,
                            info=session, perf_better=_perf_better(tc.get("perf_better"), origin),
                            perf_headline=_perf_headline(tc.get("perf_headline"), origin),
                            perf_margin=_perf_margin(tc.get("perf_margin"), origin),
                            perf_curve=_perf_headline(tc.get("perf_curve"), origin, "perf_curve"),
                            perf_curve_file=_curve_file(tc.get("perf_curve_file"), origin),
                            launches=[ln for ln in launches if ln.get("stack") == st]))
    return session, out


def _perf_better(declared, origin: str) -> dict:
    """The check's declared directions ({var or pattern: 'higher'|'lower'}); absent: {}."""
    if declared in (None, "<undefined>"):
        return {}
    if not isinstance(declared, dict) or not all(isinstance(k, str) and v in ("higher", "lower")
                                                  for k, v in declared.items()):
        raise InputError(f"{origin}: perf_better must map variable names to 'higher' or 'lower'")
    return dict(declared)


def _perf_headline(declared, origin: str, what: str = "perf_headline") -> list:
    """The check's headline (or curve) variables (names or fnmatch patterns); absent: []."""
    if declared in (None, "<undefined>"):
        return []
    if not isinstance(declared, list) or not all(isinstance(k, str) and k for k in declared):
        raise InputError(f"{origin}: {what} must be a list of variable names")
    return list(declared)


def _curve_file(declared, origin: str) -> str:
    """The check's curve file: one plain file name in each launch's directory ('' none)."""
    if declared in (None, "<undefined>", ""):
        return ""
    if not isinstance(declared, str) or "/" in declared or declared in (".", "..") or not declared.isprintable():
        raise InputError(f"{origin}: perf_curve_file must be a plain file name")
    return declared


def _perf_margin(declared, origin: str) -> dict:
    """The check's equivalence margins ({var or pattern: fraction in (0, 1)}); absent: {}."""
    if declared in (None, "<undefined>"):
        return {}
    if not isinstance(declared, dict) or not all(
            isinstance(k, str) and not isinstance(v, bool) and isinstance(v, (int, float)) and 0 < v < 1
            for k, v in declared.items()):
        raise InputError(f"{origin}: perf_margin must map variable names to a fraction in (0, 1)")
    return {k: float(v) for k, v in declared.items()}


def is_headline(declared: list, var: str) -> bool:
    return any(var == k or fnmatch.fnmatchcase(var, k) for k in declared)


def better_of(declared: dict, var: str) -> str | None:
    """'higher' | 'lower' as the check declared it for `var` (exact name first, then patterns)."""
    if var in declared:
        return declared[var]
    return next((v for k, v in declared.items() if fnmatch.fnmatchcase(var, k)), None)


def _split_spec(spec: str) -> tuple[str, str]:
    label, _, rest = spec.partition("=") if "=" in spec else ("", "", spec)
    return label, rest


def load_run(spec: str) -> list[Case]:
    return load_run_with_session(spec)[1]


def load_run_with_session(spec: str) -> tuple[Session, list[Case]]:
    label, path = _split_spec(spec)
    p = Path(path)
    if not p.is_file():
        raise StackproofError(f"run report not found: {p}")
    return cases_from_report(load_report(p), label or None, str(p))


def load_session(spec: str, config=None) -> list[Case]:
    label, uuid = _split_spec(spec)
    return [c for d in stored_sessions(config, uuid) for c in cases_from_report(d, label or None, f"session {uuid}")[1]]


# ---- labels and sessions -------------------------------------------------------------------------

def sessions_of(cases: list[Case]) -> list[Session]:
    """The sessions of these cases, in input order."""
    out: dict[str, Session] = {}
    for c in cases:
        if c.session not in out:
            out[c.session] = c.info or Session(uuid=c.session, origin="?")
    return list(out.values())


def resolve_labels(cases: list[Case]) -> tuple[list[str], list[str]]:
    """Give each label one session unless the user merged them; return (stack order, notes)."""
    sessions = sessions_of(cases)
    notes = []
    by_label: dict[str, list[str]] = defaultdict(list)
    for c in cases:
        if c.session not in by_label[c.stack]:
            by_label[c.stack].append(c.session)
    renamed = {}
    for label, sess in by_label.items():
        if len(sess) < 2:
            continue
        explicit = any(c.explicit_label for c in cases if c.stack == label)
        if explicit:
            notes.append(f"stack {label} merges sessions {', '.join(sess)} (the same LABEL= was given to each)")
            continue
        for s in sess:
            renamed[(label, s)] = f"{label}@{s[:8]}"
        notes.append(f"stack {label} ran in sessions {', '.join(sess)}: shown separately as "
                     + ", ".join(f"{label}@{s[:8]}" for s in sess)
                     + " (name them with --run LABEL=FILE, or the same LABEL to merge them)")
    for c in cases:
        c.stack = renamed.get((c.stack, c.session), c.stack)
    # order: sessions in input order, within a session the recorded order (stack=A+B), then first seen
    order: list[str] = []
    rank = {s.uuid: i for i, s in enumerate(sessions)}
    recorded = {s.uuid: s.stacks_recorded for s in sessions}

    def pos(c: Case):
        rec = recorded.get(c.session, [])
        base = c.stack.split("@")[0]
        return (rank.get(c.session, 99), rec.index(base) if base in rec else len(rec))
    for c in sorted(cases, key=pos):
        if c.stack not in order:
            order.append(c.stack)
    return order, notes


# ---- rows ----------------------------------------------------------------------------------------

@dataclass
class Row:
    check: str
    case: str                 # display name without block / repeat
    params: dict
    system: str
    var: str
    unit: str
    samples: dict             # stack -> [values] (the launches of passed cases)
    sessions: dict            # stack -> {session uuids}
    better: str | None = None  # higher | lower, as the check declared it (None: not declared)
    repeats: dict = field(default_factory=dict)   # stack -> [pair index (None: unknown)], as samples
    headline: bool = False    # the check declared it a headline metric (perf_headline)
    margin: float | None = None  # the check's equivalence margin for it (None: the run's)
    blocks: dict = field(default_factory=dict)    # stack -> [block index (None: unknown)], as samples
    curve: bool = False       # the check declared it part of a curve over message size (perf_curve)

    @property
    def judged(self) -> bool:
        """Whether the verdict judges it: every metric but a curve's points, of which only the headline
        ones (the check's declarations: perf_curve, perf_headline)."""
        return not self.curve or self.headline

    def metric(self, baseline: str, other: str) -> Metric:
        """The comparison engine's view of this row: the two stacks' launches with their pair and block
        indices (None where a launch's is not known)."""
        def known(idx):
            return idx if idx and all(isinstance(i, int) for i in idx) else None
        return Metric(self.samples[baseline], self.samples[other], self.repeats.get(baseline),
                      self.repeats.get(other), self.better, self.margin, self.headline,
                      known(self.blocks.get(baseline)), known(self.blocks.get(other)))


def launch_samples(c: Case) -> list[tuple[str, float, int | None, int | None]]:
    """(variable, value, pair, block) of every launch of a case: its launches' values, or (a case
    without launches) its performance values as one sample at the case's repeat index."""
    if c.launches:
        return [(var, float(v), ln.get("pair"), ln.get("block")) for ln in c.launches
                for var, v in (ln.get("values") or {}).items() if var in c.perf and v is not None]
    return [(var, float(pv["value"]), c.repeat, None) for var, pv in c.perf.items() if pv["value"] is not None]


def perf_rows(cases: list[Case]) -> list[Row]:
    rows: dict[tuple, Row] = {}
    for c in cases:
        if c.result != "pass":
            continue
        for var, value, pair, block in launch_samples(c):
            k = (c.check, c.name, c.system, var)
            r = rows.setdefault(k, Row(c.check, c.name, c.params, c.system, var, c.perf[var]["unit"] or "", {}, {}))
            r.samples.setdefault(c.stack, []).append(value)
            r.repeats.setdefault(c.stack, []).append(pair)
            r.blocks.setdefault(c.stack, []).append(block)
            r.better = r.better or better_of(c.perf_better, var)
            r.headline = r.headline or is_headline(c.perf_headline, var)
            # a curve's points are judged where the check names its headline points (else all are)
            r.curve = r.curve or (is_headline(c.perf_curve, var) and bool(c.perf_headline))
            r.margin = r.margin if r.margin is not None else better_of(c.perf_margin, var)
            r.sessions.setdefault(c.stack, set()).add(c.session)
    return list(rows.values())


def by_key(cases: list[Case]) -> dict[tuple, dict[str, list[Case]]]:
    """(check, case, system) -> stack -> cases (all results)."""
    out: dict[tuple, dict[str, list[Case]]] = defaultdict(lambda: defaultdict(list))
    for c in cases:
        out[c.key][c.stack].append(c)
    return out


def _identity(tc: dict, stack: str, own: str) -> tuple[str, str]:
    """(MPI library version, path) that stack `stack` ran with in test case `tc`: its entry in the
    check's `mpi_libraries` (a block records each of its stacks), else the case's own `mpi_library`
    when `stack` is the case's own stack; ('', '') when not recorded, never another stack's."""
    libs = tc.get("mpi_libraries")
    entry = libs.get(stack) if isinstance(libs, dict) else None
    if isinstance(entry, dict):
        return str(entry.get("version") or ""), str(entry.get("library") or "")
    if stack == own:
        return str(tc.get("mpi_library") or ""), str(tc.get("mpi_library_path") or "")
    return "", ""


def why_not_measured(cases: list[Case]) -> str:
    """A short reason from a stack's cases of one measurement that produced no value."""
    if not cases:
        return "not run for this stack"
    skipped = [c for c in cases if c.result == "skip"]
    failed = [c for c in cases if c.result in ("fail", "abort")]
    if failed:
        first = failed[0].fail_reason.strip().splitlines()[0] if failed[0].fail_reason.strip() else "no reason"
        return f"failed ({len(failed)}/{len(cases)}): {first}"
    if skipped:
        reason = skipped[0].fail_reason or ""
        # a check that ran but could not measure what it is about says so (StackCheck.skip_not_measured)
        return reason if skipped[0].not_measured else f"skipped: {reason}"
    return "no performance value recorded"


def _job_text(base: str, name: str, lines: int) -> str | None:
    """The last `lines` lines of the job file `name` below the directory `base`, which a job (or a
    virtual cluster's node, on its share) writes: `name` only as a relative name below `base`, no
    link anywhere on either, a regular file, its last files.TAIL_BYTES (stackproof.files). None when
    there is no such file; a line saying why when it was refused (issue 42: an absolute job_stdout or
    a link in the stage directory put a root-only file into report.html)."""
    try:
        fd = files.open_path(base)
    except FileNotFoundError:
        return None
    except (OSError, files.UnsafePath) as exc:
        return f"(not shown: {exc})"
    try:
        data = files.read_tail(fd, name, files.TAIL_BYTES)
    except FileNotFoundError:
        return None
    except (OSError, files.UnsafePath) as exc:
        return f"(not shown: {exc})"
    finally:
        os.close(fd)
    return "\n".join(data.decode(errors="replace").rstrip("\n").splitlines()[-lines:])


def failure_detail(c: Case, lines: int = 20) -> dict:
    """fail_reason + the job's stderr + the last lines of its output (from the kept stage directory,
    else the output directory; read by _job_text only)."""
    out = {"reason": c.fail_reason or "(no reason recorded)", "phase": c.fail_phase or "", "stderr": None,
           "stdout": None, "where": c.stagedir or ""}
    for kind in ("stderr", "stdout"):
        name = getattr(c, f"job_{kind}")
        for base in (c.stagedir, c.outputdir):
            if name and base:
                text = _job_text(base, name, lines if kind == "stdout" else 200)
                if text is not None:
                    out[kind] = text
                    break
    return out
