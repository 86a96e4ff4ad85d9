"""hwloc XML (format 1.x or 2.x) -> NodeType: sockets and cores (Lassen-style hidden cores rebuilt
from the packages' complete cpusets), NUMA domains and memory, GPUs (NVML/RSMI/CUDA OS devices;
PCI-only GPUs identified by the vendor tool, gpus/discovery.py)."""
from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET

from stackproof.cpulist import parse_hwloc_bitmap
from stackproof.errors import InputError
from stackproof.gpus.discovery import fill_from_vendor_tools, pci_gpus_without_backend
from stackproof.nodes.memory import NUMA_SUM, node_memory_mb
from stackproof.nodes.model import Gpu, Numa, NodeType, default_corespec

# hwloc OS device types (hwloc_obj_osdev_type_e): 1 = GPU, 5 = co-processor.
OSDEV_GPU = "1"
OSDEV_COPROC = "5"

VENDORS = {"nvidia": "nvidia", "amd": "amd", "advanced micro devices": "amd", "intel": "intel"}


def _info(elem: ET.Element, name: str) -> str | None:
    for child in elem.findall("info"):
        if child.get("name") == name:
            return child.get("value")
    return None


def _cpuset(elem: ET.Element, complete: bool = False) -> set[int]:
    text = (elem.get("complete_cpuset") if complete else None) or elem.get("cpuset")
    return parse_hwloc_bitmap(text) if text else set()


