"""The live host's topology: lstopo's hwloc XML, with the kernel's MemTotal recorded in it (the NUMA
nodes' counters can be incomplete), so that parsing it gives what `from-xml` gives for the saved XML."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from stackproof.errors import StackproofError
from stackproof.nodes import memory as node_memory
from stackproof.nodes.memory import MEMTOTAL_INFO, annotate_memtotal


def host_topology_xml() -> str:
    lstopo = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
    if lstopo is None:
        raise StackproofError("lstopo not found: install the Debian package 'hwloc' (scripts/install-deps.sh)")
    proc = subprocess.run([lstopo, "--of", "xml", "-"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise StackproofError(f"lstopo failed: {proc.stderr.strip()}")
    return proc.stdout


def host_topology(save_xml: str | None = None) -> str:
    """lstopo's XML plus the kernel's MemTotal; also written to `save_xml` when given."""
    xml_text = host_topology_xml()
    memtotal_kb = node_memory.meminfo_kb()
    if memtotal_kb and MEMTOTAL_INFO not in xml_text:
        xml_text = annotate_memtotal(xml_text, memtotal_kb)
    if save_xml:
        try:
            Path(save_xml).write_text(xml_text)
        except OSError as exc:
            raise StackproofError(f"--save-xml {save_xml}: {exc.strerror}") from None
    return xml_text
