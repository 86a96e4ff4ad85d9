"""`stackproof` command line: `stackproof <noun> <verb>`, one noun per concern, each registered by its
own module. One error handler for every command: bad input (InputError: a file or value that is not
what it may be) is one line on stderr and exit 2, like a usage error; any other problem the user can
fix (StackproofError, a file that cannot be read or written) is one line and exit 1; anything else is
a bug in stackproof and prints its traceback with a request to report it (exit 70)."""
import argparse
import importlib
import sys
import traceback

from stackproof import __version__
from stackproof.errors import InputError, StackproofError

# noun -> module providing register(subparsers); each module owns its arguments.
COMMANDS = {
    "nodetype": "stackproof.nodes.cli",
    "slurm": "stackproof.nodes.slurmconf",
    "cluster": "stackproof.cluster",
    "noise": "stackproof.noise.cli",
    "bench": "stackproof.benchparse",
    "report": "stackproof.report",
    "images": "stackproof.provision.images",
    "vcluster": "stackproof.provision.vcluster.cli",
    "spack": "stackproof.spack.cli",
    "stack": "stackproof.stacks",
}
# Programs with their own argument parser, reachable as `stackproof <noun> <verb> [their options]`
# (their `python -m` entry points stay, for scripts that call them).
PROGRAMS = {
    ("acceptance", "run"): ("stackproof.acceptance.driver", "bring up the test cluster, run the acceptance suite, "
                            "write the report"),
    ("noise", "experiment"): ("stackproof.acceptance.tableiv", "Table IV as a verdict: the core-specialization "
                              "profiles against a noise daemon on the test cluster, repeated, with intervals"),
    ("noise", "bench"): ("stackproof.noise.bench", "benchmark the noise analysis (build/fwq/bench.json)"),
}
# Commands renamed to `<noun> <verb>`: the old name is an error naming the new one.
RENAMED = {"spack-check": "stackproof spack lint|check|lock|mirror|install (was: spack-check [--spack|"
                          "--update-lock|--mirror DIR|--install NAME])"}
EX_USAGE = 2        # argparse's status for a bad command line; bad input files get the same
EX_SOFTWARE = 70
BUG = "this is a bug in stackproof: please report it with the traceback above"


def _unavailable(name: str, module: str, exc: BaseException):
    def fail(args) -> int:
        raise StackproofError(f"`{name}` is unavailable: importing {module} failed: "
                              f"{type(exc).__name__}: {exc}")
    return fail


def _subparsers(parser: argparse.ArgumentParser):
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _program(module: str):
    def run(args) -> int:
        mod = importlib.import_module(module)
        argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        return mod.main(argv) if mod.main.__code__.co_argcount else _main_noargs(mod, argv)
    return run


def _main_noargs(mod, argv) -> int:
    if argv:
        raise StackproofError(f"{mod.__name__} takes no arguments (got {' '.join(argv)})")
    return mod.main()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stackproof",
        description="TOSS-style stack harness: node types, Slurm profiles, test cluster, noise, reports")
    parser.add_argument("--version", action="version", version=f"stackproof {__version__}")
    sub = parser.add_subparsers(dest="_command", required=True, metavar="COMMAND")
    for name, module in COMMANDS.items():
        try:
            mod = importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any import failure makes the command an error, not absent
            p = sub.add_parser(name, help=f"(unavailable: {type(exc).__name__}: {exc})")
            p.add_argument("rest", nargs=argparse.REMAINDER)
            p.set_defaults(func=_unavailable(name, module, exc))
            continue
        mod.register(sub)
    for (noun, verb), (module, help_text) in PROGRAMS.items():
        if noun not in sub.choices:
            noun_parser = sub.add_parser(noun, help=help_text)
            noun_parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        verbs = _subparsers(sub.choices[noun])
        p = verbs.add_parser(verb, help=help_text, add_help=False)
        p.add_argument("argv", nargs=argparse.REMAINDER, help="the program's own options (--help lists them)")
        p.set_defaults(func=_program(module))
    return parser


def _where(args) -> str:
    words = [getattr(args, "_command", None), getattr(args, "action", None)]
    return " ".join(["stackproof"] + [w for w in words if isinstance(w, str) and w])


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in RENAMED:
        print(f"stackproof: error: `{argv[0]}` is now `{RENAMED[argv[0]]}`", file=sys.stderr)
        return 2
    where = "stackproof"
    try:
        if tuple(argv[:2]) in PROGRAMS:
            # The program parses its own options (argparse's REMAINDER would take some of them for ours).
            args = argparse.Namespace(_command=argv[0], action=argv[1], argv=argv[2:],
                                      func=_program(PROGRAMS[tuple(argv[:2])][0]))
        else:
            # inside the handler: a data file a module reads while registering its arguments is an
            # error in one line like any other
            args = build_parser().parse_args(argv)
        where = _where(args)
        rc = args.func(args)
    except InputError as exc:
        one_line = " ".join(str(exc).split("\n"))  # a value quoted from the file never adds a line
        print(f"{where}: error: {one_line}", file=sys.stderr)
        return EX_USAGE
    except StackproofError as exc:
        print(f"{where}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{where}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        # A file or program the user named: missing, unreadable, unwritable.
        target = exc.filename if exc.filename is not None else ""
        print(f"{where}: error: {target}{': ' if target else ''}{exc.strerror or exc}", file=sys.stderr)
        return 1
    except Exception:  # noqa: BLE001 - the one place that turns a bug into a report request
        traceback.print_exc()
        print(f"{where}: internal error: {BUG}", file=sys.stderr)
        return EX_SOFTWARE
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
