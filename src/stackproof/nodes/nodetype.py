"""Node types: the single source of hardware facts, derived from an hwloc topology.

A node type is a small YAML file in slurm-conf/nodetypes/ generated from an hwloc XML (a file, or the
live host through `lstopo`). slurm.conf, gres.conf, the core-specialization profiles, Warewulf tags and
ReFrame partitions are all rendered from it, so no hardware fact is written twice.

Facts kept: sockets and their cores (each core as its OS PU ids, in socket order), NUMA domains with
their PUs and memory, GPUs with vendor, model, PCI bus id, UUID and NUMA locality, total memory, and
the PUs that exist but that the source topology did not allow (e.g. Lassen's XML hides the two cores
per socket the site reserves for the system; they are reconstructed from the packages'
complete_cpuset, assuming core-major PU numbering within the hidden range).

The node type also records the site's choice of system cores for core specialization
(`corespec: {cores_per_socket: k, position: first|last}`), the one non-hardware fact that belongs to
the node type because every profile of it uses the same k.
"""
from __future__ import annotations

import hashlib
import re
import shutil
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from stackproof import validate
from stackproof.cpulist import format_list, parse_hwloc_bitmap, parse_list
from stackproof.errors import InputError, StackproofError
from stackproof.gpus.discovery import fill_from_vendor_tools, pci_gpus_without_backend
from stackproof.nodes import memory as node_memory
from stackproof.nodes.memory import MEMTOTAL_INFO, NUMA_SUM, annotate_memtotal, node_memory_mb
from stackproof.yamlfile import read_yaml
from stackproof.paths import nodetypes_dir

SCHEMA = "stackproof-nodetype/1"
MAX_MEMORY_MB = 1 << 40       # 1 EB: more is a typo
_PCI_ID = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")
_UUID = re.compile(r"[A-Za-z0-9-]{1,64}")

# hwloc OS device types (hwloc_obj_osdev_type_e): 1 = GPU, 5 = co-processor.
OSDEV_GPU = "1"
OSDEV_COPROC = "5"

VENDORS = {"nvidia": "nvidia", "amd": "amd", "advanced micro devices": "amd", "intel": "intel"}
# How each vendor's devices are selected by the runtime, and the device files Slurm constrains.
VISIBLE_DEVICES_VAR = {"nvidia": "CUDA_VISIBLE_DEVICES", "amd": "ROCR_VISIBLE_DEVICES",
                       "intel": "ZE_AFFINITY_MASK"}


@dataclass
class Gpu:
    index: int              # the id exported in *_VISIBLE_DEVICES (nvml3 -> 3)
    vendor: str             # nvidia | amd | intel
    model: str
    pci_bus_id: str | None
    numa: list[int]         # NUMA os indexes local to the GPU
    uuid: str | None = None

    def as_dict(self) -> dict:
        d = {"index": self.index, "vendor": self.vendor, "model": self.model,
             "pci_bus_id": self.pci_bus_id, "numa": self.numa}
        if self.uuid:
            d["uuid"] = self.uuid
        return d


@dataclass
class Numa:
    os_index: int
    cpus: set[int]
    memory_mb: int

    def as_dict(self) -> dict:
        return {"os_index": self.os_index, "cpus": format_list(self.cpus), "memory_mb": self.memory_mb}


