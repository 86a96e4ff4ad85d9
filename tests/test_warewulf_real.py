"""Real `wwctl overlay build` against our renderer, and how vcluster picks between them.

- With a real wwctl (PATH, $STACKPROOF_WWCTL or $WWCTL; images/warewulf/build-wwctl.sh builds
  Warewulf v4.7.0): the per-node system images that `wwctl overlay build` writes, unpacked, equal the
  overlay cpios `stackproof vcluster` builds with its own renderer for the same nodes.conf: every file
  and directory, mode, owner; the munge key byte for byte; the text files line for line once comment
  lines are set aside (the templates' "# Rendered by Warewulf ..." headers; our renderer writes
  `stackproof slurm render`'s content without comments). Skips without wwctl.
- Always (a stub wwctl script): vcluster renders the site overlays with wwctl when there is one and
  says which renderer it used; errors are one clear line.
"""
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from stackproof.provision import wwctl
from stackproof.errors import StackproofError
from stackproof.paths import REPO
from stackproof.provision import cpio
from stackproof.provision.vcluster import nodesconf, overlays
from stackproof.provision.vcluster.core import VCluster

OVERLAY_SRC = REPO / "images/warewulf/overlays"
KEY = bytes(range(256)) * 4                  # 1024 bytes, binary, last byte 0xff
MIXED_SPEC = """\
site: {cluster_name: mixed, slurmctld_host: head, configless: false,
       mpibind_plugin: /opt/stackproof/lib/mpibind/mpibind_slurm.so}
profiles:
  gpu-clean: {nodetype: pascal, profile: clean, gpus: true, image: el9-compute-gpu}
  cpu-corespec: {nodetype: lassen, profile: corespec, image: el9-compute}
  baseline: {nodetype: tioga, profile: baseline, image: el9-compute}
  vc: {nodetype: images/vcluster/nodetype.yaml, profile: corespec, image: debian12-compute}
nodes:
  g[01-02]: {profile: gpu-clean, ipaddr: 10.77.0.21}
  c01: {profile: cpu-corespec, ipaddr: 10.77.0.31}
  b01: {profile: baseline, ipaddr: 10.77.0.41}
  n01: {profile: vc, ipaddr: 10.77.0.11}
"""


def _real_wwctl() -> str:
    try:
        exe = wwctl.find()
    except StackproofError as exc:      # $STACKPROOF_WWCTL set but not executable: fix it, never skip
        pytest.fail(str(exc))
    if exe is None:
        pytest.skip("wwctl not found: put it on PATH or set STACKPROOF_WWCTL=/path/to/wwctl "
                    "(images/warewulf/build-wwctl.sh builds Warewulf v4.7.0 from a source checkout)")
    if "stub" in wwctl.version(exe):
        pytest.skip("STACKPROOF_WWCTL is a stub")
    return exe


def _entries(data: bytes) -> dict[str, tuple]:
    """path -> (type, mode, uid, gid, body) of a newc archive."""
    out = {}
    for e, body in cpio.read(data):
        path = e.path[2:] if e.path.startswith("./") else e.path.lstrip("/")
        if path in ("", "."):
            continue
        out[path] = (stat.S_IFMT(e.mode), stat.S_IMODE(e.mode), e.uid, e.gid,
                     e.link.encode() if e.link is not None else body)
    return out


