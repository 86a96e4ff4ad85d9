"""The ReFrame part of `make acceptance`: stack comparisons in looks (pairs of launches, A B then B A,
until each metric's verdict is known) and the node checks once per core-specialization profile.

run_reframe() runs one ReFrame session on the test cluster as it is now (i.e. under the profile it
was brought up with) through stackproof.reframe.session, in-process: no readiness check of its own
(the driver made the run's one). Each look is one session per pair order (A B pairs, then B A
pairs); reframe.reports.merge_reports makes one report of them, and the driver one reframe-report.json of
everything with a `stackproof` record (design, timing, provenance) that `stackproof report` reads.
"""
from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from stackproof.errors import StackproofError
from stackproof.reframe import session
from stackproof.reframe.reports import load_report, merge_reports, testcases
from stackproof.reframe.session import Target
from stackproof.report.rows import cases_from_report, perf_rows, resolve_labels, strip_repeat
from stackproof.report.sections import Context
from stackproof.report.stats import Design
from stackproof.report.verdict import decided, verdict_rows

# The system the sessions run on: the test cluster's cpu partition (its gpu partition has fake GPUs).
SYSTEM = "testcluster:cpu"
# Checks that compare the stacks (repeated in looks) and node checks (one stack, once per profile).
# MPIHello is not repeated in looks: every benchmark records its ranks' MPI library (identity probe).
STACK_CHECKS = ("NetPIPE", "MemoryBandwidth", "OSUBenchmark", "AMGBenchmark", "SW4Benchmark",
                "HPCC", "Hypre", "GPUHealth")
# FWQ per profile is the Table IV matrix (tableiv.py), not a node check: it needs the profiles
# interleaved in time and the noise daemon switched, which one session per profile cannot do.
# CoreSpecCheck checks a profile that reserves cores (CpuSpecList, bound daemons); MpibindBinding
# checks every profile where the mpibind plugin is loaded (node_check_names).
NODE_CHECKS = ("CoreSpecCheck",)
MPIBIND_NODE_CHECKS = ("MpibindBinding",)
RFM_LINE = re.compile(r"^\[\s*(RUN|OK|FAIL|SKIP)\s*\]\s*(?:\(\s*(\d+)/(\d+)\)\s+)?(.+?)\s+/\w+\s+@\S+?\+(\S+)")


def fmt_s(s: float) -> str:
    return f"{int(s // 60)}m{int(s % 60):02d}s"


@dataclass
class Progress:
    """The live line: look, check, stack, repeat k of at most n, elapsed and estimated remaining."""
    t0: float
    max_pairs: int
    look: str = ""
    later_s: float = 0.0            # estimate for the looks after this one
    offset: int = 0                 # pairs of earlier looks: a session's repeat 0 is pair offset + 1
    more: float = 0.0               # cases of this look's later session, per case of this one
    unit: str = "pair"              # what a repeat index counts: a pair of launches, or a repeat
    done: int = 0
    tty: bool = field(default_factory=lambda: sys.stderr.isatty())

    def line(self, text: str) -> None:
        if self.tty:
            print("\r\033[K" + text, end="", file=sys.stderr, flush=True)
        else:
            print(text, file=sys.stderr, flush=True)

    def feed(self, raw: str, t_case: list) -> None:
        m = RFM_LINE.match(re.sub(r"\x1b\[[0-9;]*m", "", raw).strip())
        if not m:
            return
        kind, i, n, name, stack = m.groups()
        rep = re.search(r"%repeat_index=(\d+)", name)
        check = re.sub(r"\s*%repeat_index=\d+", "", name)
        elapsed = time.monotonic() - self.t0
        if kind == "RUN":
            if not t_case:
                t_case[:] = [time.monotonic()]      # the session's first case
            k = f", {self.unit} {self.offset + int(rep.group(1)) + 1} of at most {self.max_pairs}" if rep else ""
            self.line(f"  {self.look}: {check} [{stack}]{k}; elapsed {fmt_s(elapsed)}")
            return
        if i and n:
            # the session's own pace: under the asynchronous policy ReFrame announces every case
            # (RUN) long before its job runs, so the time since a case's RUN line means nothing
            session_s = time.monotonic() - (t_case[0] if t_case else self.t0)
            left = (int(n) * (1 + self.more) - int(i)) * session_s / int(i) + self.later_s
            self.line(f"  {self.look}: {kind.lower()} {check} [{stack}] ({i}/{n}); elapsed {fmt_s(elapsed)}, "
                      f"about {fmt_s(left)} left")
        if kind == "FAIL" and self.tty:
            print(file=sys.stderr)