@dataclass
class NodeType:
    name: str
    arch: str
    cpu_model: str
    sockets: list[list[set[int]]]      # sockets[s][c] = OS PU ids of core c of socket s
    numa: list[Numa]
    gpus: list[Gpu]
    memory_mb: int
    unavailable_cpus: set[int] = field(default_factory=set)
    corespec: dict = field(default_factory=dict)
    source: dict = field(default_factory=dict)

    # ---- derived facts -------------------------------------------------------------------------
    @property
    def cores_per_socket(self) -> int:
        return len(self.sockets[0])

    @property
    def threads_per_core(self) -> int:
        return len(self.sockets[0][0])

    @property
    def num_cpus(self) -> int:
        return sum(len(core) for sock in self.sockets for core in sock)

    @property
    def num_cores(self) -> int:
        return sum(len(sock) for sock in self.sockets)

    @property
    def all_cpus(self) -> set[int]:
        return {pu for sock in self.sockets for core in sock for pu in core}

    @property
    def gpu_vendor(self) -> str | None:
        vendors = {g.vendor for g in self.gpus}
        return vendors.pop() if len(vendors) == 1 else (None if not vendors else "mixed")

    def core_pus(self, socket_index: int, core_index: int) -> set[int]:
        return self.sockets[socket_index][core_index]

    def abstract_core_id(self, socket_index: int, core_index: int) -> int:
        """Slurm's abstract core id: cores numbered socket by socket."""
        return socket_index * self.cores_per_socket + core_index

    def abstract_cpu_ids(self, socket_index: int, core_index: int) -> list[int]:
        """Slurm's abstract CPU ids of a core (what CpuSpecList takes): core-major, thread-minor.
        They equal OS ids only when the OS numbers PUs core-major (POWER9: yes; x86 SMT: no)."""
        base = self.abstract_core_id(socket_index, core_index) * self.threads_per_core
        return list(range(base, base + self.threads_per_core))

    def socket_of_numa(self, numa: Numa) -> int | None:
        for s, sock in enumerate(self.sockets):
            pus = {pu for core in sock for pu in core}
            if numa.cpus and numa.cpus <= pus:
                return s
        return None

    def gpu_cores(self, gpu: Gpu) -> list[int]:
        """Abstract core ids local to a GPU (its NUMA domains' cores), for gres.conf Cores=."""
        local = set()
        for n in self.numa:
            if n.os_index in gpu.numa:
                local |= n.cpus
        return [self.abstract_core_id(s, c) for s, sock in enumerate(self.sockets)
                for c, core in enumerate(sock) if core & local]

    # ---- (de)serialisation -----------------------------------------------------------------------
    def as_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "name": self.name,
            "source": self.source,
            "arch": self.arch,
            "cpu_model": self.cpu_model,
            "sockets": len(self.sockets),
            "cores_per_socket": self.cores_per_socket,
            "threads_per_core": self.threads_per_core,
            "cpus": self.num_cpus,
            "memory_mb": self.memory_mb,
            "unavailable_cpus": format_list(self.unavailable_cpus),
            "corespec": self.corespec,
            "numa": [n.as_dict() for n in self.numa],
            "gpus": [g.as_dict() for g in self.gpus],
            "cores": [[format_list(core) for core in sock] for sock in self.sockets],
        }

    def to_yaml(self) -> str:
        header = (f"# Node type {self.name!r}: generated by `stackproof nodetype` from an hwloc topology.\n"
                  "# The single source of hardware facts for slurm.conf, Warewulf tags and ReFrame\n"
                  "# partitions. Regenerate instead of editing; only `corespec` is a site choice.\n")
        return header + yaml.safe_dump(self.as_dict(), sort_keys=False, default_flow_style=None, width=100)

    @classmethod
    def from_dict(cls, d: dict, origin: str = "<dict>") -> "NodeType":
        try:
            if not isinstance(d, dict):
                raise InputError(f"{origin}: not a node type (a {type(d).__name__}, not a mapping)")
            if d.get("schema") != SCHEMA:
                raise InputError(f"{origin}: not a node type (schema {d.get('schema')!r}, expected {SCHEMA})")
            def cpus(text, field: str) -> set[int]:
                try:
                    return parse_list(text)
                except ValueError as exc:           # name the field: "cores[1][3]: bad CPU id ..."
                    raise InputError(f"{origin}: {field}: {exc}") from None
            nt = cls(
                name=d["name"], arch=d["arch"], cpu_model=d["cpu_model"],
                sockets=[[cpus(c, f"cores[{s}][{i}]") for i, c in enumerate(sock)]
                         for s, sock in enumerate(d["cores"])],
                numa=[Numa(n["os_index"], cpus(n["cpus"], f"numa[{i}].cpus"), n["memory_mb"])
                      for i, n in enumerate(d["numa"])],
                gpus=[Gpu(g["index"], g["vendor"], g["model"], g.get("pci_bus_id"), list(g["numa"]), g.get("uuid"))
                      for g in d.get("gpus") or []],
                memory_mb=d["memory_mb"], unavailable_cpus=cpus(d.get("unavailable_cpus") or "", "unavailable_cpus"),
                corespec=d.get("corespec") or {}, source=d.get("source") or {})
        except KeyError as exc:
            raise InputError(f"{origin}: malformed node type: field {exc.args[0]!r} is missing") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"{origin}: malformed node type: {exc}") from None
        nt.validate(origin)
        return nt

    def k_range(self) -> str:
        """The valid system cores per socket (k): 0 up to all but one core of a socket."""
        return (f"between 0 and {self.cores_per_socket - 1} on node type {self.name!r} "
                f"({self.cores_per_socket} cores per socket: at least one stays for the application)")

    def validate(self, origin: str) -> None:
        # Every value reaches slurm.conf, gres.conf, file names or Warewulf tags: check its class/range.
        validate.name(self.name, f"{origin}: name")
        for what, text in (("arch", self.arch), ("cpu_model", self.cpu_model)):
            if not isinstance(text, str) or not text.isprintable() or len(text) > 200:
                raise InputError(f"{origin}: {what} {text!r}: must be one printable line (<= 200 characters)")
        validate.integer(self.memory_mb, f"{origin}: memory_mb", 1, MAX_MEMORY_MB)
        for n in self.numa:
            validate.integer(n.os_index, f"{origin}: numa os_index", 0, 4095)
            validate.integer(n.memory_mb, f"{origin}: numa {n.os_index} memory_mb", 0, MAX_MEMORY_MB)
        for g in self.gpus:
            validate.integer(g.index, f"{origin}: gpu index", 0, 1023)
            if g.vendor not in VISIBLE_DEVICES_VAR:
                raise InputError(f"{origin}: gpu {g.index}: vendor {g.vendor!r}: one of "
                                      f"{', '.join(VISIBLE_DEVICES_VAR)}")
            if not isinstance(g.model, str) or not g.model.isprintable() or len(g.model) > 200:
                raise InputError(f"{origin}: gpu {g.index}: model {g.model!r}: must be one printable line")
            if g.pci_bus_id is not None and not _PCI_ID.fullmatch(str(g.pci_bus_id)):
                raise InputError(f"{origin}: gpu {g.index}: pci_bus_id {g.pci_bus_id!r}: not a PCI address")
            if g.uuid is not None and not _UUID.fullmatch(str(g.uuid)):
                raise InputError(f"{origin}: gpu {g.index}: uuid {g.uuid!r}: letters, digits and '-' only")
            for n in g.numa:
                validate.integer(n, f"{origin}: gpu {g.index} numa", 0, 4095)
        if len({g.index for g in self.gpus}) != len(self.gpus):
            raise InputError(f"{origin}: gpu indexes repeat: {[g.index for g in self.gpus]}")
        if not self.sockets or not self.sockets[0]:
            raise InputError(f"{origin}: node type has no cores")
        if len({len(s) for s in self.sockets}) != 1:
            raise InputError(f"{origin}: sockets have different core counts "
                                  f"{[len(s) for s in self.sockets]}; Slurm needs uniform CoresPerSocket")
        if len({len(c) for s in self.sockets for c in s}) != 1:
            raise InputError(f"{origin}: cores have different PU counts; Slurm needs uniform ThreadsPerCore")
        k = self.corespec.get("cores_per_socket", 0)
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= self.cores_per_socket - 1:
            raise InputError(f"{origin}: corespec.cores_per_socket must be {self.k_range()} (got {k!r})")
        if self.corespec.get("position", "first") not in ("first", "last"):
            raise InputError(f"{origin}: corespec.position must be 'first' or 'last'")


