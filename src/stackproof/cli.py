"""`stackproof` command line: one subcommand per concern, each registered by its own module."""
import argparse
import importlib
import sys

from . import __version__
from .errors import StackproofError

# subcommand -> module providing register(subparsers) ; each module owns its arguments.
COMMANDS = {
    "nodetype": "stackproof.nodetype",
    "slurm": "stackproof.slurmconf",
    "cluster": "stackproof.cluster",
    "noise": "stackproof.noise.cli",
    "bench": "stackproof.benchparse",
    "report": "stackproof.report",
    "images": "stackproof.images",
    "spack-check": "stackproof.spackcheck",
    "stack": "stackproof.stacks",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stackproof",
        description="TOSS-style stack harness: node types, Slurm profiles, test cluster, noise, reports")
    parser.add_argument("--version", action="version", version=f"stackproof {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in COMMANDS.items():
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:      # a real import error inside an existing module: show it
                raise
            continue                    # component not built into this checkout
        mod.register(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except StackproofError as exc:
        print(f"stackproof {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stackproof: interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
