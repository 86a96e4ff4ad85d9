"""What a node type is: the single source of hardware facts (the model; nodetype.py says where one
comes from, hwloc.py parses hwloc XML, host.py probes the live host).

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

import re
from dataclasses import dataclass, field

import yaml

from stackproof import validate
from stackproof.cpulist import format_list, parse_list
from stackproof.errors import InputError

SCHEMA = "stackproof-nodetype/1"
MAX_MEMORY_MB = 1 << 40       # 1 EB: more is a typo
_PCI_ID = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")
_UUID = re.compile(r"[A-Za-z0-9-]{1,64}")

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


def summary(nt: NodeType) -> str:
    gpus = ", ".join(f"{g.vendor}:{g.index}@numa{','.join(map(str, g.numa))}" for g in nt.gpus) or "none"
    return (f"{nt.name}: {nt.arch}, {len(nt.sockets)} sockets x {nt.cores_per_socket} cores x "
            f"{nt.threads_per_core} PUs = {nt.num_cpus} CPUs, {len(nt.numa)} NUMA, {nt.memory_mb} MB, "
            f"GPUs: {gpus}" + (f", unavailable CPUs {format_list(nt.unavailable_cpus)}"
                                if nt.unavailable_cpus else ""))
