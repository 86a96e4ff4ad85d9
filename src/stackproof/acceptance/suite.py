"""The ReFrame part of `make acceptance`: stack comparisons in looks of blocks of launches (until each
metric's call is known) and the node checks once per core-specialization profile.

run_reframe() runs one ReFrame session on the test cluster as it is now (i.e. under the profile it
was brought up with) through stackproof.reframe.session, in-process: no readiness check of its own
(the driver made the run's one). The comparison selects its checks by their tag (`compare`: every
check that runs in blocks, StackCheck), never by name. Each look is one session: every open check's
next blocks (STACKPROOF_FIRST_BLOCK.. : a block's global index names it, so looks never collide),
each block one job running `block_launches` launches of every stack, alternating A,B,B,A / B,A,A,B
(stackproof.reframe.block). stackproof.reframe_output.merge_reports makes one report of the looks,
and the driver one reframe-report.json of everything with a `stackproof` record (design, timing,
provenance) that `stackproof report` reads. Between looks the calls come from report.calls.calls_for
(calls as data: `Verdict.decided`, `Verdict.open`).
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from stackproof.comparison import Design, check_lone, metric_flags
from stackproof.errors import InputError, StackproofError
from stackproof.reframe import session
from stackproof.reframe.block import COMPARE_TAG
from stackproof.reframe.session import Target
from stackproof.reframe_output import final_cases, load_report, merge_reports, testcases
from stackproof.report.calls import calls_for
from stackproof.report.rows import cases_from_report, resolve_labels, strip_repeat
from stackproof.report.stats import RULES, design, open_design

# The system the sessions run on: the test cluster's cpu partition (its gpu partition has fake GPUs).
SYSTEM = "testcluster:cpu"
# FWQ per profile is the Table IV matrix (tableiv.py), not a node check: it needs the profiles
# interleaved in time and the noise daemon switched, which one session per profile cannot do.
# CoreSpecCheck checks a profile that reserves cores (CpuSpecList, bound daemons); MpibindBinding
# checks every profile where the mpibind plugin is loaded (node_check_names).
NODE_CHECKS = ("CoreSpecCheck",)
MPIBIND_NODE_CHECKS = ("MpibindBinding",)
# ReFrame's progress lines (the live line only: every fact the run keeps comes from the JSON report)
RFM_LINE = re.compile(r"^\[\s*(RUN|OK|FAIL|SKIP)\s*\]\s*(?:\(\s*(\d+)/(\d+)\)\s+)?(.+?)\s+/\w+\s+@\S+?\+(\S+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def fmt_s(s: float) -> str:
    return f"{int(s // 60)}m{int(s % 60):02d}s"


@dataclass
class Progress:
    """The live line: look, check, stack, block k of at most n, elapsed and estimated remaining."""
    t0: float
    max_blocks: int
    look: str = ""
    later_s: float = 0.0            # estimate for the looks after this one
    unit: str = "block"             # what a case's index counts
    done: int = 0
    tty: bool = field(default_factory=lambda: sys.stderr.isatty())

    def line(self, text: str) -> None:
        if self.tty:
            print("\r\033[K" + text, end="", file=sys.stderr, flush=True)
        else:
            print(text, file=sys.stderr, flush=True)

    def feed(self, raw: str, t_case: list) -> None:
        m = RFM_LINE.match(ANSI.sub("", raw).strip())
        if not m:
            return
        kind, i, n, name, stack = m.groups()
        blk = re.search(r"%block_index=(\d+)", name)
        check = re.sub(r"\s*%block_index=\d+", "", name)
        elapsed = time.monotonic() - self.t0
        if kind == "RUN":
            if not t_case:
                t_case[:] = [time.monotonic()]      # the session's first case
            k = f", {self.unit} {int(blk.group(1)) + 1} of at most {self.max_blocks}" if blk else ""
            self.line(f"  {self.look}: {check} [{stack}]{k}; elapsed {fmt_s(elapsed)}")
            return
        if i and n:
            # the session's own pace: under the asynchronous policy ReFrame announces every case
            # (RUN) long before its job runs, so the time since a case's RUN line means nothing
            session_s = time.monotonic() - (t_case[0] if t_case else self.t0)
            left = (int(n) - int(i)) * session_s / int(i) + self.later_s
            self.line(f"  {self.look}: {kind.lower()} {check} [{stack}] ({i}/{n}); elapsed {fmt_s(elapsed)}, "
                      f"about {fmt_s(left)} left")
        if kind == "FAIL" and self.tty:
            print(file=sys.stderr)


def reframe_cmd(target: Target, stacks: list[str], select: list[str], report: Path, extra=()) -> list[str]:
    """The session's `reframe` command (session.command): these stacks, the checks `select` picks
    (ReFrame -t / -n options), ReFrame's performance report at its end (each stack's figures, in
    reframe.log). ReFrame's asynchronous policy: the cluster itself runs one job at a time
    (--exclusive, --dependency=singleton, max_jobs=1), and the policy notices a finished job within a
    poll (poll_rate_* in config/common.py), where the serial policy's Slurm wait sleeps in growing
    steps (docs/performance.md, "Measured here, cited by the code")."""
    return session.command(target, stacks=stacks, policy="async",
                           extra=[*select, "-x", ".*%size=paper", "--performance-report", "--report-file", str(report),
                                  *extra])


# ReFrame and what it forks (sbatch, squeue) at the lowest CPU priority: on the test cluster the jobs
# share the host's cores with the harness (docs/performance.md). The jobs are started by slurmd, not
# by ReFrame, and keep their priority; between jobs the CPUs are idle and ReFrame runs at once. On a
# real site ReFrame runs on another node and this changes nothing.
HARNESS_NICE = 19


def block_env(stacks: list[str], first: int, count: int, per_stack: int) -> dict:
    """The variables that shape a session's blocks (StackCheck): its stacks (baseline first), the
    global index of its first block, how many blocks, launches per stack in each."""
    return {"STACKPROOF_BLOCK_STACKS": ",".join(stacks), "STACKPROOF_FIRST_BLOCK": str(first),
            "STACKPROOF_BLOCKS": str(count), "STACKPROOF_BLOCK_LAUNCHES": str(per_stack)}


def run_reframe(target: Target, env: dict, stacks: list[str], select: list[str], report: Path, log: Path,
                progress: Progress, extra=()) -> tuple[int, float]:
    """One ReFrame session on the test cluster as it is now: the checks `select` picks, stacks in this
    order, `env` (block_env for a comparison). Output goes to `log`; the live line to stderr. A
    session that measured nothing (session.outcome) fails, its reason in the log. Returns (exit
    status, seconds)."""
    cmd = reframe_cmd(target, stacks, select, report, extra)
    env = session.session_env(stacks, env)
    t0 = time.monotonic()
    t_case: list = []
    with open(log, "a", buffering=1) as fh:          # line-buffered: the log follows the run
        fh.write(f"$ {' '.join(cmd)}\n")

        def on_line(line: str) -> None:
            fh.write(line)
            progress.feed(line, t_case)
        rc, _ = session.run_session(cmd, env, on_line, nice=HARNESS_NICE)
        cases = testcases(load_report(report)) if report.is_file() else None
        problems = session.outcome(replace(target, stacks=list(stacks)), cases, select)
        for problem in problems:
            fh.write(f"error: {problem}\n")
    if progress.tty:
        print(file=sys.stderr)
    return rc or (1 if problems else 0), time.monotonic() - t0


@dataclass(frozen=True)
class LookCalls:
    """What a look decided: the test cases (display names without the block) with a metric still
    open, counts of decided metrics (all and headline), and per open headline metric the launches per
    stack more its spread suggests (None: no projection)."""
    open_checks: frozenset
    decided: int
    metrics: int
    headline_decided: int
    headline: int
    more: dict

    @property
    def headline_open(self) -> bool:
        return self.headline_decided < self.headline


def look_calls(doc: dict, stacks: list[str], design: Design) -> LookCalls:
    """The calls of every stack-comparison metric after a look (report.calls.calls_for)."""
    _, cases = cases_from_report(doc, None, "this run")
    order, _ = resolve_labels(cases)
    baseline = stacks[0] if stacks[0] in order else order[0]
    open_, dec, n, hdec, h, more = set(), 0, 0, 0, 0, {}
    for mc in calls_for(cases, order, design, baseline):
        n += 1
        h += mc.headline
        done = mc.call.verdict.decided or not mc.call.verdict.open        # not measured: more launches won't help
        dec += done
        hdec += done and mc.headline
        if not done:
            open_.add(mc.case)
            if mc.headline:
                more[f"{mc.case}: {mc.var} ({mc.stack})"] = mc.call.more
    return LookCalls(frozenset(open_), dec, n, hdec, h, more)


def job_seconds(cases: list[dict]) -> list[tuple[dict, float]]:
    """(test case, seconds its job ran) for the cases that ran a job. The test cluster runs one job at
    a time (--dependency=singleton), so a job started when it was submitted or when the job before it
    ended, whichever came later; ReFrame's run phase would also count the time a job waited in the
    queue behind the others (the asynchronous policy submits ahead)."""
    timed = []
    for tc in cases:
        sub, end = tc.get("job_submit_time"), tc.get("job_completion_time_unix")
        if tc.get("result") in ("pass", "fail") and all(isinstance(x, (int, float)) for x in (sub, end)):
            timed.append((float(end), float(sub), tc))
    out, prev_end = [], None
    for end, sub, tc in sorted(timed, key=lambda x: x[0]):
        start = sub if prev_end is None else max(sub, prev_end)
        out.append((tc, max(0.0, end - start)))
        prev_end = end
    return out


def look_estimate(doc: dict, cases: set[str], blocks: int, wall_s: float, add: int) -> float:
    """Seconds the next look should take: the jobs of the cases still open (their run phase in this
    look, per block, times the blocks to add) plus this session's time outside jobs (ReFrame's start,
    the checks' setup), which every session pays once."""
    in_jobs, open_s = 0.0, 0.0
    for tc, t in job_seconds(testcases(doc)):
        in_jobs += t
        if strip_repeat(str(tc.get("display_name") or "")) in cases:
            open_s += t
    return max(0.0, wall_s - in_jobs) + open_s / max(1, blocks) * add


