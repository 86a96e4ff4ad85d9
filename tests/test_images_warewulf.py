"""Warewulf nodes.conf and site overlays: tags come from node types, overlays render what
`stackproof slurm render` writes. The wwctl half runs the real `wwctl overlay show --render` /
`wwctl overlay build` when wwctl is on PATH (or $STACKPROOF_WWCTL / $WWCTL names it); docs/warewulf.md says how to build it."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from stackproof.provision import images
from stackproof.errors import StackproofError
from stackproof.nodes.slurmconf import DROPIN_NAME

WW = images.IMAGES_DIR / "warewulf"
OVERLAYS = WW / "overlays"


def _content(text: str) -> list[str]:
    return [ln.rstrip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


# ---- Python side: always runs ------------------------------------------------------------------------

def test_committed_nodes_conf_is_generated_from_node_types():
    fresh = images.nodes_conf_text(images.load_spec(WW / "cluster.yaml"))
    assert (WW / "nodes.conf").read_text() == fresh, "run `make images-regen`"


@pytest.mark.parametrize("overlay", ["slurm", "corespec", "munge"])
def test_overlay_test_inputs_are_fresh(overlay, tmp_path):
    d = OVERLAYS / overlay / "internal"
    spec = images.load_spec(d / "cluster.yaml")
    assert (d / "nodes.conf").read_text() == images.nodes_conf_text(spec, default_profile=False), \
        "run `make images-regen`"
    if overlay in images.OVERLAY_FILES:
        images.write_expected(spec, tmp_path, overlay)
        fresh = {p.relative_to(tmp_path): p.read_text() for p in tmp_path.rglob("*") if p.is_file()}
        committed = {p.relative_to(d / "expected"): p.read_text()
                     for p in (d / "expected").rglob("*") if p.is_file()}
        assert committed == fresh, "run `make images-regen`"


@pytest.mark.parametrize("profile", ["compute-cpu", "compute-gpu"])
def test_profile_tags_rebuild_the_stackproof_node_line(profile):
    """The node line the slurm overlay builds from the tags equals `stackproof slurm render`'s."""
    spec = images.load_spec(WW / "cluster.yaml")
    tags = yaml.safe_load((WW / "nodes.conf").read_text())["nodeprofiles"][profile]["tags"]
    node = (f"NodeName=c01 NodeAddr=10.0.2.11 CPUs={tags['cpus']} Boards=1 SocketsPerBoard={tags['sockets']} "
            f"CoresPerSocket={tags['cores_per_socket']} ThreadsPerCore={tags['threads_per_core']} "
            f"RealMemory={tags['real_memory']}")
    if "cpu_spec_list" in tags:
        node += f" CpuSpecList={tags['cpu_spec_list']} MemSpecLimit={tags['mem_spec_limit']}"
    if "gres" in tags:
        node += f" Gres={tags['gres']}"
    node += " State=UNKNOWN"
    rendered = images.stackproof_render(spec, spec.profiles[profile], ["c01"], ["10.0.2.11"])
    assert node in rendered["etc/slurm/slurm.conf"].splitlines()
    # CPUAffinity of the drop-ins and the kernel's irqaffinity are the profile's system CPUs
    dropin = rendered[f"etc/systemd/system/slurmd.service.d/{DROPIN_NAME}"]
    assert f"CPUAffinity={tags['corespec_cpus'].replace(',', ' ')}" in dropin.splitlines()
    args = yaml.safe_load((WW / "nodes.conf").read_text())["nodeprofiles"][profile]["kernel"]["args"]
    assert f"irqaffinity={tags['corespec_cpus']}" in args


def test_gpu_profile_carries_one_gres_line_per_gpu():
    tags = yaml.safe_load((WW / "nodes.conf").read_text())["nodeprofiles"]["compute-gpu"]["tags"]
    count = int(tags["gres"].rsplit(":", 1)[1])
    assert len(tags["gpu_files"].split(",")) == len(tags["gpu_cores"].split(";")) == count
    cpu_tags = yaml.safe_load((WW / "nodes.conf").read_text())["nodeprofiles"]["compute-cpu"]["tags"]
    assert "gres" not in cpu_tags and "gpu_files" not in cpu_tags


