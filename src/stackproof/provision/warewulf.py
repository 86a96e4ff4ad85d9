"""Warewulf: nodes.conf tags from node types, and what our site overlays must render.

`stackproof images warewulf-nodes` turns a small cluster description (images/warewulf/cluster.yaml:
which node type + core-specialization profile each Warewulf profile provisions, and which nodes use
it) into a Warewulf 4.6+ nodes.conf. Every hardware fact in the profile tags is taken from what
`stackproof slurm render` writes for that node type and profile (the NodeName line, gres.conf, the
systemd drop-ins and irqbalance files), so slurm.conf, Warewulf tags and ReFrame partitions all come
from the one node-type YAML. The site overlays in images/warewulf/overlays turn the tags back into
those files on the nodes; `expected_renders` says what they must render (the golden files that
wwctl's renders are tested against, and the renderer `stackproof vcluster` uses without wwctl).
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from stackproof.cpulist import format_list
from stackproof.errors import StackproofError
from stackproof.yamlfile import read_yaml
from stackproof.hostlist import expand
from stackproof.nodes.nodetype import load as load_nodetype
from stackproof.paths import REPO
from stackproof.nodes.profiles import plan
from stackproof.nodes.slurmconf import DROPIN_NAME, Site, render

IMAGES_DIR = REPO / "images"
DEFAULT_SPEC = IMAGES_DIR / "warewulf" / "cluster.yaml"
# Where install-stack.sh puts the mpibind SPANK plugin in every image (also in slurmconf's search list).
IMAGE_MPIBIND_PLUGIN = "/opt/stackproof/lib/mpibind/mpibind_slurm.so"

# The NodeName= fields of a stackproof slurm.conf node line that become tags (tag name = lower case).
NODE_LINE_TAGS = {"CPUs": "cpus", "SocketsPerBoard": "sockets", "CoresPerSocket": "cores_per_socket",
                  "ThreadsPerCore": "threads_per_core", "RealMemory": "real_memory",
                  "CpuSpecList": "cpu_spec_list", "MemSpecLimit": "mem_spec_limit", "Gres": "gres"}

# The default Warewulf profile (upstream etc/nodes.conf of v4.7.0, trimmed to what our images use).
DEFAULT_PROFILE = {
    "comment": "This profile is automatically included for each node",
    "runtime overlay": ["hosts", "ssh.authorized_keys"],
    "system overlay": ["wwinit", "wwclient", "hosts", "fstab", "hostname", "ssh.host_keys", "issue",
                       "resolv", "udev.netname", "systemd.netname", "ifcfg", "ifupdown", "NetworkManager"],
    "kernel": {"args": ["quiet", "crashkernel=no", "net.ifnames=1"]},
    "init": "/sbin/init",
    "root": "initramfs",
    "ipxe template": "default",
}


# ---- cluster description -------------------------------------------------------------------------

@dataclass
class ProfileSpec:
    name: str
    nodetype: str
    profile: str
    gpus: bool = False
    image: str | None = None
    k: int | None = None


@dataclass
class ClusterSpec:
    path: Path
    site: dict
    profiles: dict[str, ProfileSpec]
    nodes: list[tuple[str, str, str]] = field(default_factory=list)   # (name, profile, ipaddr)
    netmask: str = "255.255.255.0"


def load_spec(path: str | Path = DEFAULT_SPEC) -> ClusterSpec:
    path = Path(path)
    data = read_yaml(path, "cluster description")
    if not isinstance(data, dict) or not isinstance(data.get("profiles"), dict):
        raise StackproofError(f"{path}: expected a mapping with 'site', 'profiles' and 'nodes'")
    site = data.get("site") or {}
    for key in ("cluster_name", "slurmctld_host"):
        if not site.get(key):
            raise StackproofError(f"{path}: site.{key} is required")
    profiles = {}
    for name, p in data["profiles"].items():
        if not isinstance(p, dict) or "nodetype" not in p or "profile" not in p:
            raise StackproofError(f"{path}: profile {name!r} needs 'nodetype' and 'profile'")
        unknown = set(p) - {"nodetype", "profile", "gpus", "image", "k"}
        if unknown:
            raise StackproofError(f"{path}: profile {name!r}: unknown keys {sorted(unknown)}")
        profiles[name] = ProfileSpec(name, str(p["nodetype"]), str(p["profile"]), bool(p.get("gpus")),
                                     p.get("image"), p.get("k"))
    nodes = []
    for hostlist, n in (data.get("nodes") or {}).items():
        if not isinstance(n, dict) or n.get("profile") not in profiles:
            raise StackproofError(f"{path}: nodes {hostlist!r}: 'profile' must be one of {sorted(profiles)}")
        try:
            first = ipaddress.IPv4Address(str(n.get("ipaddr")))
        except ValueError:
            raise StackproofError(f"{path}: nodes {hostlist!r}: 'ipaddr' must be an IPv4 address "
                                  f"(the first node's; the others count up)") from None
        for i, name in enumerate(expand(hostlist)):
            nodes.append((name, n["profile"], str(first + i)))
    names = [n[0] for n in nodes]
    if len(set(names)) != len(names):
        raise StackproofError(f"{path}: a node is listed twice")
    return ClusterSpec(path, site, profiles, nodes, str(data.get("netmask", "255.255.255.0")))


# ---- tags from the stackproof render ---------------------------------------------------------------

def comm_params(spec: ClusterSpec) -> tuple[str, ...]:
    """site.comm_params (e.g. NoCtldInAddrAny,NoInAddrAny: every daemon binds its node's address),
    checked by slurmconf.validate_site like every value of slurm.conf."""
    return tuple(p.strip() for p in str(spec.site.get("comm_params") or "").split(",") if p.strip())


def _site_for(spec: ClusterSpec, p: ProfileSpec, nodes: list[str], addrs: list[str] | None) -> Site:
    return Site(cluster_name=spec.site["cluster_name"], nodes=nodes, controller=spec.site["slurmctld_host"],
                node_addrs=addrs, gpus=p.gpus,
                mpibind_plugin=spec.site.get("mpibind_plugin", IMAGE_MPIBIND_PLUGIN) or None,
                cgroup_plugin=spec.site.get("cgroup_plugin", "autodetect"), comm_params=comm_params(spec))


def stackproof_render(spec: ClusterSpec, p: ProfileSpec, nodes: list[str],
                      addrs: list[str] | None = None) -> dict[str, str]:
    """What `stackproof slurm render` writes for this profile's node type and profile."""
    nt = load_nodetype(p.nodetype)
    return render(nt, plan(nt, p.profile, k=p.k), _site_for(spec, p, nodes, addrs))


def node_line_fields(slurm_conf: str) -> dict[str, str]:
    line = next((ln for ln in slurm_conf.splitlines() if ln.startswith("NodeName=")), None)
    if line is None:
        raise StackproofError("stackproof render produced no NodeName line")
    return dict(kv.split("=", 1) for kv in line.split())


def profile_tags(spec: ClusterSpec, p: ProfileSpec) -> dict[str, str]:
    files = stackproof_render(spec, p, ["x1"])
    fields = node_line_fields(files["etc/slurm/slurm.conf"])
    # a node type given as a path (images/vcluster/nodetype.yaml) is named as its YAML names it
    tags = {"nodetype": load_nodetype(p.nodetype).name, "stackproof_profile": p.profile,
            "slurm_cluster": spec.site["cluster_name"], "slurmctld_host": spec.site["slurmctld_host"]}
    if spec.site.get("configless"):
        tags["slurm_configless"] = "yes"
    plugin = spec.site.get("mpibind_plugin", IMAGE_MPIBIND_PLUGIN)
    if plugin:
        tags["mpibind_plugin"] = plugin
    if spec.site.get("cgroup_plugin", "autodetect") != "autodetect":
        tags["cgroup_plugin"] = spec.site["cgroup_plugin"]
    if comm_params(spec):
        tags["slurm_comm_params"] = ",".join(comm_params(spec))
    if fields.get("Boards") != "1":
        raise StackproofError(f"node line with Boards={fields.get('Boards')}: the overlay assumes 1")
    for key, tag in NODE_LINE_TAGS.items():
        if key in fields:
            tags[tag] = fields[key]
    gres_lines = [ln for ln in files["etc/slurm/gres.conf"].splitlines() if ln.startswith("NodeName=")]
    if gres_lines:
        gres = [dict(kv.split("=", 1) for kv in ln.split()) for ln in gres_lines]
        tags["gpu_type"] = gres[0]["Type"]
        tags["gpu_files"] = ",".join(g["File"] for g in gres)
        tags["gpu_cores"] = ";".join(g["Cores"] for g in gres)   # core lists contain commas
    units = sorted(rel.split("/")[3][:-2] for rel in files
                   if rel.startswith("etc/systemd/system/") and rel.endswith(".d/" + DROPIN_NAME))
    if units:
        body = files[f"etc/systemd/system/{units[0]}.d/{DROPIN_NAME}"]
        # CPUAffinity= takes a space-separated list; the tag keeps the usual comma form
        tags["corespec_cpus"] = re.search(r"^CPUAffinity=(.*)$", body, re.M).group(1).replace(" ", ",")
        tags["corespec_units"] = " ".join(units)
        if f"etc/systemd/system.conf.d/{DROPIN_NAME}" in files:
            tags["corespec_manager"] = "yes"
    if "etc/default/irqbalance" in files:
        irq = dict(ln.split("=", 1) for ln in files["etc/default/irqbalance"].splitlines()
                   if ln and not ln.startswith("#"))
        tags["irqbalance_banned_cpulist"] = irq["IRQBALANCE_BANNED_CPULIST"]
        tags["irqbalance_banned_cpus"] = irq["IRQBALANCE_BANNED_CPUS"]
    return dict(sorted(tags.items()))


def kernel_args(p: ProfileSpec) -> list[str]:
    """Reserved profiles keep device interrupts on the system cores from boot on (irqbalance takes
    over once it runs); the other profiles leave the kernel alone."""
    nt = load_nodetype(p.nodetype)
    pl = plan(nt, p.profile, k=p.k)
    return [f"irqaffinity={format_list(pl.system_cpus)}"] if pl.reserve else []


def nodes_conf(spec: ClusterSpec, default_profile: bool = True) -> dict:
    """default_profile=False leaves out Warewulf's default profile (and its distribution overlays):
    the overlays' own test inputs render our site overlays only."""
    profiles = {"default": DEFAULT_PROFILE} if default_profile else {}
    for p in spec.profiles.values():
        nt = load_nodetype(p.nodetype)
        entry = {"comment": f"node type {nt.name}, core-specialization profile {p.profile}"
                            + (" with GPUs" if p.gpus else "") + ": generated by `stackproof images warewulf-nodes`"}
        if p.image:
            entry["image name"] = p.image
        entry["system overlay"] = ["munge", "slurm", "corespec"]
        args = kernel_args(p)
        if args:
            entry["kernel"] = {"args": args}
        entry["tags"] = profile_tags(spec, p)
        if nt.arch not in ("x86_64", "unknown"):
            entry["comment"] += f" ({nt.arch})"
        profiles[p.name] = entry
    nodes = {}
    for name, prof, addr in spec.nodes:
        nodes[name] = {"profiles": (["default"] if default_profile else []) + [prof],
                       "network devices": {"default": {"device": "eth0", "ipaddr": addr,
                                                       "netmask": spec.netmask}}}
    return {"nodeprofiles": profiles, "nodes": nodes}


def nodes_conf_text(spec: ClusterSpec, default_profile: bool = True) -> str:
    flag = "" if default_profile else " --no-default-profile"
    header = (f"# Warewulf 4.6+ nodes.conf generated by `stackproof images warewulf-nodes{flag} --spec "
              f"{_rel(spec.path)}`.\n# Tags carry the node-type facts for the slurm and corespec "
              f"overlays. Regenerate instead of editing.\n")
    return header + yaml.safe_dump(nodes_conf(spec, default_profile), sort_keys=False, width=1000)


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


# ---- expected overlay output -------------------------------------------------------------------------

def _content_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def expected_renders(spec: ClusterSpec) -> dict[str, dict[str, str]]:
    """node -> {overlay path -> text} that the slurm and corespec overlays must render, assembled from
    `stackproof slurm render` of each node's type and profile (comments dropped: the only lines that
    may differ)."""
    by_profile: dict[str, list[tuple[str, str]]] = {}
    for name, prof, addr in spec.nodes:
        by_profile.setdefault(prof, []).append((name, addr))
    renders = {prof: stackproof_render(spec, spec.profiles[prof], [n for n, _ in members], [a for _, a in members])
               for prof, members in by_profile.items()}
    preamble, node_lines, gpu_nodes = [], [], []
    ordered = sorted(spec.nodes)        # Warewulf's .AllNodes is sorted by node name
    for name, prof, _ in ordered:
        lines = _content_lines(renders[prof]["etc/slurm/slurm.conf"])
        head = lines[:next(i for i, x in enumerate(lines) if x.startswith("NodeName="))]
        for i, ln in enumerate(head):   # merge, keeping each render's order (AllowSpec... before GresTypes)
            if ln not in preamble:
                at = preamble.index(head[i - 1]) + 1 if i and head[i - 1] in preamble else len(preamble)
                preamble.insert(at, ln)
        node_lines += [ln for ln in lines if ln.startswith(f"NodeName={name} ")]
        if spec.profiles[prof].gpus:
            gpu_nodes.append(name)
    partitions = ["PartitionName=cpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP"]
    if gpu_nodes:
        members = "ALL" if len(gpu_nodes) == len(spec.nodes) else ",".join(gpu_nodes)
        partitions.append(f"PartitionName=gpu Nodes={members} MaxTime=INFINITE State=UP")
    slurm_conf = "\n".join(preamble + node_lines + partitions) + "\n"

    gres = []
    for name, prof, _ in ordered:
        if spec.profiles[prof].gpus:
            single = stackproof_render(spec, spec.profiles[prof], [name])["etc/slurm/gres.conf"]
            gres += [ln for ln in _content_lines(single) if ln.startswith("NodeName=")]
    gres_conf = "\n".join(["AutoDetect=off"] + gres) + "\n" if gres else ""

    out = {}
    for name, prof, _ in spec.nodes:
        files = renders[prof]
        node = {"etc/slurm/slurm.conf": slurm_conf, "etc/slurm/gres.conf": gres_conf}
        for rel in ("etc/slurm/cgroup.conf", "etc/slurm/plugstack.conf"):
            node[rel] = "\n".join(_content_lines(files[rel])) + "\n" if _content_lines(files[rel]) else ""
        for rel, text in files.items():
            if rel.startswith(("etc/systemd/", "etc/default/irqbalance", "etc/sysconfig/irqbalance")):
                node[rel] = "\n".join(_content_lines(text)) + "\n"
        out[name] = dict(sorted(node.items()))
    return out


OVERLAY_FILES = {"slurm": ("etc/slurm/",),
                 "corespec": ("etc/systemd/", "etc/default/irqbalance", "etc/sysconfig/irqbalance")}


def write_expected(spec: ClusterSpec, out: Path, overlay: str) -> int:
    count = 0
    for node, files in expected_renders(spec).items():
        for rel, text in files.items():
            if not rel.startswith(OVERLAY_FILES[overlay]):
                continue
            dest = out / node / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
            count += 1
    return count
