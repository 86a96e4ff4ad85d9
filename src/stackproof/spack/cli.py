"""`stackproof spack lint|check|lock|mirror|install|env`: the Spack environments of spack-envs/.

  lint     consistency of pins, environments, recipes and committed locks; no Spack needed (CI)
  check    lint, then with $SPACK_ROOT: spack audit, offline concretization of every environment
           compared with its committed lock, and with each site packages.yaml
  lock     concretize every environment (isolated scopes) and rewrite spack-envs/<env>/spack.lock
  mirror   write the project's release tarball (and --add FILE sources) into a Spack source mirror at DIR
  install  spack install environment NAME from its committed lock, offline, with the site's scope
  env      shell exports: the pinned Spack on PATH with the project's scopes (ReFrame's Spack builds);
           --site NAME: spack-envs/site/NAME/packages.yaml as the system scope
"""
import argparse
import os
import sys
from pathlib import Path

from stackproof.errors import StackproofError
from stackproof.spack.check import consistency_check
from stackproof.spack.pins import ENVS_DIR, load_pins

NOUN = "spack"


def say(message, err=False):
    print(f"stackproof spack: {message}", file=sys.stderr if err else sys.stdout, flush=True)


def _lint(args, pins, check_locks=True) -> None:
    envs_dir = Path(args.envs_dir)
    names = list(getattr(args, "env", None) or [])
    for e in names + ([args.name] if getattr(args, "name", None) else []):
        if e not in pins["environments"]:
            raise StackproofError(f"unknown environment '{e}' (known: {', '.join(pins['environments'])})")
    errors, notes = consistency_check(envs_dir, names or None, check_locks=check_locks)
    for n in notes:
        say(n)
    for e in errors:
        say(f"ERROR: {e}", err=True)
    if errors:
        raise StackproofError(f"consistency check failed: {len(errors)} error(s) in {envs_dir}")
    locks = "lockfiles" if check_locks else "lockfiles not checked (being rewritten or not needed)"
    say(f"consistent: pins, {len(names or pins['environments'])} environments, recipes, {locks}")


def _spack(args, pins):
    """The pinned Spack at $SPACK_ROOT; None (after saying why) when it is absent and the caller
    passed --skip-missing, which only `check` offers (make test runs it without Spack)."""
    if not os.environ.get("SPACK_ROOT"):
        msg = (f"Spack checks SKIPPED: set SPACK_ROOT to a Spack v{pins['spack']['version']} checkout "
               f"(and SPACK_PACKAGES_ROOT to spack-packages {pins['spack_packages']['tag']}); see docs/spack.md")
        if getattr(args, "skip_missing", False):
            say(msg)
            return None
        raise StackproofError(msg)
    from stackproof.spack.driver import open_pinned
    return open_pinned(pins, args.workdir, offline=not args.allow_network)


def cmd_lint(args) -> int:
    _lint(args, load_pins(args.envs_dir))
    return 0


def cmd_check(args) -> int:
    pins = load_pins(args.envs_dir)
    _lint(args, pins)
    spack = _spack(args, pins)
    if spack is None:
        return 0
    from stackproof.spack.lock import concretize_all
    concretize_all(spack, args.envs_dir, pins, args.env, audit=True, sites=args.site)
    return 0


def cmd_lock(args) -> int:
    pins = load_pins(args.envs_dir)
    _lint(args, pins, check_locks=False)
    from stackproof.spack.lock import concretize_all
    concretize_all(_spack(args, pins), args.envs_dir, pins, args.env, write=True)
    return 0


def cmd_mirror(args) -> int:
    pins = load_pins(args.envs_dir)
    _lint(args, pins, check_locks=False)
    from stackproof.spack.mirror import add_source, source_ext, write_mirror
    for path in args.add or []:
        source_ext(path)                       # bad input before anything is written
    write_mirror(args.envs_dir, pins, Path(args.dir))
    for path in args.add or []:
        add_source(Path(args.dir), path)
    return 0


def cmd_install(args) -> int:
    pins = load_pins(args.envs_dir)
    _lint(args, pins)
    from stackproof.spack.install import install
    install(_spack(args, pins), args.envs_dir, args.name, args.scope)
    return 0


def _env(args) -> int:
    from stackproof.spack.env import cmd_env
    return cmd_env(args)


def register(subparsers):
    noun = subparsers.add_parser(NOUN, help="Spack environments of spack-envs/: lint, check, lock, mirror, install",
                                 description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = noun.add_subparsers(dest="action", required=True, metavar="ACTION")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--envs-dir", default=str(ENVS_DIR), help="the spack-envs/ directory (default: %(default)s)")
    spack = argparse.ArgumentParser(add_help=False)
    spack.add_argument("--allow-network", action="store_true", help="do not run Spack under unshare -n")
    spack.add_argument("--workdir", default=None, help="scratch dir for scopes, env copies, logs (default: build/spack)")
    only = argparse.ArgumentParser(add_help=False)
    only.add_argument("--env", action="append", metavar="NAME", help="only this environment (repeatable)")

    verbs.add_parser("lint", parents=[common, only], help="consistency check, no Spack needed (CI)") \
        .set_defaults(func=cmd_lint)
    p = verbs.add_parser("check", parents=[common, only, spack],
                         help="lint, then with $SPACK_ROOT: spack audit + offline concretization vs the committed locks")
    p.add_argument("--site", action="append", metavar="NAME",
                   help="only this site file (spack-envs/site/NAME; default: pins.yaml sites)")
    p.add_argument("--skip-missing", action="store_true",
                   help="without $SPACK_ROOT: say that the Spack checks are skipped and succeed (make test)")
    p.set_defaults(func=cmd_check)
    verbs.add_parser("lock", parents=[common, only, spack],
                     help="concretize (isolated scopes) and write spack-envs/<env>/spack.lock") \
        .set_defaults(func=cmd_lock)
    p = verbs.add_parser("mirror", parents=[common],
                         help="write the project's release tarball into a Spack source mirror at DIR")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--add", action="append", metavar="FILE",
                   help="also a third-party source archive, stored under its sha256 where Spack looks "
                        "(Spack checks it against the recipe when it fetches); repeatable")
    p.set_defaults(func=cmd_mirror)
    p = verbs.add_parser("install", parents=[common, spack],
                         help="spack install environment NAME from its committed lock, offline, writing its view")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--scope", metavar="DIR", required=True,
                   help="a Spack config scope with the site's source mirror and git mirrors "
                        "(docs/spack.md \"Building for real\"; never committed)")
    p.set_defaults(func=cmd_install)
    p = verbs.add_parser("env", help='print shell exports for the pinned Spack on PATH (ReFrame\'s Spack build '
                                     'system): eval "$(stackproof spack env)"')
    p.add_argument("--site", metavar="NAME",
                   help="spack-envs/site/NAME/packages.yaml as the system scope (the site's externals: compiler, "
                        "gmake, ...); default: an empty system scope")
    p.set_defaults(func=_env)