def test_no_hardware_fact_is_hand_written_in_the_cluster_description():
    text = (WW / "cluster.yaml").read_text()
    for word in ("cpus", "sockets", "cores_per_socket", "real_memory", "CpuSpecList"):
        assert word not in text


@pytest.mark.parametrize("body, message", [
    ("profiles: {}\n", "site.cluster_name is required"),
    ("site: {cluster_name: x, slurmctld_host: h}\nprofiles: {p: {nodetype: pascal}}\n", "needs 'nodetype' and 'profile'"),
    ("site: {cluster_name: x, slurmctld_host: h}\nprofiles: {p: {nodetype: pascal, profile: corespec, cpus: 4}}\n",
     "unknown keys"),
    ("site: {cluster_name: x, slurmctld_host: h}\nprofiles: {p: {nodetype: pascal, profile: corespec}}\n"
     "nodes: {'n[1-2]': {profile: q, ipaddr: 10.0.0.1}}\n", "'profile' must be one of"),
    ("site: {cluster_name: x, slurmctld_host: h}\nprofiles: {p: {nodetype: pascal, profile: corespec}}\n"
     "nodes: {'n[1-2]': {profile: p, ipaddr: ten}}\n", "must be an IPv4 address"),
    ("[", "invalid YAML"),
])
def test_bad_cluster_description_is_rejected(tmp_path, body, message):
    f = tmp_path / "cluster.yaml"
    f.write_text(body)
    with pytest.raises(StackproofError, match=message):
        images.load_spec(f)


def test_unknown_node_type_in_cluster_description_fails(tmp_path):
    f = tmp_path / "cluster.yaml"
    f.write_text("site: {cluster_name: x, slurmctld_host: h}\nprofiles: {p: {nodetype: nosuch, profile: corespec}}\n")
    with pytest.raises(StackproofError, match="unknown node type"):
        images.nodes_conf(images.load_spec(f))


def test_cli_warewulf_nodes_missing_spec_exits_1(tmp_path, capsys):
    from stackproof.cli import main
    assert main(["images", "warewulf-nodes", "--spec", str(tmp_path / "none.yaml")]) == 1
    assert "cluster description not found" in capsys.readouterr().err


# ---- wwctl side ------------------------------------------------------------------------------------

def _wwctl() -> str:
    from stackproof.provision import wwctl
    try:
        exe = wwctl.find()          # $STACKPROOF_WWCTL, $WWCTL, PATH
    except StackproofError as exc:      # $STACKPROOF_WWCTL set but not executable: fix it, never skip
        pytest.fail(str(exc))
    if not exe:
        pytest.skip("wwctl not found: put it on PATH or set STACKPROOF_WWCTL=/path/to/wwctl (docs/warewulf.md: "
                    "images/warewulf/build-wwctl.sh builds Warewulf v4.7.0 from a source checkout)")
    return exe


