"""Core-specialization profiles (paper Table III) applied to a node type.

A profile plan says, for one node type, which cores are system cores (or app-free cores), which
CPUs applications get, what goes into Slurm's CpuSpecList (in Slurm's abstract CPU ids) and which
daemons must be bound to the system cores (in OS CPU ids).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


from stackproof import validate
from stackproof.cpulist import format_list
from stackproof.errors import InputError
from stackproof.yamlfile import read_yaml
from stackproof.nodes.model import NodeType
from stackproof.paths import slurm_conf_dir


def load_catalog(path: Path | None = None) -> dict:
    path = path or slurm_conf_dir() / "profiles.yaml"
    data = read_yaml(path, "profile catalog")
    if not isinstance(data, dict) or "profiles" not in data or "daemons" not in data:
        raise InputError(f"{path}: expected 'profiles' and 'daemons' sections")
    check_names(path, data)
    return data


def check_names(path, data: dict) -> None:
    """Profile and group names, unit names and process names end up in file names, env files and
    the corespec process list run by root: each is checked against its character class."""
    for name in data.get("profiles") or {}:
        validate.name(name, f"{path}: profile name")
    for group, spec in (data.get("daemons") or {}).items():
        validate.name(group, f"{path}: daemon group name")
        if not isinstance(spec, dict):
            continue
        for unit in spec.get("units") or []:
            validate.unit_name(unit, f"{path}: daemon group {group!r}: unit")
        for proc in spec.get("processes") or []:
            validate.process_name(proc, f"{path}: daemon group {group!r}: process")


def profile_names(profile_file: str | Path | None = None) -> list[str]:
    return list(catalog_with(profile_file)["profiles"])


PROFILE_KEYS = {"description", "free", "reserve", "position", "daemons", "optional_daemons", "irqs"}
DAEMON_KEYS = {"units", "processes", "manager", "irqbalance"}


def read_profile_file(path: str | Path) -> dict:
    """A profile file (same schema as slurm-conf/profiles.yaml: `profiles:` and optional `daemons:`,
    e.g. the hunt-clean proposal of `stackproof noise hunt`), checked: every error names the file."""
    path = Path(path)
    data = read_yaml(path, "profile file")
    if not isinstance(data, dict) or not isinstance(data.get("profiles"), dict) or not data["profiles"]:
        raise InputError(f"{path}: expected a 'profiles' mapping with at least one profile")
    extra = set(data) - {"profiles", "daemons"}
    if extra:
        raise InputError(f"{path}: unknown section(s) {', '.join(sorted(extra))} (profiles, daemons)")
    daemons = data.get("daemons") or {}
    if not isinstance(daemons, dict):
        raise InputError(f"{path}: 'daemons' must be a mapping of group -> {{units, processes}}")
    for name, spec in daemons.items():
        if not isinstance(spec, dict) or set(spec) - DAEMON_KEYS or not all(
                isinstance(spec.get(k, []), list) and all(isinstance(x, str) for x in spec.get(k, []))
                for k in ("units", "processes")):
            raise InputError(f"{path}: daemon group {name!r}: expected {{units: [..], processes: [..]}}")
    check_names(path, data)
    for name, spec in data["profiles"].items():
        if not isinstance(spec, dict):
            raise InputError(f"{path}: profile {name!r} must be a mapping")
        bad = set(spec) - PROFILE_KEYS
        if bad:
            raise InputError(f"{path}: profile {name!r}: unknown key(s) {', '.join(sorted(bad))}")
        if spec.get("position", "first") not in ("first", "last"):
            raise InputError(f"{path}: profile {name!r}: position must be first or last")
        if not isinstance(spec.get("daemons") or [], list) or not all(
                isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in spec.get("irqs") or []):
            raise InputError(f"{path}: profile {name!r}: daemons must be a list, irqs a list of IRQ numbers")
    return {"profiles": data["profiles"], "daemons": daemons}


def catalog_with(profile_file: str | Path | None = None) -> dict:
    """The catalog, plus the profiles and daemon groups of a profile file (which may not redefine
    the catalog's own: a file adds, it never changes what `baseline`..`clean` mean)."""
    catalog = load_catalog()
    if not profile_file:
        return catalog
    extra = read_profile_file(profile_file)
    for section in ("profiles", "daemons"):
        clash = sorted(set(extra[section]) & set(catalog[section]))
        clash = [n for n in clash if extra[section][n] != catalog[section][n]]
        if clash:
            raise InputError(f"{profile_file}: {section} {', '.join(clash)} redefine the catalog's "
                                  f"(slurm-conf/profiles.yaml): use new names")
    merged = {**catalog, "profiles": {**catalog["profiles"], **extra["profiles"]},
              "daemons": {**catalog["daemons"], **extra["daemons"]}}
    for name, spec in extra["profiles"].items():
        unknown = [g for g in spec.get("daemons") or [] if g not in merged["daemons"]]
        if unknown:
            raise InputError(f"{profile_file}: profile {name!r} names unknown daemon group(s) "
                                  f"{', '.join(unknown)}")
    return merged


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
    irqs: list[int] = field(default_factory=list)           # IRQs to steer to the system CPUs (hunt proposals)

    @property
    def system_cpu_list(self) -> str:
        return format_list(self.system_cpus)

    @property
    def app_cpu_list(self) -> str:
        return format_list(self.app_cpus)


def plan(nt: NodeType, name: str, k: int | None = None, position: str | None = None,
         with_nvidia: bool = False, profile_file: str | Path | None = None) -> ProfilePlan:
    catalog = catalog_with(profile_file)
    profiles = catalog["profiles"]
    if name not in profiles:
        raise InputError(f"unknown profile {name!r} (known: {', '.join(profiles)})")
    spec = profiles[name]
    free = bool(spec.get("free"))
    reserve = bool(spec.get("reserve"))
    k = nt.corespec.get("cores_per_socket", 1) if k is None else k
    position = position or spec.get("position") or nt.corespec.get("position", "first")
    if not free:
        k = 0
    if k < 0:
        raise InputError(f"k must be >= 0 (got {k})")
    if free and k == 0:
        raise InputError(f"profile {name!r} needs k >= 1 system/free cores per socket")
    if k >= nt.cores_per_socket:
        raise InputError(
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
            raise InputError(f"--with-nvidia applies to the clean profile, not {name!r}")
        groups.append("nvidia")
    daemons = {}
    for g in groups:
        if g not in catalog["daemons"]:
            raise InputError(f"profile {name!r} names unknown daemon group {g!r}")
        daemons[g] = catalog["daemons"][g]
    return ProfilePlan(name=name, description=spec.get("description", ""), k=k, position=position,
                       reserve=reserve, system_cores=system_cores, system_cpus=system_cpus,
                       app_cpus=app_cpus, app_cores=app_cores, cpu_spec_list=cpu_spec, daemons=daemons,
                       irqs=list(spec.get("irqs") or []))