def default_corespec(cores_per_socket: int) -> dict:
    """The paper reserves 2 cores per 22-core socket; small nodes reserve 1."""
    return {"cores_per_socket": min(2 if cores_per_socket >= 8 else 1, cores_per_socket - 1), "position": "first"}


# ---- hwloc XML parsing ---------------------------------------------------------------------------

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


# ---- sources ---------------------------------------------------------------------------------------

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


def host_topology_xml() -> str:
    lstopo = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
    if lstopo is None:
        raise StackproofError("lstopo not found: install the Debian package 'hwloc' (scripts/install-deps.sh)")
    proc = subprocess.run([lstopo, "--of", "xml", "-"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise StackproofError(f"lstopo failed: {proc.stderr.strip()}")
    return proc.stdout


def from_host(name: str = "local", *, smi_output: str | None = None, ignore_pci_gpus: bool = False,
              save_xml: str | None = None) -> NodeType:
    """The live host: lstopo's XML plus the kernel's MemTotal (node_memory.node_memory_mb), parsed
    exactly as `from-xml` parses the XML `save_xml` writes, so the two agree on every field."""
    xml_text = host_topology_xml()
    memtotal_kb = node_memory.meminfo_kb()
    if memtotal_kb and MEMTOTAL_INFO not in xml_text:
        xml_text = annotate_memtotal(xml_text, memtotal_kb)
    if save_xml:
        try:
            Path(save_xml).write_text(xml_text)
        except OSError as exc:
            raise StackproofError(f"--save-xml {save_xml}: {exc.strerror}") from None
    nt = parse_topology(xml_text, name, "live host", smi_output=smi_output, ignore_pci_gpus=ignore_pci_gpus)
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


def summary(nt: NodeType) -> str:
    gpus = ", ".join(f"{g.vendor}:{g.index}@numa{','.join(map(str, g.numa))}" for g in nt.gpus) or "none"
    return (f"{nt.name}: {nt.arch}, {len(nt.sockets)} sockets x {nt.cores_per_socket} cores x "
            f"{nt.threads_per_core} PUs = {nt.num_cpus} CPUs, {len(nt.numa)} NUMA, {nt.memory_mb} MB, "
            f"GPUs: {gpus}" + (f", unavailable CPUs {format_list(nt.unavailable_cpus)}"
                                if nt.unavailable_cpus else ""))


# ---- CLI -------------------------------------------------------------------------------------------

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
