"""From the culprit ranking to a Clean profile in slurm-conf/profiles.yaml terms, rendered, and the
commands that apply it (written, never run unless `noise hunt --apply` on the test cluster).

Rules (the paper's Table V method, automated): a culprit that took at least MIN_SHARE of an
application CPU's detour time is acted on:
  task in a Table V daemon group       -> that group joins the profile's daemons (bound to system cores)
  other user-space task                -> a new daemon group `hunt-<comm>` (bound to system cores)
  per-CPU kernel thread (kworker/N...) -> cannot be moved; reported with the kernel-side remedy
  IRQ N                                -> steered to the system cores (/proc/irq/N/smp_affinity_list)
  local timer / softirq / IPIs         -> kernel boot options (nohz_full, rcu_nocbs), reported only
  unexplained                          -> hardware or hypervisor: reported only
The base is the catalog's `clean` profile (CpuSpecList = the node type's k system cores per socket).
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from stackproof import validate
from stackproof.errors import StackproofError

MIN_SHARE = 0.05
KTHREAD = re.compile(r"^(kworker|ksoftirqd|migration|rcu_|cpuhp|idle_inject|watchdog|irq/|kthreadd|kcompactd|"
                     r"khugepaged|kswapd|jbd2|writeback|oom_reaper|kauditd)")


def daemon_group_of(comm: str, catalog: dict) -> str | None:
    for name, group in catalog["daemons"].items():
        if comm in group.get("processes", []):
            return name
    return None


def propose(results: list, plan_, catalog: dict, host: str) -> dict:
    """results: [CpuResult]; plan_: the base (clean) ProfilePlan for this node. Returns the proposal:
    {profile_name, profile (catalog entry), daemons (new groups), bind: [{pid, comm, group}],
     irqs: [{irq, label}], kernel: [remedy lines], unexplained, system_cpus, app_cpus, cpu_spec_list}."""
    groups = list(catalog["profiles"]["clean"].get("daemons", []))
    new_groups: dict[str, dict] = {}
    bind, irqs, kernel, notes = [], [], [], []
    seen = set()
    for res in results:
        if res.cpu in plan_.system_cpus:
            continue              # system CPUs may be noisy: that is what they are for
        for c in res.culprits:
            if c.share < MIN_SHARE or c.key in seen:
                continue
            seen.add(c.key)
            why = f"{c.share:.0%} of CPU {res.cpu}'s detour time"
            if c.kind == "task":
                if KTHREAD.match(c.comm):
                    kernel.append(f"{c.label}: per-CPU kernel thread ({why}); cannot be moved: "
                                  f"isolate the CPU from its work (workqueue cpumask, nohz_full/rcu_nocbs)")
                    continue
                if c.cgroup == "(exited)":
                    notes.append(f"{c.label}: a short-lived process ({why}), gone by the end of the hunt: a "
                                 f"job's or a co-tenant's work, not a daemon to bind")
                    continue
                if not validate.PROCESS_NAME.fullmatch(c.comm or ""):
                    # The comm is the process's own choice: `$(touch /tmp/pwned)` would reach the
                    # corespec list run by root. Never proposed; reported for a person to look at.
                    notes.append(f"{_safe(c.label)}: process name {c.comm!r} refused ({why}): not a plain "
                                 f"process name (A-Z a-z 0-9 _ . : @ % + , = / -); not bound")
                    continue
                group = daemon_group_of(c.comm, catalog)
                if group is None:
                    group = "hunt-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", c.comm).strip("-")
                    units = [c.unit] if validate.UNIT_NAME.fullmatch(c.unit or "") and c.unit.endswith(".service") else []
                    new_groups.setdefault(group, {"units": units, "processes": [c.comm]})
                if group not in groups:
                    groups.append(group)
                bind.append({"pid": c.tgid or c.pid, "tid": c.pid, "comm": c.comm, "group": group, "why": why, "cgroup": c.cgroup,
                             "unit": c.unit})
            elif c.kind == "irq":
                irqs.append({"irq": c.irq, "label": c.label, "why": why})
            elif c.kind == "vector" and c.key == "vector:local_timer":
                kernel.append(f"local timer ({why}): boot with nohz_full={plan_.app_cpu_list} (tick off "
                              f"on application CPUs running one task)")
            elif c.kind in ("vector", "softirq"):
                kernel.append(f"{c.label} ({why}): rcu_nocbs={plan_.app_cpu_list} and steering the IRQs "
                              f"that raise it; IPIs come from other CPUs' work (TLB shootdowns, wakeups)")
            elif c.kind == "unexplained":
                notes.append(f"unexplained ({why}): no kernel event in the window: hardware (SMI) or the "
                             f"hypervisor (steal time); nothing to bind")
            elif c.kind == "idle":
                notes.append(f"idle ({why}): FWQ was not running; an oversubscribed or throttled CPU")
    profile = {"description": f"Derived by `stackproof noise hunt` on {host}: clean plus the culprits "
                              f"found ({', '.join(sorted(new_groups)) or 'none new'}); IRQs "
                              f"{', '.join(str(i['irq']) for i in irqs) or 'none'} steered to the system cores.",
               "free": True, "reserve": True, "daemons": groups}
    if irqs:
        profile["irqs"] = [i["irq"] for i in irqs]
    return {"profile_name": "hunt-clean", "profile": profile, "daemons": new_groups, "bind": bind,
            "irqs": irqs, "kernel": kernel, "notes": notes, "system_cpus": plan_.system_cpu_list,
            "app_cpus": plan_.app_cpu_list, "cpu_spec_list": plan_.cpu_spec_list, "k": plan_.k,
            "position": plan_.position}


def profiles_yaml(prop: dict) -> str:
    doc = {"profiles": {prop["profile_name"]: prop["profile"]}}
    if prop["daemons"]:
        doc["daemons"] = prop["daemons"]
    head = ("# Proposed by `stackproof noise hunt`: merge into slurm-conf/profiles.yaml (profiles: and daemons:).\n"
            f"# System CPUs {prop['system_cpus']} (k={prop['k']}, {prop['position']}), application CPUs "
            f"{prop['app_cpus']}, CpuSpecList={','.join(map(str, prop['cpu_spec_list']))}.\n"
            "# `irqs:` lists the IRQs to steer to the system CPUs (apply.sh does it).\n")
    return head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)


def commands(prop: dict) -> list[str]:
    """Shell commands that apply the proposal to this node now (run-time part)."""
    sysc = prop["system_cpus"]
    lines = []
    for b in prop["bind"]:
        lines.append(f"taskset -a -c -p {sysc} {int(b['pid'])}    # {b['comm']} ({b['group']}): {b['why']}")
    for i in prop["irqs"]:
        lines.append(f"echo {sysc} > /proc/irq/{int(i['irq'])}/smp_affinity_list    # {i['label']}: {i['why']}")
    return lines


def _safe(text) -> str:
    """One printable line (labels come from trace text: a kernel comm may hold any byte)."""
    return "".join(ch if ch.isprintable() else "?" for ch in str(text))


def apply_script(prop: dict) -> str:
    body = "\n".join(_safe(line) for line in commands(prop)) or ": # nothing to bind or steer"
    remarks = "\n".join(f"# {_safe(line)}" for line in prop["kernel"] + prop["notes"]) or "# (none)"
    return ("#!/bin/sh\n# Written by `stackproof noise hunt`: binds the culprits found to the system CPUs and\n"
            "# steers their IRQs. Persistent form: the hunt-clean profile (profiles.yaml) rendered in rendered/\n"
            "# (systemd CPUAffinity drop-ins, irqbalance ban list, stackproof-corespec).\nset -eu\n"
            + body + "\n# Not applicable at run time (kernel boot options, hardware):\n" + remarks + "\n")


def render_proposal(prop: dict, nt, base_plan, host: str, outdir: Path) -> list[str]:
    """Write profiles.yaml, apply.sh and the rendered configuration tree into outdir."""
    from stackproof.nodes.slurmconf import Site, render, write_tree
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "profiles.yaml").write_text(profiles_yaml(prop))
    script = outdir / "apply.sh"
    script.write_text(apply_script(prop))
    script.chmod(0o755)
    base_plan.name = prop["profile_name"]
    base_plan.description = prop["profile"]["description"]
    for g, spec in prop["daemons"].items():
        base_plan.daemons[g] = spec
    try:
        files = render(nt, base_plan, Site(cluster_name="hunt", nodes=[host]))
    except StackproofError as exc:
        raise StackproofError(f"rendering the proposed profile failed: {exc}") from None
    write_tree(files, outdir / "rendered")
    return sorted(files)
