"""The virtual cluster without booting anything: cpio assembly (overlays, an OCI image's rootfs with
whiteouts and hard links), nodes.conf -> DHCP/iPXE configuration, and the errors raised before boot."""
import copy
import stat
import subprocess

import pytest
from ocitest import layer, oci_archive

from stackproof.errors import StackproofError
from stackproof.provision import cpio
from stackproof.provision.vcluster import artifacts, boot, netboot, nodesconf, overlays
from stackproof.provision.vcluster.core import head_slurm_conf


# ---- cpio -------------------------------------------------------------------------------------------

def _by_path(data: bytes) -> dict:
    return {e.path: (e, body) for e, body in cpio.read(data)}


def test_overlay_cpio_round_trip_with_parents_modes_and_links():
    files = {"etc/munge/munge.key": cpio.File(b"k" * 7, 0o400, 970, 970),
             "init": cpio.File("#!/bin/sh\n", 0o755),
             "etc/systemd/system/ssh.service": cpio.File(link="/dev/null")}
    data = cpio.to_bytes(cpio.overlay_entries(files, {"etc/munge": (0o700, 970, 970)}))
    got = _by_path(data)
    assert list(got)[:4] == ["etc", "etc/munge", "etc/systemd", "etc/systemd/system"], "parents first"
    e, body = got["etc/munge/munge.key"]
    assert (stat.S_IMODE(e.mode), e.uid, e.gid, body) == (0o400, 970, 970, b"kkkkkkk")
    assert stat.S_IMODE(got["etc/munge"][0].mode) == 0o700 and got["etc/munge"][0].uid == 970
    assert stat.S_IMODE(got["etc"][0].mode) == 0o755
    assert stat.S_ISLNK(got["etc/systemd/system/ssh.service"][0].mode)
    assert got["etc/systemd/system/ssh.service"][0].link == "/dev/null"
    assert stat.S_IMODE(got["init"][0].mode) == 0o755


def test_overlay_cpio_is_what_gnu_cpio_reads(tmp_path):
    data = cpio.to_bytes(cpio.overlay_entries({"a/b/c.txt": cpio.File("hello\n"), "d": cpio.File(b"\0" * 5)}))
    proc = subprocess.run(["cpio", "-idm", "--quiet"], input=data, cwd=tmp_path, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "a/b/c.txt").read_text() == "hello\n" and (tmp_path / "d").read_bytes() == b"\0" * 5


def test_overlay_cpio_is_reproducible():
    files = {"x": cpio.File("1"), "y/z": cpio.File("2")}
    assert cpio.to_bytes(cpio.overlay_entries(files)) == cpio.to_bytes(cpio.overlay_entries(dict(reversed(files.items()))))


@pytest.fixture
def two_layer_image(tmp_path):
    base = layer([("usr", "dir", 0o755), ("usr/bin", "dir", 0o755), ("usr/bin/perl", "file", b"PERL"),
                   ("usr/bin/perl5", "hard", "usr/bin/perl"), ("bin", "sym", "usr/bin"),
                   ("etc", "dir", 0o755), ("etc/gone", "file", b"old"), ("etc/app", "dir", 0o755),
                   ("etc/app/a", "file", b"a"), ("usr/share", "dir", 0o755), ("usr/share/doc", "dir", 0o755),
                   ("usr/share/doc/README", "file", b"doc"), ("etc/warewulf", "dir", 0o755),
                   ("etc/warewulf/excludes", "file", b"/usr/share/doc/\n")])
    # layer 2 changes /usr (a new version of the directory: must not delay its contents), deletes
    # etc/gone, empties etc/app (opaque) and adds a file there
    top = layer([("usr", "dir", 0o750), ("usr/local", "dir", 0o755), ("usr/local/x", "file", b"x"),
                  ("etc/.wh.gone", "file", b""), ("etc/app/.wh..wh..opq", "file", b""),
                  ("etc/app/b", "file", b"b")])
    return oci_archive(tmp_path / "img.oci.tar", [base, top])


def test_oci_rootfs_applies_whiteouts_excludes_and_orders_directories(two_layer_image):
    entries = list(cpio.oci_rootfs_entries(str(two_layer_image), ["/usr/local/"]))
    paths = [e.path for e in entries]
    assert "etc/gone" not in paths and "etc/app/a" not in paths and "etc/app/b" in paths
    assert not any(p.startswith("usr/share/doc") for p in paths), "the image's own excludes apply"
    assert not any(p.startswith("usr/local") for p in paths), "extra excludes apply"
    for i, p in enumerate(paths):           # every parent directory comes before its contents
        parent = p.rsplit("/", 1)[0] if "/" in p else None
        if parent:
            assert parent in paths[:i], f"{p} before its directory"
    usr = [e for e in entries if e.path == "usr"]
    assert stat.S_IMODE(usr[-1].mode) == 0o750, "the last version of a directory wins"


