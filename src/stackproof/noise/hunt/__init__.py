"""Noise hunt: who steals each core's time (issue 15).

    tracefs.py    record sched/irq/softirq/irq_vectors events in a private tracefs instance
    timeline.py   text trace -> per-CPU ownership segments (task, IRQ, softirq, local timer, IPI)
    attribute.py  FWQ detours x segments -> culprits per CPU, ranked, with periodic signatures
    propose.py    culprits -> a Clean profile (profiles.yaml terms), rendered, and its commands
    hunt.py       the `stackproof noise hunt` run: FWQ with and without tracing, --apply, outputs
    plot.py       timeline figure; report.py: the acceptance report's "who stole the time" section
"""
from stackproof.noise.hunt.report import hunt_report_section

__all__ = ["hunt_report_section"]
