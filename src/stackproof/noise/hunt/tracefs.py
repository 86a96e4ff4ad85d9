"""Record kernel events with tracefs: a private trace instance with its own buffer, events, CPU mask
and clock, removed again afterwards (the global instance and other users are left alone).

    with TraceSession(cpus={0, 1}, buffer_kb=4096) as ts:
        ...workload...
    ts.text        # the text trace (`trace` file of the instance)
    ts.lost        # events lost per CPU (overrun + dropped + commit overrun): must be 0
    ts.clock       # "mono_raw" when the kernel has it (FWQ's clock); else the offset is calibrated
    ts.sync        # [(trace ts ns, CLOCK_MONOTONIC_RAW ns at the write)] sync markers

Events are always recorded with tracefs (FWQ is the workload whose detours are attributed). When
the kernel has the osnoise tracer (`backend()`), the instance also runs it with NO_OSNOISE_WORKLOAD
(no osnoise threads: its hooks measure the noise FWQ's thread sees) and records the osnoise:*
tracepoints, the kernel's own net per-source noise (osnoise.py parses them). This kernel (6.18 here)
has no osnoise tracer: that path is tested on a fake tracefs only.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from stackproof.errors import StackproofError

TRACEFS = Path(os.environ.get("STACKPROOF_TRACEFS", "/sys/kernel/tracing"))
INSTANCE = "stackproof-hunt"
SYNC_TAG = "spk-sync"

# event -> required?  (sched_switch and the IRQ events are what attribution needs)
EVENTS = ["sched/sched_switch", "sched/sched_wakeup", "sched/sched_migrate_task",
          "irq/irq_handler_entry", "irq/irq_handler_exit", "irq/softirq_entry", "irq/softirq_exit"]
REQUIRED = {"sched/sched_switch", "irq/irq_handler_entry", "irq/irq_handler_exit"}
VECTOR_NAMES = ("local_timer", "reschedule", "call_function", "call_function_single", "irq_work",
                "x86_platform_ipi", "thermal_apic", "error_apic", "spurious_apic", "deferred_error_apic",
                "threshold_apic")


def mounted(root: Path = TRACEFS) -> bool:
    return (root / "instances").is_dir()


def ensure_tracefs(root: Path = TRACEFS) -> Path:
    """tracefs mounted (mounting it as root if needed), else a clear error naming what is needed."""
    if mounted(root):
        if not os.access(root / "instances", os.W_OK):
            raise StackproofError(f"tracefs at {root} is not writable: noise hunt needs root "
                                  "(or CAP_SYS_ADMIN) to create a trace instance")
        return root
    if os.geteuid() != 0:
        raise StackproofError(f"tracefs is not mounted at {root} and this is not root: noise hunt needs root "
                              f"(mount -t tracefs nodev {root})")
    proc = subprocess.run(["mount", "-t", "tracefs", "nodev", str(root)], capture_output=True, text=True)
    if proc.returncode != 0 or not mounted(root):
        raise StackproofError(f"cannot mount tracefs at {root} ({proc.stderr.strip() or 'no instances/'}): "
                              "the kernel needs CONFIG_TRACING (tracefs) for noise hunt")
    return root


def backend(root: Path = TRACEFS) -> dict:
    """Which recorder is used, and why: tracefs sched/irq events always (FWQ is the workload whose
    samples are attributed); plus the osnoise tracer's tracepoints when the kernel has them."""
    from stackproof.noise.hunt.osnoise import detect
    k = detect(root)
    tracers = k["available_tracers"]
    use_osnoise = k["osnoise_tracer"] and k["osnoise_events"]
    rtla = shutil.which("rtla")
    why = ("sched/irq/softirq/irq_vectors events from tracefs; the kernel has no osnoise tracer "
           "(available_tracers: " + " ".join(tracers) + ")") if not use_osnoise else (
           "sched/irq/softirq/irq_vectors events from tracefs, and the osnoise tracer (NO_OSNOISE_WORKLOAD) "
           "with its osnoise:* tracepoints: the kernel's net per-source noise on FWQ's CPUs"
           + (f"; `{rtla} osnoise top|hist` can cross-check" if rtla else ""))
    return {"name": "tracefs-events+osnoise" if use_osnoise else "tracefs-events", "osnoise": use_osnoise,
            "osnoise_tracer": k["osnoise_tracer"], "timerlat_tracer": k["timerlat_tracer"],
            "rtla": rtla, "available_tracers": tracers, "why": why}


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, value: str) -> None:
    try:
        with open(path, "w") as fh:
            fh.write(value)
    except OSError as exc:
        raise StackproofError(f"cannot write {value.strip()!r} to {path}: {exc.strerror}") from None


