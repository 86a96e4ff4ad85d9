"""Node types: where one comes from. A node type (the model: nodes/model.py) is a small YAML file in
slurm-conf/nodetypes/ generated from an hwloc XML (a file, or the live host through `lstopo`);
slurm.conf, gres.conf, the core-specialization profiles, Warewulf tags and ReFrame partitions are all
rendered from it, so no hardware fact is written twice.

  load(name or path)   a stored node type (`local`: the live host's when none is stored)
  from_xml(path)       from an hwloc XML file (nodes/hwloc.py parses it)
  from_host(name)      from the live host (nodes/host.py: lstopo + MemTotal)
"""
from __future__ import annotations

import hashlib
import socket
from pathlib import Path

from stackproof.errors import InputError, StackproofError
from stackproof.nodes.host import host_topology
from stackproof.nodes.hwloc import parse_topology
from stackproof.nodes.model import NodeType
from stackproof.paths import nodetypes_dir
from stackproof.yamlfile import read_yaml

__all__ = ["NodeType", "from_host", "from_xml", "load"]


def from_xml(path: str | Path, name: str | None = None, *, smi_output: str | None = None,
             ignore_pci_gpus: bool = False) -> NodeType:
    path = Path(path)
    if not path.is_file():
        raise StackproofError(f"topology file not found: {path}")
    data = path.read_bytes()
    nt = parse_topology(data.decode("utf-8", errors="replace"), name or path.stem, str(path),
                        smi_output=smi_output, ignore_pci_gpus=ignore_pci_gpus)
    nt.source = {"kind": "hwloc-xml", "file": path.name, "sha256": hashlib.sha256(data).hexdigest(),
                 **nt.source}
    return nt


def from_host(name: str = "local", *, smi_output: str | None = None, ignore_pci_gpus: bool = False,
              save_xml: str | None = None) -> NodeType:
    """The live host: lstopo's XML plus the kernel's MemTotal (node_memory.node_memory_mb), parsed
    exactly as `from-xml` parses the XML `save_xml` writes, so the two agree on every field."""
    nt = parse_topology(host_topology(save_xml), name, "live host", smi_output=smi_output,
                        ignore_pci_gpus=ignore_pci_gpus)
    nt.source = {"kind": "live-host", "hostname": socket.gethostname(), **nt.source}
    return nt


def load(name_or_path: str) -> NodeType:
    """Load a node type by name (slurm-conf/nodetypes/<name>.yaml) or path. `local` is generated
    from the live host when no file exists (it is host-specific and not committed)."""
    path = Path(name_or_path)
    if not path.suffix:
        path = nodetypes_dir() / f"{name_or_path}.yaml"
        if name_or_path == "local" and not path.exists():
            return from_host("local")
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in nodetypes_dir().glob("*.yaml")) + ["local"])
        raise InputError(f"unknown node type {name_or_path!r} (known: {known})")
    data = read_yaml(path, "node type")
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a node type")
    return NodeType.from_dict(data, str(path))
