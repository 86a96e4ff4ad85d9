"""`stackproof cluster up|down|status|exec|env`."""
from __future__ import annotations

import argparse
import json
import os
import shlex
from pathlib import Path

from stackproof.errors import InputError, StackproofError
from stackproof.nodes.profiles import profile_names, read_profile_file
from stackproof.cluster.core import Cluster
from stackproof.cluster.state import DEFAULT_RUN_DIRS, Settings


def find_built_mpibind_plugin() -> str | None:
    """The mpibind SPANK plugin from this checkout's build (or STACKPROOF_MPIBIND_PLUGIN), if built.
    (slurmconf.find_installed_mpibind_plugin searches a site's install prefixes instead.)"""
    from stackproof.paths import REPO
    env = os.environ.get("STACKPROOF_MPIBIND_PLUGIN")
    if env:
        if env == "none":
            return None
        if not Path(env).is_file():
            raise StackproofError(f"STACKPROOF_MPIBIND_PLUGIN={env}: no such file")
        return env
    for cand in sorted(REPO.glob("build/mpibind/**/mpibind_slurm.so")):
        return str(cand)
    return None


def _parse_ports(text: str) -> tuple[int, int]:
    try:
        a, b = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("takes SLURMCTLD,SLURMD (e.g. 17817,17818)") from None
    if not (1 <= a <= 65535 and 1 <= b <= 65535) or a == b:
        raise argparse.ArgumentTypeError(f"{text!r}: two different ports between 1 and 65535")
    return a, b


def settings_from_args(args, current: dict | None = None) -> Settings:
    """Settings for `up` from its command line (settings_with)."""
    return settings_with(current, **{k: getattr(args, k, None) for k in _OPTIONS})


_OPTIONS = ("profile", "profile_file", "k", "nodes", "fake_gpus", "ports", "mpibind", "mpibind_args", "noise_daemon")


def settings_with(current: dict | None = None, *, profile=None, profile_file=None, k=None, nodes=None,
                  fake_gpus=None, ports=None, mpibind=None, mpibind_args=None, noise_daemon=None) -> Settings:
    """Settings for `up`: the options given (not None) win; the others keep the running cluster's
    values `current` (so `up --profile corespec` switches the profile of a 3-node cluster with fake
    GPUs and leaves the rest alone), or take the defaults when nothing runs. noise_daemon "none": none."""
    base = Settings()
    if current:
        try:
            base = Settings(**{**current, "ports": tuple(current["ports"])})
        except (TypeError, KeyError, ValueError):
            base = Settings()
    if mpibind is None:
        plugin = base.mpibind_plugin if current else find_built_mpibind_plugin()
    elif mpibind == "off":
        plugin = None
    else:
        plugin = find_built_mpibind_plugin()
        if mpibind == "on" and plugin is None:
            raise StackproofError("--mpibind on: the mpibind SPANK plugin is not built (make build) "
                                  "and STACKPROOF_MPIBIND_PLUGIN is not set")

    def pick(value, inherited):
        return inherited if value is None else value
    # k belongs to the profile: a new profile without --k takes the node type's default.
    k = k if k is not None else (base.k if profile is None else None)
    profile, profile_file = _profile_and_file(profile, profile_file, base)
    return Settings(profile=profile, profile_file=profile_file, k=k, nodes=pick(nodes, base.nodes),
                    fake_gpus=pick(fake_gpus, base.fake_gpus), ports=pick(ports, base.ports),
                    mpibind_plugin=plugin, mpibind_args=pick(mpibind_args, base.mpibind_args),
                    noise_daemon="" if noise_daemon == "none" else pick(noise_daemon, base.noise_daemon))


def _profile_and_file(profile, pfile, base: Settings) -> tuple[str, str]:
    """--profile-file FILE adds FILE's profiles (checked here, before anything is stopped); without
    --profile it selects the file's only profile. A catalog --profile alone drops an inherited file."""
    if pfile is None:
        return (base.profile, base.profile_file) if profile is None else (
            profile, base.profile_file if profile not in profile_names() else "")
    path = os.path.abspath(pfile)
    names = list(read_profile_file(path)["profiles"])
    if profile is None and len(names) != 1:
        raise InputError(f"--profile-file {pfile}: it has {len(names)} profiles ({', '.join(names)}): "
                         "choose one with --profile")
    return profile or names[0], path


def _cmd_up(args) -> int:
    c = Cluster(args.run_dir)
    st = c.load_state()
    c.up(settings_from_args(args, st.settings if st else None))
    return 0


def _cmd_down(args) -> int:
    Cluster(args.run_dir).down()
    return 0


