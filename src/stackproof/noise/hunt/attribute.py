"""Attribute FWQ detours to culprits: align each detour with the trace segments of its CPU.

For every FWQ rank (one CPU): the undisturbed quantum is the 5th percentile of its samples; a sample
whose excess over it is above the threshold is a detour sample, and consecutive detour samples form
one detour [first start, last end]. The trace says who held the CPU inside that window other than
FWQ's own thread: those owners share the detour's excess in proportion to their time; what the trace
cannot explain (excess - owner time, when positive) is "unexplained" (hardware, hypervisor, the cost
of switching). Per culprit: stolen time, share, the detours it took part in, and its periodic
signature (period, duration) from all its occurrences on that CPU during the run.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from stackproof.noise.hunt.timeline import Owner, Timeline

UNEXPLAINED = Owner("unexplained", "unexplained", "unexplained (hardware/hypervisor/switch cost)")
HYPERVISOR = Owner("hypervisor", "hypervisor", "hypervisor (vCPU not running: ticks missed)")
MERGE_GAP_NS = 100_000       # a culprit's segments closer than this are one occurrence
# The cost of switching to a task and back (scheduler, wake-up, cache refill) falls in FWQ's detour
# but outside the task's trace segment: above the residual of detours holding one switched-in task in
# tests/data/hunt (its median and p90 here: docs/performance.md, "Measured here, cited by the code").
# Up to this much of a detour's residual is charged to the task switched in; the rest stays unexplained.
SWITCH_COST_US = 30.0


@dataclass
class Culprit:
    key: str
    kind: str
    label: str
    stolen_us: float                   # detour time attributed to it on this CPU
    share: float                       # of this CPU's detour time
    detours: int                       # detours it took part in
    cpu_time_us: float                 # all its time on this CPU during the run (inside detours or not)
    occurrences: int
    period_ms: float | None = None
    duration_us: float | None = None   # median time per occurrence
    periodic: bool = False
    comm: str = ""
    pid: int | None = None
    irq: int | None = None
    tgid: int | None = None            # the process of a task culprit (pid is the thread)
    cgroup: str = ""
    unit: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class CpuResult:
    cpu: int
    rank: int
    samples: int
    quantum_us: float
    std_us: float
    max_us: float
    detours: int
    detour_time_us: float
    attributed_us: float
    attributed_fraction: float         # named culprits, the hypervisor (with evidence) included
    hypervisor_us: float
    self_task: str
    culprits: list[Culprit] = field(default_factory=list)
    # per detour (for the timeline plot): start s from FWQ start, excess us, top culprit key
    detour_start_s: list[float] = field(default_factory=list, repr=False)
    detour_excess_us: list[float] = field(default_factory=list, repr=False)
    detour_top: list[str] = field(default_factory=list, repr=False)
    detour_explained_us: list[float] = field(default_factory=list, repr=False)   # by kernel events
    threshold_us: float = 0.0
    quiet_culprits: list[Culprit] = field(default_factory=list)   # periodic tasks below the threshold

    @property
    def real_fraction(self) -> float:
        """Of the detour time, the part attributed to real culprits (tasks, IRQs, softirqs, the tick,
        IPIs): neither unexplained nor the hypervisor."""
        if not self.detour_time_us:
            return 1.0
        return (self.attributed_us - self.hypervisor_us) / self.detour_time_us

    def top(self) -> Culprit | None:
        named = [c for c in self.culprits if c.kind not in ("unexplained", "hypervisor")]
        return named[0] if named else None

    def as_dict(self, with_detours: bool = True) -> dict:
        d = asdict(self)
        if not with_detours:
            for k in ("detour_start_s", "detour_excess_us", "detour_top", "detour_explained_us"):
                d.pop(k)
        d["real_fraction"] = self.real_fraction
        return d


def periodic_signature(starts_ns: np.ndarray, durations_ns: np.ndarray, span_ns: float):
    """(period ns, median duration ns, periodic?) of occurrences: the period is the least-squares
    slope of occurrence time over occurrence number (numbers from the median gap). Periodic when at
    least 4 occurrences, 80 % of them within 10 % of a period of the fitted grid, and at least 60 %
    of the grid's slots filled."""
    t = np.asarray(starts_ns, dtype=np.float64)
    dur = float(np.median(durations_ns)) if len(durations_ns) else 0.0
    if t.size < 4:
        return None, dur, False
    gaps = np.diff(t)
    p0 = float(np.median(gaps))
    if p0 <= 0:
        return None, dur, False
    n = np.rint((t - t[0]) / p0)
    for _ in range(2):
        slope, icpt = np.polyfit(n, t, 1)
        resid = t - (icpt + slope * n)
        good = np.abs(resid) < 0.1 * slope
        if good.sum() < 4:
            return None, dur, False
        slope, icpt = np.polyfit(n[good], t[good], 1)
        n = np.rint((t - icpt) / slope)
    resid = t - (icpt + slope * n)
    good = np.abs(resid) < 0.1 * slope
    slots = max(1.0, np.floor(span_ns / slope))
    fill = np.unique(n[good]).size / slots
    periodic = bool(good.mean() >= 0.8 and fill >= 0.6)
    return float(slope), dur, periodic


