"""Core-specialization profiles (paper Table III) and the Slurm/system renders."""
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import stackproof_cli
from stackproof.nodes import nodetype

from stackproof.nodes import profiles
from stackproof.cpulist import format_list
from stackproof.errors import StackproofError
from stackproof.nodes.slurmconf import Site, render, write_tree

GOLDEN = Path(__file__).parent / "golden" / "slurm"


def _cases():
    for line in (GOLDEN / "cases.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, args = (x.strip() for x in line.split("|"))
            yield name, args.split()


def test_lassen_corespec_k2_first_gives_the_papers_system_cores_0_1_22_23():
    nt = nodetype.load("lassen")
    plan = profiles.plan(nt, "corespec", k=2)
    cores = [nt.abstract_core_id(s, c) for s, c in plan.system_cores]
    assert cores == [0, 1, 22, 23]
    assert plan.system_cpu_list == "0-7,88-95"
    assert format_list(plan.cpu_spec_list) == "0-7,88-95"
    assert len(plan.app_cores) == 40
    assert set(plan.daemons) == {"slurm", "munge"}


def test_freecore_last_and_first_on_lassen():
    nt = nodetype.load("lassen")
    last = profiles.plan(nt, "freecore-last", k=2)
    assert [nt.abstract_core_id(s, c) for s, c in last.system_cores] == [20, 21, 42, 43]
    assert not last.reserve and last.cpu_spec_list == []
    first = profiles.plan(nt, "freecore-first", k=2)
    assert first.system_cpu_list == "0-7,88-95" and not first.reserve


def test_pascal_spec_list_uses_abstract_ids_and_affinity_uses_os_ids():
    nt = nodetype.load("pascal")
    plan = profiles.plan(nt, "clean", k=2)
    assert format_list(plan.cpu_spec_list) == "0-3,36-39"
    assert plan.system_cpu_list == "0-1,18-19,36-37,54-55"
    assert {"snmpd", "irqbalance", "systemd", "time", "cron"} <= set(plan.daemons)
    assert "nvidia" not in plan.daemons
    assert "nvidia" in profiles.plan(nt, "clean", k=2, with_nvidia=True).daemons


def test_baseline_gives_applications_every_cpu():
    nt = nodetype.load("tioga")
    plan = profiles.plan(nt, "baseline")
    assert plan.app_cpus == nt.all_cpus and plan.system_cpus == set() and plan.k == 0


@pytest.mark.parametrize("name,kwargs,msg", [
    ("corespec", {"k": 22}, "leaves 0 application cores"),
    ("blink", {}, "unknown profile 'blink'"),
    ("corespec", {"k": -1}, "k must be >= 0"),
    ("freecore-first", {"k": 0}, "needs k >= 1"),
])
def test_bad_profiles(name, kwargs, msg):
    with pytest.raises(StackproofError, match=msg):
        profiles.plan(nodetype.load("lassen"), name, **kwargs)


@pytest.mark.parametrize("name,args", list(_cases()), ids=[c[0] for c in _cases()])
def test_render_matches_golden_files(tmp_path, name, args):
    proc = stackproof_cli("slurm", "render", *args, "-o", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    got = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    want = {p.relative_to(GOLDEN / name): p.read_bytes() for p in (GOLDEN / name).rglob("*") if p.is_file()}
    assert sorted(got) == sorted(want)
    for rel in want:
        assert got[rel] == want[rel], f"{name}/{rel} differs from the golden file (tests/golden/slurm/regenerate.sh)"


def test_render_is_byte_identical_on_repeat(tmp_path):
    args = ["slurm", "render", "--nodetype", "lassen", "--profile", "clean", "--gpus", "--mpibind-plugin", "none"]
    a, b = stackproof_cli(*args), stackproof_cli(*args)
    assert a.returncode == 0 and a.stdout == b.stdout and a.stdout


def test_rendered_files_say_what_the_paper_says():
    files = render(nodetype.load("lassen"), profiles.plan(nodetype.load("lassen"), "corespec", k=2),
                   Site(cluster_name="lassen", nodes=["lassen1"], gpus=True))
    conf = files["etc/slurm/slurm.conf"]
    assert ("NodeName=lassen1 CPUs=176 Boards=1 SocketsPerBoard=2 CoresPerSocket=22 ThreadsPerCore=4"
            in conf)
    assert "CpuSpecList=0-7,88-95" in conf and "Gres=gpu:v100:4" in conf
    assert "SlurmdOffSpec" not in conf  # daemons must run ON the spec CPUs
    assert "CPUAffinity=0-7 88-95" in files["etc/systemd/system/slurmd.service.d/50-stackproof-corespec.conf"]
    assert "IRQBALANCE_BANNED_CPULIST=8-87,96-175" in files["etc/default/irqbalance"]
    gres = files["etc/slurm/gres.conf"]
    assert "File=/dev/nvidia0 Cores=0-21" in gres and "File=/dev/nvidia3 Cores=22-43" in gres


def test_plugstack_names_the_plugin_when_installed(tmp_path):
    plugin = tmp_path / "mpibind_slurm.so"
    plugin.write_bytes(b"\x7fELF")
    proc = stackproof_cli("slurm", "render", "--nodetype", "pascal", "--profile", "baseline", "--mpibind-plugin", str(plugin))
    assert f"required {plugin}\n" in proc.stdout
    proc = stackproof_cli("slurm", "render", "--nodetype", "pascal", "--profile", "baseline", "--mpibind-plugin", "/no/such.so")
    assert proc.returncode == 1 and "mpibind plugin not found" in proc.stderr


def test_gpus_flag_on_a_cpu_only_node_type_is_an_error():
    proc = stackproof_cli("slurm", "render", "--nodetype", "local", "--profile", "baseline", "--gpus")
    assert proc.returncode == 2 and "has no GPUs" in proc.stderr


def test_corespec_script_checks_affinity(tmp_path):
    """The no-systemd script's `check` passes for a process on the system CPUs and fails otherwise."""
    nt = nodetype.from_host()
    if nt.cores_per_socket < 2:
        pytest.skip("needs 2 cores")
    plan = profiles.plan(nt, "corespec", k=1)
    # A process name no other process has (a copy of sleep), so `apply` re-pins only what we started.
    name = f"spkcs{os.getpid() % 10**8}"
    own = tmp_path / name
    shutil.copy(shutil.which("sleep"), own)
    write_tree(render(nt, plan, Site(cluster_name="t", nodes=["x"])), tmp_path / "root")
    with open(tmp_path / "root/etc/stackproof/corespec.processes", "a") as fh:
        fh.write(name + "\n")      # the process list is data the static script reads
    script = tmp_path / "root/usr/local/sbin/stackproof-corespec"
    on_app = subprocess.Popen(["taskset", "-c", plan.app_cpu_list, str(own), "30"])
    for _ in range(500):       # taskset execs the copy: until then the process is named taskset
        if Path(f"/proc/{on_app.pid}/comm").read_text().strip() == name:
            break
        time.sleep(0.01)
    try:
        bad = subprocess.run([str(script), "check"], capture_output=True, text=True)
        assert bad.returncode == 1 and f"FAIL {name}[{on_app.pid}]" in bad.stdout
        subprocess.run([str(script), "apply"], check=True, capture_output=True, env={"PATH": "/usr/bin:/bin", "STACKPROOF_NO_TUNA": "1"})
        good = subprocess.run([str(script), "check"], capture_output=True, text=True)
        assert good.returncode == 0, good.stdout
    finally:
        on_app.kill()