def _cmd_status(args) -> int:
    s = Cluster(args.run_dir).status()
    if args.json:
        print(json.dumps(s, indent=1, sort_keys=True))
    elif not s["up"]:
        print(f"down (run dir {s['run_dir']})")
    elif s.get("corrupt"):
        print(f"run dir {s['run_dir']}: state unreadable ({s['corrupt']}); daemons still running: "
              f"{' '.join(str(d['pid']) for d in s['daemons'].values()) or 'none'}; `stackproof cluster down` "
              "removes them")
    else:
        print(f"run dir {s['run_dir']}  profile {s['settings']['profile']}  nodes {','.join(s['nodes'])}")
        for name, d in s["daemons"].items():
            print(f"  {name:12s} pid {d['pid']!s:>7s}  {'running' if d['alive'] else 'DEAD'}")
        print(f"  system CPUs {s['system_cpus'] or '-'}  application CPUs {s['app_cpus']}")
        print(f"  export SLURM_CONF={s['slurm_conf']}")
    if not s["up"]:
        return 3
    return 0 if s["healthy"] else 1


def _cmd_exec(args) -> int:
    cmd = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    if not cmd:
        raise StackproofError("exec: no command given (stackproof cluster exec -- CMD ...)")
    return Cluster(args.run_dir).exec_cmd(cmd, node=args.node).returncode


def _cmd_env(args) -> int:
    """Shell exports for Slurm clients and ReFrame (`eval "$(stackproof cluster env)"`); an error
    with the command that starts a cluster when none is up."""
    c = Cluster(args.run_dir)
    st = c.load_state()
    if st is None:
        raise StackproofError(f"no test cluster is up (run dir {c.root}): start one with "
                              "`stackproof cluster up [--nodes N] [--profile P]`")
    for name, value in cluster_exports(c, st).items():
        print(f"export {name}={shlex.quote(value)}")
    return 0


def cluster_exports(c: Cluster, st) -> dict[str, str]:
    """What a shell needs to use the running cluster: its Slurm clients' configuration, where its
    state lives (ReFrame's `testcluster` reads node count, GPUs and profile from there), ReFrame's
    system, and what the stacks need to run as root."""
    return {"SLURM_CONF": str(c.conf), "STACKPROOF_RUN_DIR": str(c.root),
            "STACKPROOF_CLUSTER_NODES": str(len(st.node_names)),
            "STACKPROOF_CLUSTER_PROFILE": str(st.settings.get("profile", "baseline")),
            "RFM_SYSTEM": "testcluster",
            "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def _int_in(lo: int, hi: int):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{v} is not between {lo} and {hi}")
        return v
    return parse


def register(sub) -> None:
    p = sub.add_parser("cluster", help="local Slurm test cluster (real munged/slurmctld/slurmd)")
    p.add_argument("--run-dir", type=Path, default=None,
                   help=f"state directory (default $STACKPROOF_RUN_DIR or {DEFAULT_RUN_DIRS[0]}; private, 0700)")
    csub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    u = csub.add_parser("up", help="start (or reconfigure, or repair) the cluster; idempotent")
    u.epilog = "Options not given keep the running cluster's values (defaults when none runs)."
    u.add_argument("--profile", help="a profile of slurm-conf/profiles.yaml (default baseline)")
    u.add_argument("--profile-file", metavar="FILE",
                   help="add the profiles of FILE (profiles.yaml schema, e.g. a noise hunt's "
                        "proposal/profiles.yaml); selects its only profile unless --profile is given")
    u.add_argument("--k", type=_int_in(0, 4096), help="system/free cores per socket (default: the node type's)")
    u.add_argument("--nodes", type=int, help="emulated nodes, each in its own namespaces (default 1)")
    u.add_argument("--fake-gpus", type=int, help="GPU gres per node backed by device files (default 0)")
    u.add_argument("--ports", type=_parse_ports, help="SLURMCTLD,SLURMD ports (default 17817,17818)")
    u.add_argument("--mpibind", choices=["auto", "on", "off"],
                   help="load the mpibind SPANK plugin from the build (default auto: when built)")
    u.add_argument("--mpibind-args", help="plugstack.conf arguments, e.g. default_off")
    u.add_argument("--noise-daemon", metavar="FREQHz-DURATION|none",
                   help="run a daemon-like noise source on the node (e.g. 10Hz-2500us), bound like "
                        "the profile's daemons")
    u.set_defaults(func=_cmd_up)
    d = csub.add_parser("down", help="cancel jobs, stop every daemon, remove namespaces, cgroups and the key")
    d.set_defaults(func=_cmd_down)
    s = csub.add_parser("status", help="daemon health (exit 1 if one is dead or the state is corrupt, 3 if down)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_cmd_status)
    e = csub.add_parser("exec", help="run a command where Slurm clients reach the controller")
    e.add_argument("--node", help="run inside that node's namespaces instead")
    e.add_argument("cmd", nargs=argparse.REMAINDER)
    e.set_defaults(func=_cmd_exec)
    v = csub.add_parser("env", help='print shell exports for Slurm clients and ReFrame: eval "$(stackproof cluster env)"')
    v.set_defaults(func=_cmd_env)
