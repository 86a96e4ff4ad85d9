"""Every Slurm daemon of the test and virtual clusters binds its node's address, never 0.0.0.0
(issue 42; the live check is tests/test_cluster_listen_live.py). What is rendered for it:
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny (Slurm 22.05, man slurm.conf: each daemon binds
the address its host name resolves to) in the test cluster's daemons' configuration (clients keep
slurm.conf without it), in the virtual cluster's nodes' slurm.conf (the Warewulf overlay, from the
cluster description's site.comm_params) and, NoCtldInAddrAny alone, in the head's copy; and the
daemons start with the cluster's own /etc/hosts."""
from pathlib import Path

import pytest

from stackproof.cluster import daemons
from stackproof.errors import InputError
from stackproof.nodes.nodetype import from_host
from stackproof.nodes.profiles import plan
from stackproof.nodes.slurmconf import COMM_PARAMS, Site, render
from stackproof.provision import warewulf
from stackproof.provision.vcluster import nodesconf, overlays
from stackproof.provision.vcluster.core import head_slurm_conf


def _render(**site):
    nt = from_host()
    return render(nt, plan(nt, "baseline"), Site(cluster_name="c", nodes=["n1"], **site))


def test_the_test_cluster_daemons_read_the_parameters_and_clients_do_not(tmp_path):
    files = _render(run_dir=tmp_path, daemon_comm_params=COMM_PARAMS)
    daemons_conf = files["etc/slurm/daemons.conf"].splitlines()
    assert f"Include {tmp_path}/etc/slurm/slurm.conf" in daemons_conf
    assert "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny" in daemons_conf
    assert "CommunicationParameters" not in files["etc/slurm/slurm.conf"]


def test_a_site_render_carries_them_in_slurm_conf():
    files = _render(comm_params=("NoInAddrAny",))
    assert "CommunicationParameters=NoInAddrAny" in files["etc/slurm/slurm.conf"].splitlines()
    assert "etc/slurm/daemons.conf" not in files and "CommunicationParameters" not in _render()["etc/slurm/slurm.conf"]


@pytest.mark.parametrize("site, message", [
    ({"comm_params": ("NoInAddrAny\nSlurmUser=evil",)}, "only NoCtldInAddrAny, NoInAddrAny"),
    ({"comm_params": ("EnableIPv6",)}, "only NoCtldInAddrAny, NoInAddrAny"),
    ({"daemon_comm_params": COMM_PARAMS}, "only for a test cluster"),
])
def test_other_values_are_refused(site, message):
    with pytest.raises(InputError, match=message):
        _render(**site)


def test_the_virtual_cluster_nodes_and_head():
    spec = nodesconf.load_spec(nodesconf.DEFAULT_SPEC, nodes=2)
    assert warewulf.comm_params(spec) == COMM_PARAMS
    tags = warewulf.profile_tags(spec, spec.profiles["compute"])
    assert tags["slurm_comm_params"] == "NoCtldInAddrAny,NoInAddrAny"
    node_conf = warewulf.expected_renders(spec)["n01"]["etc/slurm/slurm.conf"]
    assert "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny" in node_conf.splitlines()
    head = head_slurm_conf(node_conf, Path("/r"), Path("/r/etc/plugstack.conf")).splitlines()
    assert "CommunicationParameters=NoCtldInAddrAny" in head
    assert not any(ln.startswith("CommunicationParameters=") and "NoInAddrAny" in ln.split(",") for ln in head)
    # the node overlays the vcluster serves carry it (stackproof's renderer; wwctl renders the same template)
    vnodes = nodesconf.resolve(nodesconf.generate(spec))
    rendered = overlays.render(spec, vnodes, b"k" * 1024, None)
    assert b"CommunicationParameters=NoCtldInAddrAny,NoInAddrAny" in \
        rendered["n01"]["system"]["etc/slurm/slurm.conf"].data.encode()


def test_the_warewulf_template_renders_the_tag():
    text = (Path(warewulf.__file__).resolve().parents[3] / "images" / "warewulf" / "overlays" / "slurm" / "rootfs" /
            "etc" / "slurm" / "slurm.conf.ww").read_text()
    assert "{{- if .Tags.slurm_comm_params }}\nCommunicationParameters={{ .Tags.slurm_comm_params }}\n{{- end }}" \
        in text
    assert text.index("MinJobAge=300") < text.index("CommunicationParameters") < text.index("AllowSpecResourcesUsage")


def test_daemons_start_with_the_cluster_hosts_file(tmp_path):
    cmd = ["/usr/sbin/slurmd", "-f", "/r/etc/slurm/daemons.conf", "-N", "n1"]
    assert daemons._private_hosts(tmp_path, cmd) == cmd            # no hosts file: as before
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "hosts").write_text("127.0.0.1 localhost n1\n")
    wrapped = daemons._private_hosts(tmp_path, cmd, hostname="n1")
    assert wrapped[:6] == ["unshare", "--uts", "--mount", "--propagation", "private", "sh"]
    assert wrapped[-1] == (f"hostname n1 && mount --bind {tmp_path}/etc/hosts /etc/hosts && "
                           "exec /usr/sbin/slurmd -f /r/etc/slurm/daemons.conf -N n1")
