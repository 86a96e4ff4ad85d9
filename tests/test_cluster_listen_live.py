"""No Slurm daemon of the test cluster listens on every address (issue 42): slurmctld, slurmd and a
job step's slurmstepd (with the pmix plugin's server) bind their node's address only
(CommunicationParameters=NoCtldInAddrAny,NoInAddrAny in the daemons' configuration, their host
names resolved through the cluster's /etc/hosts). Checked with `ss -ltnp` in this host's namespace
and in every namespace of the cluster, single node and two nodes, while a step runs."""
import re
import subprocess
import time

import pytest

from conftest import require_tools
from stackproof import cluster as cl
from stackproof.cluster import netns

pytestmark = pytest.mark.live

DAEMONS = ("slurmctld", "slurmd", "slurmstepd")
_LINE = re.compile(r"^LISTEN\s+\d+\s+\d+\s+(\S+):(\d+)\s+\S+\s+users:\((.*)\)\s*$")


def listeners(namespace: str | None = None) -> list[tuple[str, int, set[str]]]:
    """(local address, port, process names) of every listening TCP socket in a network namespace."""
    cmd = (["ip", "netns", "exec", namespace] if namespace else []) + ["ss", "-ltnpH"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        m = _LINE.match(line.strip())
        if m:
            found.append((m.group(1).strip("[]"), int(m.group(2)), set(re.findall(r'\("([^"]+)"', m.group(3)))))
    return found


def _step_running(c, timeout=60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc = c.exec_cmd(["squeue", "-h", "-s", "-o", "%i"], capture_output=True, text=True, timeout=30)
        if any(s.endswith(".0") for s in proc.stdout.split()):
            return True
        time.sleep(0.5)
    return False


@pytest.mark.parametrize("nodes", [1, 2])
def test_no_slurm_daemon_listens_on_every_address(live_cluster, nodes):
    require_tools("ss", "ip", "squeue")
    st = live_cluster.up(cl.Settings(profile="baseline", nodes=nodes))
    step = subprocess.Popen(["srun", "--mpi=pmix", f"-N{nodes}", f"-n{nodes}", "sleep", "60"], env=live_cluster.env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert _step_running(live_cluster), "the step never started"
        spaces = [None] + netns.existing(live_cluster.root)
        seen = [(ns, addr, port, names) for ns in spaces for addr, port, names in listeners(ns)
                if names & set(DAEMONS)]
    finally:
        step.kill()
        step.wait()
        live_cluster.exec_cmd(["scancel", "--quiet", "-u", "root"], capture_output=True, timeout=30)
    wildcard = [s for s in seen if s[1] in ("0.0.0.0", "*", "::")]
    assert wildcard == [], f"Slurm daemons listening on every address: {wildcard}"
    ctl_addr = netns.controller_addr(live_cluster.root) if nodes > 1 else "127.0.0.1"
    node_addrs = {netns.node_addr(live_cluster.root, i) for i in range(1, nodes + 1)} if nodes > 1 else {"127.0.0.1"}
    ctld = {(addr, port) for _ns, addr, port, names in seen if "slurmctld" in names}
    slurmd = {(addr, port) for _ns, addr, port, names in seen if "slurmd" in names}
    assert ctld == {(ctl_addr, st.settings["ports"][0])}, seen
    assert slurmd == {(a, st.settings["ports"][1]) for a in node_addrs}, seen
    # the step's slurmstepd (its pmix server) was seen listening on every node: the check covered it
    assert len({ns for ns, _a, _p, names in seen if "slurmstepd" in names}) == nodes, seen