def _lines(body: bytes) -> list[str]:
    return [ln for ln in body.decode().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _site_only(nodes):
    import dataclasses
    return [dataclasses.replace(n, system_overlays=[o for o in n.system_overlays if o in overlays.SITE])
            for n in nodes]


def _compare(spec_path: Path, tmp_path: Path, exe: str) -> dict:
    spec = nodesconf.load_spec(spec_path)
    nodes = _site_only(nodesconf.resolve(nodesconf.generate(spec)))
    ours = overlays.render(spec, nodes, KEY, None)
    key = tmp_path / "munge.key"
    key.write_bytes(KEY)
    tree = wwctl.Tree(tmp_path / "ww", overlays.site_nodes_conf(nodes, key), exe=exe)
    tree.run("overlay", "build", *[n.name for n in nodes])
    stats = {"nodes": len(nodes), "files": 0, "dirs": 0, "comment_only_diffs": 0, "empty_dirs_only_in_wwctl": 0}
    for n in nodes:
        mine = _entries(cpio.to_bytes(cpio.overlay_entries(ours[n.name]["system"], overlays.overlay_dirs())))
        theirs = _entries(tree.image(n.name, "system"))
        # wwctl also archives the overlays' own directories when a template writes nothing below them
        # (baseline profile: etc/systemd/system with no drop-in). 0755 root like the image's: harmless.
        extra = {p for p in set(theirs) - set(mine) if theirs[p][:4] == (stat.S_IFDIR, 0o755, 0, 0)
                 and any((OVERLAY_SRC / o / "rootfs" / p).is_dir() for o in overlays.SITE)}
        stats["empty_dirs_only_in_wwctl"] += len(extra)
        assert sorted(mine) == sorted(set(theirs) - extra), f"{n.name}: file lists differ"
        for path, (kind, mode, uid, gid, body) in theirs.items():
            if path in extra:
                continue
            m_kind, m_mode, m_uid, m_gid, m_body = mine[path]
            assert (m_kind, oct(m_mode), m_uid, m_gid) == (kind, oct(mode), uid, gid), f"{n.name}:{path}"
            if kind == stat.S_IFDIR:
                stats["dirs"] += 1
                continue
            stats["files"] += 1
            if path == "etc/munge/munge.key":
                assert m_body == body == KEY, f"{n.name}: munge key differs"
                continue
            assert _lines(m_body) == _lines(body), f"{n.name}:{path}"
            stats["comment_only_diffs"] += m_body != body
    return stats


@pytest.mark.parametrize("spec", ["vcluster", "mixed"])
def test_wwctl_overlay_build_equals_our_renderer(tmp_path, spec):
    exe = _real_wwctl()
    path = REPO / "images/vcluster/cluster.yaml"
    if spec == "mixed":
        path = tmp_path / "cluster.yaml"
        path.write_text(MIXED_SPEC)
    stats = _compare(path, tmp_path, exe)
    print(f"wwctl {wwctl.version(exe)}: {stats}")
    assert stats["files"] >= 8 * stats["nodes"] and stats["dirs"] >= 6 * stats["nodes"]


def test_install_overlays_script_with_real_wwctl(tmp_path):
    """images/warewulf/install-overlays.sh sets the munge key's and /etc/munge's mode and owner."""
    exe = _real_wwctl()
    spec = nodesconf.load_spec(REPO / "images/vcluster/cluster.yaml", nodes=1)
    nodes = _site_only(nodesconf.resolve(nodesconf.generate(spec)))
    key = tmp_path / "munge.key"
    key.write_bytes(KEY)
    tree = wwctl.Tree(tmp_path / "ww", overlays.site_nodes_conf(nodes, key), exe=exe, overlays=())
    wrapper = tmp_path / "wwctl"
    wrapper.write_text(f'#!/bin/sh\nexec {exe} --warewulfconf {tree.conf} "$@"\n')
    wrapper.chmod(0o755)
    proc = subprocess.run([str(REPO / "images/warewulf/install-overlays.sh"), "--wwctl", str(wrapper),
                           "--key", str(key)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    tree.run("overlay", "build", "n01")
    got = _entries(tree.image("n01", "system"))
    uid = overlays.munge_id()
    assert got["etc/munge"][1:4] == (0o700, uid, uid)
    assert got["etc/munge/munge.key"][1:] == (0o400, uid, uid, KEY)


def test_vcluster_render_auto_with_real_wwctl(tmp_path, monkeypatch):
    """What `vcluster up` serves with a real wwctl: its site files plus our stand-ins."""
    exe = _real_wwctl()
    monkeypatch.setenv("STACKPROOF_WWCTL", exe)
    spec = nodesconf.load_spec(REPO / "images/vcluster/cluster.yaml", nodes=2)
    nodes = nodesconf.resolve(nodesconf.generate(spec))
    rendered, how = overlays.render_auto(spec, nodes, KEY, b"ELF", tmp_path / "work")
    assert how == f"site overlays slurm, corespec, munge rendered by `wwctl overlay build` ({exe}, {wwctl.version(exe)})"
    ours = overlays.render(spec, nodes, KEY, b"ELF")
    for name in ("n01", "n02"):
        got, want = rendered[name]["system"], ours[name]["system"]
        assert sorted(got) == sorted(want)
        assert got["etc/slurm/slurm.conf"].data.startswith(b"# Rendered by Warewulf (stackproof slurm overlay)")
        assert got["etc/hostname"] == want["etc/hostname"] and got["init"] == want["init"]
        assert rendered[name]["runtime"] == ours[name]["runtime"]


# ---- vcluster's choice of renderer (stub wwctl: always runs) -------------------------------------------

STUB = """#!{python}
# stub wwctl: records its arguments; `overlay build` writes one file per node from nodes.conf
import os, sys, json, yaml
sys.path.insert(0, {src!r})
from stackproof.provision import cpio
args = sys.argv[1:]
with open(os.environ["STUB_LOG"], "a") as fh:
    fh.write(json.dumps(args) + "\\n")
if args == ["--emptyconf", "version"]:
    print("wwctl version:\\t 0.0.0-stub")
    sys.exit(0)
if os.environ.get("STUB_FAIL"):
    print("ERROR: stub refuses", file=sys.stderr)
    sys.exit(1)
conf = yaml.safe_load(open(args[1]))
if args[2:4] == ["overlay", "build"]:
    nodes = yaml.safe_load(open(conf["paths"]["sysconfdir"] + "/warewulf/nodes.conf"))["nodes"]
    for name in args[4:]:
        n = nodes[name]
        files = {{"etc/slurm/slurm.conf": cpio.File("stub " + name + " " + ",".join(n["system overlay"]) + "\\n"),
                 "etc/munge/munge.key": cpio.File(open(n["tags"]["munge_key_path"], "rb").read(), 0o400, 970, 970)}}
        d = conf["paths"]["wwprovisiondir"] + "/overlays/" + name
        os.makedirs(d, exist_ok=True)
        open(d + "/__SYSTEM__.img", "wb").write(cpio.to_bytes(cpio.overlay_entries(files)))
"""


@pytest.fixture
def planned():
    spec = nodesconf.load_spec(REPO / "images/vcluster/cluster.yaml", nodes=2)
    return spec, nodesconf.resolve(nodesconf.generate(spec))


@pytest.fixture
def stub(tmp_path, monkeypatch):
    exe = tmp_path / "bin" / "wwctl"
    exe.parent.mkdir()
    exe.write_text(STUB.format(python=sys.executable, src=str(REPO / "src")))
    exe.chmod(0o755)
    monkeypatch.setenv("STUB_LOG", str(tmp_path / "stub.log"))
    monkeypatch.delenv("WWCTL", raising=False)
    monkeypatch.setenv("STACKPROOF_WWCTL", str(exe))
    return exe


def test_vcluster_uses_wwctl_for_site_overlays_when_present(planned, stub, tmp_path):
    spec, nodes = planned
    rendered, how = overlays.render_auto(spec, nodes, KEY, b"ELF", tmp_path / "work")
    assert how.startswith("site overlays slurm, corespec, munge rendered by `wwctl overlay build`")
    assert str(stub) in how and "0.0.0-stub" in how
    n02 = rendered["n02"]["system"]
    assert n02["etc/slurm/slurm.conf"].data == b"stub n02 munge,slurm,corespec\n"   # wwctl's, not ours
    assert (n02["etc/munge/munge.key"].data, n02["etc/munge/munge.key"].mode) == (KEY, 0o400)
    assert "etc/systemd/system/slurmd.service.d/50-stackproof-corespec.conf" not in n02   # ours left out
    assert "WWHOSTNAME=n02" in n02["warewulf/config"].data and n02["etc/hostname"].data == "n02\n"
    assert rendered["n02"]["runtime"]["opt/vcluster/bin/mpi-hello"].data == b"ELF"
    calls = [ln for ln in (tmp_path / "stub.log").read_text().splitlines() if '"build"' in ln]
    assert len(calls) == 1 and calls[0].endswith('"overlay", "build", "n01", "n02"]')
    # the private tree: every path inside the work directory, no host services
    conf = yaml.safe_load((tmp_path / "work/warewulf/etc/warewulf/warewulf.conf").read_text())
    assert all(str(v).startswith(str(tmp_path / "work")) for v in conf["paths"].values())
    assert not any(conf[s]["enabled"] for s in ("dhcp", "tftp", "nfs"))


def test_vcluster_falls_back_to_our_renderer_without_wwctl(planned, tmp_path, monkeypatch):
    spec, nodes = planned
    monkeypatch.delenv("STACKPROOF_WWCTL", raising=False)
    monkeypatch.delenv("WWCTL", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    rendered, how = overlays.render_auto(spec, nodes, KEY, None, tmp_path / "work")
    assert how == "site overlays rendered by stackproof's renderer (no wwctl on PATH or in $STACKPROOF_WWCTL)"
    assert rendered == overlays.render(spec, nodes, KEY, None)
    assert not (tmp_path / "work").exists()


def test_wwctl_failure_is_one_clear_error(planned, stub, tmp_path, monkeypatch):
    monkeypatch.setenv("STUB_FAIL", "1")
    spec, nodes = planned
    with pytest.raises(StackproofError, match=r"^wwctl overlay chmod munge etc/munge 0700 failed \(exit 1\): "
                                              r"ERROR: stub refuses$"):
        overlays.render_auto(spec, nodes, KEY, None, tmp_path / "work")


def test_explicit_wwctl_that_is_not_executable_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("STACKPROOF_WWCTL", str(tmp_path / "nosuch"))
    with pytest.raises(StackproofError, match="STACKPROOF_WWCTL=.*nosuch is not an executable wwctl"):
        wwctl.find()


def test_munge_key_ending_in_newline_is_refused_for_wwctl(planned, stub, tmp_path):
    spec, nodes = planned
    with pytest.raises(StackproofError, match="ends with a newline byte"):
        overlays.render_auto(spec, nodes, KEY[:-1] + b"\n", None, tmp_path / "work")


def test_generated_munge_key_never_ends_in_newline(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "urandom", lambda n: b"k" * (n - 1) + b"\n")
    key = VCluster(tmp_path)._munge_key()
    data = key.read_bytes()
    assert len(data) == 1024 and not data.endswith(b"\n") and stat.S_IMODE(key.stat().st_mode) == 0o400