def test_oci_rootfs_cpio_unpacks_with_hard_links_and_symlinks(two_layer_image, tmp_path):
    data = cpio.to_bytes(cpio.oci_rootfs_entries(str(two_layer_image)))
    out = tmp_path / "root"
    out.mkdir()
    proc = subprocess.run(["cpio", "-idm", "--quiet"], input=data, cwd=out, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert (out / "usr/bin/perl5").read_bytes() == b"PERL"
    assert (out / "usr/bin/perl").stat().st_ino == (out / "usr/bin/perl5").stat().st_ino
    assert (out / "bin").is_symlink() and str((out / "bin").readlink()) == "usr/bin"
    assert (out / "usr/local/x").read_bytes() == b"x"


# ---- nodes.conf -> DHCP / iPXE --------------------------------------------------------------------

@pytest.fixture(scope="module")
def planned():
    spec = nodesconf.load_spec(nodesconf.DEFAULT_SPEC, nodes=2)
    conf = nodesconf.generate(spec)
    return spec, conf, nodesconf.resolve(conf)


def test_nodes_conf_resolves_names_addresses_overlays(planned):
    _, conf, nodes = planned
    assert [(n.name, n.ipaddr, n.hwaddr) for n in nodes] == [
        ("n01", "10.77.0.11", "52:54:00:77:00:01"), ("n02", "10.77.0.12", "52:54:00:77:00:02")]
    n = nodes[0]
    assert n.system_overlays == ["wwinit", "vcnode", "hostname", "hosts", "munge", "slurm", "corespec"]
    assert n.image == "debian12-compute" and n.prefix == 24 and n.gateway == nodesconf.HEAD_ADDR
    assert n.tags["cpus"] == "2" and n.tags["cpu_spec_list"] == "0" and n.tags["nodetype"] == "vcluster-tcg"
    assert "irqaffinity=0" in n.kernel_args and "console=ttyS0" in n.kernel_args


def test_dnsmasq_conf_has_one_static_lease_per_node_and_stays_on_the_bridge(planned, tmp_path):
    nodes = planned[2]
    text = netboot.dnsmasq_conf(nodes, tmp_path / "run", tmp_path / "tftp")
    lines = text.splitlines()
    assert [ln for ln in lines if ln.startswith("dhcp-host=")] == [
        "dhcp-host=52:54:00:77:00:01,10.77.0.11,n01", "dhcp-host=52:54:00:77:00:02,10.77.0.12,n02"]
    assert "interface=br0" in lines and "bind-interfaces" in lines and "port=0" in lines
    assert "dhcp-range=10.77.0.0,static,255.255.255.0,1h" in lines
    assert f"tftp-root={tmp_path / 'tftp'}" in lines and "dhcp-boot=tag:ipxe,boot.ipxe,,10.77.0.1" in lines


def test_ipxe_scripts_chain_per_mac_and_load_image_then_overlays(planned):
    n = planned[2][1]
    assert "chain http://10.77.0.1:8000/ipxe/${mac:hexhyp}.ipxe" in netboot.boot_script()
    script = netboot.node_script(n).splitlines()
    assert script[0] == "#!ipxe" and script[-1] == "boot"
    kernel = next(ln for ln in script if ln.startswith("kernel "))
    assert kernel.startswith("kernel http://10.77.0.1:8000/vmlinuz console=ttyS0") and "wwid=n02" in kernel
    initrds = [ln.split("/", 3)[3] for ln in script if ln.startswith("initrd ")]
    assert initrds == [artifacts.image_rel("debian12-compute"), "kmods.img", "overlays/n02/system.img",
                       "overlays/n02/runtime.img"]
    assert netboot.mac_name(n.hwaddr) == "52-54-00-77-00-02"


def test_overlays_render_node_identity_key_and_slurm_config(planned):
    spec, _, nodes = planned
    r = overlays.render(spec, nodes, b"K" * 1024, b"ELF")
    sysfiles = r["n02"]["system"]
    config = sysfiles["warewulf/config"].data
    assert "WWHOSTNAME=n02" in config and "WWIPADDR=10.77.0.12" in config and "WWPREFIX=24" in config
    assert sysfiles["etc/hostname"].data == "n02\n"
    assert "10.77.0.1 head" in sysfiles["etc/hosts"].data and "10.77.0.11 n01" in sysfiles["etc/hosts"].data
    key = sysfiles["etc/munge/munge.key"]
    assert (key.data, key.mode, key.uid) == (b"K" * 1024, 0o400, overlays.munge_id())
    slurm = sysfiles["etc/slurm/slurm.conf"].data
    assert "NodeName=n02 NodeAddr=10.77.0.12 CPUs=2" in slurm and "CpuSpecList=0" in slurm
    assert "SlurmctldHost=head" in slurm
    assert sysfiles["etc/systemd/system/slurmd.service.d/50-stackproof-corespec.conf"].data.strip().endswith("CPUAffinity=0")
    assert sysfiles["etc/systemd/system/slurmctld.service"].link == "/dev/null"
    assert r["n02"]["runtime"]["opt/vcluster/bin/mpi-hello"].data == b"ELF"


def test_head_slurm_conf_moves_controller_paths():
    text = head_slurm_conf("SlurmctldHost=head\nSlurmUser=slurm\nStateSaveLocation=/var/spool/slurmctld\nNodeName=n01 CPUs=2\n",
                           __import__("pathlib").Path("/r"), __import__("pathlib").Path("/r/etc/plugstack.conf"))
    lines = text.splitlines()
    assert "AuthInfo=socket=/r/munge.socket" in lines and "SlurmUser=root" in lines
    assert "StateSaveLocation=/r/slurmctld-state" in lines and "NodeName=n01 CPUs=2" in lines
    assert "SlurmctldPidFile=/r/slurmctld.pid" in lines and "SlurmctldHost=head(10.77.0.1)" in lines


# ---- errors before boot ---------------------------------------------------------------------------

def _broken(conf, path, value):
    conf = copy.deepcopy(conf)
    node = conf["nodes"]["n02"]
    if path == "profile":
        node["profiles"].append("nosuch")
    elif path == "nodev":
        node.pop("network devices")
    else:
        node["network devices"]["default"][path] = value
    return conf


@pytest.mark.parametrize("path, value, message", [
    ("hwaddr", "52:54:00:77:00:01", "share hwaddr"),
    ("hwaddr", "zz", "not a MAC address"),
    ("hwaddr", None, "needs 'hwaddr'"),
    ("ipaddr", "10.77.0.11", "share ipaddr"),
    ("ipaddr", "192.168.1.5", "not a node address in 10.77.0.0/24"),
    ("ipaddr", "10.77.0.1", "not a node address"),
    ("ipaddr", "ten", "Expected 4 octets"),
    ("profile", None, "unknown profile 'nosuch'"),
    ("nodev", None, "no 'network devices'"),
])
def test_malformed_nodes_conf_is_rejected(planned, path, value, message):
    with pytest.raises(StackproofError, match=message):
        nodesconf.resolve(_broken(planned[1], path, value))


def test_nodes_conf_without_nodes_is_rejected():
    with pytest.raises(StackproofError, match="no 'nodes'"):
        nodesconf.resolve({"nodeprofiles": {}})


def test_unknown_overlay_is_rejected_before_boot(planned):
    nodes = copy.deepcopy(planned[2])
    nodes[0].system_overlays.append("ifcfg")
    with pytest.raises(StackproofError, match="overlay 'ifcfg' has no vcluster renderer"):
        overlays.check_known(nodes)


def test_unknown_profile_and_node_count_are_rejected():
    with pytest.raises(StackproofError, match="unknown profile 'fast'"):
        nodesconf.load_spec(nodesconf.DEFAULT_SPEC, profile="fast")
    with pytest.raises(StackproofError, match="--nodes 9"):
        nodesconf.load_spec(nodesconf.DEFAULT_SPEC, nodes=9)
    for p in ("baseline", "freecore-first", "corespec"):
        assert nodesconf.load_spec(nodesconf.DEFAULT_SPEC, profile=p).profiles["compute"].profile == p


def test_cli_up_with_unknown_profile_fails_before_anything_starts(capsys):
    from stackproof.cli import main
    assert main(["vcluster", "up", "--profile", "fast"]) == 1
    err = capsys.readouterr().err
    assert "unknown profile 'fast'" in err and "Traceback" not in err


def test_missing_image_archive_names_the_build_target(monkeypatch, tmp_path):
    monkeypatch.setattr(artifacts, "IMAGES_OUT", tmp_path)
    with pytest.raises(StackproofError, match="make images-debian"):
        artifacts.oci_archive("debian12-compute")


def test_preflight_names_the_fix_for_missing_qemu_and_tun(monkeypatch):
    monkeypatch.setattr(boot.shutil, "which", lambda tool: None if tool == boot.QEMU else "/usr/bin/" + tool)
    real_exists = boot.Path.exists
    monkeypatch.setattr(boot.Path, "exists", lambda self: False if str(self) == "/dev/net/tun" else real_exists(self))
    with pytest.raises(StackproofError) as err:
        boot.preflight()
    assert "apt-get install qemu-system-x86 ipxe-qemu" in str(err.value)
    assert "/dev/net/tun missing" in str(err.value) and "modprobe tun" in str(err.value)


def test_stage_tracking_from_console(tmp_path, planned):
    b = boot.NodeBoot(planned[2][0], "tap0", tmp_path / "c.log", tmp_path / "q.pid", started=0.0)
    (tmp_path / "c.log").write_text("Linux version 6.1\nFreeing initrd memory: 1K\nvcluster: network up\n")
    assert boot.update_stage(b, 5.0) and b.stage == "wwinit"
    (tmp_path / "c.log").write_text((tmp_path / "c.log").read_text() + "\x1b[0;32m  OK  \x1b[0m] Started slurmd.service\n")
    assert boot.update_stage(b, 9.0) and b.stage == "slurmd" and b.stage_at["slurmd"] == 9.0
    assert "Started slurmd.service" in boot.console_tail(tmp_path / "c.log") and "\x1b" not in boot.console_tail(tmp_path / "c.log")


# ---- shared directories (virtiofs) and the ReFrame vcluster system --------------------------------------

def test_shares_are_the_share_dir_and_the_stacks_root_read_only(monkeypatch, tmp_path):
    from stackproof.provision.vcluster import share
    monkeypatch.setenv("STACKPROOF_STACKS_ROOT", str(tmp_path / "stacks"))
    assert share.shares(tmp_path / "vc") == [share.Share("spk-share", tmp_path / "vc" / "share")]
    (tmp_path / "stacks").mkdir()
    assert share.shares(tmp_path / "vc")[1] == share.Share("spk-stacks", tmp_path / "stacks", readonly=True)


def test_qemu_gets_shared_memory_and_one_vhost_user_fs_per_share(planned, tmp_path):
    from stackproof.provision.vcluster import share
    items = [share.Share("spk-share", tmp_path / "s"), share.Share("spk-stacks", tmp_path / "t", True)]
    b = boot.NodeBoot(planned[2][0], "tap0", tmp_path / "n01.console.log", tmp_path / "n01.qemu.pid", shares=items)
    cmd = boot.qemu_command(b)
    assert cmd[:3] == ["ip", "netns", "exec"] and cmd[3].startswith("spk-vc-")
    assert f"memory-backend-memfd,id=mem,size={boot.MEMORY_MB}M,share=on" in cmd and "memory-backend=mem" in cmd
    assert cmd[cmd.index("-m") + 1] == str(boot.MEMORY_MB), "backend and -m must agree"
    chardevs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-chardev"]
    assert chardevs == [f"socket,id=fs0,path={tmp_path}/n01.spk-share.socket",
                        f"socket,id=fs1,path={tmp_path}/n01.spk-stacks.socket"]
    assert "vhost-user-fs-pci,chardev=fs1,tag=spk-stacks" in cmd
    d = share.virtiofsd_command(tmp_path, "n01", items[0])
    assert d[0] == str(share.VIRTIOFSD) and f"--socket-path={tmp_path}/n01.spk-share.socket" in d
    assert f"source={tmp_path / 's'}" in d and "sandbox=chroot" in d
    assert "modcaps=-mknod:-setfcap" in d, "no device node or file capability made on the head's filesystem"
    ro = share.virtiofsd_command(tmp_path, "n01", items[1])      # read-only on the head, not just in the guest
    assert ro[:6] == ["unshare", "--mount", "--propagation", "private", "sh", "-c"]
    assert ro[6].startswith(f"mount --bind {tmp_path}/t {tmp_path}/t && mount -o remount,bind,ro {tmp_path}/t && "
                            f"exec {share.VIRTIOFSD} ")
    script = share.mount_script(items, "6.1.0")
    assert f"mount -t virtiofs -o rw,nosuid,nodev spk-share '{tmp_path}/s'" in script
    assert f"mount -t virtiofs -o ro spk-stacks '{tmp_path}/t'" in script
    plain = boot.qemu_command(boot.NodeBoot(planned[2][0], "tap0", tmp_path / "c", tmp_path / "p"))
    assert "-chardev" not in plain and "memory-backend=mem" not in plain


def test_ipxe_script_loads_the_share_overlay_last(planned):
    script = netboot.node_script(planned[2][0], extra_initrds=("share.img",)).splitlines()
    initrds = [ln.split("/", 3)[3] for ln in script if ln.startswith("initrd ")]
    assert initrds[-3:] == ["overlays/n01/system.img", "overlays/n01/runtime.img", "share.img"]


def _fake_kernel_deb(tmp_path, release, modules):
    pkg = tmp_path / "pkg"
    for m in modules:
        (pkg / "lib/modules" / release / m).parent.mkdir(parents=True, exist_ok=True)
        (pkg / "lib/modules" / release / m).write_bytes(m.encode())
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN/control").write_text("Package: fake-kernel\nVersion: 1\nArchitecture: all\n"
                                        "Maintainer: t <t@t>\nDescription: t\n")
    deb = tmp_path / "fake.deb"
    subprocess.run(["dpkg-deb", "--build", "-Zgzip", str(pkg), str(deb)], check=True, capture_output=True)
    return deb