def reframe_cmd(target: Target, stacks: list[str], names: list[str], report: Path, extra=()) -> list[str]:
    """The session's `reframe` command (session.command): these stacks in this order, the checks whose
    display name matches one of `names`. ReFrame's asynchronous policy: the cluster itself runs one
    job at a time (--exclusive, --dependency=singleton, max_jobs=1), and the policy notices a
    finished job within a poll (poll_rate_* in config/common.py), where the serial policy's Slurm
    wait sleeps 1, 2, 3 s in turn: 0.5-1.5 s lost per launch, a quarter of a 2-s launch."""
    return session.command(target, stacks=stacks, policy="async",
                           extra=["-n", "|".join(names), "-x", ".*%size=paper", "--report-file", str(report), *extra])


# ReFrame and what it forks (sbatch, squeue) at the lowest CPU priority: on the test cluster the jobs
# share the host's cores with the harness, and ReFrame's polling took 0.1-0.3 of a core beside 2-rank
# benchmarks on 2 cores (measured: docs/performance.md). The jobs are started by slurmd, not by
# ReFrame, and keep their priority; between jobs the CPUs are idle and ReFrame runs at once. On a real
# site ReFrame runs on another node and this changes nothing.
HARNESS_NICE = 19


def run_reframe(target: Target, env: dict, stacks: list[str], names: list[str], repeat: int, report: Path,
                log: Path, progress: Progress, extra=()) -> tuple[int, float]:
    """One ReFrame session on the test cluster as it is now: the checks whose display name matches one
    of `names`, each repeated `repeat` times, stacks in this order. Output goes to `log`; the live line
    to stderr. A session that measured nothing (session.outcome) fails, its reason in the log.
    Returns (exit status, seconds)."""
    cmd = reframe_cmd(target, stacks, names, report, extra)
    env = session.session_env(stacks, {**env, "STACKPROOF_REPEAT": str(repeat)})
    t0 = time.monotonic()
    t_case: list = []
    with open(log, "a", buffering=1) as fh:          # line-buffered: the log follows the run
        fh.write(f"$ {' '.join(cmd)}\n")

        def on_line(line: str) -> None:
            fh.write(line)
            progress.feed(line, t_case)
        rc, lines = session.run_session(cmd, env, on_line, nice=HARNESS_NICE)
        cases = testcases(load_report(report)) if report.is_file() else None
        problems = session.outcome(replace(target, stacks=list(stacks)), cases, lines, ["-n", *names])
        for problem in problems:
            fh.write(f"error: {problem}\n")
    if progress.tty:
        print(file=sys.stderr)
    return rc or (1 if problems else 0), time.monotonic() - t0


def undecided_checks(doc: dict, stacks: list[str], design: Design) -> tuple[set[str], int, int]:
    """The test cases (display name without the repeat) with a stack-comparison metric whose call is
    not yet known, and (decided, total) metric counts."""
    _, cases = cases_from_report(doc, None, "this run")
    order, _ = resolve_labels(cases)
    baseline = stacks[0] if stacks[0] in order else order[0]
    ctx = Context(cases=cases, rows=perf_rows(cases), stacks=order, baseline=baseline, img=Path("."),
                  design=design)
    open_, n_dec, n = set(), 0, 0
    for row in verdict_rows(ctx):
        for v in row["vs"].values():
            n += 1
            if decided(v["verdict"]) or v["verdict"].startswith("not measured"):
                n_dec += 1
            else:
                open_.add(row["case"])
    return open_, n_dec, n


def job_seconds(testcases: list[dict]) -> list[tuple[dict, float]]:
    """(test case, seconds its job ran) for the cases that ran a job. The test cluster runs one job at
    a time (--dependency=singleton), so a job started when it was submitted or when the job before it
    ended, whichever came later; ReFrame's run phase would also count the time a job waited in the
    queue behind the others (the asynchronous policy submits ahead)."""
    timed = []
    for tc in testcases:
        sub, end = tc.get("job_submit_time"), tc.get("job_completion_time_unix")
        if tc.get("result") in ("pass", "fail") and all(isinstance(x, (int, float)) for x in (sub, end)):
            timed.append((float(end), float(sub), tc))
    out, prev_end = [], None
    for end, sub, tc in sorted(timed, key=lambda x: x[0]):
        start = sub if prev_end is None else max(sub, prev_end)
        out.append((tc, max(0.0, end - start)))
        prev_end = end
    return out