def parse_topology(xml_text: str, name: str, origin: str, *, smi_output: str | None = None,
                   ignore_pci_gpus: bool = False) -> NodeType:
    """Derive a node type from hwloc XML (format 1.x or 2.x). GPUs hwloc shows only as PCI
    devices are filled from the vendor tool (or its recorded output `smi_output`), unless
    `ignore_pci_gpus` (then they are left out, and the node type says so in `source`)."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise InputError(f"{origin}: malformed topology XML: {exc}") from None
    if root.tag != "topology":
        raise InputError(f"{origin}: not an hwloc topology (root element <{root.tag}>)")
    machine = root.find("object")
    if machine is None or machine.get("type") != "Machine":
        raise InputError(f"{origin}: hwloc XML has no Machine object")
    try:
        return _parse_machine(machine, name, origin, smi_output, ignore_pci_gpus)
    except ValueError as exc:
        raise InputError(f"{origin}: malformed topology XML: {exc}") from None


def _parse_machine(machine: ET.Element, name: str, origin: str, smi_output: str | None = None,
                   ignore_pci_gpus: bool = False) -> NodeType:
    parent = {child: elem for elem in machine.iter() for child in elem}
    objects = list(machine.iter("object"))

    cores = [_cpuset(o) for o in objects if o.get("type") == "Core"]
    cores = [c for c in cores if c]
    if not cores:  # e.g. a topology without Core objects: one core per PU
        cores = [{int(o.get("os_index"))} for o in objects if o.get("type") == "PU"]
    if not cores:
        raise InputError(f"{origin}: topology has no cores or PUs")
    threads = max(len(c) for c in cores)

    packages = [o for o in objects if o.get("type") == "Package"]
    package_sets = [_cpuset(p, complete=True) for p in packages] or [_cpuset(machine, complete=True)]
    sockets: list[list[set[int]]] = []
    unavailable: set[int] = set()
    for pkg_cpus in sorted(package_sets, key=min):
        pkg_cores = [c for c in cores if c <= pkg_cpus]
        hidden = sorted(pkg_cpus - set().union(*pkg_cores)) if pkg_cores else sorted(pkg_cpus)
        if len(hidden) % threads:
            raise InputError(f"{origin}: {len(hidden)} PUs of a package are not in any core and "
                                  f"cannot be grouped into cores of {threads} PUs")
        rebuilt = [set(hidden[i:i + threads]) for i in range(0, len(hidden), threads)]
        unavailable.update(hidden)
        sockets.append(sorted(pkg_cores + rebuilt, key=min))

    numa = []
    for o in objects:
        if o.get("type") == "NUMANode":
            cpus = _cpuset(o, complete=True)
            numa.append(Numa(int(o.get("os_index", len(numa))), cpus,
                             int(o.get("local_memory", "0")) // (1024 * 1024)))
    numa.sort(key=lambda n: n.os_index)
    memory_mb, memory_source = node_memory_mb(machine, numa)

    gpus = _parse_gpus(objects, parent)
    source = {"memory": memory_source} if memory_source != NUMA_SUM else {}
    pci_only = pci_gpus_without_backend(objects)
    if pci_only and not gpus and ignore_pci_gpus:
        source["gpus"] = f"{len(pci_only)} PCI-only GPU(s) left out (--ignore-pci-gpus)"
    elif pci_only and not gpus:
        records, tool = fill_from_vendor_tools(pci_only, origin, smi_output)
        for g in pci_only:
            rec = records[g.bus_id]
            gpus.append(Gpu(rec.index, g.vendor, rec.model, g.bus_id, _numa_of(g.element, parent), rec.uuid))
        gpus.sort(key=lambda g: g.index)
        source["gpus"] = f"PCI devices of the topology, identified by {tool}"
        print(f"nodetype: {origin}: hwloc shows {len(pci_only)} GPU(s) only as PCI devices "
              f"({', '.join(g.bus_id for g in pci_only)}); model, index and UUID taken from {tool}, "
              "matched by PCI bus id", file=sys.stderr)
    pkg0 = packages[0] if packages else machine
    cpu_model = (_info(pkg0, "CPUModel") or _info(machine, "CPUModel") or "unknown").strip()
    arch = _info(machine, "Architecture") or "unknown"
    nt = NodeType(name=name, arch=arch, cpu_model=cpu_model, sockets=sockets, numa=numa, gpus=gpus,
                  memory_mb=memory_mb, unavailable_cpus=unavailable,
                  corespec=default_corespec(len(sockets[0])), source=source)
    nt.validate(origin)
    return nt


def _numa_of(elem: ET.Element, parent: dict) -> list[int]:
    """NUMA os indexes local to an I/O object: the nodeset of its first non-I/O ancestor."""
    anc = parent.get(elem)
    while anc is not None:
        if anc.get("nodeset"):
            return sorted(parse_hwloc_bitmap(anc.get("nodeset")))
        anc = parent.get(anc)
    return []


def _parse_gpus(objects: list[ET.Element], parent: dict) -> list[Gpu]:
    """GPUs as the runtime sees them: NVML/RSMI GPU OS devices (CUDA co-processors when NVML is
    absent). DRM devices (card0, renderD128) and OpenCL co-processors are not counted: they carry no
    vendor id the runtime uses and would double-count the same GPU."""
    by_backend: dict[str, list[Gpu]] = {"NVML": [], "RSMI": [], "CUDA": []}
    for o in objects:
        if o.get("type") != "OSDev":
            continue
        osdev_name = o.get("name", "")
        backend = _info(o, "Backend") or ""
        kind = o.get("osdev_type")
        if kind == OSDEV_GPU and backend in ("NVML", "RSMI"):
            pass
        elif kind == OSDEV_COPROC and (backend == "CUDA" or o.get("subtype") == "CUDA"):
            backend = "CUDA"
        else:
            continue
        m = re.search(r"(\d+)$", osdev_name)
        if not m:
            continue
        vendor_text = (_info(o, "GPUVendor") or ("NVIDIA" if backend in ("NVML", "CUDA") else "AMD")).lower()
        vendor = next((v for k, v in VENDORS.items() if vendor_text.startswith(k)), vendor_text.split()[0])
        model = _info(o, "GPUModel") or _info(o, "CoProcModel") or "unknown"
        pci, numa = None, []
        anc = parent.get(o)
        while anc is not None:
            if pci is None and anc.get("type") == "PCIDev":
                pci = anc.get("pci_busid")
            if anc.get("nodeset"):
                numa = sorted(parse_hwloc_bitmap(anc.get("nodeset")))
                break
            anc = parent.get(anc)
        uuid = _info(o, "NVIDIAUUID") or _info(o, "AMDUUID")
        by_backend[backend].append(Gpu(int(m.group(1)), vendor, model.strip(), pci, numa, uuid))
    gpus = by_backend["NVML"] + by_backend["RSMI"] or by_backend["CUDA"]
    return sorted(gpus, key=lambda g: g.index)