def case_pattern(case: str) -> str:
    """A ReFrame -n regex selecting one test case whatever its block and the order of its parameters
    (ReFrame matches the display name with its spaces removed)."""
    check, *params = case.split()
    looks = "".join(f"(?=.*{re.escape(p)}(%|$))" for p in params if p.startswith("%"))
    return f"^{re.escape(check)}" + (looks if looks else "(%|$)")


def look_sizes(design: Design, per_stack: int):
    """(look, launches per stack, blocks) of each look the design allows, in order: a fixed design's
    looks, an open design's without end. A look's size must be a whole number of blocks."""
    j = 1
    while design.open or j <= len(design.looks):
        size = design.size(j)
        if size % per_stack:
            raise StackproofError(f"look {j}: {size} launches per stack is not a whole number of blocks of "
                                  f"{per_stack} launches per stack (--block-launches)")
        yield j, size, size // per_stack
        j += 1


def compare_stacks(target: Target, env: dict, out: Path, design: Design, budget_s: float, extra: list[str], *,
                   per_stack: int = 2, until_decided: bool = False) -> tuple[dict, list[dict], str]:
    """The looks: blocks up to each look's size (launches per stack), then only the checks still open;
    with `until_decided` (an open design) looks go on until every headline metric is decided or the
    next look would end after `budget_s`. Returns (merged report without record, look records,
    summary)."""
    stacks = target.stacks
    docs, looks = [], []
    open_: set[str] = set()
    select = ["-t", f"^{COMPARE_TAG}$"]
    done_blocks = 0
    t0 = time.monotonic()
    bound = "budget" if design.open else f"{design.size(len(design.looks)) // per_stack}"
    progress = Progress(t0, design.size(1) // per_stack if design.open else int(bound))
    merged, calls = None, None
    for i, size, blocks in look_sizes(design, per_stack):
        add = blocks - done_blocks
        spent = time.monotonic() - t0
        need = (look_estimate(docs[-1], open_, looks[-1]["blocks_added"], looks[-1]["wall_s"], add)
                if looks else 0.0)
        if looks and budget_s and spent + need > budget_s:
            looks.append({"index": i, "launches": size, "estimate_s": round(need),
                          "skipped": f"budget {budget_s:.0f} s would be exceeded (about {need:.0f} s more)"})
            break
        progress.look = f"look {i}{'' if design.open else f'/{len(design.looks)}'} ({size} launches per stack)"
        progress.max_blocks = blocks
        report = out / f"reframe-look{i}.json"
        report.unlink(missing_ok=True)
        rc, wall = run_reframe(target, {**env, **block_env(stacks, done_blocks, add, per_stack)}, stacks, select,
                               report, out / "reframe.log", progress, extra)
        if not report.is_file():
            raise StackproofError(f"ReFrame wrote no report in look {i} (exit {rc}); see {out / 'reframe.log'}")
        docs.append(load_report(report))
        done_blocks = blocks
        merged = merge_reports(docs)
        calls = look_calls(merged, stacks, replace(design, ran=i))
        open_ = set(calls.open_checks)
        looks.append({"index": i, "launches": size, "blocks": blocks, "blocks_added": add, "wall_s": round(wall, 1),
                      "rc": rc, "decided": calls.decided, "metrics": calls.metrics,
                      "headline_decided": calls.headline_decided, "headline": calls.headline,
                      "undecided": len(open_), "checks": sorted(open_), "more": calls.more})
        print(f"  look {i}: {size} launches per stack, {calls.decided} of {calls.metrics} metrics decided "
              f"({calls.headline_decided} of {calls.headline} headline) in {fmt_s(wall)}", file=sys.stderr)
        if not open_ or (until_decided and not calls.headline_open):
            break
        select = ["-t", f"^{COMPARE_TAG}$", "-n", "|".join(case_pattern(c) for c in sorted(open_))]
    ran = [lk for lk in looks if "decided" in lk]
    if not ran:
        raise StackproofError("no look ran (the budget is smaller than one look)")
    last = ran[-1]
    summary = (f"{last['decided']} of {last['metrics']} metrics decided ({last['headline_decided']} of "
               f"{last['headline']} headline) after {last['launches']} launches per stack")
    if calls is not None and calls.more:
        needs = [f"{k} about {v} more" if v else f"{k} beyond reach" for k, v in sorted(calls.more.items())]
        summary += "; open headline metrics (launches per stack their spread suggests): " + "; ".join(needs)
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


def node_checks(target: Target, env: dict, out: Path, stack: str, profile: str, names: list[str],
                extra: list[str]) -> tuple[dict, str]:
    """The node checks `names` (node_check_names) of one profile (the cluster runs it now), with one stack."""
    report = out / f"reframe-node-{profile}.json"
    report.unlink(missing_ok=True)
    progress = Progress(time.monotonic(), 1, look=f"node checks under {profile}", unit="block")
    rc, wall = run_reframe(target, {**env, "STACKPROOF_NOISE_STACK": stack}, [stack], ["-n", "|".join(names)], report,
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
    """Harness vs benchmark time: the jobs' own run time (job_seconds) summed over the test cases, and
    the launches inside them."""
    in_jobs, jobs, launches = 0.0, 0, 0
    for doc in docs:
        for _tc, t in job_seconds(testcases(doc)):
            in_jobs += t
            jobs += 1
        launches += sum(len(tc.get("launches") or []) for tc in final_cases(doc) if tc.get("result") == "pass")
    return {"wall_s": round(wall_s, 1), "launch_s": round(in_jobs, 1), "jobs": jobs, "launches": launches,
            "looks": looks, **costs}


def declared_metrics(target: Target, extra: list[str]) -> tuple[int, int]:
    """(metrics, headline metrics) the comparison will judge, from the checks' own declarations
    (`reframe --describe` of the checks tagged compare with the run's sizing `extra`: each variant's
    figures and its perf_headline); checks whose benchmark a stack lacks still count, so the
    lone-metric check errs on the strict side."""
    cmd = [session.reframe_executable(), "-C", str(session.CONFIG), "--system", target.system,
           "-p", "^(" + "|".join(target.stacks) + ")$", "-t", f"^{COMPARE_TAG}$", "-x", ".*%size=paper", *extra,
           "--describe"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=session.session_env(target.stacks))
    try:
        described = json.loads(proc.stdout) if proc.returncode == 0 else None
    except ValueError:
        described = None
    if not isinstance(described, list):
        raise StackproofError(f"reframe --describe of the comparison's checks failed: {proc.stderr.strip()[-300:]}")
    total = headline = 0
    variants = {strip_repeat(str(d.get("display_name") or "")): d for d in described}   # one per case, any block
    for d in variants.values():
        names = list(d.get("perf_variables") or [])
        heads, curve = d.get("perf_headline") or [], d.get("perf_curve") or []
        judged = [v for v in names if not any(fnmatch.fnmatchcase(v, c) for c in curve)
                  or any(fnmatch.fnmatchcase(v, h) for h in heads)]
        total += len(judged)
        headline += sum(any(fnmatch.fnmatchcase(v, h) for h in heads) for v in judged)
    return total, headline


def lone_metric_check(args, target: Target, extra: list[str]) -> str | None:
    """Refuse (InputError, one line) a design whose first look cannot call a lone headline metric among
    the metrics the checks declare (comparison.check_lone), saying the launches it needs. A fixed
    `--repeat N` is the smoke form (the laptop image's CI runs --repeat 3): it runs, with the reason as
    a warning (returned), since its calls then need several metrics apart at once."""
    total, head = declared_metrics(target, extra)
    try:
        check_lone(args.design, metric_flags(total, head))
    except ValueError as exc:
        msg = f"{exc} ({total} metrics, {head} headline, as the checks declare them)"
        if args.repeat is None:
            raise InputError(msg) from None
        return msg + ": a smoke run (--repeat)"
    return None


# ---- the comparison's command-line options (`python -m stackproof.acceptance`, the driver) -------------

DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$")


def duration_s(text: str) -> float:
    """Seconds of a duration written 30m, 1h, 1h30m, 90s, 1.5h (a unit is required; 0 means none);
    InputError in one line otherwise."""
    m = DURATION.match(text.strip()) if isinstance(text, str) else None
    if not m or not any(m.groups()):
        if isinstance(text, str) and text.strip() == "0":
            return 0.0
        raise InputError(f"--budget {text!r}: not a duration (write it like 30m, 1h, 1h30m or 90s)")
    h, mnt, s = (float(x) if x else 0.0 for x in m.groups())
    return h * 3600 + mnt * 60 + s


def add_arguments(p) -> None:
    """The options of the stack comparison (blocks, looks, test, budget)."""
    p.add_argument("--min-pairs", type=int, default=8, metavar="N",
                   help="launches per stack before the first look (default 8: the look every 10-minute run makes)")
    p.add_argument("--max-pairs", type=int, default=16, metavar="N",
                   help="launches per stack at most (default 16: a second look where the budget allows it)")
    p.add_argument("--looks", type=int, default=2, help="looks from min to max launches (default 2)")
    p.add_argument("--block-launches", type=int, default=4, metavar="L",
                   help="launches per stack in one block, one job (4: A,B,B,A,A,B,B,A; 2: A,B,B,A; default 4: "
                        "half the jobs of 2, docs/performance.md)")
    p.add_argument("--until-decided", action="store_true",
                   help="keep adding blocks (a look every --look-step launches per stack, alpha spent so that any "
                        "number of looks stays within 5 %%) until every headline metric is decided or --budget ends")
    p.add_argument("--look-step", type=int, default=8, metavar="N",
                   help="with --until-decided: launches per stack each look adds (default 8)")
    pairs = p.add_mutually_exclusive_group()
    pairs.add_argument("--paired", action="store_true",
                       help="compare within each block or pair (its launches ran one right after the other) at a "
                            "look where that test can reach its alpha, else as two samples")
    pairs.add_argument("--unpaired", action="store_true",
                       help="two samples (Mann-Whitney) at every look; by default a look whose within-block test can "
                            "reach half its alpha takes the better of both tests, each at half of it")
    p.add_argument("--rule", choices=RULES, default="bh",
                   help="the error control over all metrics at each look: bh (Benjamini-Hochberg, default) or holm")
    p.add_argument("--repeat", type=int, metavar="N",
                   help="a fixed number of launches per stack, one look at the whole 5 %% "
                        "(--min-pairs N --max-pairs N --looks 1)")
    p.add_argument("--margin", type=float, default=0.05,
                   help="equivalence margin: an interval inside +-MARGIN is 'no difference' (default 0.05)")
    p.add_argument("--budget", default=None, metavar="DURATION",
                   help="wall-clock budget of the stack comparison (30m, 1h, 90s): no look starts that would end "
                        "after it (default 9m: both looks and a whole run within 12 minutes here, "
                        "docs/performance.md; with --until-decided 30m; 0: none)")
    p.add_argument("--budget-min", type=float, default=None, help=argparse.SUPPRESS)   # before --budget


def check_arguments(args) -> None:
    """The comparison's design from the options (`args.design`, `args.block_launches`, `args.budget_s`);
    InputError, one line, on bad input."""
    if args.until_decided and len(args.stack) < 2:
        raise InputError(f"--until-decided compares stacks: name at least two (--stack A --stack B), got "
                         f"{', '.join(args.stack)}")
    if args.budget is not None and args.budget_min is not None:
        raise InputError("--budget and --budget-min: give one (--budget 9m)")
    if args.budget is not None:
        args.budget_s = duration_s(args.budget)
    elif args.budget_min is not None:
        args.budget_s = 60.0 * args.budget_min
    else:
        args.budget_s = 1800.0 if args.until_decided else 540.0
    if not 0 <= args.budget_s <= 7 * 24 * 3600:
        raise InputError(f"--budget {args.budget}: at most a week")
    if args.repeat is not None:
        args.min_pairs = args.max_pairs = args.repeat
        args.looks = 1
    if args.block_launches < 1:
        raise InputError(f"--block-launches {args.block_launches}: at least 1 launch per stack in a block")
    sizes = [args.min_pairs, args.look_step] if args.until_decided else [args.min_pairs, args.max_pairs]
    # blocks cancel a launch's position when a look holds whole A,B,B,A groups (report.stats.design:
    # multiples of 4 launches per stack); a size that does not (--repeat 3) runs blocks of one launch
    # per stack (A B, B A: pairs) judged as pairs and two samples
    blocks = all(n % 4 == 0 for n in sizes) and all(n % args.block_launches == 0 for n in sizes)
    if not blocks:
        args.block_launches = 1
    either = not (args.paired or args.unpaired)
    try:
        if args.until_decided:
            args.design = open_design(args.min_pairs, args.look_step, margin=args.margin, rule=args.rule,
                                      either=either, paired=args.paired, blocks=blocks)
        else:
            args.design = design(args.min_pairs, args.max_pairs, args.looks, margin=args.margin, paired=args.paired,
                                 rule=args.rule, either=either, blocks=blocks)
    except ValueError as exc:
        raise InputError(str(exc)) from None