def look_estimate(doc: dict, cases: set[str], pairs: int, wall_s: float, add: int) -> float:
    """Seconds the next look should take: the jobs of the cases still open (their run phase in this
    look, per pair, times the pairs to add) plus this session's time outside jobs (ReFrame's start,
    the checks' setup), which every session pays once. A look re-runs only the open cases, so the
    last look's whole wall time per pair would overstate it."""
    in_jobs, open_s = 0.0, 0.0
    for tc, t in job_seconds(testcases(doc)):
        in_jobs += t
        if strip_repeat(str(tc.get("display_name") or "")) in cases:
            open_s += t
    return max(0.0, wall_s - in_jobs) + open_s / max(1, pairs) * add


def case_pattern(case: str) -> str:
    """A ReFrame -n regex selecting one test case whatever the repeat index and the order of its
    parameters (ReFrame matches the display name with its spaces removed)."""
    check, *params = case.split()
    looks = "".join(f"(?=.*{re.escape(p)}(%|$))" for p in params if p.startswith("%"))
    return f"^{re.escape(check)}" + (looks if looks else "(%|$)")


def pair_orders(stacks: list[str], offset: int, add: int) -> list[tuple[list[str], list[int]]]:
    """The sessions of one look: (stack order, the session's own repeat indices it runs). Pairs
    alternate A B, B A, A B, ... by their index over the whole comparison (offset + local index), so
    that what the first or the second launch of a pair gets for being first or second (measured here
    in an A/A run with A always first: AMG's setup 7 % slower second, OSU's latency 8 % faster) falls
    on each stack equally often and cancels instead of becoming a difference. ReFrame runs a session's
    stacks in one order (its partition's environments), hence one session per order."""
    ab = [i for i in range(add) if (offset + i) % 2 == 0]
    ba = [i for i in range(add) if (offset + i) % 2 == 1]
    return [(order, idx) for order, idx in ((list(stacks), ab), (list(reversed(stacks)), ba)) if idx]


def repeat_excludes(keep: list[int], add: int) -> list[str]:
    """ReFrame -x options leaving only these repeat indices of 0..add-1 (ReFrame matches the display
    name without spaces)."""
    drop = [i for i in range(add) if i not in keep]
    return ["-x", f"%repeat_index=({'|'.join(map(str, drop))})(%|$)"] if drop else []


