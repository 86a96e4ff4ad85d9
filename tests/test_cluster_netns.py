"""Two multi-node test clusters on one host never share a link name or a subnet (issue 28, item 6),
and a subnet already on the host is refused instead of being shared."""
from pathlib import Path

import pytest

from stackproof.cluster import netns
from stackproof.errors import StackproofError


def test_link_names_and_subnets_differ_per_run_dir():
    roots = [Path(f"/run/stackproof-{i}") for i in range(64)]
    veths = {netns.host_veth(r) for r in roots}
    assert len(veths) == 64
    assert all(len(v) <= 15 for v in veths)            # IFNAMSIZ
    nets = [netns.subnet(r) for r in roots[:2]]
    assert nets[0] != nets[1]
    for r in roots:
        third = int(netns.subnet(r).split(".")[2])
        assert 16 <= third <= 239
        assert netns.node_addr(r, 3) == f"{netns.subnet(r)}.13"
        assert netns.controller_addr(r) == f"{netns.subnet(r)}.1"


def test_same_run_dir_same_names():
    r = Path("/run/stackproof")
    assert netns.host_veth(r) == netns.host_veth(Path("/run/stackproof"))
    assert netns.names(r, ["n1"]) == [f"{netns.prefix(r)}ctl", f"{netns.prefix(r)}n1"]


def test_subnet_already_on_the_host_is_refused(monkeypatch):
    root = Path("/run/stackproof-x")
    monkeypatch.setattr(netns, "_subnet_in_use", lambda net: "spkffffff-host")
    calls = []
    monkeypatch.setattr(netns, "sh", lambda cmd: calls.append(cmd))
    with pytest.raises(StackproofError, match=r"already on the host \(link spkffffff-host\)"):
        netns.create(root, ["n1"], [])
    assert calls == []                                # nothing created


def test_subnet_in_use_reads_ip_addr(monkeypatch):
    class Out:
        stdout = ("1: lo    inet 127.0.0.1/8 scope host lo\n"
                  "7: spkabc123-host    inet 10.99.42.254/24 scope global spkabc123-host\n")
    monkeypatch.setattr(netns.subprocess, "run", lambda *a, **k: Out())
    assert netns._subnet_in_use("10.99.42") == "spkabc123-host"
    assert netns._subnet_in_use("10.99.4") is None
    assert netns._subnet_in_use("10.99.43") is None