def _occurrences(starts, ends, mask) -> tuple[np.ndarray, np.ndarray]:
    """Merge the culprit's segments (mask) into occurrences: (start ns, owned time ns)."""
    s, e = starts[mask], ends[mask]
    if s.size == 0:
        return np.empty(0), np.empty(0)
    brk = np.flatnonzero(s[1:] - e[:-1] > MERGE_GAP_NS) + 1
    first = np.concatenate(([0], brk))
    occ_start = s[first]
    occ_time = np.add.reduceat(e - s, first)
    return occ_start, occ_time


def _tick_times(tl: Timeline, cpu: int) -> np.ndarray:
    """Start times of the local timer interrupts on a CPU, and the tick period (their median gap)."""
    idx = tl.owner_index().get("vector:local_timer")
    if idx is None or cpu not in tl.segments:
        return np.empty(0)
    s, _, o = tl.segments[cpu]
    return s[o == idx]


def _missed_tick_time(ticks: np.ndarray, a: float, b: float, period: float | None = None) -> float:
    """Time in [a, b] the vCPU cannot have run: a busy CPU takes a tick every period (FWQ keeps it
    busy, so the tick never stops); gaps between ticks longer than 1.1 periods mean the hypervisor
    did not run this vCPU. Returns the part of the window beyond one period per gap."""
    if ticks.size < 8:
        return 0.0
    if period is None:
        period = float(np.median(np.diff(ticks)))
    lo = max(0, int(np.searchsorted(ticks, a)) - 1)
    hi = min(ticks.size, int(np.searchsorted(ticks, b)) + 1)
    t = ticks[lo:hi]
    lost = 0.0
    for x, y in zip(t[:-1], t[1:]):
        if y - x > 1.1 * period:
            lost += max(0.0, min(y, b) - max(x + period, a))
    return lost


