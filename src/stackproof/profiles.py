"""Core-specialization profiles (paper Table III) applied to a node type.

A profile plan says, for one node type, which cores are system cores (or app-free cores), which
CPUs applications get, what goes into Slurm's CpuSpecList (in Slurm's abstract CPU ids) and which
daemons must be bound to the system cores (in OS CPU ids).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


from .cpulist import format_list
from .errors import StackproofError
from .yamlfile import read_yaml
from .nodetype import NodeType
from .paths import slurm_conf_dir


def load_catalog(path: Path | None = None) -> dict:
    path = path or slurm_conf_dir() / "profiles.yaml"
    data = read_yaml(path, "profile catalog")
    if not isinstance(data, dict) or "profiles" not in data or "daemons" not in data:
        raise StackproofError(f"{path}: expected 'profiles' and 'daemons' sections")
    return data


def profile_names() -> list[str]:
    return list(load_catalog()["profiles"])


def read_profile_env(path) -> dict[str, str]:
    """KEY=VALUE lines of a rendered etc/stackproof/profile.env (the one reader of that file)."""
    values = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key] = value
    return values


@dataclass
class ProfilePlan:
    name: str
    description: str
    k: int                              # cores per socket taken from applications (0 for baseline)
    position: str                       # first | last
    reserve: bool                       # CpuSpecList + bound daemons (system change)
    system_cores: list[tuple[int, int]]  # (socket, core) pairs reserved or left free
    system_cpus: set[int]               # OS ids of those cores' PUs
    app_cpus: set[int]                  # OS ids applications use
    app_cores: list[tuple[int, int]]
    cpu_spec_list: list[int]            # Slurm abstract CPU ids (empty unless reserve)
    daemons: dict[str, dict] = field(default_factory=dict)  # group -> {units, processes, ...}

    @property
    def system_cpu_list(self) -> str:
        return format_list(self.system_cpus)

    @property
    def app_cpu_list(self) -> str:
        return format_list(self.app_cpus)


def plan(nt: NodeType, name: str, k: int | None = None, position: str | None = None,
         with_nvidia: bool = False) -> ProfilePlan:
    catalog = load_catalog()
    profiles = catalog["profiles"]
    if name not in profiles:
        raise StackproofError(f"unknown profile {name!r} (known: {', '.join(profiles)})")
    spec = profiles[name]
    free = bool(spec.get("free"))
    reserve = bool(spec.get("reserve"))
    k = nt.corespec.get("cores_per_socket", 1) if k is None else k
    position = position or spec.get("position") or nt.corespec.get("position", "first")
    if not free:
        k = 0
    if k < 0:
        raise StackproofError(f"k must be >= 0 (got {k})")
    if free and k == 0:
        raise StackproofError(f"profile {name!r} needs k >= 1 system/free cores per socket")
    if k >= nt.cores_per_socket:
        raise StackproofError(
            f"profile {name!r} with k={k} cores per socket leaves 0 application cores on node type "
            f"{nt.name!r} ({nt.cores_per_socket} cores per socket)")

    system_cores = []
    for s in range(len(nt.sockets)):
        idx = range(k) if position == "first" else range(nt.cores_per_socket - k, nt.cores_per_socket)
        system_cores += [(s, c) for c in idx]
    app_cores = [(s, c) for s in range(len(nt.sockets)) for c in range(nt.cores_per_socket)
                 if (s, c) not in system_cores]
    system_cpus = {pu for s, c in system_cores for pu in nt.core_pus(s, c)}
    app_cpus = {pu for s, c in app_cores for pu in nt.core_pus(s, c)}
    cpu_spec = sorted(i for s, c in system_cores for i in nt.abstract_cpu_ids(s, c)) if reserve else []

    groups = list(spec.get("daemons") or [])
    if with_nvidia:
        if "nvidia" not in (spec.get("optional_daemons") or []):
            raise StackproofError(f"--with-nvidia applies to the clean profile, not {name!r}")
        groups.append("nvidia")
    daemons = {}
    for g in groups:
        if g not in catalog["daemons"]:
            raise StackproofError(f"profile {name!r} names unknown daemon group {g!r}")
        daemons[g] = catalog["daemons"][g]
    return ProfilePlan(name=name, description=spec.get("description", ""), k=k, position=position,
                       reserve=reserve, system_cores=system_cores, system_cpus=system_cpus,
                       app_cpus=app_cpus, app_cores=app_cores, cpu_spec_list=cpu_spec, daemons=daemons)
