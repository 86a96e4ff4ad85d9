#!/usr/bin/env python3
"""Replay the reference implementation's golden mappings with our library (in-process).

Every case of <shared>/mpibind-golden/*.json is mapped on its topology, loaded the way
the reference did (hwloc_topology_set_xml + structure filter + important OS/PCI devices);
a case is identical when every task's cpus, nthreads and gpus match. Prints the
percentage per topology and overall, lists the differing cases, and fails when the
overall share is below --min-identical.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import mpibind


def resolve_topology(shared, golden_file, topo_file):
    for base in (shared, golden_file.parent.parent, golden_file.parent):
        path = base / topo_file
        if path.exists():
            return path
    path = shared / "topologies" / Path(topo_file).name
    if path.exists():
        return path
    raise FileNotFoundError(f"{golden_file.name}: topology {topo_file} not found under {shared}")


def run_case(topo, params):
    kwargs = {k: params.get(k) for k in ("nthreads", "smt", "greedy", "gpu_optim",
                                         "restrict_type", "restrict_ids")}
    with mpibind.MpibindHandle(params["ntasks"], topology=topo, **kwargs) as h:
        h.mpibind()
        nthreads = h.nthreads
        return [{"task": t, "nthreads": nthreads[t], "cpus": h.get_cpus_str(t),
                 "gpus": h.get_gpus_ptask(t)} for t in range(params["ntasks"])]


def compare(expected, got):
    want = [{k: t[k] for k in ("task", "nthreads", "cpus", "gpus")} for t in expected]
    return want == got


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shared", type=Path, required=True)
    ap.add_argument("--golden", type=Path, help="directory of golden JSONs "
                    "(default <shared>/mpibind-golden)")
    ap.add_argument("--min-identical", type=float, default=99.0)
    ap.add_argument("--show", type=int, default=20, help="differences shown per topology")
    args = ap.parse_args()
    golden_dir = args.golden or args.shared / "mpibind-golden"
    files = sorted(golden_dir.glob("*.json"))
    if not files:
        print(f"golden_replay: no golden JSON files in {golden_dir}", file=sys.stderr)
        return 2

    start = time.monotonic()
    total = same = 0
    for gf in files:
        data = json.loads(gf.read_text())
        topo_path = resolve_topology(args.shared, gf, data["topology"]["file"])
        ok = 0
        diffs = []
        with mpibind.Topology(topo_path) as topo:
            for case in data["cases"]:
                expect_ok = case.get("rc", 0) == 0
                try:
                    got = run_case(topo, case["params"])
                    good = expect_ok and compare(case["tasks"], got)
                except mpibind.MpibindError as exc:
                    got = f"error: {exc}"
                    good = not expect_ok
                if good:
                    ok += 1
                else:
                    diffs.append((case["id"], case.get("tasks"), got))
        n = len(data["cases"])
        total += n
        same += ok
        print(f"{gf.stem:40s} {ok:4d}/{n:4d} identical ({100.0 * ok / n:6.2f} %)")
        for cid, want, got in diffs[:args.show]:
            print(f"  DIFF {cid}")
            if isinstance(got, str):
                print(f"    ours: {got}")
                continue
            for w, g in zip(want, got):
                if {k: w[k] for k in g} != g:
                    print(f"    task {w['task']}: ref nths {w['nthreads']} gpus {w['gpus']} "
                          f"cpus {w['cpus']}")
                    print(f"    {'':{len(str(w['task']))}}       ours nths {g['nthreads']} "
                          f"gpus {g['gpus']} cpus {g['cpus']}")
        if len(diffs) > args.show:
            print(f"  ... {len(diffs) - args.show} more differences")
    pct = 100.0 * same / total
    print(f"TOTAL {same}/{total} identical ({pct:.2f} %) in {time.monotonic() - start:.1f} s")
    if pct < args.min_identical:
        print(f"golden_replay: below the required {args.min_identical} %", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
