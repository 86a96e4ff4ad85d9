"""No silent pass: what makes a ReFrame run that "PASSED" a run that measured nothing.

ReFrame exits 0 and prints PASSED when no check was selected (it then writes no report), and when
every selected case was skipped (e.g. GPU checks on a node whose stack has no nvcc). The
acceptance suite treats both as failures with the reason:
  - a run that selected 0 test cases;
  - a GPU partition of the run whose GPU cases (tag `gpu`) were all skipped, or on which no GPU
    case was selected at all although the run was not narrowed by name or tag.
Skip reasons are not in ReFrame's JSON report; they are taken from its output lines
`[ SKIP ] (i/n) NAME /hash @sys:part+env [reason]`.
"""
from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SKIP_LINE = re.compile(r"^\[\s*SKIP\s*\]\s*\(\d+/\d+\)\s+(.+?)\s+/\w+\s+@(\S+?)\+(\S+)\s+\[(.*)\]\s*$")


def skip_reasons(output: str) -> dict[tuple[str, str, str], str]:
    """{(name, 'sys:part', environ): reason} from ReFrame's run output."""
    found = {}
    for line in output.splitlines():
        m = SKIP_LINE.match(ANSI.sub("", line).strip())
        if m:
            found[(m.group(1), m.group(2), m.group(3))] = m.group(4)
    return found


def is_gpu_case(case: dict) -> bool:
    return "gpu" in (case.get("tags") or [])


def problems(cases: list[dict] | None, gpu_partitions: list[str], reasons: dict, narrowed: bool,
             what: str) -> list[str]:
    """Reasons this run must fail although ReFrame passed. `cases`: the report's test cases
    (None: ReFrame wrote no report); `gpu_partitions`: 'sys:part' names with the `gpu` feature
    that the run covered; `narrowed`: the user selected checks by name or tag."""
    if not cases:
        return [f"no test case was selected for {what}: nothing was measured (check the system, stack, "
                "tag and name filters; `reframe -l` lists what would run)"]
    found = []
    for part in gpu_partitions:
        sysname, partname = part.split(":")
        gpu = [c for c in cases if c.get("system") == sysname and c.get("partition") == partname
               and is_gpu_case(c)]
        if not gpu:
            if not narrowed:
                found.append(f"GPU partition {part}: no GPU check was selected (no environment with the "
                             "`cuda` feature?): the GPUs were not tested")
            continue
        if all(c.get("result") == "skip" for c in gpu):
            why = sorted({reasons.get((c["name"], part, c.get("environ")), "reason not reported")
                          for c in gpu})
            found.append(f"GPU partition {part}: all {len(gpu)} GPU test case(s) were skipped: "
                         + "; ".join(why))
    return found
