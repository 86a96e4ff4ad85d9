"""`stackproof vcluster down` returns only when its QEMU processes are gone (issue 33, item 8).

QEMU is multi-threaded: once its main thread has exited, /proc shows the leader as a zombie while the
other threads still run and hold the VM's memory, tap and files. The old wait took that zombie for
gone, so `down` returned with both VMs still there for a few seconds. Reproduced here without QEMU:
a process whose main thread exits while another thread lives on (pthread_exit)."""
import subprocess
import sys
import time

import pytest

from stackproof.cluster.procs import alive, exited
from stackproof.provision.vcluster import head

LEADER_EXITS_FIRST = """
import ctypes, sys, threading, time
threading.Thread(target=lambda: time.sleep(3600)).start()
time.sleep(0.1)
print("ready", flush=True)
ctypes.CDLL(None).pthread_exit(None)
"""


@pytest.fixture
def leader_zombie():
    proc = subprocess.Popen([sys.executable, "-c", LEADER_EXITS_FIRST], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 30
    while alive(proc.pid) and time.monotonic() < deadline:       # until the main thread is gone
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait()


def test_a_zombie_leader_with_running_threads_has_not_exited(leader_zombie):
    assert not alive(leader_zombie.pid)          # what the old wait looked at: "gone"
    assert not exited(leader_zombie.pid)         # its other thread still runs
    leader_zombie.kill()
    deadline = time.monotonic() + 30
    while not exited(leader_zombie.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert exited(leader_zombie.pid)             # a zombie with no thread left (not yet reaped): gone


def test_teardown_returns_only_after_the_process_has_exited(leader_zombie, monkeypatch):
    monkeypatch.setattr(head, "netns_pids", lambda: [])          # never touch a real namespace here
    monkeypatch.setattr(head, "netns_exists", lambda: False)
    pid = leader_zombie.pid
    assert head._wait_gone([pid], timeout=0.3) == [pid]         # not gone while its thread runs
    assert head.teardown(also=[pid]) == [pid]                    # SIGTERM ends the whole process
    assert exited(pid)


def test_teardown_of_an_unkillable_thread_group_is_one_line(leader_zombie, monkeypatch):
    monkeypatch.setattr(head, "netns_pids", lambda: [])
    monkeypatch.setattr(head, "netns_exists", lambda: False)
    monkeypatch.setattr(head, "_wait_gone", lambda pids, timeout=0: list(pids))     # never exits
    monkeypatch.setattr(head.os, "kill", lambda pid, sig: None)
    with pytest.raises(head.StackproofError, match=rf"processes \[{leader_zombie.pid}\] in namespace .* did not exit"):
        head.teardown(also=[leader_zombie.pid])


def test_qemu_pid_names_only_a_qemu_process(tmp_path):
    pidfile = tmp_path / "n01.qemu.pid"
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        pidfile.write_text(f"{sleeper.pid}\n")
        assert head.qemu_pid(pidfile) is None                    # a reused pid is never signalled
        pidfile.write_text("1\n")
        assert head.qemu_pid(pidfile) is None
        assert head.qemu_pid(tmp_path / "missing.pid") is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_down_waits_for_the_nodes_qemu_named_in_its_state(tmp_path, monkeypatch):
    from stackproof.provision.vcluster import core
    seen = {}

    def teardown(also=()):
        seen["also"] = list(also)
        return list(also)
    monkeypatch.setattr(head, "teardown", teardown)
    monkeypatch.setattr(head, "qemu_pid", lambda path: {"n01.qemu.pid": 4242, "n02.qemu.pid": 4343}.get(path.name))
    monkeypatch.setattr(head, "remove_runtime_dir", lambda root: None)
    monkeypatch.setattr(head, "NETNS", head.NETNS)          # VCluster() selects tmp_path's namespace
    vc = core.VCluster(tmp_path)
    vc.run.mkdir(parents=True, exist_ok=True)
    vc.state_file.write_text('{"nodes": {"n01": {"pidfile": "/r/n01.qemu.pid"}, '
                             '"n02": {"pidfile": "/r/n02.qemu.pid"}}}')
    vc.down(quiet=True)
    assert seen["also"] == [4242, 4343]