def test_share_overlay_mounts_each_share_at_its_path_before_slurmd(tmp_path):
    from stackproof.provision.vcluster import share
    items = [share.Share("spk-share", tmp_path / "vc/share"), share.Share("spk-stacks", tmp_path / "stacks", True)]
    deb = _fake_kernel_deb(tmp_path, "R", share.MODULES)
    got = _by_path(share.overlay_image(deb, "R", items))
    assert got["usr/lib/modules/R/kernel/fs/fuse/virtiofs.ko"][1] == b"kernel/fs/fuse/virtiofs.ko"
    link = got[f"etc/systemd/system/slurmd.service.requires/{share.UNIT}"][0]
    assert stat.S_ISLNK(link.mode) and link.link == f"/etc/systemd/system/{share.UNIT}"
    unit = got[f"etc/systemd/system/{share.UNIT}"][1].decode()
    assert "Before=slurmd.service" in unit and "RequiredBy=slurmd.service" in unit and "journal+console" in unit
    e, script = got["usr/local/sbin/vcluster-share"]
    script = script.decode()
    assert stat.S_IMODE(e.mode) == 0o755
    assert script.index("fuse/fuse.ko") < script.index("fuse/virtiofs.ko") < script.index("mount ")
    assert f"mount -t virtiofs -o rw,nosuid,nodev spk-share '{tmp_path}/vc/share'" in script
    assert f"mount -t virtiofs -o ro spk-stacks '{tmp_path}/stacks'" in script
    assert "vcluster: share spk-share failed" in script and "exit 1" in script


