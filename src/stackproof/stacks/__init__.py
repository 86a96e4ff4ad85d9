"""Software stacks under test: the model (model.py, one YAML file per stack), the checks made before
anything runs (preflight.py, environment.py), their installation (install.py) and the benchmark
builds (benchbuild.py: recipes.py reads stacks/data/recipes.yaml, sources.py + fetch.py get the pinned
sources, appbuild.py builds them; commands.py has the install/build verbs).

  stackproof stack list                     the stacks and where their files are
  stackproof stack show NAME                the resolved description (paths expanded)
  stackproof stack check NAME... [--kind local|slurm]   ready to run? (binaries, MPI linkage, environment)
  stackproof stack install NAME...          pinned wheels / Debian packages
  stackproof stack build NAME... [--source-mirror DIR]   the benchmarks, per stack

May import: basics, nodes/, cluster/, spack/ (Spack stacks use Spack's installs).
"""
from __future__ import annotations

import json
from dataclasses import asdict

from stackproof.stacks.model import Stack, StackError, load_stack, stack_names, stacks_root, view_var

__all__ = ["Stack", "StackError", "load_stack", "stack_names", "stacks_root", "view_var", "register"]


def _list(args) -> int:
    for name in stack_names():
        try:
            st = load_stack(name)
            print(f"{name:16} {st.description}  ({st.file})")
        except StackError as exc:
            print(f"{name:16} BROKEN: {exc}")
    return 0


def _show(args) -> int:
    data = asdict(load_stack(args.name))
    print(json.dumps(data, indent=2, default=str))
    return 0


def _check(args) -> int:
    from stackproof.stacks.preflight import ensure_ready
    for line in ensure_ready(args.names, args.kind, require=args.require):
        print(line)
    return 0


def register(sub) -> None:
    p = sub.add_parser("stack", help="software stacks under test: list, show, check (install, build)")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    v = verbs.add_parser("list", help="the stacks and their files")
    v.set_defaults(func=_list)
    v = verbs.add_parser("show", help="a stack's resolved description as JSON")
    v.add_argument("name")
    v.set_defaults(func=_show)
    v = verbs.add_parser("check", help="is a stack ready to run (before ReFrame)?")
    v.add_argument("names", nargs="+", metavar="NAME")
    v.add_argument("--kind", choices=["local", "slurm"], default="local", help="system kind to launch on")
    v.add_argument("--require", default="probe,hello,fwq,netpipe",
                   help="benchmarks that must exist (comma-separated; default %(default)s)")
    v.set_defaults(func=_check)
    from stackproof.stacks.commands import register_verbs
    register_verbs(verbs)