class WwEnv:
    """A private Warewulf tree: the overlay's internal/warewulf.conf + nodes.conf, our site overlays."""

    def __init__(self, root: Path, overlay: str, nodes_conf: dict | None = None):
        self.exe = _wwctl()
        self.root = root
        internal = OVERLAYS / overlay / "internal"
        conf = yaml.safe_load((internal / "warewulf.conf").read_text())
        conf["paths"] = {"sysconfdir": f"{root}/etc", "localstatedir": f"{root}/var",
                         "cachedir": f"{root}/var/cache", "datadir": f"{root}/share",
                         "wwoverlaydir": f"{root}/overlays", "wwchrootdir": f"{root}/var/chroots",
                         "wwprovisiondir": f"{root}/var/provision", "srvdir": f"{root}/srv"}
        (root / "etc/warewulf").mkdir(parents=True)
        self.conf = root / "etc/warewulf/warewulf.conf"
        self.conf.write_text(yaml.safe_dump(conf))
        nodes = nodes_conf or yaml.safe_load((internal / "nodes.conf").read_text())
        (root / "etc/warewulf/nodes.conf").write_text(yaml.safe_dump(nodes))
        for name in ("slurm", "corespec", "munge"):
            shutil.copytree(OVERLAYS / name / "rootfs", root / "overlays" / name / "rootfs")

    def run(self, *args, check=True) -> subprocess.CompletedProcess:
        proc = subprocess.run([self.exe, "--warewulfconf", str(self.conf), *args],
                              capture_output=True, timeout=120)
        if check:
            assert proc.returncode == 0, proc.stderr.decode()
        return proc

    def render(self, node: str, overlay: str, path: str) -> dict[str, str]:
        """Every file a template writes: {output path: text} (`show` without -q names each file)."""
        out = self.run("overlay", "show", "--render", node, overlay, path).stdout.decode()
        files, name, body = {}, None, []
        for line in out.splitlines():
            if line.startswith("Filename: "):
                if name is not None:
                    files[name] = "\n".join(body)
                name, body = line[len("Filename: "):].lstrip("/"), []
            elif line.startswith(("backupFile: ", "writeFile: ")):
                if line == "writeFile: false":
                    name = "<aborted>"
            elif name is not None:
                body.append(line)
        if name is not None:
            files[name] = "\n".join(body)
        files.pop("<aborted>", None)
        return files


def _expected(overlay: str) -> dict[str, dict[str, str]]:
    base = OVERLAYS / overlay / "internal" / "expected"
    return {node.name: {str(p.relative_to(node)): p.read_text() for p in node.rglob("*") if p.is_file()}
            for node in base.iterdir()}


SLURM_TEMPLATES = ["etc/slurm/slurm.conf.ww", "etc/slurm/gres.conf.ww", "etc/slurm/cgroup.conf.ww",
                   "etc/slurm/plugstack.conf.ww"]


@pytest.mark.parametrize("node", ["n01", "n02", "g01"])
def test_wwctl_slurm_overlay_renders_stackproof_config(tmp_path, node):
    env = WwEnv(tmp_path, "slurm")
    expected = _expected("slurm")[node]
    for template in SLURM_TEMPLATES:
        rel = template[:-3]
        got = env.render(node, "slurm", template)
        want = expected.get(rel, "")
        assert _content(got.get(rel, "")) == _content(want), f"{node}:{rel}"
    # the node line and CpuSpecList equal `stackproof slurm render` for the same node type + profile
    conf = env.render(node, "slurm", "etc/slurm/slurm.conf.ww")["etc/slurm/slurm.conf"]
    assert "NodeName=n01 NodeAddr=192.168.3.21 CPUs=72 " in conf and "CpuSpecList=0-3,36-39" in conf


def test_wwctl_slurm_overlay_configless(tmp_path):
    nodes = yaml.safe_load((OVERLAYS / "slurm/internal/nodes.conf").read_text())
    nodes["nodeprofiles"]["compute-cpu"]["tags"]["slurm_configless"] = "yes"
    env = WwEnv(tmp_path, "slurm", nodes)
    for options in ("etc/sysconfig/slurmd.ww", "etc/default/slurmd.ww"):
        got = env.render("n01", "slurm", options)
        assert _content(got[options[:-3]]) == ['SLURMD_OPTIONS="--conf-server head"']
    assert env.render("n01", "slurm", "etc/slurm/slurm.conf.ww") == {}, "configless: no local slurm.conf"
    # g01 (other profile, not configless) still gets a local slurm.conf and empty options
    assert _content(env.render("g01", "slurm", "etc/sysconfig/slurmd.ww")["etc/sysconfig/slurmd"]) \
        == ['SLURMD_OPTIONS=""']


