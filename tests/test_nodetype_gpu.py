"""GPU discovery that never loses a GPU, and node memory that from-xml and from-host agree on.

Recorded data (../shared): the same H100 node seen by Debian's hwloc (no NVML: the GPU is a bare
PCI 3D controller) and by hwloc built with NVML+CUDA, and that node's `nvidia-smi -q`, served by
a stub `nvidia-smi` put first on PATH.
"""
import argparse
import contextlib
import io
import os
import sys
from pathlib import Path

import pytest

from conftest import stackproof_cli
from stackproof.gpus import discovery as gpu_discovery

from stackproof.nodes import memory as node_memory

from stackproof.nodes import cli as nodetype_cli
from stackproof.nodes import nodetype
from stackproof.nodes.hwloc import parse_topology
from stackproof.nodes.memory import annotate_memtotal
from stackproof.errors import StackproofError

FIXTURE = "fixtures/gpu/h100-nvidia-smi-q.txt"
NO_NVML, NVML = "device__h100-no-nvml.xml", "device__h100-nvml.xml"
H100_UUID = "GPU-922e7ea4-6ce9-eb68-610f-e095c1727040"


def stub(tmp_path, name, text):
    """An executable `name` on a private PATH directory that prints `text` whatever its arguments."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    data = tmp_path / f"{name}.out"
    data.write_text(text)
    exe = bindir / name
    exe.write_text(f"#!/bin/sh\ncat '{data}'\n")
    exe.chmod(0o755)
    return bindir


@pytest.fixture
def smi_on_path(tmp_path, shared, monkeypatch):
    bindir = stub(tmp_path, "nvidia-smi", (shared / FIXTURE).read_text())
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return bindir


@pytest.fixture
def no_smi(monkeypatch, tmp_path):
    """PATH without any vendor tool (CI has none; a developer's machine might)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def comparable(nt, memory=True):
    d = nt.as_dict()
    d.pop("source"), d.pop("name")
    if not memory:
        d.pop("memory_mb")
        for n in d["numa"]:
            n.pop("memory_mb")
    return d


def test_nvidia_smi_q_parser(shared):
    (g,) = gpu_discovery.parse_nvidia_smi_q((shared / FIXTURE).read_text())
    assert (g.index, g.model, g.bus_id, g.uuid) == (0, "NVIDIA H100 80GB HBM3", "0000:00:06.0", H100_UUID)
    assert (g.pcie_gen_max, g.pcie_width_max) == (5, 16)


def test_both_h100_topologies_give_the_same_node_type(shared, smi_on_path, capfd):
    plain = nodetype.from_xml(shared / "topologies" / NO_NVML, "h100")
    assert "only as PCI devices (0000:00:06.0)" in capfd.readouterr().err     # it says so
    full = nodetype.from_xml(shared / "topologies" / NVML, "h100")
    assert [g.as_dict() for g in plain.gpus] == [g.as_dict() for g in full.gpus] == [
        {"index": 0, "vendor": "nvidia", "model": "NVIDIA H100 80GB HBM3", "pci_bus_id": "0000:00:06.0",
         "numa": [0], "uuid": H100_UUID}]
    assert "nvidia-smi" in plain.source["gpus"] and "gpus" not in full.source
    # Every field agrees except memory: the two files were recorded minutes apart on a VM whose
    # per-NUMA meminfo grows as the kernel initialises pages (hwloc wrote 5,211 then 5,339 MB).
    assert comparable(plain, memory=False) == comparable(full, memory=False)
    assert (plain.memory_mb, full.memory_mb) == (5211, 5339)


def test_recorded_smi_output_instead_of_the_tool(shared, no_smi):
    nt = nodetype.from_xml(shared / "topologies" / NO_NVML, smi_output=str(shared / FIXTURE))
    assert nt.gpus[0].uuid == H100_UUID and FIXTURE.split("/")[-1] in nt.source["gpus"]


def test_no_vendor_tool_is_an_error_naming_the_device_and_the_fix(shared, no_smi):
    with pytest.raises(StackproofError) as exc:
        nodetype.from_xml(shared / "topologies" / NO_NVML)
    msg = str(exc.value)
    assert "0000:00:06.0 (nvidia, PCI 0302 [10de:2330]): nvidia-smi not found on PATH" in msg
    assert "hwloc +nvml +cuda" in msg and "libhwloc-contrib-plugins" in msg and "--enable-nvml" in msg


def test_vendor_tool_without_that_bus_id_is_an_error(shared, tmp_path, monkeypatch):
    text = (shared / FIXTURE).read_text().replace("00000000:00:06.0", "00000000:41:00.0")
    monkeypatch.setenv("PATH", f"{stub(tmp_path, 'nvidia-smi', text)}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(StackproofError, match=r"nvidia-smi lists no GPU at 0000:00:06.0 \(0000:41:00.0\)"):
        nodetype.from_xml(shared / "topologies" / NO_NVML)


def test_ignore_pci_gpus_is_explicit(shared, no_smi):
    nt = nodetype.from_xml(shared / "topologies" / NO_NVML, ignore_pci_gpus=True)
    assert nt.gpus == [] and "left out" in nt.source["gpus"]


def test_drm_only_gpus_are_pci_only_and_other_backends_are_not(shared, no_smi):
    # hwloc-1 Lassen: V100s with DRM devices only -> PCI-only (need the vendor tool)
    with pytest.raises(StackproofError, match="0004:04:00.0 .*0004:05:00.0"):
        nodetype.from_xml(shared / "topologies" / "robustness" / "coral-lassen-hwloc1.xml")
    # Corona: MI50s seen through OpenCL (hwloc has a backend): not PCI-only; ASPEED VGA never a GPU
    nt = nodetype.from_xml(shared / "topologies" / "mpibind__epyc-corona.xml")
    assert nt.gpus == []


def test_rocm_smi_json_parser_synthetic():
    # Synthetic (written from rocm-smi's --json key names; no AMD node was available)
    text = ('{"card1": {"PCI Bus": "0000:D6:00.0", "Card series": "AMD Instinct MI250X", "Unique ID": "0x2"},'
            ' "card0": {"PCI Bus": "0000:D1:00.0", "Card series": "AMD Instinct MI250X", "Unique ID": "0x1"},'
            ' "system": {"Driver version": "6.2"}}')
    vendor, gpus = gpu_discovery.parse_smi_output(text, "x")
    assert vendor == "amd" and [(g.index, g.bus_id, g.uuid) for g in gpus] == [
        (0, "0000:d1:00.0", "0x1"), (1, "0000:d6:00.0", "0x2")]


# ---- AMD: real rocm-smi outputs (tests/data/rocm-smi/SOURCES.md says where each was posted) ---------

ROCM = Path(__file__).parent / "data" / "rocm-smi"
MI300X_BUSES = ["0000:26:00.0", "0000:46:00.0", "0000:65:00.0", "0000:85:00.0"]


def test_rocm_smi_text_output_of_a_real_mi300x_node():
    vendor, gpus = gpu_discovery.parse_smi_output((ROCM / "mi300x-x4-a.txt").read_text(), "x")
    assert vendor == "amd"
    assert [(g.index, g.bus_id, g.model) for g in gpus] == [
        (i, bus, "AMD Instinct MI300X OAM") for i, bus in enumerate(MI300X_BUSES)]
    assert gpus[0].uuid == "0x8d1457e2c20f59d2" and gpus[3].uuid == "0xeff71edc82169115"


def test_rocm_smi_json_of_a_real_apu_unique_id_na_is_no_uuid():
    vendor, (gpu,) = gpu_discovery.parse_smi_output((ROCM / "radeon780m-showallinfo.json").read_text(), "x")
    assert (vendor, gpu.index, gpu.bus_id, gpu.model, gpu.uuid) == ("amd", 0, "0000:c4:00.0", "Phoenix3", None)


def test_rocm_smi_json_without_showbus_says_so(tmp_path, shared, no_smi):
    """Real ROCm 6 JSON of an MI250X without --showbus: 'Card Model' is a PCI id, and there is no
    bus id to match, which the error says."""
    with pytest.raises(StackproofError, match=r"card0: no 'PCI Bus' \(run rocm-smi with --showbus\)"):
        nodetype.from_xml(shared / "topologies" / NO_NVML, smi_output=str(ROCM / "mi250x-showproductname.json"))


def amd_pci_only_topology(shared, tmp_path, buses, pci_ids="0302 [1002:74a1] [1002:74a1] 00"):
    """The H100 node's Debian-hwloc XML with its PCI-only GPU replaced by AMD GPUs at `buses`: what
    Debian's hwloc (built without RSMI) shows of an MI300X node's GPUs (PCI 3D controllers, no OS
    device). Only the PCI identity is edited; the node's CPUs and memory stay the H100 node's."""
    xml = (shared / "topologies" / NO_NVML).read_text()
    h100 = next(line for line in xml.splitlines() if 'pci_busid="0000:00:06.0"' in line)
    amd = "\n".join(h100.replace('pci_busid="0000:00:06.0"', f'pci_busid="{bus}"')
                    .replace("0302 [10de:2330] [10de:16c1] a1", pci_ids)
                    .replace('gp_index="88"', f'gp_index="{900 + i}"') for i, bus in enumerate(buses))
    path = tmp_path / "amd.xml"
    path.write_text(xml.replace(h100, amd))
    return path


def test_pci_only_amd_gpus_filled_from_real_rocm_smi_text(shared, tmp_path, no_smi):
    xml = amd_pci_only_topology(shared, tmp_path, MI300X_BUSES)
    nt = nodetype.from_xml(xml, "mi300x", smi_output=str(ROCM / "mi300x-x4-a.txt"))
    assert nt.gpu_vendor == "amd"
    assert [(g.index, g.pci_bus_id, g.model, g.uuid) for g in nt.gpus] == [
        (0, "0000:26:00.0", "AMD Instinct MI300X OAM", "0x8d1457e2c20f59d2"),
        (1, "0000:46:00.0", "AMD Instinct MI300X OAM", "0xb4fa34630e85d42a"),
        (2, "0000:65:00.0", "AMD Instinct MI300X OAM", "0xe8986800e182538a"),
        (3, "0000:85:00.0", "AMD Instinct MI300X OAM", "0xeff71edc82169115")]
    assert "rocm-smi output" in nt.source["gpus"]


def test_pci_only_amd_gpu_filled_by_rocm_smi_on_path(shared, tmp_path, monkeypatch):
    """from-host's path: rocm-smi on PATH (a stub printing the real 780M JSON), matched by bus id."""
    xml = amd_pci_only_topology(shared, tmp_path, ["0000:c4:00.0"], "0300 [1002:1900] [1002:e001] 01")
    bindir = stub(tmp_path, "rocm-smi", (ROCM / "radeon780m-showallinfo.json").read_text())
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}/usr/bin:/bin")     # no nvidia-smi: no matter
    nt = nodetype.from_xml(xml, "apu")
    (gpu,) = nt.gpus
    assert (gpu.index, gpu.pci_bus_id, gpu.model, gpu.uuid) == (0, "0000:c4:00.0", "Phoenix3", None)


def test_amd_gpu_missing_from_rocm_smi_names_it(shared, tmp_path, no_smi):
    xml = amd_pci_only_topology(shared, tmp_path, ["0000:27:00.0"])
    with pytest.raises(StackproofError, match=r"0000:27:00.0 \(amd, PCI 0302 \[1002:74a1\]\): rocm-smi output .* "
                                              r"lists no GPU at 0000:27:00.0 \(0000:26:00.0, 0000:46:00.0"):
        nodetype.from_xml(xml, smi_output=str(ROCM / "mi300x-x4-a.txt"))


@pytest.mark.parametrize("text", ["", "garbage\n", '{"card0": {}}'])
def test_bad_smi_output_is_a_one_line_error(text, tmp_path, shared, no_smi):
    bad = tmp_path / "smi.txt"
    bad.write_text(text)
    with pytest.raises(StackproofError, match="cannot read vendor GPU output"):
        nodetype.from_xml(shared / "topologies" / NO_NVML, smi_output=str(bad))


# ---- from-host == from-xml ------------------------------------------------------------------------

def fake_host(tmp_path, monkeypatch, xml_text, memtotal_kb):
    bindir = stub(tmp_path, "lstopo-no-graphics", xml_text)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"MemTotal:       {memtotal_kb} kB\nMemFree:        1000 kB\n")
    monkeypatch.setattr(node_memory, "MEMINFO", str(meminfo))


