"""Node types derived from real hwloc topologies (shared/topologies) and the live host."""
import os

import pytest
import yaml

from conftest import stackproof_cli
from stackproof.nodes import nodetype
from stackproof.cpulist import format_list, parse_hwloc_bitmap, parse_list
from stackproof.errors import StackproofError
from stackproof.paths import nodetypes_dir

SHIPPED = {"lassen": "mpibind__coral-lassen.xml", "pascal": "mpibind__cts1-pascal.xml",
           "tioga": "mpibind__eas-tioga.xml"}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_nodetype_regenerates_identically(shared, name):
    """The committed YAML is exactly what the generator derives from the topology: nothing hand-edited."""
    fresh = nodetype.from_xml(shared / "topologies" / SHIPPED[name], name)
    fresh.corespec = nodetype.load(name).corespec  # the one site choice in the file
    assert fresh.to_yaml() == (nodetypes_dir() / f"{name}.yaml").read_text()


def test_lassen_facts_including_the_cores_its_xml_hides():
    nt = nodetype.load("lassen")
    assert (len(nt.sockets), nt.cores_per_socket, nt.threads_per_core, nt.num_cpus) == (2, 22, 4, 176)
    # The XML shows 20 cores per socket; cores 0,1 and 22,23 are hidden (reserved by the site).
    assert format_list(nt.unavailable_cpus) == "0-7,88-95"
    assert nt.core_pus(0, 0) == {0, 1, 2, 3} and nt.core_pus(1, 0) == {88, 89, 90, 91}
    assert [(g.index, g.numa) for g in nt.gpus] == [(0, [0]), (1, [0]), (2, [8]), (3, [8])]
    assert {g.vendor for g in nt.gpus} == {"nvidia"} and nt.gpus[0].pci_bus_id == "0004:04:00.0"
    assert [n.os_index for n in nt.numa] == [0, 8]


def test_pascal_gpus_both_on_socket0_and_interleaved_smt_numbering():
    nt = nodetype.load("pascal")
    assert (len(nt.sockets), nt.cores_per_socket, nt.threads_per_core) == (2, 18, 2)
    assert nt.core_pus(0, 0) == {0, 36}          # x86 SMT siblings are numbered apart
    assert nt.abstract_cpu_ids(0, 0) == [0, 1]   # Slurm's abstract ids are core-major
    assert [g.numa for g in nt.gpus] == [[0], [0]]
    assert nt.gpu_cores(nt.gpus[0]) == list(range(18))


def test_tioga_amd_gcds_spread_over_numa_domains():
    nt = nodetype.load("tioga")
    assert (len(nt.sockets), nt.cores_per_socket, nt.threads_per_core) == (1, 64, 2)
    assert len(nt.gpus) == 8 and nt.gpu_vendor == "amd"
    assert sorted({n for g in nt.gpus for n in g.numa}) == [0, 1, 2, 3]


def test_robustness_topologies_load_and_drm_devices_are_not_gpus(shared):
    xmls = sorted((shared / "topologies" / "robustness").glob("*.xml"))
    assert len(xmls) >= 4, f"expected the 4 robustness topologies in {shared / 'topologies' / 'robustness'}"
    for xml in xmls:
        nt = nodetype.from_xml(xml, ignore_pci_gpus=True)   # their GPUs are PCI-only: test_nodetype_gpu.py
        assert nt.num_cpus > 0
        assert nt.gpus == [], f"{xml.name}: DRM devices (card0, renderD128) must not count as GPUs"


def test_live_host_matches_the_kernel():
    nt = nodetype.from_host()
    assert nt.num_cpus == os.cpu_count()
    with open("/proc/self/status") as fh:
        allowed = next(line.split()[1] for line in fh if line.startswith("Cpus_allowed_list"))
    assert nt.all_cpus == parse_list(allowed)
    assert nt.memory_mb > 0


def test_bitmaps_and_lists():
    assert parse_hwloc_bitmap("0x0000ff00") == set(range(8, 16))
    assert parse_hwloc_bitmap("0x00000003,,0x00000001") == {0, 64, 65}
    assert format_list({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert parse_list("0-2,5") == {0, 1, 2, 5}
    with pytest.raises(ValueError):
        parse_hwloc_bitmap("0xf...f")


def test_cli_from_xml_writes_the_same_yaml(shared, tmp_path):
    out = tmp_path / "lassen.yaml"
    proc = stackproof_cli("nodetype", "from-xml", str(shared / "topologies" / SHIPPED["lassen"]), "--name", "lassen", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(out.read_text())["cpus"] == 176


@pytest.mark.parametrize("content,expect", [
    ("<topology><object type='Machine'", "malformed topology XML"),
    ("<notatopology/>", "not an hwloc topology"),
    ("<topology version='2.0'><object type='Machine' cpuset='0x1'><object type='Core' cpuset='0xzz'/>"
     "</object></topology>", "malformed topology XML"),
    ("<topology version='2.0'><object type='Machine' cpuset='0x0'/></topology>", "no cores or PUs"),
])
def test_cli_rejects_bad_topology(tmp_path, content, expect):
    bad = tmp_path / "bad.xml"
    bad.write_text(content)
    proc = stackproof_cli("nodetype", "from-xml", str(bad))
    assert proc.returncode == 2          # bad input
    assert expect in proc.stderr


def test_cli_missing_file_and_unknown_nodetype():
    proc = stackproof_cli("nodetype", "from-xml", "/nonexistent.xml")
    assert proc.returncode == 1 and "not found" in proc.stderr
    proc = stackproof_cli("nodetype", "show", "summit")
    assert proc.returncode == 2 and "unknown node type 'summit'" in proc.stderr


def test_from_dict_rejects_non_uniform_sockets():
    d = yaml.safe_load((nodetypes_dir() / "lassen.yaml").read_text())
    d["cores"][1] = d["cores"][1][:-1]
    with pytest.raises(StackproofError, match="different core counts"):
        nodetype.NodeType.from_dict(d)
