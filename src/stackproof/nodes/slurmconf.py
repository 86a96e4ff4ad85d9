"""Render Slurm configuration and the system side of a core-specialization profile.

`stackproof slurm render --nodetype T --profile P` writes, under an output directory laid out like
the node's root file system:

  etc/slurm/{slurm.conf,cgroup.conf,gres.conf,plugstack.conf}
  etc/stackproof/profile.env            which CPUs are system / app-free / application CPUs
  etc/systemd/system/<unit>.d/50-stackproof-corespec.conf   CPUAffinity= for each bound daemon
  etc/systemd/system.conf.d/50-stackproof-corespec.conf     PID 1 (clean profile)
  etc/default/irqbalance, etc/sysconfig/irqbalance          IRQs kept off the application CPUs
  usr/local/sbin/stackproof-corespec    the same binding for hosts without systemd (taskset/tuna),
                                        plus `check` to verify it (a static script: corespec.py)
  etc/stackproof/corespec.processes     the process names it binds, one per line (data, validated)

Same inputs give byte-identical output (no timestamps, sorted everything).

CPU ids: Slurm's CpuSpecList and gres.conf Cores= take Slurm's *abstract* ids (cores numbered
socket by socket, PUs of a core consecutive); systemd, irqbalance, taskset and profile.env take
*OS* ids. They coincide on POWER9 (Lassen) and differ on x86 with SMT (Pascal: core 0 = PUs 0,36).
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from stackproof import validate

from stackproof.nodes import corespec
from stackproof.cpulist import format_list, format_mask
from stackproof.errors import InputError, StackproofError
from stackproof.hostlist import compress, expand
from stackproof.nodes.model import VISIBLE_DEVICES_VAR, NodeType
from stackproof.nodes.nodetype import load
from stackproof.nodes.profiles import ProfilePlan, plan

DROPIN_NAME = "50-stackproof-corespec.conf"
# Memory kept for the OS (slurmd, kernel, page cache floor) out of RealMemory.
REAL_MEMORY_FRACTION = 0.95
MEM_SPEC_MB = 1024
MPIBIND_PLUGIN_SEARCH = ["/usr/lib/mpibind/mpibind_slurm.so", "/usr/lib64/mpibind/mpibind_slurm.so",
                         "/usr/local/lib/mpibind/mpibind_slurm.so", "/opt/stackproof/lib/mpibind/mpibind_slurm.so"]


@dataclass
class Site:
    """Where and how the configuration is used: a real site (FHS paths) or the local test cluster."""
    cluster_name: str
    nodes: list[str]
    controller: str = "head"
    controller_addr: str | None = None
    node_addrs: list[str] | None = None
    slurmctld_port: int = 6817
    slurmd_port: int = 6818
    slurm_user: str = "slurm"
    run_dir: Path | None = None          # test cluster: every path below this directory
    gpus: bool = False
    fake_gpus: int = 0                   # GPU gres backed by device files in run_dir/dev
    mpibind_plugin: str | None = None
    mpibind_args: str = ""               # plugstack.conf arguments: default_off, exclusive_only_off
    cgroup_plugin: str = "autodetect"    # autodetect | cgroup/v1 | cgroup/v2
    ignore_systemd: bool = False         # cgroup/v2 on a host whose PID 1 is not systemd
    mpi_default: str = "none"
    # CommunicationParameters= in slurm.conf (every reader: daemons and clients): COMM_PARAMS only
    comm_params: tuple[str, ...] = ()
    # test cluster: CommunicationParameters= read by its daemons alone (etc/slurm/daemons.conf, which
    # includes slurm.conf): clients run from this host's namespace, where the host name does not
    # resolve to the cluster's address, and NoInAddrAny would bind their listening ports there
    daemon_comm_params: tuple[str, ...] = ()
    extra: list[str] = field(default_factory=list)

    def path(self, fhs: str, cluster: str) -> str:
        return fhs if self.run_dir is None else f"{self.run_dir}/{cluster}"


# Slurm 22.05's CommunicationParameters that bind a daemon to its node's address, not to every address
# (man slurm.conf): slurmctld (NoCtldInAddrAny), every other daemon and client (NoInAddrAny), each to
# the address its host name resolves to.
COMM_PARAMS = ("NoCtldInAddrAny", "NoInAddrAny")


def gpu_type_name(model: str) -> str:
    """Slurm gres type from a GPU model: 'Tesla V100-SXM2-16GB' -> v100, 'AMD INSTINCT MI200' -> mi200."""
    m = re.search(r"\b([A-Z]{1,3}\d{2,4}[A-Z]?)\b", model.upper())
    return m.group(1).lower() if m else "gpu"


def _gpu_file(vendor: str, index: int) -> str:
    # NVIDIA: /dev/nvidiaN is minor N. AMD/Intel: render nodes in enumeration order (renderD128 + N).
    return f"/dev/nvidia{index}" if vendor == "nvidia" else f"/dev/dri/renderD{128 + index}"


_HOSTNAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*")
_IPV4 = re.compile(r"(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)")
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_SAFE_PATH = re.compile(r"/[A-Za-z0-9_.,+@%:/=-]*")
_ARGS = re.compile(r"[A-Za-z0-9_=,.:/ -]*")


def validate_site(site: Site) -> None:
    """Every value that goes into a Slurm file: one bad character (a newline above all) would add
    a directive of the caller's choosing to a file root's daemons read."""
    def bad(what, value, expected):
        raise InputError(f"{what} {value!r}: {expected}")
    if not _HOSTNAME.fullmatch(site.controller or "") or len(site.controller) > 253:
        bad("controller", site.controller, "not a valid host name")
    for n in site.nodes:
        if not _HOSTNAME.fullmatch(n) or len(n) > 253:
            bad("node name", n, "not a valid host name")
    for addr in [site.controller_addr] + list(site.node_addrs or []):
        if addr is not None and not (_IPV4.fullmatch(addr) or _HOSTNAME.fullmatch(addr)):
            bad("address", addr, "not an IPv4 address or host name")
    if site.node_addrs is not None and len(site.node_addrs) != len(site.nodes):
        bad("node addresses", site.node_addrs, f"need one per node ({len(site.nodes)})")
    for what, port in (("slurmctld port", site.slurmctld_port), ("slurmd port", site.slurmd_port)):
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            bad(what, port, "must be an integer between 1 and 65535")
    if not _NAME.fullmatch(site.cluster_name or ""):
        bad("cluster name", site.cluster_name, "letters, digits, '_', '.', '-' only (1-64)")
    if not _NAME.fullmatch(site.slurm_user or ""):
        bad("slurm user", site.slurm_user, "not a user name")
    for what, path in (("run dir", site.run_dir), ("mpibind plugin", site.mpibind_plugin)):
        if path is not None and not _SAFE_PATH.fullmatch(str(path)):
            bad(what, str(path), "must be an absolute path without spaces or control characters")
    if not _ARGS.fullmatch(site.mpibind_args or ""):
        bad("mpibind arguments", site.mpibind_args, "letters, digits, spaces and _=,.:/- only")
    if not isinstance(site.fake_gpus, int) or not 0 <= site.fake_gpus <= 64:
        bad("fake GPUs", site.fake_gpus, "between 0 and 64")
    for what, params in (("CommunicationParameters", site.comm_params),
                         ("daemons' CommunicationParameters", site.daemon_comm_params)):
        if any(p not in COMM_PARAMS for p in params):
            bad(what, ",".join(params), f"only {', '.join(COMM_PARAMS)}")
    if site.daemon_comm_params and site.run_dir is None:
        bad("daemons' CommunicationParameters", ",".join(site.daemon_comm_params), "only for a test cluster (run dir)")
    for line in site.extra:
        if any(c in line for c in "\n\r\0"):
            bad("extra line", line, "must be one line")


def render(nt: NodeType, prof: ProfilePlan, site: Site) -> dict[str, str]:
    validate_site(site)
    files: dict[str, str] = {}
    header = (f"# Rendered by stackproof for node type {nt.name!r}, profile {prof.name!r}"
              + (f" (k={prof.k}, {prof.position})" if prof.k else "") + ". Do not edit: re-render.\n")
    files["etc/slurm/slurm.conf"] = header + _slurm_conf(nt, prof, site)
    if site.daemon_comm_params:
        files["etc/slurm/daemons.conf"] = (
            header + "# The daemons' slurm.conf (slurmctld -f, slurmd -f): each binds the address its host name\n"
            "# resolves to, not every address; clients read slurm.conf alone.\n"
            f"Include {site.run_dir}/etc/slurm/slurm.conf\n"
            f"CommunicationParameters={','.join(site.daemon_comm_params)}\n")
    files["etc/slurm/cgroup.conf"] = header + _cgroup_conf(site)
    files["etc/slurm/gres.conf"] = header + _gres_conf(nt, site)
    files["etc/slurm/plugstack.conf"] = header + _plugstack_conf(site)
    files["etc/stackproof/profile.env"] = header + _profile_env(nt, prof)
    if prof.reserve:
        files.update(_systemd_dropins(prof, header))
        irq = header + _irqbalance(prof)
        files["etc/default/irqbalance"] = irq
        files["etc/sysconfig/irqbalance"] = irq
        files.update(corespec.files(prof.daemons, header))
    return dict(sorted(files.items()))


def _gres(nt: NodeType, site: Site) -> tuple[str, int] | None:
    if site.fake_gpus:
        model = nt.gpus[0].model if nt.gpus else "fake"
        return gpu_type_name(model) if nt.gpus else "fake", site.fake_gpus
    if site.gpus:
        if not nt.gpus:
            raise InputError(f"--gpus: node type {nt.name!r} has no GPUs")
        return gpu_type_name(nt.gpus[0].model), len(nt.gpus)
    return None


def _slurm_conf(nt: NodeType, prof: ProfilePlan, site: Site) -> str:
    p = site.path
    ctl = site.controller + (f"({site.controller_addr})" if site.controller_addr else "")
    lines = [
        f"ClusterName={site.cluster_name}",
        f"SlurmctldHost={ctl}",
        f"SlurmctldPort={site.slurmctld_port}",
        f"SlurmdPort={site.slurmd_port}",
        f"SlurmUser={site.slurm_user}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"StateSaveLocation={p('/var/spool/slurmctld', 'state')}",
        f"SlurmdSpoolDir={p('/var/spool/slurmd', 'spool/%n')}",
        f"SlurmctldPidFile={p('/run/slurmctld.pid', 'run/slurmctld.pid')}",
        f"SlurmdPidFile={p('/run/slurmd.pid', 'run/slurmd-%n.pid')}",
        f"SlurmctldLogFile={p('/var/log/slurm/slurmctld.log', 'log/slurmctld.log')}",
        f"SlurmdLogFile={p('/var/log/slurm/slurmd.log', 'log/slurmd-%n.log')}",
        f"PlugStackConfig={p('/etc/slurm/plugstack.conf', 'etc/slurm/plugstack.conf')}",
    ]
    if site.run_dir is not None:
        # Several slurmd on one host: per-node TmpFS, or pmix steps of one job collide (notes).
        lines += [f"TmpFS={site.run_dir}/tmpfs/%n", "MailProg=/bin/true", "KillWait=5"]
    lines += [
        "ProctrackType=proctrack/cgroup",
        "TaskPlugin=task/cgroup,task/affinity",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        f"MpiDefault={site.mpi_default}",
        "ReturnToService=2",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        # ReFrame's squeue scheduler needs finished jobs visible for a while (no accounting here).
        "MinJobAge=300",
    ]
    if site.comm_params:
        lines.append(f"CommunicationParameters={','.join(site.comm_params)}")
    if prof.reserve:
        # Without SlurmdOffSpec slurmd/slurmstepd run on the CpuSpecList CPUs, jobs never do.
        lines.append("AllowSpecResourcesUsage=yes")
    gres = _gres(nt, site)
    if gres:
        lines.append("GresTypes=gpu")
    lines += site.extra
    node = (f"CPUs={nt.num_cpus} Boards=1 SocketsPerBoard={len(nt.sockets)} "
            f"CoresPerSocket={nt.cores_per_socket} ThreadsPerCore={nt.threads_per_core} "
            f"RealMemory={int(nt.memory_mb * REAL_MEMORY_FRACTION)}")
    if prof.reserve:
        node += f" CpuSpecList={format_list(prof.cpu_spec_list)} MemSpecLimit={MEM_SPEC_MB}"
    if gres:
        node += f" Gres=gpu:{gres[0]}:{gres[1]}"
    if site.node_addrs:
        for name, addr in zip(site.nodes, site.node_addrs):
            lines.append(f"NodeName={name} NodeAddr={addr} {node} State=UNKNOWN")
    else:
        lines.append(f"NodeName={compress(site.nodes)} {node} State=UNKNOWN")
    lines.append("PartitionName=cpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    if gres:
        lines.append("PartitionName=gpu Nodes=ALL MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def _cgroup_conf(site: Site) -> str:
    lines = [f"CgroupPlugin={site.cgroup_plugin}"]
    if site.ignore_systemd:
        lines.append("IgnoreSystemd=yes")
    lines += ["ConstrainCores=yes", "ConstrainDevices=yes", "ConstrainRAMSpace=yes"]
    return "\n".join(lines) + "\n"


def _gres_conf(nt: NodeType, site: Site) -> str:
    gres = _gres(nt, site)
    if not gres:
        return "# no GPUs\n"
    nodes = compress(site.nodes)
    lines = ["AutoDetect=off"]
    if site.fake_gpus:
        lines.append(f"# fake GPUs: device files created by `stackproof cluster up --fake-gpus {site.fake_gpus}`")
        last = site.fake_gpus - 1
        files = f"{site.run_dir}/dev/nvidia[0-{last}]" if last else f"{site.run_dir}/dev/nvidia0"
        lines.append(f"NodeName={nodes} Name=gpu Type={gres[0]} File={files}")
    else:
        for g in nt.gpus:
            cores = format_list(nt.gpu_cores(g))
            lines.append(f"NodeName={nodes} Name=gpu Type={gres[0]} File={_gpu_file(g.vendor, g.index)} Cores={cores}")
    return "\n".join(lines) + "\n"


def _plugstack_conf(site: Site) -> str:
    if not site.mpibind_plugin:
        return "# mpibind SPANK plugin not installed: no default binding plugin\n"
    return f"required {site.mpibind_plugin}{' ' + site.mpibind_args if site.mpibind_args else ''}\n"


def _profile_env(nt: NodeType, prof: ProfilePlan) -> str:
    validate.name(prof.name, "profile name")
    validate.env_value(prof.position, f"profile {prof.name!r}: position")
    first_pus = ",".join(str(min(nt.core_pus(s, c))) for s, c in prof.app_cores)
    masks = ",".join("0x" + format_mask(nt.core_pus(s, c)).replace(",", "") for s, c in prof.app_cores)
    lines = [
        f"STACKPROOF_PROFILE={prof.name}",
        f"STACKPROOF_K={prof.k}",
        f"STACKPROOF_POSITION={prof.position}",
        f"STACKPROOF_RESERVED={'yes' if prof.reserve else 'no'}",
        f"STACKPROOF_SYSTEM_CPUS={prof.system_cpu_list if prof.reserve else ''}",
        f"STACKPROOF_FREE_CPUS={prof.system_cpu_list}",
        f"STACKPROOF_APP_CPUS={prof.app_cpu_list}",
        f"STACKPROOF_APP_CORES={len(prof.app_cores)}",
        f"STACKPROOF_APP_CORE_FIRST_PUS={first_pus}",
        # One task per application core, each bound to its core's PUs (srun --cpu-bind=...).
        f"STACKPROOF_SRUN_CPU_BIND=mask_cpu:{masks}",
        "MPIBIND_RESTRICT_TYPE=cpu",
        f"MPIBIND_RESTRICT={prof.app_cpu_list}",
    ]
    if nt.gpu_vendor in VISIBLE_DEVICES_VAR:
        lines.append(f"STACKPROOF_GPU_ENV={VISIBLE_DEVICES_VAR[nt.gpu_vendor]}")
    return "\n".join(lines) + "\n"


def _systemd_dropins(prof: ProfilePlan, header: str) -> dict[str, str]:
    files = {}
    affinity = prof.system_cpu_list.replace(",", " ")
    body = header + "[Service]\nCPUAffinity=" + affinity + "\n"
    for group in prof.daemons.values():
        for unit in group.get("units", []):
            validate.unit_name(unit, "daemon group unit")
            files[f"etc/systemd/system/{unit}.d/{DROPIN_NAME}"] = body
        if group.get("manager"):
            # PID 1 itself; also the default for services without their own CPUAffinity=.
            files[f"etc/systemd/system.conf.d/{DROPIN_NAME}"] = header + "[Manager]\nCPUAffinity=" + affinity + "\n"
    return files


def _irqbalance(prof: ProfilePlan) -> str:
    return ("# Keep hardware interrupts off the application CPUs: irqbalance places IRQs on the system cores.\n"
            f"IRQBALANCE_BANNED_CPULIST={prof.app_cpu_list}\n"
            "# irqbalance < 1.8 reads the mask form instead\n"
            f"IRQBALANCE_BANNED_CPUS={format_mask(prof.app_cpus)}\n")


def find_installed_mpibind_plugin(explicit: str | None) -> str | None:
    """The mpibind SPANK plugin of a site: PATH, none, or auto (search the standard install prefixes).
    (cluster.find_built_mpibind_plugin finds the one in this checkout's build tree instead.)"""
    if explicit == "none":
        return None
    if explicit and explicit != "auto":
        if not Path(explicit).is_file():
            raise StackproofError(f"mpibind plugin not found: {explicit}")
        return explicit
    return next((p for p in MPIBIND_PLUGIN_SEARCH if Path(p).is_file()), None)




def write_tree(files: dict[str, str], out: Path) -> None:
    for rel, text in files.items():
        dest = validate.inside(out, rel, "rendered file")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink():
            dest.unlink()            # re-render: never write through a link someone left here
        dest.write_text(text)
        dest.chmod(0o755 if rel.startswith("usr/local/sbin/") else 0o644)


def _cmd_render(args) -> int:
    nt = load(args.nodetype)
    prof = plan(nt, args.profile, k=args.k, position=args.position, with_nvidia=args.with_nvidia,
                profile_file=args.profile_file)
    try:
        nodes = expand(args.nodes if args.nodes is not None else f"{nt.name}1")
    except InputError as exc:
        raise InputError(f"--nodes: {exc}") from None
    site = Site(cluster_name=args.cluster_name or nt.name, nodes=nodes, controller=args.controller,
                slurmctld_port=args.slurmctld_port, slurmd_port=args.slurmd_port, gpus=args.gpus,
                mpibind_plugin=find_installed_mpibind_plugin(args.mpibind_plugin), cgroup_plugin=args.cgroup_plugin)
    files = render(nt, prof, site)
    if args.output == "-":
        for rel, text in files.items():
            sys.stdout.write(f"==> {rel} <==\n{text}")
        return 0
    out = Path(args.output)
    write_tree(files, out)
    print(f"rendered {len(files)} files for {nt.name}/{prof.name} into {out}: system CPUs "
          f"{prof.system_cpu_list or '-'}, application CPUs {prof.app_cpu_list}", file=sys.stderr)
    return 0


def port(text: str) -> int:
    """argparse type: a TCP port, 1-65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and 65535")
    return value


def register(sub) -> None:
    p = sub.add_parser("slurm", help="render Slurm configuration and core-specialization profiles")
    ssub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    r = ssub.add_parser("render", help="render slurm.conf & friends plus the profile's system side")
    r.add_argument("--nodetype", required=True, help="node type name (slurm-conf/nodetypes/) or YAML path")
    # the help names no profiles: building the parser reads no data file (a bad catalog is an error of
    # the commands that use it, in one line, not of every command)
    r.add_argument("--profile", required=True, help="a profile of slurm-conf/profiles.yaml (baseline, corespec, ...)")
    r.add_argument("--profile-file", help="a profile file adding profiles and daemon groups (e.g. a hunt proposal)")
    r.add_argument("--k", type=int, help="cores per socket for free/system cores (default: the node type's)")
    r.add_argument("--position", choices=["first", "last"], help="override the profile's position")
    r.add_argument("--with-nvidia", action="store_true", help="clean: also move nvidia* daemons (Clean+nvidia)")
    r.add_argument("--nodes", help="hostlist of nodes of this type (default: <nodetype>1)")
    r.add_argument("--gpus", action="store_true", help="declare the node type's GPUs as gres")
    r.add_argument("--cluster-name")
    r.add_argument("--controller", default="head", help="SlurmctldHost")
    r.add_argument("--slurmctld-port", type=port, default=6817)
    r.add_argument("--slurmd-port", type=port, default=6818)
    r.add_argument("--cgroup-plugin", default="autodetect", choices=["autodetect", "cgroup/v1", "cgroup/v2"])
    r.add_argument("--mpibind-plugin", default="auto", help="auto (search standard prefixes) | none | PATH")
    r.add_argument("-o", "--output", default="-", help="output directory (default: print to stdout)")
    r.set_defaults(func=_cmd_render)