def test_from_host_and_from_xml_agree_on_every_field(shared, smi_on_path, tmp_path, monkeypatch, capfd):
    """The H100 node as from-host saw it: lstopo without NVML, MemTotal 128,887 MB while hwloc's
    NUMA node said 5,339 MB. from-host uses MemTotal, says why, and the XML it saves gives
    the same node type through from-xml."""
    fake_host(tmp_path, monkeypatch, (shared / "topologies" / NO_NVML).read_text(), 128887 * 1024)
    saved = tmp_path / "h100.xml"
    host = nodetype.from_host("h100", save_xml=str(saved))
    assert host.memory_mb == 128887 and host.source["memory"] == "kernel MemTotal"
    assert host.gpus[0].uuid == H100_UUID
    again = nodetype.from_xml(saved, "h100")
    assert comparable(again) == comparable(host)
    assert again.to_yaml().split("arch:")[1] == host.to_yaml().split("arch:")[1]


def test_memtotal_excludes_cpuless_gpu_memory(shared):
    """hwloc-1 Lassen XML: CPU-less NUMA nodes hold the V100s' memory; not in RealMemory."""
    path = shared / "topologies" / "robustness" / "coral-lassen-hwloc1.xml"
    lassen = nodetype.from_xml(path, ignore_pci_gpus=True)
    cpuless = sum(n.memory_mb for n in lassen.numa if not n.cpus)
    assert cpuless > 0
    xml = annotate_memtotal(path.read_text(), (lassen.memory_mb + cpuless) * 1024)
    nt = parse_topology(xml, "lassen", "test", ignore_pci_gpus=True)
    assert nt.memory_mb == lassen.memory_mb and nt.source["memory"].endswith("less CPU-less NUMA nodes")


