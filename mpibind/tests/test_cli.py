#!/usr/bin/env python3
"""The mpibind CLI: reference text format, JSON output, and clear errors on bad input."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

FAILURES = []


def run(cli, *args):
    return subprocess.run([cli, *map(str, args)], capture_output=True, text=True, timeout=60)


def expect(cond, what, out=None):
    if not cond:
        detail = f" (rc={out.returncode} stdout={out.stdout[:200]!r} stderr={out.stderr[:200]!r})" \
            if out is not None else ""
        FAILURES.append(what + detail)
        print(f"FAIL {what}{detail}")
    else:
        print(f"ok   {what}")


def expect_error(cli, what, needle, *args):
    out = run(cli, *args)
    expect(out.returncode != 0 and needle in out.stderr and "mpibind:" in out.stderr
           and out.stdout == "", f"{what} -> non-zero exit and '{needle}'", out)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shared", type=Path, required=True)
    args = ap.parse_args()
    cli = os.environ.get("MPIBIND_CLI", "mpibind")
    lassen = args.shared / "topologies" / "mpibind__coral-lassen.xml"
    golden = json.loads((args.shared / "mpibind-golden" / "mpibind__coral-lassen.json").read_text())

    # Text output is the reference's, line for line.
    case = next(c for c in golden["cases"] if c["id"] == "n8_t2_smtauto_gdflt_gpudflt")
    out = run(cli, "--topology", lassen, "--ntasks", 8, "--nthreads", 2)
    expect(out.returncode == 0 and out.stdout == case["mapping_text"],
           "text output equals the reference mapping_text (lassen, 8 tasks x 2 threads)", out)
    line = re.compile(r"^mpibind: task +\d+ nths +\d+ gpus [0-9,]* cpus [0-9,-]+$")
    expect(all(line.match(x) for x in out.stdout.splitlines()), "text line format", out)

    out = run(cli, "--topology", lassen, "--ntasks", 4, "--json", "--env")
    data = json.loads(out.stdout) if out.returncode == 0 else {}
    tasks = data.get("tasks", [])
    expect(len(tasks) == 4 and tasks[0]["task"] == 0 and tasks[0]["gpus"] == ["0"]
           and tasks[0]["cpus"] == "8,12,16,20,24,28,32,36,40,44"
           and tasks[0]["env"]["CUDA_VISIBLE_DEVICES"] == "0"
           and tasks[0]["env"]["OMP_NUM_THREADS"] == str(tasks[0]["nthreads"]),
           "JSON output (tasks, cpus, gpus, env)", out)

    out = run(cli, "--topology", lassen, "--ntasks", 2, "--restrict-type", "mem", "--restrict", 8)
    expect(out.returncode == 0 and "gpus 2 cpus 96" in out.stdout, "restrict to NUMA 8", out)

    expect_error(cli, "missing topology file", "cannot read topology file",
                 "--topology", "/nonexistent/topo.xml", "--ntasks", 2)
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as bad:
        bad.write("<?xml version='1.0'?>\n<topology><object type='Machine'><broken>\n")
    try:
        expect_error(cli, "malformed XML", "cannot load topology", "--topology", bad.name,
                     "--ntasks", 2)
    finally:
        os.unlink(bad.name)
    expect_error(cli, "ntasks 0", "--ntasks", "--topology", lassen, "--ntasks", 0)
    expect_error(cli, "ntasks missing", "--ntasks N is required", "--topology", lassen)
    expect_error(cli, "ntasks not a number", "--ntasks", "--topology", lassen, "--ntasks", "4x")
    expect_error(cli, "smt above hardware SMT", "exceeds the hardware SMT",
                 "--topology", lassen, "--ntasks", 2, "--smt", 8)
    expect_error(cli, "unknown option", "unknown option", "--topology", lassen, "--ntasks", 2,
                 "--bogus")
    expect_error(cli, "greedy 2", "--greedy", "--topology", lassen, "--ntasks", 2, "--greedy", 2)
    expect_error(cli, "restrict type", "--restrict-type", "--topology", lassen, "--ntasks", 2,
                 "--restrict-type", "gpu", "--restrict", 0)
    expect_error(cli, "restrict outside the node", "not in this topology",
                 "--topology", lassen, "--ntasks", 2, "--restrict", "500-600")
    expect_error(cli, "restrict neither list nor file", "neither an id list",
                 "--topology", lassen, "--ntasks", 2, "--restrict", "/nonexistent/ids")
    expect_error(cli, "option without value", "needs a value", "--topology", lassen, "--ntasks")

    print(f"cli: {len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