def test_share_overlay_names_a_missing_kernel_module(tmp_path):
    from stackproof.provision.vcluster import share
    deb = _fake_kernel_deb(tmp_path, "R", share.MODULES[:1])
    with pytest.raises(StackproofError, match="lacks kernel/fs/fuse/virtiofs.ko"):
        share.kernel_modules(deb, "R")


def test_a_failed_share_mount_stops_the_wait(tmp_path, planned):
    b = boot.NodeBoot(planned[2][0], "tap0", tmp_path / "c.log", tmp_path / "q.pid", started=0.0)
    (tmp_path / "c.log").write_text("vcluster: network up\nWelcome to Debian\nvcluster: share spk-share at /x\n")
    assert boot.update_stage(b, 7.0) and b.stage == "share" and b.failed is None
    (tmp_path / "c.log").write_text("vcluster: share spk-stacks failed\n")
    boot.update_stage(b, 8.0)
    assert b.failed == "vcluster: share spk-stacks failed"


def test_head_profile_env_is_the_profile_the_nodes_run(planned, tmp_path):
    from stackproof.nodes.profiles import read_profile_env
    from stackproof.provision.vcluster.core import VCluster
    spec, _, nodes = planned
    VCluster(tmp_path)._profile_env(spec, nodes, tmp_path / "etc")
    env = read_profile_env(tmp_path / "etc/stackproof/profile.env")
    assert env["STACKPROOF_PROFILE"] == "corespec" and env["STACKPROOF_APP_CPUS"] == "1"
    assert env["STACKPROOF_SYSTEM_CPUS"] == "0"     # = CpuSpecList=0 in the nodes' slurm.conf


