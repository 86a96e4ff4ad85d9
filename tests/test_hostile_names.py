"""Hostile process names (issue 28, case 1): a comm such as `$(touch pwned)` goes through hunt ->
proposal -> render -> the corespec script, and nothing is executed. The script is static and reads
its process list as data; names are refused at every source (profile files, the catalog, proposals)."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import stackproof_cli
from stackproof import validate

from stackproof.nodes import corespec
from stackproof.errors import StackproofError
from stackproof.noise.hunt import attribute, propose
from stackproof.nodes.nodetype import load
from stackproof.nodes.profiles import load_catalog, plan, read_profile_file
from stackproof.nodes.slurmconf import Site, render, write_tree

# Each would run `touch pwned` (in the test's cwd) if spliced into shell. 15 bytes at most fit a comm.
HOSTILE = ["$(touch pwned)", "`touch pwned`", "a;touch pwned", "a\ntouch pwned", "a|touch pwned", "a b", "",
           "a" * 65, "x&touch pwned", "'", '"', "*", "a>pwned"]


@pytest.mark.parametrize("name", HOSTILE)
def test_validate_refuses_hostile_process_names(name):
    with pytest.raises(StackproofError, match="not a process name"):
        validate.process_name(name)


@pytest.mark.parametrize("name", ["slurmd", "kworker/0:1H", "systemd-journald", "nv-hostengine", "prometheus-node-exporter"])
def test_real_daemon_names_pass(name):
    assert validate.process_name(name) == name


def test_catalog_names_all_valid():
    cat = load_catalog()
    assert corespec.process_names(cat["daemons"])


def _profile_file(tmp_path, procs=None, units=None):
    procs = procs if procs is not None else ["$(touch pwned)"]
    units = units if units is not None else []
    import yaml
    p = tmp_path / "evil.yaml"
    p.write_text(yaml.safe_dump({"profiles": {"evil": {"free": True, "reserve": True, "daemons": ["evil"]}},
                                 "daemons": {"evil": {"units": units, "processes": procs}}}))
    return p


def test_profile_file_with_a_hostile_process_is_refused(tmp_path):
    with pytest.raises(StackproofError, match=r"evil.yaml: daemon group 'evil': process.*not a process name"):
        read_profile_file(_profile_file(tmp_path))


@pytest.mark.parametrize("unit", ["../../../../tmp/x.service", "a/b.service", "a\nb.service", "x"])
def test_profile_file_with_a_hostile_unit_is_refused(tmp_path, unit):
    with pytest.raises(StackproofError, match="not a systemd unit name"):
        read_profile_file(_profile_file(tmp_path, procs=["ok"], units=[unit]))


def test_cli_render_refuses_the_hostile_profile_file(tmp_path):
    out = tmp_path / "out"
    proc = stackproof_cli("slurm", "render", "--nodetype", "pascal",
                           "--profile", "evil", "--profile-file", str(_profile_file(tmp_path)), "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr          # bad input
    assert len(proc.stderr.strip().splitlines()) == 1 and "not a process name" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists() and not (tmp_path / "pwned").exists()


def test_rendered_script_is_static_and_names_are_data():
    nt = load("pascal")
    a = render(nt, plan(nt, "clean"), Site(cluster_name="t", nodes=["x"]))
    b = render(nt, plan(nt, "corespec"), Site(cluster_name="t", nodes=["x"]))
    assert a[corespec.SCRIPT] == b[corespec.SCRIPT] == corespec.script_text()
    assert "slurmd\n" in a[corespec.PROCESSES] and "munged\n" in b[corespec.PROCESSES]
    assert "slurmd" not in a[corespec.SCRIPT]


def _named_process(comm: str) -> subprocess.Popen:
    """A sleeping child whose kernel comm is `comm` (prctl PR_SET_NAME, as any user can do)."""
    code = ("import ctypes, sys, time; ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0); "
            "print('ready', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, comm], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    with open(f"/proc/{proc.pid}/comm") as fh:
        assert fh.read().rstrip("\n") == comm[:15]
    return proc


def test_script_runs_hostile_list_entries_as_data(tmp_path):
    """The data file written by hand with hostile lines (bypassing every check) and processes really
    named that way running: apply/check/list skip those lines and run nothing."""
    nt = load("pascal")
    root = tmp_path / "root"
    write_tree(render(nt, plan(nt, "corespec"), Site(cluster_name="t", nodes=["x"])), root)
    # only hostile lines: `apply` must not re-pin this host's real daemons as a side effect
    (root / corespec.PROCESSES).write_text("$(touch pwned)\n`touch pwned`\na;touch pwned\n$(touch pwned2)x\n")
    procs = [_named_process(n) for n in ("$(touch pwned)", "`touch pwned`", "a;touch pwned")]
    try:
        for action in ("list", "check", "apply"):
            res = subprocess.run([str(root / corespec.SCRIPT), action], capture_output=True, text=True,
                                 cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "STACKPROOF_NO_TUNA": "1"})
            assert res.stderr.count("not a process name (ignored)") == 4, res.stderr
            assert res.returncode == 1            # a skipped line is reported, never silently passed
            assert not list(tmp_path.glob("pwned*")), action
            for p in procs:
                assert f"[{p.pid}]" not in res.stdout
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_script_binds_a_plain_named_daemon_and_matches_exactly(tmp_path):
    """A valid name is compared as a string: `a.c` is not a regex that also matches `abc`."""
    nt = load("pascal")
    root = tmp_path / "root"
    write_tree(render(nt, plan(nt, "corespec"), Site(cluster_name="t", nodes=["x"])), root)
    tag = f"spk{os.getpid() % 10**6}"
    (root / corespec.PROCESSES).write_text(f"{tag}.c\n")
    decoy, real = _named_process(f"{tag}xc"), _named_process(f"{tag}.c")
    try:
        res = subprocess.run([str(root / corespec.SCRIPT), "list"], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        assert f"[{real.pid}]" in res.stdout and f"[{decoy.pid}]" not in res.stdout
    finally:
        for p in (decoy, real):
            p.kill()
            p.wait()


def test_hunt_proposal_drops_a_hostile_comm_and_nothing_runs(tmp_path):
    """hunt -> proposal -> render -> apply.sh: the culprit named `$(touch pwned)` is reported, never
    bound, never in the rendered process list; running apply.sh and the corespec script runs nothing."""
    nt = load("pascal")
    base = plan(nt, "clean")
    C = attribute.Culprit
    res = attribute.CpuResult(cpu=max(base.app_cpus), rank=0, samples=1, quantum_us=10, std_us=1, max_us=1,
                              detours=1, detour_time_us=100, attributed_us=90, attributed_fraction=0.9,
                              hypervisor_us=0, self_task="fwq-th[1]", culprits=[
        C("task:$(touch pwned):11", "task", "$(touch pwned)[11]", 40, 0.4, 1, 40, 1,
          comm="$(touch pwned)", pid=11, tgid=11),
        C("task:a\ntouch pwned:12", "task", "a\ntouch pwned[12]", 30, 0.3, 1, 30, 1, comm="a\ntouch pwned", pid=12),
        C("task:snmpd:5", "task", "snmpd[5]", 20, 0.2, 1, 20, 1, comm="snmpd", pid=5)])
    prop = propose.propose([res], base, load_catalog(), "pascal1")
    assert [b["comm"] for b in prop["bind"]] == ["snmpd"]
    assert sum("refused" in n for n in prop["notes"]) == 2
    assert not any("touch" in g for g in prop["daemons"])
    propose.render_proposal(prop, nt, base, "pascal1", tmp_path)
    names = (tmp_path / "rendered" / corespec.PROCESSES).read_text()
    assert "touch" not in names and "snmpd" in names
    script = (tmp_path / "apply.sh").read_text()
    assert "\ntouch pwned" not in script
    # apply.sh would taskset pid 5 (maybe a real process): run it with taskset stubbed out.
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "taskset").write_text("#!/bin/sh\nexit 0\n")
    (stub / "taskset").chmod(0o755)
    run = subprocess.run(["sh", str(tmp_path / "apply.sh")], cwd=tmp_path, capture_output=True, text=True,
                         env={"PATH": f"{stub}:/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    run = subprocess.run([str(tmp_path / "rendered" / corespec.SCRIPT), "list"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert not list(tmp_path.glob("pwned*"))


def test_script_is_shellcheck_clean():
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (apt-get install shellcheck)")
    res = subprocess.run(["shellcheck", "-s", "sh", "-"], input=corespec.script_text(), capture_output=True, text=True)
    assert res.returncode == 0, res.stdout

