"""The `stack install` and `stack build` verbs (added to the `stack` noun by stacks/__init__.py).

  stackproof stack install NAME... [--dry-run] [--wheels DIR]
  stackproof stack lock NAME... [--wheels DIR]
  stackproof stack build NAME... [--only T,...] [--force] [--source-mirror DIR] [--reuse DIR]
  stackproof stack fetch NAME... [--only T,...] [--source-mirror DIR] [--into DIR]
  stackproof stack toolchain NAME... [--outdated]
"""
from __future__ import annotations

import os
from pathlib import Path

from stackproof import files
from stackproof.errors import InputError
from stackproof.stacks import buildkey, unpack
from stackproof.stacks.benchbuild import RECIPES, TARGETS, build_stack, source_for
from stackproof.stacks.environment import check_environment
from stackproof.stacks.model import StackError, load_stack
from stackproof.stacks.piplock import WHEELS_VAR, wheels_dir
from stackproof.stacks.install import check_apt, install, lock, resolve_lock
from stackproof.stacks.sources import MIRROR_VAR, SourceUnavailable


def _install_cmd(args) -> int:
    wheels = wheels_dir(args.wheels)
    for name in args.names:
        stack = load_stack(name)
        if args.dry_run:
            if stack.install_pip:
                planned = resolve_lock(stack, wheels=wheels)
                print(f"stack {name}: resolves: {', '.join(f'{k}=={v}' for k, v in sorted(planned.items()))}")
            check_apt(stack)
            if stack.install_apt:
                print(f"stack {name}: Debian packages present ({' '.join(stack.install_apt)})")
            continue
        print(install(stack, wheels=wheels), flush=True)
    return 0


def _lock_cmd(args) -> int:
    wheels = wheels_dir(args.wheels)
    for name in args.names:
        print(lock(load_stack(name), wheels=wheels), flush=True)
    return 0


def _build_cmd(args) -> int:
    only = tuple(x for x in (args.only or "").split(",") if x) or None
    if args.source_mirror:
        os.environ[MIRROR_VAR] = os.path.abspath(args.source_mirror)
    reuse = Path(args.reuse).resolve() if args.reuse else None
    if reuse is not None and not reuse.is_dir():
        raise InputError(f"--reuse {args.reuse}: no such directory (it holds <stack>/, a copy of a stack's bench dir)")
    for name in args.names:
        stack = load_stack(name)
        if stack.view is None:
            check_environment(stack)
        for line in build_stack(stack, only=only, force=args.force, reuse=reuse):
            print(line, flush=True)
    return 0


def _targets(only: str | None) -> tuple[str, ...]:
    targets = tuple(x for x in (only or "").split(",") if x) or TARGETS
    bad = sorted(set(targets) - set(TARGETS))
    if bad:
        raise StackError(f"unknown build targets {bad} (known: {', '.join(TARGETS)})")
    return targets


def _seed(obtained, into: Path) -> None:
    """Copy a verified source archive (and the note of where it came from) into into/<recipe>/, the
    layout of the stacks root's source cache: another machine's or an image's `stack build` with
    STACKPROOF_STACKS_ROOT above that directory finds it there and fetches nothing. `into` must be
    root's own (files.check_owned_dir); each file is read from the cache through stackproof.files,
    copied into a private staging directory, checked against the digest just verified and renamed
    into place (a link planted there is replaced, never written through)."""
    dest = files.check_owned_dir(into / obtained.recipe, "--into", create=True)
    cache, name = obtained.archive.parent, obtained.archive.name
    with files.Staging(dest) as stage:
        got = stage.copy_from(cache, name, name, files.MAX_ARCHIVE, owner=os.geteuid())
        if obtained.tree_sha256 is not None:
            got = unpack.archive_tree_digest(stage.path / name)
        if got != obtained.digest:
            raise StackError(f"{obtained.archive}: changed since it was verified (now {got}): not copied to {dest}")
        try:
            stage.copy_from(cache, name + ".origin", name + ".origin", files.MAX_RECORD, owner=os.geteuid())
            stage.commit(name + ".origin")
        except FileNotFoundError:
            pass
        stage.commit(name)