def test_cli_from_host_says_which_memory_it_uses(shared, smi_on_path, tmp_path, monkeypatch):
    fake_host(tmp_path, monkeypatch, (shared / "topologies" / NO_NVML).read_text(), 128887 * 1024)
    args = argparse.Namespace(name="h100", smi_output=None, ignore_pci_gpus=False, save_xml=None,
                              output=str(tmp_path / "h100.yaml"), k=None, position=None)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert nodetype_cli._cmd_from_host(args) == 0
    assert "MemTotal (128887 MB) exceeds the NUMA nodes' meminfo (5211 MB" in err.getvalue()


def test_cli_from_xml_with_smi_output_and_error_exit(shared, tmp_path):
    env = dict(os.environ, PATH=os.path.dirname(sys.executable))
    out = tmp_path / "h100.yaml"
    ok = stackproof_cli("nodetype", "from-xml",
                         str(shared / "topologies" / NO_NVML), "--smi-output", str(shared / FIXTURE),
                         "-o", str(out), env=env)
    assert ok.returncode == 0, ok.stderr
    assert H100_UUID in out.read_text() and "GPUs: nvidia:0@numa0" in ok.stderr
    bad = stackproof_cli("nodetype", "from-xml",
                          str(shared / "topologies" / NO_NVML), env=env)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "0000:00:06.0" in bad.stderr
