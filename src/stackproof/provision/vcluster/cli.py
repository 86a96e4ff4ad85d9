"""`stackproof vcluster up|down|status|console|exec`."""
from __future__ import annotations

import json
import sys

from stackproof.provision.vcluster.core import DEFAULT_TIMEOUT, VCluster
from stackproof.provision.vcluster.nodesconf import DEFAULT_SPEC


def _cmd_up(args) -> int:
    VCluster().up(args.spec, nodes=args.nodes, profile=args.profile, image=args.image, timeout=args.timeout)
    return 0


def _cmd_down(args) -> int:
    VCluster().down()
    return 0


def _cmd_status(args) -> int:
    st = VCluster().status()
    if args.json:
        print(json.dumps(st, indent=1))
        return 0 if st["up"] else 1
    if not st["up"]:
        print("vcluster: down")
        return 1
    for name, d in st["head"].items():
        print(f"head  {name:10s} pid {d['pid']} {'running' if d['alive'] else 'DEAD'}")
    for tag, d in st.get("shares", {}).items():
        print(f"share {tag:10s} {d['path']} ({'read-only' if d['readonly'] else 'read-write'}, virtiofs, same path on the nodes)")
    for name, n in st["nodes"].items():
        print(f"node  {name:10s} {n['ip']:12s} qemu {'running' if n['qemu_alive'] else 'DEAD'}  slurm {n['slurm']}"
              f"  boot {n['boot_s']} s  console {n['console']}")
    return 0


def _cmd_console(args) -> int:
    print(VCluster().console(args.node, args.lines))
    return 0


def _cmd_exec(args) -> int:
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        print("stackproof vcluster exec: give a command after --", file=sys.stderr)
        return 2
    return VCluster().exec_cmd(cmd).returncode


def register(sub) -> None:
    p = sub.add_parser("vcluster", help="virtual cluster: QEMU nodes network-booted from our image, Slurm across them")
    vs = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = vs.add_parser("up", help="build what changed, start the head, boot the nodes, wait for slurmd")
    q.add_argument("--nodes", type=int, default=2, help="how many nodes of the description to boot (default 2)")
    q.add_argument("--image", help="image name (build/images/NAME.oci.tar; default: the description's)")
    q.add_argument("--profile", help="core-specialization profile (default: the description's, corespec)")
    q.add_argument("--spec", default=str(DEFAULT_SPEC), help="cluster description YAML")
    q.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds until every slurmd registered")
    q.set_defaults(func=_cmd_up)
    q = vs.add_parser("down", help="stop every process, remove namespace, bridge and taps")
    q.set_defaults(func=_cmd_down)
    q = vs.add_parser("status", help="head daemons, nodes, Slurm state, boot times")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=_cmd_status)
    q = vs.add_parser("console", help="a node's console log (path and last lines)")
    q.add_argument("node")
    q.add_argument("-n", "--lines", type=int, default=40)
    q.set_defaults(func=_cmd_console)
    q = vs.add_parser("exec", help="run a command on the head (Slurm clients see the virtual cluster)")
    q.add_argument("cmd", nargs="+", help="-- CMD ...")
    q.set_defaults(func=_cmd_exec)