def _fetch_cmd(args) -> int:
    """Every source the stacks' builds need, fetched and verified now (into the stacks root's cache):
    what `stack build` would download, done ahead, e.g. on a host before an offline image build."""
    targets = _targets(args.only)
    if args.source_mirror:
        os.environ[MIRROR_VAR] = os.path.abspath(args.source_mirror)
    into = Path(os.path.abspath(args.into)) if args.into else None
    if into is not None and os.path.lexists(into):
        files.check_owned_dir(into, "--into")       # refused before anything is fetched
    wanted = []
    for name in args.names:
        stack = load_stack(name)
        if stack.view is None:
            wanted += [r for r in RECIPES if r in targets and r not in wanted]
    for name in wanted:
        recipe = RECIPES[name]
        try:
            obtained = source_for(recipe, lambda msg: print(f"[fetch] {msg}", flush=True))
        except SourceUnavailable as exc:
            print(f"fetch {name}: not available: {exc}", flush=True)
            continue
        if obtained.archive is None:        # this repository's own source (fwq): nothing to fetch
            print(f"fetch {name} {recipe.version}: {obtained.origin}", flush=True)
            continue
        if into is not None:
            _seed(obtained, into)
        print(f"fetch {name} {recipe.version}: {obtained.origin} (sha256 {obtained.digest})", flush=True)
    return 0


def _toolchain_cmd(args) -> int:
    """The Debian packages the stacks' build keys cover, `name version` per line; with --outdated only
    the names of those the archive has in another version (apt-get install --only-upgrade's arguments)."""
    roots = [*buildkey.TOOLCHAIN_ROOTS]
    for name in args.names:
        roots += [p for p in load_stack(name).install_apt if p not in roots]
    packages = buildkey.toolchain_packages(roots)
    if packages is None and args.outdated:
        return 0                # no dpkg: nothing apt could upgrade
    if packages is None:
        raise StackError("no dpkg-query here: the build keys record the compilers' --version instead")
    if args.outdated:
        print(" ".join(buildkey.outdated(packages)))
    else:
        for name, version in packages.items():
            print(f"{name} {version}")
    return 0


def register_verbs(verbs) -> None:
    v = verbs.add_parser("install", help="install stacks: pinned wheels into a venv at the prefix, "
                                         "check Debian packages")
    v.add_argument("names", nargs="+", metavar="NAME")
    v.add_argument("--dry-run", action="store_true", help="only check that the hash lock installs here")
    v.add_argument("--wheels", metavar="DIR", help=f"install from the wheels in DIR, not the index (the lock's "
                                                   f"hashes still apply; ${WHEELS_VAR})")
    v.set_defaults(func=_install_cmd)
    v = verbs.add_parser("lock", help="resolve a pip stack's pins and write its hash lock <name>.pip-lock.txt "
                                      "beside the stack file")
    v.add_argument("names", nargs="+", metavar="NAME")
    v.add_argument("--wheels", metavar="DIR", help=f"resolve from the wheels in DIR, not the index (${WHEELS_VAR})")
    v.set_defaults(func=_lock_cmd)
    v = verbs.add_parser("build", help="build the benchmarks against each stack into ${prefix}/bench "
                                       "(recipes: stackproof/stacks/data/recipes.yaml)")
    v.add_argument("names", nargs="+", metavar="NAME")
    v.add_argument("--only", help=f"comma-separated subset of: {','.join(TARGETS)}")
    v.add_argument("--force", action="store_true", help="rebuild even when the inputs did not change")
    v.add_argument("--reuse", metavar="DIR",
                   help="take a target's build from DIR/<stack>/ (a copy of another machine's bench dir) when "
                        "its recorded key is the one computed here (same recipe, source, stack, toolchain)")
    v.add_argument("--source-mirror", metavar="DIR",
                   help=f"local source mirror (tarballs, Spack mirror layout, git repositories); ${MIRROR_VAR}")
    v.set_defaults(func=_build_cmd)
    v = verbs.add_parser("fetch", help="fetch and verify the sources of the stacks' benchmarks now, without "
                                       "building (e.g. before an offline image build)")
    v.add_argument("names", nargs="+", metavar="NAME")
    v.add_argument("--only", help=f"comma-separated subset of: {','.join(TARGETS)}")
    v.add_argument("--source-mirror", metavar="DIR",
                   help=f"local source mirror (tarballs, Spack mirror layout, git repositories); ${MIRROR_VAR}")
    v.add_argument("--into", metavar="DIR",
                   help="also copy each verified source into DIR/<benchmark>/, the layout of "
                        "${STACKPROOF_STACKS_ROOT}/sources (seeds another machine's or an image's cache)")
    v.set_defaults(func=_fetch_cmd)
    v = verbs.add_parser("toolchain", help="the Debian packages the stacks' build keys cover (compilers, binutils, "
                                           "headers, MPI, BLAS), with their versions")
    v.add_argument("names", nargs="+", metavar="NAME")
    v.add_argument("--outdated", action="store_true",
                   help="only the names of those whose apt candidate is another version, on one line")
    v.set_defaults(func=_toolchain_cmd)