@pytest.mark.parametrize("node", ["n01", "n02", "n03"])
def test_wwctl_corespec_overlay_matches_stackproof_dropins(tmp_path, node):
    env = WwEnv(tmp_path, "corespec")
    got = env.render(node, "corespec", "etc/systemd/system/stackproof-corespec.ww")
    for irq in ("etc/default/irqbalance", "etc/sysconfig/irqbalance"):
        got.update(env.render(node, "corespec", irq + ".ww"))
    want = _expected("corespec").get(node, {})
    assert {k: _content(v) for k, v in got.items()} == {k: _content(v) for k, v in want.items()}
    if node == "n01":   # clean profile: PID 1 too
        assert f"etc/systemd/system.conf.d/{DROPIN_NAME}" in got
    if node == "n03":   # baseline: nothing to bind
        assert got == {}


def test_wwctl_munge_overlay_key_is_exact_0400_and_owned_by_munge(tmp_path):
    if shutil.which("cpio") is None:
        pytest.skip("cpio not found (apt-get install cpio): needed to unpack the built overlay")
    key = tmp_path / "server-munge.key"
    data = os.urandom(1023) + b"\x00"        # binary; Include() would drop a trailing newline
    key.write_bytes(data)
    key.chmod(0o400)
    nodes = yaml.safe_load((OVERLAYS / "munge/internal/nodes.conf").read_text())
    nodes["nodeprofiles"]["compute-cpu"]["tags"]["munge_key_path"] = str(key)
    nodes["nodeprofiles"]["compute-cpu"]["system overlay"] = ["munge"]
    env = WwEnv(tmp_path / "ww", "munge", nodes)
    env.run("overlay", "chmod", "munge", "etc/munge/munge.key.ww", "0400")
    env.run("overlay", "chown", "munge", "etc/munge/munge.key.ww", "970:970")
    env.run("overlay", "chmod", "munge", "etc/munge", "0700")
    env.run("overlay", "chown", "munge", "etc/munge", "970:970")
    env.run("overlay", "build", "n01")
    image = tmp_path / "ww/var/provision/overlays/n01/__SYSTEM__.img"
    listing = subprocess.run(["cpio", "-itv", "--numeric-uid-gid"], stdin=image.open("rb"),
                             capture_output=True, text=True).stdout
    entry = next(ln for ln in listing.splitlines() if ln.endswith("etc/munge/munge.key"))
    mode, _, uid, gid = entry.split()[:4]
    assert (mode, uid, gid) == ("-r--------", "970", "970")
    # the kernel applies the directory entry's owner to the image's /etc/munge: it must stay munge's
    assert next(ln for ln in listing.splitlines() if ln.endswith(" etc/munge")).split()[:4] \
        == ["drwx------", "2", "970", "970"]
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    subprocess.run(["cpio", "-idm", "--quiet", "etc/munge/munge.key"], stdin=image.open("rb"),
                   cwd=unpacked, check=True)
    assert (unpacked / "etc/munge/munge.key").read_bytes() == data


def test_wwctl_munge_overlay_without_server_key_writes_nothing(tmp_path):
    nodes = yaml.safe_load((OVERLAYS / "munge/internal/nodes.conf").read_text())
    nodes["nodeprofiles"]["compute-cpu"]["tags"]["munge_key_path"] = str(tmp_path / "missing.key")
    env = WwEnv(tmp_path / "ww", "munge", nodes)
    proc = env.run("overlay", "show", "--render", "n01", "munge", "etc/munge/munge.key.ww")
    assert b"writeFile: false" in proc.stdout


def test_wwctl_nodes_conf_is_accepted(tmp_path):
    """The shipped nodes.conf parses in real wwctl and the profile tags reach the nodes."""
    env = WwEnv(tmp_path, "slurm", yaml.safe_load((WW / "nodes.conf").read_text()))
    out = env.run("node", "list", "--all", "c01").stdout.decode()
    assert "cpu_spec_list" in out and "0-3,36-39" in out
    assert "irqaffinity=0-1,18-19,36-37,54-55" in out
    conf = env.render("g01", "slurm", "etc/slurm/slurm.conf.ww")["etc/slurm/slurm.conf"]
    assert "PartitionName=gpu Nodes=g01,g02 " in conf
