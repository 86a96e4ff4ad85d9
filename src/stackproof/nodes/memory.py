"""Node memory: which figure a node type gives Slurm (RealMemory), and why.

The live host's kernel MemTotal travels with the topology as an hwloc info of the Machine object,
so `nodetype from-xml` of a topology saved by `from-host` gives the same memory as `from-host`.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET


def _info(elem: ET.Element, name: str) -> str | None:
    for child in elem.findall("info"):
        if child.get("name") == name:
            return child.get("value")
    return None


# hwloc info added by `from-host` to the Machine object: the kernel's MemTotal (kB).
MEMTOTAL_INFO = "StackproofMemTotalKB"
NUMA_SUM = "sum of the NUMA nodes with CPUs (hwloc)"   # the default, not recorded in `source`


def node_memory_mb(machine: ET.Element, numa: list) -> tuple[int, str]:
    """Memory Slurm can give to jobs (RealMemory), and where it came from.

    hwloc records each NUMA node's MemTotal from /sys/devices/system/node/nodeN/meminfo. On
    kernels that initialise struct pages lazily (Firecracker VMs: "Memory: 3218172K/25165432K
    available" at boot) those per-node counters only hold the pages initialised so far and grow
    for minutes, while /proc/meminfo's MemTotal (what slurmd reports) is the whole memory: a
    16-vCPU H100 VM showed 5,339 MB in hwloc and 128,887 MB in MemTotal. So the kernel's MemTotal
    is used when the topology carries it (`from-host` adds it as the Machine info
    StackproofMemTotalKB, and `--save-xml` keeps it), less CPU-less NUMA nodes (coherent GPU
    memory on POWER9, which Slurm cannot give to jobs); else the CPU NUMA nodes' sum."""
    cpuless_mb = sum(n.memory_mb for n in numa if not n.cpus)
    memtotal_kb = _info(machine, MEMTOTAL_INFO)
    if memtotal_kb and memtotal_kb.isdigit() and int(memtotal_kb) // 1024 > cpuless_mb:
        return int(memtotal_kb) // 1024 - cpuless_mb, "kernel MemTotal" + (
            " less CPU-less NUMA nodes" if cpuless_mb else "")
    total = sum(n.memory_mb for n in numa if n.cpus)
    if total:
        return total, NUMA_SUM
    return int(machine.get("local_memory", "0")) // (1024 * 1024), "machine memory (hwloc)"


MEMINFO = "/proc/meminfo"


def meminfo_kb() -> int:
    with open(MEMINFO) as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    return 0


def annotate_memtotal(xml_text: str, memtotal_kb: int) -> str:
    """The host's XML with the kernel's MemTotal as an info of the Machine object (hwloc keeps
    unknown infos), so `from-xml` of the saved file gives the same memory as `from-host`."""
    lines = xml_text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if '<object type="Machine"' in line:
            lines.insert(i + 1, f'    <info name="{MEMTOTAL_INFO}" value="{memtotal_kb}"/>\n')
            return "".join(lines)
    return xml_text
