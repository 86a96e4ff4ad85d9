"""Live virtual cluster (issue 14): boot 2 QEMU TCG nodes from the debian12-compute image over
DHCP/TFTP/iPXE/HTTP, check that their slurmd registered, run `srun -N2 hostname` and an MPI hello
across them, `up` again (idempotent), then `down` (nothing left). One cluster for the module.

Runs only with STACKPROOF_VCLUSTER=1 (`make vcluster-test`; .ci/run sets it): it needs root,
/dev/net/tun, QEMU and ~3.5 GB of memory, and takes a few minutes on 2 cores.
The assertions are signatures noise cannot fake: which hosts answered, the MPI ranks and their
allreduce, process ids before/after a second `up`; boot times are printed, never asserted."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.environ.get("STACKPROOF_VCLUSTER") != "1",
                                reason="live virtual cluster: set STACKPROOF_VCLUSTER=1 (make vcluster-test)")

STACKPROOF = [sys.executable, "-m", "stackproof.cli"]
NODES = ["n01", "n02"]


def vc(*args, timeout=600, check=True) -> subprocess.CompletedProcess:
    proc = subprocess.run(STACKPROOF + ["vcluster", *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert proc.returncode == 0, f"vcluster {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def cluster():
    from stackproof.vcluster import head
    from stackproof.vcluster.boot import preflight
    if os.geteuid() != 0:
        pytest.skip("needs root")
    preflight()
    proc = vc("up", "--nodes", "2")
    print(proc.stdout)
    for line in proc.stdout.splitlines():
        if "boot time" in line or "up in" in line:
            print("VCLUSTER", line, file=sys.__stderr__)
    yield proc.stdout
    vc("down", check=False)
    assert not head.netns_exists()


def test_every_node_registered_with_a_boot_time(cluster):
    st = json.loads(vc("status", "--json").stdout)
    assert st["up"] and sorted(st["nodes"]) == NODES
    for name, n in st["nodes"].items():
        assert n["qemu_alive"], name
        assert re.match(r"IDLE", n["slurm"]), f"{name}: {n['slurm']}"
        assert n["boot_s"] and n["boot_s"] > 0
    for name in NODES:
        assert re.search(rf"boot time {name}: [0-9.]+ s from QEMU start to slurmd registered", cluster)


def test_srun_across_both_nodes(cluster):
    proc = vc("exec", "--", "srun", "-N2", "--ntasks-per-node=1", "hostname", timeout=180)
    assert sorted(proc.stdout.split()) == NODES


def test_mpi_hello_across_both_nodes(cluster):
    proc = vc("exec", "--", "srun", "-N2", "-n2", "--mpi=pmix", "/opt/vcluster/bin/mpi-hello", timeout=240)
    lines = sorted(ln for ln in proc.stdout.splitlines() if ln.startswith("mpi-hello"))
    assert lines == ["mpi-hello rank 0 of 2 on n01 (allreduce 1)", "mpi-hello rank 1 of 2 on n02 (allreduce 1)"], \
        proc.stdout + proc.stderr


def test_corespec_profile_reaches_the_nodes(cluster):
    """CpuSpecList from the corespec profile: slurmd reports CPU 0 as specialized on each node."""
    out = vc("exec", "--", "scontrol", "-o", "show", "node").stdout
    for name in NODES:
        line = next(ln for ln in out.splitlines() if f"NodeName={name} " in ln)
        assert "CPUSpecList=0" in line or "CoreSpecCount=1" in line, line


def test_up_again_is_idempotent(cluster):
    before = json.loads(vc("status", "--json").stdout)
    proc = vc("up", "--nodes", "2", timeout=120)
    assert "already up" in proc.stdout
    after = json.loads(vc("status", "--json").stdout)
    assert {n: d["qemu_pid"] for n, d in before["nodes"].items()} == \
        {n: d["qemu_pid"] for n, d in after["nodes"].items()}


def test_console_shows_the_node_log(cluster):
    out = vc("console", "n01", "-n", "400").stdout
    assert "console log" in out and "vcluster: network up" in out
    assert vc("console", "nosuch", check=False).returncode == 1


def test_down_leaves_nothing(cluster):
    from stackproof.vcluster import head
    st = json.loads(vc("status", "--json").stdout)
    qemu = [d["qemu_pid"] for d in st["nodes"].values()]
    heads = [d["pid"] for d in st["head"].values()]
    vc("down")
    assert not head.netns_exists()
    assert not [p for p in qemu + heads if head.alive(p)]
    assert vc("status", check=False).returncode == 1
    assert "spk-vc" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not list(Path("/run/netns").glob("spk-vc*"))