def attribute(trace, tl: Timeline, offset_ns: int = 0, threshold_us: float | dict = 20.0,
              self_comm: str = "fwq-th", skip_first: int = 1, cpus: set | None = None) -> list[CpuResult]:
    """Per FWQ rank: detours, their attribution and the ranked culprits. `offset_ns` is added to
    FWQ (CLOCK_MONOTONIC_RAW) times to get trace times; `threshold_us` is one value or {cpu: value};
    `cpus` limits the ranks analysed."""
    results = []
    starts_all = trace.starts_us()
    d_all = trace.durations_us()
    for r, rank in enumerate(trace.ranks):
        cpu = rank["cpu"]
        if cpus is not None and cpu not in cpus:
            continue
        threshold = threshold_us[cpu] if isinstance(threshold_us, dict) else threshold_us
        if cpu not in tl.segments:
            raise ValueError(f"the trace has no events on CPU {cpu} (FWQ rank {rank['rank']})")
        seg_s, seg_e, seg_o = tl.segments[cpu]
        t0 = int(rank["t0_ticks"]) + offset_ns
        d_us = d_all[r, skip_first:]
        s_ns = t0 + (starts_all[r, skip_first:] * 1e3)
        e_ns = s_ns + d_us * 1e3
        win_a, win_b = float(s_ns[0]), float(e_ns[-1])
        if tl.first_ns.get(cpu, 0) > win_a or tl.last_ns.get(cpu, 0) < win_b - 50e6:
            raise ValueError(f"the trace does not cover FWQ's run on CPU {cpu} (clock mismatch?)")
        quantum = float(np.percentile(d_us, 5))
        excess = d_us - quantum
        hit = excess > threshold
        # owner time inside the FWQ window (clipped segments)
        a = np.clip(seg_s, win_a, win_b)
        b = np.clip(seg_e, win_a, win_b)
        in_win = b - a
        total_by_owner = np.bincount(seg_o, weights=in_win, minlength=len(tl.owners))
        # FWQ's own thread: fwq-th records its thread id as the rank's pid; else the task with FWQ's
        # name that held the CPU longest
        cands = [i for i, o in enumerate(tl.owners) if o.kind == "task" and o.pid == rank.get("pid")]
        cands = cands or [i for i, o in enumerate(tl.owners) if o.kind == "task" and o.comm == self_comm]
        if not cands:
            raise ValueError(f"no {self_comm} task on CPU {cpu} in the trace")
        me = max(cands, key=lambda i: total_by_owner[i])
        nown = len(tl.owners)
        is_task = np.array([o.kind == "task" for o in tl.owners], dtype=bool)
        stolen = np.zeros(nown + 2)                  # slots nown: hypervisor, nown + 1: unexplained
        detour_count = np.zeros(nown + 2, dtype=np.int64)
        ticks = _tick_times(tl, cpu)
        tick_period = float(np.median(np.diff(ticks))) if ticks.size >= 8 else None
        det_start, det_excess, det_top, det_expl = [], [], [], []
        idx = np.flatnonzero(hit)
        total_excess = 0.0
        if idx.size:
            brk = np.flatnonzero(np.diff(idx) > 1) + 1
            groups = np.split(idx, brk)
            for g in groups:
                a_ns, b_ns = float(s_ns[g[0]]), float(e_ns[g[-1]])
                ex_ns = float(excess[g].sum()) * 1e3
                total_excess += ex_ns
                # the culprit may start in the sample before (its excess under the threshold) or end
                # in the one after: the window for ownership spans one sample more on each side
                wa = float(s_ns[g[0] - 1]) if g[0] > 0 else a_ns
                wb = float(e_ns[g[-1] + 1]) if g[-1] + 1 < e_ns.size else b_ns
                lo = max(0, int(np.searchsorted(seg_e, wa, side="right")))
                hi = int(np.searchsorted(seg_s, wb, side="left"))
                owners = seg_o[lo:hi]
                ov = np.minimum(seg_e[lo:hi], wb) - np.maximum(seg_s[lo:hi], wa)
                keep = (owners != me) & (ov > 0)
                per = np.bincount(owners[keep], weights=ov[keep], minlength=nown)
                explained = float(per.sum())
                rest = ex_ns - explained
                if rest > 0 and explained > 0:
                    # the switch to a task and back: charged to the task that held the CPU longest
                    tasks = [i for i in np.flatnonzero(per) if is_task[i]]
                    if tasks:
                        t = max(tasks, key=lambda i: per[i])
                        charge = min(rest, SWITCH_COST_US * 1e3)
                        per[t] += charge
                        explained += charge
                        rest -= charge
                hyp = min(rest, _missed_tick_time(ticks, a_ns, b_ns, tick_period)) if rest > 0 else 0.0
                det_expl.append(explained / 1e3)
                per = np.concatenate((per, [hyp]))
                explained += hyp
                scale = min(1.0, ex_ns / explained) if explained > 0 else 0.0
                stolen[:-1] += per * scale
                stolen[-1] += max(0.0, ex_ns - explained)
                detour_count[:-1] += per > 0
                if ex_ns > explained:
                    detour_count[-1] += 1
                det_start.append((a_ns - win_a) / 1e9)
                det_excess.append(ex_ns / 1e3)
                top = int(np.argmax(per)) if explained > 0 else -1
                det_top.append(([*tl.owners, HYPERVISOR][top]).key if top >= 0 and per[top] >= ex_ns - explained
                               else UNEXPLAINED.key)
        span = win_b - win_a
        culprits = []
        quiet = []
        # tasks that took the CPU without a detour above the threshold: listed when periodic (a
        # culprit below the threshold still shows its signature)
        ran = [i for i in np.flatnonzero(total_by_owner[:nown] > 0)
               if stolen[i] == 0 and i != me and tl.owners[i].kind == "task"]
        for i in [*np.flatnonzero(stolen > 0), *ran]:
            owner = {nown: HYPERVISOR, nown + 1: UNEXPLAINED}.get(i) or tl.owners[i]
            occ_n, period, dur, periodic, cpu_time = 0, None, None, False, 0.0
            if i < nown:
                mask = (seg_o == i) & (seg_e > win_a) & (seg_s < win_b)
                occ_s, occ_t = _occurrences(seg_s, seg_e, mask)
                occ_n = int(occ_s.size)
                cpu_time = float(total_by_owner[i]) / 1e3
                p, dur_ns, periodic = periodic_signature(occ_s, occ_t, span)
                period = p / 1e6 if p else None
                dur = dur_ns / 1e3 if occ_n else None
            if stolen[i] == 0 and not (periodic and occ_n >= 8):
                continue
            (culprits if stolen[i] > 0 else quiet).append(Culprit(key=owner.key, kind=owner.kind, label=owner.label,
                                    stolen_us=float(stolen[i]) / 1e3,
                                    share=float(stolen[i] / total_excess) if total_excess else 0.0,
                                    detours=int(detour_count[i]), cpu_time_us=cpu_time, occurrences=occ_n,
                                    period_ms=period, duration_us=dur, periodic=periodic,
                                    comm=owner.comm, pid=owner.pid, irq=owner.irq))
        culprits.sort(key=lambda c: -c.stolen_us)
        quiet.sort(key=lambda c: -c.cpu_time_us)
        unexplained = float(stolen[-1]) / 1e3
        hypervisor = float(stolen[-2]) / 1e3
        results.append(CpuResult(
            cpu=cpu, rank=rank["rank"], samples=int(d_us.size), quantum_us=quantum, std_us=float(d_us.std()),
            max_us=float(d_us.max()), detours=len(det_start), detour_time_us=total_excess / 1e3,
            attributed_us=total_excess / 1e3 - unexplained,
            attributed_fraction=(1 - unexplained * 1e3 / total_excess) if total_excess else 1.0,
            hypervisor_us=hypervisor,
            self_task=tl.owners[me].label, culprits=culprits, detour_start_s=det_start,
            detour_excess_us=det_excess, detour_top=det_top, detour_explained_us=det_expl,
            threshold_us=float(threshold), quiet_culprits=quiet))
    return results