def _vcluster_site(monkeypatch, root):
    """Execute systems/vcluster.py afresh: ReFrame's import_module_from_file hands back the module an
    earlier test (the whole site config) already loaded, whose import-time settings are then stale."""
    import importlib.util
    from stackproof.paths import REPO
    monkeypatch.setenv("STACKPROOF_VCLUSTER_DIR", str(root))
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.syspath_prepend(str(REPO / "reframe-tests" / "config"))
    path = REPO / "reframe-tests" / "config" / "systems" / "vcluster.py"
    spec = importlib.util.spec_from_file_location("stackproof_test_vcluster_site", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.site_configuration


def test_reframe_vcluster_system_uses_the_share_the_head_profile_and_the_nodes_slurm_conf(monkeypatch, tmp_path):
    (tmp_path / "run/etc").mkdir(parents=True)
    (tmp_path / "run/etc/slurm.conf").write_text("ClusterName=vcluster\n")
    conf = _vcluster_site(monkeypatch, tmp_path)
    import os as _os
    assert _os.environ["SLURM_CONF"] == str(tmp_path / "run/etc/slurm.conf"), "the head's copy for sbatch/squeue"
    sysconf = conf["systems"][0]
    # the nodes write stage directories on the share; outputs, perflogs and reports stay on the head (issue 42)
    assert sysconf["name"] == "vcluster" and sysconf["prefix"] == str(tmp_path / "reframe")
    assert sysconf["stagedir"] == str(tmp_path / "share" / "reframe" / "stage")
    part = sysconf["partitions"][0]
    assert (part["scheduler"], part["launcher"]) == ("squeue", "srun")
    assert part["environs"] == ["builtin", "default", "commodity"], "ReFrame's conventions, then the stack"
    assert "corespec" in part["features"] and "profiles" not in part["features"]
    assert part["extras"]["stackproof_root"] == str(tmp_path / "run")
    assert part["extras"]["nodetype"].endswith("images/vcluster/nodetype.yaml")
    assert ["SLURM_CONF", "/etc/slurm/slurm.conf"] in part["env_vars"], "jobs use the nodes' own config"
    assert part["processor"]["num_cpus"] == 2
    assert conf["general"] == [{"poll_rate_min": 1.0, "target_systems": ["vcluster"]}]


class _FakePart:
    fullname = "site:cpu"

    def __init__(self, features, root):
        self.features, self.extras = features, {"stackproof_root": str(root), "nodetype": "x"}


def test_check_without_a_profile_runs_under_the_image_profile_on_corespec_partitions(tmp_path):
    """MPIHello & co. (no profile of their own) run on nodes whose image fixes corespec; a check asking
    for another profile is still skipped there."""
    from stackproof.reframe.profile import ProfileUnavailable, profile_values
    (tmp_path / "etc/stackproof").mkdir(parents=True)
    (tmp_path / "etc/stackproof/profile.env").write_text("STACKPROOF_PROFILE=corespec\nSTACKPROOF_APP_CORES=1\n")
    part = _FakePart(["remote", "corespec"], tmp_path)
    assert profile_values(part, None, tmp_path)["STACKPROOF_APP_CORES"] == "1"
    assert profile_values(part, "corespec", tmp_path)["STACKPROOF_PROFILE"] == "corespec"
    with pytest.raises(ProfileUnavailable, match="runs profile 'corespec'; this check measures 'baseline'"):
        profile_values(part, "baseline", tmp_path)


def test_down_removes_virtiofsd_pid_files_of_its_own_sockets_only(monkeypatch, tmp_path):
    from stackproof.provision.vcluster import share
    pids = tmp_path / "virtiofsd"
    pids.mkdir()
    monkeypatch.setattr(share, "PIDFILE_DIR", pids)
    run = tmp_path / "vc" / "run"
    mine = pids / (str(share.socket_path(run, "n01", share.Share("spk-share", tmp_path))).replace("/", ".") + ".pid")
    other = pids / ".elsewhere.vm.sock.pid"
    mine.write_text("1\n")
    other.write_text("2\n")
    assert share.leftover_pidfiles(run) == [mine]
    share.remove_pidfiles(run)
    assert not mine.exists() and other.exists()
    other.unlink()
    share.remove_pidfiles(run)
    assert not pids.exists(), "the directory goes when it is empty"