def parse_stats(text: str) -> dict:
    """per_cpu/cpuN/stats -> {"entries": .., "overrun": .., "commit overrun": .., "dropped events": ..}"""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            try:
                out[key.strip()] = int(value.split()[0])
            except (ValueError, IndexError):
                pass
    return out


def lost_events(stats: dict) -> int:
    return stats.get("overrun", 0) + stats.get("commit overrun", 0) + stats.get("dropped events", 0)


def parse_ts_ns(text: str) -> int:
    """'825.978837' (seconds.microseconds, as the text trace prints ns clocks) -> ns."""
    sec, _, frac = text.partition(".")
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


class TraceSession:
    """A private trace instance recording the attribution events on `cpus`."""

    def __init__(self, cpus: set[int], buffer_kb: int = 4096, root: Path | None = None, name: str | None = None,
                 osnoise: bool = False):
        if buffer_kb < 64:
            raise StackproofError(f"--buffer-kb {buffer_kb}: at least 64 KB per CPU")
        self.root = root or TRACEFS
        self.cpus = sorted(cpus)
        self.buffer_kb = buffer_kb
        self.dir = self.root / "instances" / (name or f"{INSTANCE}-{os.getpid()}")
        self.clock = "local"
        self.events: list[str] = []
        self.text = ""
        self.stats: dict[int, dict] = {}
        self.lost: dict[int, int] = {}
        self.sync: list[tuple[int, int]] = []
        self.start_ns = self.stop_ns = 0
        self.osnoise = osnoise              # also run the osnoise tracer (hooks only) in the instance
        self.osnoise_saved: dict[str, str] = {}
        self.osnoise_error = ""

    # ---- set up / tear down ----
    def start(self) -> "TraceSession":
        ensure_tracefs(self.root)
        for old in (self.root / "instances").glob(f"{INSTANCE}-*"):
            # the instance of a hunt that was killed (its process is gone): remove it
            pid = old.name.rsplit("-", 1)[-1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                try:
                    old.rmdir()
                except OSError:
                    pass
        try:
            self.dir.mkdir()
        except OSError as exc:
            raise StackproofError(f"cannot create trace instance {self.dir}: {exc.strerror}") from None
        try:
            self._configure()
        except BaseException:
            self.close()
            raise
        return self

    def _configure(self) -> None:
        d = self.dir
        _write(d / "tracing_on", "0")
        clocks = _read(d / "trace_clock").replace("[", "").replace("]", "").split()
        self.clock = "mono_raw" if "mono_raw" in clocks else ("mono" if "mono" in clocks else "local")
        _write(d / "trace_clock", self.clock)
        _write(d / "buffer_size_kb", str(self.buffer_kb))
        _write(d / "options/overwrite", "0")      # a full buffer drops new events and counts them
        ncpu = os.cpu_count() or 1
        mask = 0
        for c in self.cpus:
            if c >= ncpu:
                raise StackproofError(f"CPU {c} is not in this node (CPUs 0-{ncpu - 1})")
            mask |= 1 << c
        _write(d / "tracing_cpumask", f"{mask:x}")
        wanted = list(EVENTS) + [f"irq_vectors/{v}_{edge}" for v in VECTOR_NAMES for edge in ("entry", "exit")]
        for ev in wanted:
            path = d / "events" / ev / "enable"
            if not path.exists():
                if ev in REQUIRED:
                    raise StackproofError(f"the kernel has no {ev} trace event (needed for attribution)")
                continue
            _write(path, "1")
            self.events.append(ev)
        if self.osnoise:
            self._start_osnoise()
        _write(d / "trace", "")
        self.start_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
        _write(d / "tracing_on", "1")
        self.mark_sync()

    def _start_osnoise(self) -> None:
        """osnoise tracer in the instance, without its workload threads (osnoise/options
        NO_OSNOISE_WORKLOAD) on our CPUs (osnoise/cpus): those two files are global, so their values
        are saved and put back by close(). A kernel that refuses falls back to events only, said."""
        o = self.root / "osnoise"
        try:
            for f in ("cpus", "options"):
                self.osnoise_saved[f] = _read(o / f).strip()
            _write(o / "cpus", ",".join(map(str, self.cpus)))
            _write(o / "options", "NO_OSNOISE_WORKLOAD")
            _write(self.dir / "current_tracer", "osnoise")
            for ev in ("sample_threshold", "irq_noise", "softirq_noise", "thread_noise", "nmi_noise"):
                path = self.dir / "events" / "osnoise" / ev / "enable"
                if path.parent.is_dir():
                    _write(path, "1")
                    self.events.append(f"osnoise/{ev}")
        except StackproofError as exc:
            self.osnoise_error = str(exc)
            self.osnoise = False
            self._restore_osnoise()

    def _restore_osnoise(self) -> None:
        o = self.root / "osnoise"
        try:
            _write(self.dir / "current_tracer", "nop")
        except StackproofError:
            pass
        for f, value in self.osnoise_saved.items():
            if f == "options":
                # the options file lists every option ("OSNOISE_WORKLOAD" or "NO_OSNOISE_WORKLOAD")
                value = "NO_OSNOISE_WORKLOAD" if "NO_OSNOISE_WORKLOAD" in value.split() else "OSNOISE_WORKLOAD"
            try:
                _write(o / f, value)
            except StackproofError:
                pass
        self.osnoise_saved = {}

    def mark_sync(self) -> None:
        """Write a marker carrying CLOCK_MONOTONIC_RAW: its trace timestamp gives the clock offset."""
        # the instance records only its CPUs: write from one of them
        saved = os.sched_getaffinity(0)
        try:
            os.sched_setaffinity(0, {self.cpus[0]})
            before = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
            with open(self.dir / "trace_marker", "w") as fh:
                fh.write(f"{SYNC_TAG} {before}\n")
        finally:
            os.sched_setaffinity(0, saved)

    def stop(self) -> None:
        for _ in range(3):
            self.mark_sync()
        _write(self.dir / "tracing_on", "0")
        self.stop_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
        self.text = (self.dir / "trace").read_text(errors="replace")
        for c in self.cpus:
            st = parse_stats(_read(self.dir / "per_cpu" / f"cpu{c}" / "stats"))
            self.stats[c] = st
            self.lost[c] = lost_events(st)

    def close(self) -> None:
        if self.osnoise_saved:
            self._restore_osnoise()
        if self.dir.exists():
            try:
                _write(self.dir / "tracing_on", "0")
            except StackproofError:
                pass
            for _ in range(20):
                try:
                    self.dir.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        try:
            if exc[0] is None:
                self.stop()
        finally:
            self.close()
        return False

    def meta(self) -> dict:
        return {"clock": self.clock, "cpus": self.cpus, "buffer_kb_per_cpu": self.buffer_kb,
                "buffer_kb_total": self.buffer_kb * (os.cpu_count() or 1),
                "events": self.events, "osnoise": self.osnoise, "osnoise_error": self.osnoise_error,
                "stats": {str(c): s for c, s in self.stats.items()},
                "lost_events": {str(c): n for c, n in self.lost.items()},
                "start_ns": self.start_ns, "stop_ns": self.stop_ns}
