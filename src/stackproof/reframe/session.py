"""The one way stackproof runs ReFrame. A *run* of the acceptance suite is one or more ReFrame
sessions over the same target (a system of the ReFrame configuration and the stacks to measure on
it); `make reframe-run` (reframe-tests/run.py) and `make acceptance` (stackproof.acceptance) both go
through these functions, in this order:

  target(system, stacks)       the system and stacks, checked against the ReFrame configuration
  preflight(target)            `stackproof stack check` of every stack: once per run, before anything
  cluster_up(profile, daemon)  the test cluster in a core-specialization profile (and noise daemon)
  command(target, ...)         the `reframe` command line of one session
  run_session(cmd, ...)        one ReFrame session, in its own process group, its output line by line
  merge_reports(docs, ...)     the one rule that makes one ReFrame report of several sessions
                               (stackproof.reframe_output, with the report reader)
  outcome(target, ...)         a run that measured nothing fails (stackproof.report.outcome)

run_profiles() strings them together for a run over several profiles. ReFrame runs in a subprocess
(it owns its process: signals, logging, sys.exit); everything around it runs in the caller's process.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from reframe.utility import import_module_from_file

from stackproof.cluster import Cluster, settings_with
from stackproof.errors import InputError, StackproofError
from stackproof.nodes.nodetype import from_host
from stackproof.nodes.profiles import plan, profile_names
from stackproof.reframe_output import SITE_CONFIG, load_report, merge_reports, reframe_executable, testcases
from stackproof.report.outcome import problems
from stackproof.stacks.preflight import ensure_ready

CONFIG = SITE_CONFIG


# ---- the target: a system and its stacks ------------------------------------------------------------

@dataclass
class Target:
    """What a run measures: `system` (S or S:PART) of the ReFrame configuration and `stacks` (its
    environments, in the order a pair runs them), with the configuration facts a run needs."""
    system: str
    stacks: list[str]
    partitions: list[dict] = field(default_factory=list)     # the system's partitions (configuration)
    config: dict = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return self.system.split(":")[0]

    @property
    def kind(self) -> str:
        """`slurm` when the partitions launch with srun, else `local` (the stack file's launcher key)."""
        return "slurm" if any(p.get("launcher") == "srun" for p in self.partitions) else "local"

    @property
    def switchable(self) -> bool:
        """Whether stackproof switches the system's profiles (the test cluster: feature `profiles`)."""
        return any("profiles" in p.get("features", []) for p in self.partitions)

    def gpu_partitions(self, extra=()) -> list[str]:
        """'sys:part' of the partitions with real GPUs (feature `gpu`, not `fakegpu`) a session covers:
        the target's system, or the last --system of REFRAME ARGS `extra` (ReFrame's rule)."""
        system = self.system
        for i, arg in enumerate(extra):
            if arg == "--system" and i + 1 < len(extra):
                system = extra[i + 1]
            elif arg.startswith("--system="):
                system = arg.split("=", 1)[1]
        name, _, only = system.partition(":")
        return [f"{name}:{p['name']}" for s in self.config.get("systems", []) if s["name"] == name
                for p in s["partitions"] if "gpu" in p.get("features", []) and "fakegpu" not in p.get("features", [])
                and only in ("", p["name"])]


@contextmanager
def _requested_system(system: str):
    """The configuration reads only the node types of the system a run asks for (config/partitions.py
    `requested_system`: --system on the command line, else RFM_SYSTEM)."""
    old = os.environ.get("RFM_SYSTEM")
    os.environ["RFM_SYSTEM"] = system
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("RFM_SYSTEM", None)
        else:
            os.environ["RFM_SYSTEM"] = old


def load_config(system: str) -> tuple[dict, dict]:
    """(ReFrame's site configuration as ReFrame reads it, {system: why it is left out}) for a run on
    `system`. Its own errors (lock probe, node types) are a StackproofError naming the file."""
    try:
        with _requested_system(system.split(":")[0]):
            config = import_module_from_file(str(CONFIG)).site_configuration
        import partitions           # config/partitions.py: site.py put its directory on the path
    except Exception as exc:     # the configuration's own errors (lock probe, node types) are user errors
        raise StackproofError(f"cannot load {CONFIG}: {exc}") from None
    return config, dict(partitions.UNAVAILABLE)


def target(system: str, stacks: list[str]) -> Target:
    """The target, checked: an unknown system or a stack the system does not define is an error naming
    what is known (ReFrame itself would run zero tests for an unknown stack)."""
    config, unavailable = load_config(system)
    name = system.split(":")[0]
    found = [s for s in config["systems"] if s["name"] == name]
    if not found:
        if unavailable.get(name):
            raise StackproofError(f"system {name!r} is not available here: {unavailable[name]}")
        known = ", ".join(s["name"] for s in config["systems"])
        raise StackproofError(f"unknown system {name!r} (known: {known})")
    import partitions
    defined = sorted({env for p in found[0]["partitions"] for env in p["environs"]
                      if env not in partitions.CONVENTIONAL})
    unknown = [s for s in stacks if s not in defined]
    if unknown:
        raise StackproofError(f"unknown stack {', '.join(map(repr, unknown))} for system {name!r} "
                              f"(known: {', '.join(defined)}): describe it in reframe-tests/stacks/NAME.yaml "
                              "(or a directory in $STACKPROOF_STACKS_DIR), see docs/acceptance.md")
    return Target(system, list(stacks), found[0]["partitions"], config)


# ---- before the sessions -----------------------------------------------------------------------------

def preflight(tgt: Target) -> list[str]:
    """`stackproof stack check NAME --kind local|slurm` for every stack (stack file, launcher, binaries,
    MPI linkage, vendor environment): its notes, or StackError naming each problem and the fix. Once
    per run: the sessions after it do not check again."""
    return ensure_ready(tgt.stacks, tgt.kind)


def profiles_to_run(requested: list[str]) -> list[str]:
    """The profiles of --profile, each once (`all`: every catalog profile the local node type can run)."""
    known = profile_names()
    if "all" in requested:
        nt = from_host("local")
        out = []
        for name in known:
            try:
                plan(nt, name)
            except StackproofError:
                continue
            out.append(name)
        return out
    unknown = [p for p in requested if p not in known]
    if unknown:
        raise InputError(f"unknown profile {', '.join(unknown)} (known: {', '.join(known)}, all)")
    return list(dict.fromkeys(requested))


def cluster_up(profile: str, noise_daemon: str = "", *, base=None, cluster=None):
    """The test cluster up in `profile` with `noise_daemon` ('' none); every other setting from `base`
    (a cluster.state.Settings), or, without one, the running cluster's (as `stackproof cluster up
    --profile P --noise-daemon D` keeps them). Returns its State."""
    cluster = cluster or Cluster()
    if base is None:
        st = cluster.load_state()
        settings = settings_with(st.settings if st else None, profile=profile, noise_daemon=noise_daemon or "none")
    else:
        settings = replace(base, profile=profile, noise_daemon=noise_daemon)
    return cluster.up(settings)


# ---- one session -------------------------------------------------------------------------------------

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


def command(tgt: Target, *, stacks: list[str] | None = None, tag: str | None = None, dry_run: bool = False,
            policy: str = "serial", extra=()) -> list[str]:
    """`reframe -C reframe-tests/config/site.py --system S -p '^(STACKS)$' -r` for the target's stacks
    (or `stacks`, one pair order of them), the session tagged with them (`stack=A+B`); REFRAME ARGS
    `extra` last (ReFrame: a later option wins)."""
    stacks = list(stacks or tgt.stacks)
    cmd = [reframe_executable(), "-C", str(CONFIG), "--system", tgt.system,
           "-p", "^(" + "|".join(stacks) + ")$", "--session-extras", f"stack={'+'.join(stacks)}",
           f"--exec-policy={policy}"]
    if tag:
        cmd += ["-t", tag]
    return cmd + (["--dry-run"] if dry_run else ["-r"]) + list(extra)


def compare_groups(system: str, tag: str = "compare") -> list[tuple[str, list[str]]]:
    """(check, columns) for ReFrame's --performance-compare of every check tagged `tag` on `system`:
    `basename` and the check's own parameters (its blocks left out: they are samples of one case), as
    `reframe --describe` names them. ReFrame cannot join a parameter column one side lacks, so each
    check is compared on its own (make reframe-compare)."""
    proc = subprocess.run([reframe_executable(), "-C", str(CONFIG), "--system", system, "-t", f"^{tag}$",
                           "--describe"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise StackproofError(f"reframe --describe -t {tag}: {proc.stderr.strip()[-300:] or proc.stdout[-300:]}")
    try:
        described = json.loads(proc.stdout)
    except ValueError:
        raise StackproofError(f"reframe --describe: unexpected output {proc.stdout[:200]!r}") from None
    out: dict[str, list[str]] = {}
    for d in described:
        params = [w.split("=", 1)[0][1:] for w in str(d.get("display_name", "")).split()[1:] if w.startswith("%")]
        cols = out.setdefault(str(d.get("@class")), ["basename"])
        cols += [p for p in params if p not in ("block_index",) and not p.startswith(".") and p not in cols]
    return sorted(out.items())


def session_env(stacks: list[str], env: dict | None = None) -> dict:
    """The session's environment: ReFrame runs a test's environments in the partition's order, the
    stacks in the order given (config/partitions.py run_order), so a pair runs A B or B A as asked."""
    return {**(os.environ if env is None else env), "STACKPROOF_STACK_ORDER": ",".join(stacks)}


_running: list[subprocess.Popen] = []


def _echo(line: str) -> None:
    sys.stdout.write(line)
    sys.stdout.flush()


def run_session(cmd: list[str], env: dict | None = None, on_line: Callable[[str], None] = _echo,
                nice: int = 0) -> tuple[int, list[str]]:
    """One ReFrame session: (exit status, its output lines), each line handed to `on_line` as it comes.
    It runs in its own process group, so a signal reaches it only through stop_sessions(), in order
    (ReFrame first cancels its jobs and writes its report); `nice` > 0 lowers its CPU priority (and
    that of what it forks) by that much."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            start_new_session=True, preexec_fn=(lambda: os.nice(nice)) if nice > 0 else None)
    _running.append(proc)          # stays listed when interrupted: stop_sessions() ends it
    lines = []
    for line in proc.stdout:
        lines.append(line)
        on_line(line)
    rc = proc.wait()
    _running.remove(proc)
    return rc, lines


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_sessions(grace: float = 20.0) -> None:
    """SIGINT to each running session's process group (ReFrame cancels its jobs and writes its
    report), SIGTERM after `grace` s, SIGKILL after twice that; returns when every process of the
    group is gone, not only its leader."""
    for p in list(_running):
        pgid = p.pid                          # start_new_session: the leader's pid is the group id
        for sig, wait in ((signal.SIGINT, grace), (signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            if not _group_alive(pgid):
                break
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            end = time.monotonic() + wait
            while time.monotonic() < end and _group_alive(pgid):
                p.poll()                      # reap the leader so the group can empty
                time.sleep(0.2)
        p.poll()
        _running.remove(p)


# ---- the run outcome ---------------------------------------------------------------------------------

def narrowed(extra, tag: str | None) -> bool:
    """Whether the user selected checks by name or tag (then a GPU partition may run no GPU check)."""
    return any(a in ("-n", "--name", "-t", "--tag", "-x", "--exclude") or
               a.startswith(("--name=", "--tag=", "--exclude=")) for a in extra) or tag not in (None, "acceptance", "gpu")


def outcome(tgt: Target, cases: list[dict] | None, extra=(), tag: str | None = None) -> list[str]:
    """The problems of a run that measured nothing although ReFrame passed (stackproof.report.outcome):
    no test case selected, or a GPU partition whose GPU checks were all skipped."""
    what = f"system {tgt.system} stack {'+'.join(tgt.stacks)}" + (f" tag {tag}" if tag else "")
    return problems(cases, tgt.gpu_partitions(extra), narrowed(extra, tag), what)


# ---- a run over the profiles -------------------------------------------------------------------------

def run_profiles(tgt: Target, profiles: list[str], daemons: list[str], *, tag: str | None = None, extra=(),
                 prog: str = "stackproof") -> tuple[int, list[str]]:
    """One cluster configuration and one ReFrame session per profile, then per noise daemon and
    profile one more session running only FWQNoise; the reports merged into REFRAME ARGS'
    --report-file (else a temporary one). Returns (exit status, the run outcome's problems)."""
    import partitions           # config/partitions.py (target() loaded the configuration)
    report, extra = report_option(extra)
    tmpdir = tempfile.mkdtemp(prefix="stackproof-profiles-")
    runs = [(p, "") for p in profiles] + [(p, d) for d in daemons for p in profiles]
    docs, rc = [], 0
    for profile, daemon in runs:
        up = f"stackproof cluster up --profile {profile} --noise-daemon {daemon or 'none'}"
        print(f"{prog}: {up}", flush=True)
        try:
            cluster_up(profile, daemon)
        except StackproofError as exc:
            print(f"{prog}: error: `{up}` failed: {exc}", file=sys.stderr, flush=True)
            rc = rc or 1
            continue
        path = os.path.join(tmpdir, f"report-{profile}-{daemon or 'none'}.json")
        # each session its own stage/output tree: a later session that skips a check would otherwise
        # clean the output (e.g. the FWQ trace) an earlier session kept for it
        prefix = os.path.join(partitions.default_prefix(), "sessions", f"{profile}-{daemon or 'none'}")
        only = ["-n", "FWQNoise"] if daemon else []
        session_rc, _ = run_session(
            command(tgt, tag=tag, extra=[*extra, *only, "--prefix", prefix, "--report-file", path]),
            session_env(tgt.stacks))
        rc = rc or session_rc
        if os.path.isfile(path):
            docs.append(load_report(path))
    cases = None
    if docs:
        merged = merge_reports(docs)
        Path(report or os.path.join(tmpdir, "report.json")).write_text(json.dumps(merged, indent=1))
        cases = testcases(merged)
    found = outcome(tgt, cases, extra, tag)
    shutil.rmtree(tmpdir, ignore_errors=True)
    return rc or (1 if found else 0), found


def run_once(tgt: Target, *, tag: str | None = None, dry_run: bool = False, extra=()) -> tuple[int, list[str]]:
    """One ReFrame session on the system as it is; (exit status, the run outcome's problems). A report
    that cannot be read is one of the problems."""
    report, _ = report_option(extra)
    tmpdir = None
    if report is None:
        tmpdir = tempfile.mkdtemp(prefix="stackproof-run-")
        report = os.path.join(tmpdir, "report.json")
        extra = [*extra, "--report-file", report]
    rc, _ = run_session(command(tgt, tag=tag, dry_run=dry_run, extra=extra), session_env(tgt.stacks))
    cases = None
    try:
        if os.path.isfile(report):
            cases = testcases(load_report(report))
    except StackproofError as exc:
        return rc or 1, [f"cannot read the ReFrame report: {exc}"]
    finally:
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
    found = outcome(tgt, cases, extra, tag)
    return rc or (1 if found else 0), found
