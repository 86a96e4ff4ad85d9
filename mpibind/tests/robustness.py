#!/usr/bin/env python3
"""Every topology XML (robustness/ and the top level) loads and gives valid mappings.

Valid: one cpuset per task, never empty, inside the node's PUs; nthreads >= 1; GPU ids
are real GPUs (DRM card/renderD devices are not); and while there are no more tasks than
PUs and no GPU packing, tasks never share a PU (overlapping HBM/MCDRAM NUMA nodes must
not make two tasks identical). Also runs the CLI once per file: it must not crash.
"""
import argparse
import itertools
import os
import subprocess
import sys
from pathlib import Path

import mpibind


def parse_list(text):
    out = set()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def check_topology(path, cli):
    problems = []
    topo = mpibind.Topology(path)
    # All usable PUs: one task per PU with every hardware thread covers them.
    probe = mpibind.MpibindHandle(1, topology=topo, greedy=0).mpibind()
    smt = probe.hw_smt
    numas = probe.num_numas
    ngpus = probe.num_gpus
    full = mpibind.MpibindHandle(1, topology=topo, greedy=1).mpibind()
    all_pus = set(full.get_cpus_ptask(0)) if full.greedy_path else None
    if all_pus is None:  # single NUMA domain: smt=hw on one task covers it
        all_pus = set(mpibind.MpibindHandle(1, topology=topo, smt=smt).mpibind().get_cpus_ptask(0))
    npus = len(all_pus)
    ncores = npus // smt
    names = {g for t in full.tasks() for g in t["gpus_pci"]}
    if ngpus and not names:
        problems.append(f"{ngpus} GPUs but none assigned on the greedy path")
    gpu_names = []
    with mpibind.MpibindHandle(1, topology=topo) as h:
        h.mpibind()
        gpu_names = h.get_gpus_ptask(0, "name")
    for name in gpu_names:
        if name.startswith(("card", "renderD", "controlD")):
            problems.append(f"DRM device {name} counted as a GPU")

    cases = 0
    for ntasks, greedy, gpu, smt_opt, nthreads in itertools.product(
            sorted({1, 2, 3, 4, 8, numas, ncores, npus, 2 * npus}), (None, 0), (None, 0),
            (None, 1, smt), (None, 2)):
        cases += 1
        try:
            h = mpibind.MpibindHandle(ntasks, topology=topo, greedy=greedy, gpu_optim=gpu,
                                      smt=smt_opt, nthreads=nthreads).mpibind()
        except mpibind.MpibindError as exc:
            problems.append(f"n{ntasks} greedy={greedy} gpu={gpu} smt={smt_opt}: {exc}")
            continue
        sets = [set(h.get_cpus_ptask(t)) for t in range(ntasks)]
        label = f"n{ntasks} greedy={greedy} gpu={gpu} smt={smt_opt} nthreads={nthreads}"
        if any(not s for s in sets):
            problems.append(f"{label}: a task has no CPUs")
        if any(not s <= all_pus for s in sets):
            problems.append(f"{label}: CPUs outside the node")
        if any(n < 1 for n in h.nthreads):
            problems.append(f"{label}: nthreads < 1")
        packed_on_gpus = ngpus and gpu is None
        if ntasks <= npus and not packed_on_gpus and smt_opt in (None, smt):
            seen = set()
            for s in sets:
                if seen & s:
                    problems.append(f"{label}: tasks share PUs {sorted(seen & s)[:4]}")
                    break
                seen |= s
        env = h.env_vars()
        if "VISIBLE_DEVICES" in env or (not ngpus and len(env) != 3):
            problems.append(f"{label}: unexpected variables {sorted(env)}")
        h.close()
    out = subprocess.run([cli, "--topology", str(path), "--ntasks", str(numas * 2)],
                         capture_output=True, text=True)
    if out.returncode != 0 or out.stdout.count("mpibind: task") != numas * 2:
        problems.append(f"CLI failed: rc={out.returncode} {out.stderr.strip()}")
    topo.close()
    return cases, numas, ngpus, npus, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shared", type=Path, required=True)
    args = ap.parse_args()
    cli = os.environ.get("MPIBIND_CLI", "mpibind")
    files = sorted((args.shared / "topologies" / "robustness").glob("*.xml")) + \
        sorted((args.shared / "topologies").glob("*.xml"))
    if not files:
        print(f"robustness: no XML files under {args.shared}/topologies", file=sys.stderr)
        return 2
    failed = 0
    for path in files:
        try:
            cases, numas, ngpus, npus, problems = check_topology(path, cli)
        except mpibind.MpibindError as exc:
            cases, numas, ngpus, npus, problems = 0, 0, 0, 0, [f"load failed: {exc}"]
        status = "ok" if not problems else "FAIL"
        print(f"{status:4s} {path.name:45s} numa={numas:2d} gpus={ngpus} pus={npus:3d} "
              f"cases={cases}")
        for p in problems[:10]:
            print(f"     {p}")
        failed += bool(problems)
    print(f"robustness: {len(files) - failed}/{len(files)} topologies valid")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
