"""Who had each CPU when: the text trace of a tracefs instance -> per-CPU ownership segments.

Every line names the CPU, the task running there and the time:
    python-27317   [001] d.h3.   820.651427: local_timer_entry: vector=236
Between two consecutive events of a CPU, the CPU belongs to the innermost open interrupt context
(hard IRQ, softirq, local timer or IPI vector) if one is open, else to the running task (from the
line's task, or the next_* side of a sched_switch). The result is a list of segments per CPU:
(start ns, end ns, owner), owners being Owner records shared by all CPUs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from stackproof.noise.hunt.tracefs import SYNC_TAG, parse_ts_ns

LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
                  r"(?P<ts>\d+\.\d+):\s+(?P<event>\w+):\s?(?P<body>.*)$")
SWITCH = re.compile(r"prev_comm=(?P<pc>.*) prev_pid=(?P<pp>-?\d+) prev_prio=-?\d+ prev_state=\S+ ==> "
                    r"next_comm=(?P<nc>.*) next_pid=(?P<np>-?\d+) next_prio=-?\d+")
IRQ = re.compile(r"irq=(?P<irq>\d+)(?: name=(?P<name>.*)| ret=\S+)?")
SOFTIRQ = re.compile(r"vec=(?P<vec>\d+) \[action=(?P<action>\w+)\]")


@dataclass(frozen=True)
class Owner:
    kind: str            # task | idle | irq | softirq | vector
    key: str             # unique: "task:comm:pid", "irq:36", "softirq:TIMER", "vector:local_timer"
    label: str           # for people: "fwq-noise[1234]", "irq 36 (virtio1-req.0)", "softirq TIMER", "local timer"
    comm: str = ""
    pid: int | None = None
    irq: int | None = None


@dataclass
class Timeline:
    owners: list[Owner] = field(default_factory=list)
    # cpu -> (starts ns, ends ns, owner index), sorted by start, non-overlapping
    segments: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    sync: list[tuple[int, int]] = field(default_factory=list)   # (trace ts ns, CLOCK_MONOTONIC_RAW ns)
    first_ns: dict[int, int] = field(default_factory=dict)
    last_ns: dict[int, int] = field(default_factory=dict)
    events: int = 0
    unparsed: int = 0

    def owner_index(self) -> dict[str, int]:
        return {o.key: i for i, o in enumerate(self.owners)}


def _task(comm: str, pid: int) -> Owner:
    if pid == 0:
        return Owner("idle", "idle", "idle (swapper)", comm="swapper", pid=0)
    return Owner("task", f"task:{comm}:{pid}", f"{comm}[{pid}]", comm=comm, pid=pid)


def _vector(name: str) -> Owner:
    label = "local timer" if name == "local_timer" else f"IPI {name.replace('_', ' ')}"
    return Owner("vector", f"vector:{name}", label)


def parse(lines) -> Timeline:
    """Build the timeline from the lines of a text trace (an iterable of str)."""
    tl = Timeline()
    index: dict[str, int] = {}
    comms: dict[int, str] = {}
    state: dict[int, dict] = {}          # cpu -> {"task": Owner, "stack": [Owner], "t": ns}
    out: dict[int, list[tuple[int, int, int]]] = {}

    def idx(owner: Owner) -> int:
        i = index.get(owner.key)
        if i is None:
            i = index[owner.key] = len(tl.owners)
            tl.owners.append(owner)
        return i

    for raw in lines:
        if not raw or raw[0] == "#":
            continue
        m = LINE.match(raw.rstrip("\n"))
        if not m:
            tl.unparsed += 1
            continue
        tl.events += 1
        cpu, ts, event, body = int(m["cpu"]), parse_ts_ns(m["ts"]), m["event"], m["body"]
        pid = int(m["pid"])
        comm = m["comm"] if m["comm"] != "<...>" else comms.get(pid, "<...>")
        if event.endswith("_noise") or event == "sample_threshold":
            continue                             # osnoise tracepoints: read by osnoise.parse_events
        if event == "tracing_mark_write":
            words = body.split()
            if len(words) >= 2 and words[0] == SYNC_TAG:
                tl.sync.append((ts, int(words[1])))
            continue
        st = state.get(cpu)
        if st is None:
            st = state[cpu] = {"task": _task(comm, pid), "stack": [], "t": ts}
            tl.first_ns[cpu] = ts
            out[cpu] = []
        elif ts > st["t"]:
            owner = st["stack"][-1] if st["stack"] else st["task"]
            segs = out[cpu]
            i = idx(owner)
            if segs and segs[-1][2] == i and segs[-1][1] == st["t"]:
                segs[-1] = (segs[-1][0], ts, i)
            else:
                segs.append((st["t"], ts, i))
            st["t"] = ts
        tl.last_ns[cpu] = ts
        if not st["stack"] and event != "sched_switch":
            st["task"] = _task(comm, pid)        # the line names the task the CPU is running
        if event == "sched_switch":
            s = SWITCH.search(body)
            if s:
                comms[int(s["pp"])] = s["pc"]
                comms[int(s["np"])] = s["nc"]
                st["task"] = _task(s["nc"], int(s["np"]))
                st["stack"].clear()
        elif event == "irq_handler_entry":
            s = IRQ.search(body)
            if s:
                n = int(s["irq"])
                st["stack"].append(Owner("irq", f"irq:{n}", f"irq {n} ({s['name'] or '?'})", irq=n))
        elif event == "softirq_entry":
            s = SOFTIRQ.search(body)
            if s:
                st["stack"].append(Owner("softirq", f"softirq:{s['action']}", f"softirq {s['action']}"))
        elif event.endswith("_entry") and event not in ("irq_handler_entry", "softirq_entry"):
            st["stack"].append(_vector(event[:-len("_entry")]))
        elif event in ("irq_handler_exit", "softirq_exit") or event.endswith("_exit"):
            kind = {"irq_handler_exit": "irq", "softirq_exit": "softirq"}.get(event, "vector")
            key = None
            if kind == "irq":
                s = IRQ.search(body)
                key = f"irq:{s['irq']}" if s else None
            elif kind == "softirq":
                s = SOFTIRQ.search(body)
                key = f"softirq:{s['action']}" if s else None
            else:
                key = f"vector:{event[:-len('_exit')]}"
            stack = st["stack"]
            for j in range(len(stack) - 1, -1, -1):   # close the matching context (and any left open inside)
                if stack[j].key == key:
                    del stack[j:]
                    break
    for cpu, segs in out.items():
        arr = np.array(segs, dtype=np.int64).reshape(-1, 3)
        tl.segments[cpu] = (arr[:, 0], arr[:, 1], arr[:, 2])
    return tl


def clock_offset_ns(tl: Timeline) -> tuple[int, float]:
    """Offset to add to CLOCK_MONOTONIC_RAW times to get trace times, and its spread (ns), from the
    sync markers (the median of trace ts - the clock read just before the write)."""
    if not tl.sync:
        return 0, float("nan")
    diffs = np.array([t - raw for t, raw in tl.sync], dtype=np.float64)
    return int(np.median(diffs)), float(diffs.max() - diffs.min())
