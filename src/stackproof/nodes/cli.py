"""`stackproof nodetype from-xml|from-host|show|list`: node types from hwloc topologies."""
from __future__ import annotations

import sys
from pathlib import Path

from stackproof.errors import InputError
from stackproof.nodes.model import NodeType, summary
from stackproof.nodes.nodetype import from_host, from_xml, load
from stackproof.paths import nodetypes_dir


def _emit(nt: NodeType, args) -> int:
    if getattr(args, "k", None) is not None:
        if not 0 <= args.k <= nt.cores_per_socket - 1:      # checked before anything is written
            raise InputError(f"--k (system cores per socket) must be {nt.k_range()} (got {args.k})")
        nt.corespec["cores_per_socket"] = args.k
    if getattr(args, "position", None):
        nt.corespec["position"] = args.position
    nt.validate("arguments")
    text = nt.to_yaml()
    if args.output:
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}: {summary(nt)}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _cmd_from_xml(args) -> int:
    return _emit(from_xml(args.file, args.name, smi_output=args.smi_output,
                          ignore_pci_gpus=args.ignore_pci_gpus), args)


def _cmd_from_host(args) -> int:
    nt = from_host(args.name, smi_output=args.smi_output, ignore_pci_gpus=args.ignore_pci_gpus,
                   save_xml=args.save_xml)
    numa_mb = sum(n.memory_mb for n in nt.numa)
    if nt.memory_mb > 1.02 * numa_mb:
        print(f"nodetype: the kernel's MemTotal ({nt.memory_mb} MB) exceeds the NUMA nodes' meminfo "
              f"({numa_mb} MB, what hwloc records): this kernel's per-node counters are incomplete "
              "(lazily initialised memory); memory_mb uses MemTotal", file=sys.stderr)
    return _emit(nt, args)


def _cmd_show(args) -> int:
    nt = load(args.nodetype)
    print(summary(nt))
    return 0


def _cmd_list(args) -> int:
    for p in sorted(nodetypes_dir().glob("*.yaml")):
        print(summary(load(str(p))))
    if not (nodetypes_dir() / "local.yaml").exists():
        print(summary(from_host("local")) + "  (live host, not saved)")
    return 0


def register(sub) -> None:
    p = sub.add_parser("nodetype", help="derive node types (hardware facts) from hwloc topologies")
    nsub = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    def common(q):
        q.add_argument("-o", "--output", help="write the YAML here instead of stdout")
        q.add_argument("--k", type=int, help="system cores per socket for core specialization")
        q.add_argument("--position", choices=["first", "last"], help="which cores of each socket are system cores")
        q.add_argument("--smi-output", metavar="FILE",
                       help="recorded `nvidia-smi -q` (or `rocm-smi --showproductname --showbus --showuniqueid "
                            "--json`) output identifying GPUs hwloc shows only as PCI devices "
                            "(default: run the tool on PATH)")
        q.add_argument("--ignore-pci-gpus", action="store_true",
                       help="leave out GPUs hwloc shows only as PCI devices instead of failing")

    q = nsub.add_parser("from-xml", help="node type from an hwloc XML file")
    q.add_argument("file")
    q.add_argument("--name", help="node type name (default: file stem)")
    common(q)
    q.set_defaults(func=_cmd_from_xml)
    q = nsub.add_parser("from-host", help="node type of this machine (via lstopo)")
    q.add_argument("--name", default="local")
    q.add_argument("--save-xml", metavar="FILE",
                   help="also write the topology used (lstopo's XML plus the kernel's MemTotal); "
                        "`from-xml FILE` gives the same node type")
    common(q)
    q.set_defaults(func=_cmd_from_host)
    q = nsub.add_parser("show", help="one-line summary of a node type")
    q.add_argument("nodetype")
    q.set_defaults(func=_cmd_show)
    q = nsub.add_parser("list", help="summaries of all shipped node types")
    q.set_defaults(func=_cmd_list)