def compare_stacks(target: Target, env: dict, out: Path, design: Design, budget_s: float,
                   extra: list[str]) -> tuple[dict, list[dict], str]:
    """The looks: pairs up to each look, then only the checks still undecided; each look's pairs in
    alternating order (pair_orders) over the target's stacks (the baseline first). Returns (merged
    report without record, look records, summary)."""
    stacks = target.stacks
    docs, offsets, looks = [], [], []
    open_: set[str] = set()
    names = [f"^{c}" for c in STACK_CHECKS]
    done_pairs = 0
    t0 = time.monotonic()
    progress = Progress(t0, design.max_pairs)
    merged = None
    for i, pairs in enumerate(design.looks, start=1):
        add = pairs - done_pairs
        spent = time.monotonic() - t0
        if looks and budget_s:
            need = look_estimate(docs[-1], open_, looks[-1]["pairs_added"], looks[-1]["wall_s"], add)
            if spent + need > budget_s:
                looks.append({"index": i, "pairs": pairs, "estimate_s": round(need),
                              "skipped": f"budget {budget_s:.0f} s would be exceeded (about {need:.0f} s more)"})
                break
        progress.look = f"look {i}/{len(design.looks)} ({pairs} pairs)"
        progress.offset = done_pairs
        progress.later_s = (look_estimate(docs[-1], open_, looks[-1]["pairs_added"], looks[-1]["wall_s"],
                                          design.max_pairs - pairs) if looks else 0.0)
        sessions, look_docs, wall, rcs = pair_orders(stacks, done_pairs, add), [], 0.0, []
        for j, (order, keep) in enumerate(sessions):
            report = out / f"reframe-look{i}{'ab'[j] if len(sessions) > 1 else ''}.json"
            report.unlink(missing_ok=True)
            later = sum(len(k) for _, k in sessions[j + 1:])
            progress.more = later / len(keep)
            once = ["-x", "^(?!.*%repeat_index=)"] if j else []   # checks without repeats: first session only
            rc, w = run_reframe(target, env, order, names, add, report, out / "reframe.log", progress,
                                [*extra, *repeat_excludes(keep, add), *once])
            if not report.is_file():
                raise StackproofError(f"ReFrame wrote no report in look {i} (exit {rc}); see {out / 'reframe.log'}")
            look_docs.append(load_report(report))
            wall, rcs = wall + w, rcs + [rc]
        docs.append(merge_reports(look_docs))
        offsets.append(done_pairs)
        done_pairs = pairs
        merged = merge_reports(docs, offsets)
        open_, n_dec, n = undecided_checks(merged, stacks, replace(design, ran=i))
        looks.append({"index": i, "pairs": pairs, "pairs_added": add, "wall_s": round(wall, 1),
                      "rc": max(rcs), "sessions": [{"order": o, "repeats": [done_pairs - add + k for k in keep]}
                                                   for o, keep in sessions],
                      "decided": n_dec, "metrics": n, "undecided": len(open_), "checks": sorted(open_)})
        print(f"  look {i}: {pairs} pairs, {n_dec} of {n} metrics decided ({fmt_s(wall)})", file=sys.stderr)
        if not open_:
            break
        names = [case_pattern(c) for c in sorted(open_)]
    last = looks[-1] if "decided" in looks[-1] else looks[-2]
    summary = f"{last['decided']} of {last['metrics']} metrics decided after {done_pairs} pairs"
    failed = failures(docs)
    if failed:
        summary += f"; {failed} test case(s) failed (report: Failed checks)"
    return merged, looks, summary


def node_check_names(profile: str, reserves: bool, mpibind: bool) -> list[str]:
    """The node checks that apply to `profile` on the cluster as it runs (a ReFrame session that
    selects none fails: it measured nothing): CoreSpecCheck where the profile reserves cores, the
    binding check under every profile where the mpibind plugin is loaded."""
    checks = (NODE_CHECKS if reserves else ()) + (MPIBIND_NODE_CHECKS if mpibind else ())
    return [f"^{c}.*%profile={re.escape(profile)}(%|$)" for c in checks]


def node_checks(target: Target, env: dict, out: Path, stack: str, profile: str, names: list[str], repeat: int,
                extra: list[str]) -> tuple[dict, str]:
    """The node checks `names` (node_check_names) of one profile (the cluster runs it now), with one stack."""
    report = out / f"reframe-node-{profile}.json"
    report.unlink(missing_ok=True)
    progress = Progress(time.monotonic(), repeat, look=f"node checks under {profile}", unit="repeat")
    rc, wall = run_reframe(target, {**env, "STACKPROOF_NOISE_STACK": stack}, [stack], names, repeat, report,
                           out / "reframe.log", progress, extra)
    if not report.is_file():
        return {"runs": []}, f"ReFrame wrote no report (exit {rc})"
    doc = load_report(report)
    return doc, session_summary(doc) + f" ({fmt_s(wall)})"


def session_summary(doc: dict) -> str:
    s = doc.get("session_info") or {}
    return f"{s.get('num_cases', '?')} cases, {s.get('num_failures', 0)} failed, {s.get('num_skipped', 0)} skipped"


def failures(docs: list[dict]) -> int:
    """Failed test cases of these sessions (a step with failures is never reported as passed)."""
    return sum(int((d.get("session_info") or {}).get("num_failures") or 0) for d in docs)


def timing(docs: list[dict], wall_s: float, looks: list[dict], costs: dict) -> dict:
    """Harness vs benchmark time: the jobs' own run time (job_seconds) summed over the test cases."""
    launch, n = 0.0, 0
    for doc in docs:
        for _tc, t in job_seconds(testcases(doc)):
            launch += t
            n += 1
    return {"wall_s": round(wall_s, 1), "launch_s": round(launch, 1), "launches": n, "looks": looks, **costs}
