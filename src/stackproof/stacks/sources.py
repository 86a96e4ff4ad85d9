"""Where a recipe's pinned source comes from, in this order:

1. the work directory's cache (${STACKPROOF_STACKS_ROOT}/sources/<recipe>/): fetched once, verified
   again before every reuse (a tarball's sha256, a git export's tree digest); an entry that does not
   match is removed and fetched again;
2. a local source mirror, $STACKPROOF_SOURCE_MIRROR (`stack build --source-mirror DIR`):
   the tarball by file name (DIR/<file>, or Debian's DIR/<orig>), Spack's mirror layout
   (DIR/<spack>/<spack>-<version>.<ext> as `spack mirror create` writes it, or
   DIR/_source-cache/archive/<sha256[:2]>/<sha256>.<ext>), or a git repository DIR/<spack>.git (bare)
   or DIR/<spack>/ holding the recipe's commit;
3. Debian's source archive (`apt-get source`, .dsc pinned) for recipes that name a Debian package;
4. upstream: the release tarball's URL, else the git repository (the commit fetched).
A mirror and a cache are hostile (issue 42): every file in them is opened through stackproof.files,
beneath its directory, never through a link (a mirror's links may only stay inside the mirror, as
Spack's layout links into its own source cache), only as a regular file, at most files.MAX_ARCHIVE
bytes. The cache (and `stack fetch --into`) must be root's own directory that nobody else may write
(files.check_owned_dir). A tarball is copied into a private staging directory (0700, the copy 0600),
the copy is hashed, and only a copy with the pinned sha256 is renamed into the cache: nobody reads it
before it is checked, and a link planted at the cache entry's name is replaced, never written
through. The archive is hashed again as it is unpacked (fetch.safe_extract). A git source is never
read with the repository's own configuration: gitsource.py fetches the pinned commit into a
repository of ours and writes the tarball itself; with a recipe's source.git.tree_sha256 its tree
digest must match, and a cached export is reused only against that pin. A recipe pinned by its
commit alone (SW4) is exported again from the commit every time: a digest recorded in the cache would
be checked against the cache itself. When no source is reachable, SourceUnavailable says exactly
what to set.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from stackproof import files
from stackproof.paths import REPO
from stackproof.stacks import gitsource, unpack
from stackproof.stacks.debsource import fetch_debian
from stackproof.stacks.fetch import ChecksumError, FetchError, download, sha256_of
from stackproof.stacks.model import StackError, stacks_root
from stackproof.stacks.recipes import Recipe

MIRROR_VAR = "STACKPROOF_SOURCE_MIRROR"
GIT_TIMEOUT_S = gitsource.GIT_TIMEOUT_S
MAX_MIRROR_BYTES = files.MAX_ARCHIVE    # a mirror tarball larger than this is not copied (the largest pin: 6.7 MB)
ARCHIVE = "archive"                     # the staged copy's name; RECORD the staged .origin record's
RECORD = "origin"


class SourceUnavailable(StackError):
    """No place holds the recipe's source: the message names what was tried and what to set."""


@dataclass(frozen=True)
class Obtained:
    """A verified source: an archive to unpack (or this repository's directory) and where it came from."""
    recipe: str
    origin: str                 # "mirror DIR/...", "debian hpcc=1.5.0-3", "upstream URL", "git URL@commit", ...
    digest: str                 # sha256 (hex) of the archive, a git export's tree digest, or a directory's files
    archive: Path | None = None
    directory: Path | None = None
    commit: str | None = None   # the git commit a git source was exported at
    tree_sha256: str | None = None  # a git export: the tree digest checked as it is unpacked (else digest
                                    # is the archive's sha256, checked the same way)


def mirror_dir() -> Path | None:
    value = os.environ.get(MIRROR_VAR)
    return Path(value) if value else None


def cache_dir(recipe: Recipe) -> Path:
    return stacks_root() / "sources" / recipe.name


def own_cache(recipe: Recipe) -> Path:
    """The recipe's cache directory, created when missing; files.UnsafePath (one line) unless it and
    the stacks root's sources/ are root's own and nobody else may write them."""
    return files.check_owned_dir(cache_dir(recipe), "source cache", create=True)


def _record(origin: str, **extra: str) -> bytes:
    """<archive>.origin: where a cache entry came from (and, for a git export, its commit and tree digest)."""
    return (json.dumps({"origin": origin, **extra}) + "\n").encode()


def _record_of(cache: Path, name: str) -> dict:
    try:
        data = json.loads(files.read_bytes(cache, name + ".origin", files.MAX_RECORD, owner=os.geteuid()))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError, files.UnsafePath):
        return {}


def _origin_of(cache: Path, name: str) -> str:
    origin = _record_of(cache, name).get("origin")
    return origin if isinstance(origin, str) and origin.isprintable() else f"cache {cache / name}"


def _keep(stage: files.Staging, name: str, origin: str, **extra: str) -> Path:
    """Move a verified staged archive (ARCHIVE) and its record into the cache as `name`."""
    stage.write(RECORD, _record(origin, **extra))
    stage.commit(RECORD, name + ".origin")
    return stage.commit(ARCHIVE, name)


def _git_archive_name(recipe: Recipe) -> str:
    return f"{recipe.source.top}-git-{recipe.source.git.commit[:12]}.tar"


def _export_git(recipe: Recipe, remote, cache: Path, origin: str, log) -> Obtained:
    """Fetch the recipe's commit from `remote` (a mirror directory or the upstream URL) into a
    repository of ours (in a private staging directory of the cache) and write its tarball there;
    ChecksumError unless its tree digest is the pinned one; renamed into the cache only then."""
    git = recipe.source.git
    with files.Staging(cache) as stage:
        repo, env = gitsource.fetch_commit(remote, git.commit, stage)
        with stage.create(ARCHIVE) as out:
            digest = gitsource.export_commit(repo, env, git.commit, recipe.source.top, out)
        if git.tree_sha256 and digest != git.tree_sha256:
            raise ChecksumError(f"{remote}: commit {git.commit[:12]} exports a tree with sha256 {digest}, not the "
                                f"pinned source.git.tree_sha256 {git.tree_sha256}")
        if not git.tree_sha256:
            log(f"{recipe.name}: commit {git.commit[:12]} exports tree sha256 {digest} (recipes.yaml pins no "
                "source.git.tree_sha256: exported again from the commit on every build, never reused from the "
                "cache)")
        dest = _keep(stage, _git_archive_name(recipe), origin, commit=git.commit, tree_sha256=digest)
    return Obtained(recipe.name, origin, digest, archive=dest, commit=git.commit, tree_sha256=digest)


def mirror_candidates(recipe: Recipe) -> list[str]:
    """Names below the mirror that may hold the recipe's tarball (any of them must match the pinned
    sha256)."""
    src = recipe.source
    if not src.sha256:
        return []
    out = [n for n in (src.file, src.debian.orig if src.debian else None) if n]
    out.append(f"{recipe.spack}/{recipe.spack}-{recipe.version}{src.extension}")
    out.append(f"_source-cache/archive/{src.sha256[:2]}/{src.sha256}{src.extension}")
    return out


def mirror_git_repos(recipe: Recipe, mirror: Path) -> list[Path]:
    """The mirror's git repositories for the recipe. A link to a repository elsewhere is used (a
    mirror of clones often is one): only the pinned commit's objects come out of it, each checked
    against its id as it arrives (gitsource.py), nothing else of its target is read."""
    if not recipe.source.git:
        return []
    return [p for p in (mirror / f"{recipe.spack}.git", mirror / recipe.spack) if p.is_dir()]


def _from_repository(recipe: Recipe) -> Obtained:
    directory = REPO / recipe.source.repository
    if not directory.is_dir():
        raise SourceUnavailable(f"{recipe.name}: {directory} is missing from the installation")
    h = hashlib.sha256()
    for p in sorted(directory.rglob("*")):
        if p.is_file() and "build" not in p.relative_to(directory).parts:
            h.update(str(p.relative_to(directory)).encode())
            h.update(sha256_of(p).encode())
    return Obtained(recipe.name, f"repository {recipe.source.repository}/", h.hexdigest(), directory=directory)


def _discard(cache: Path, name: str, why: str, log) -> None:
    log(f"cache entry {cache / name} {why}: removed, fetching it again")
    try:
        files.remove_entry(cache, name)
        files.remove_entry(cache, name + ".origin")
    except OSError as exc:
        raise FetchError(f"{cache / name}: cannot remove a damaged cache entry ({exc.strerror})") from None


def _ours(st: os.stat_result | None) -> bool:
    """A plain file (not a link, FIFO or device) owned by us: the only cache entry worth checking."""
    return st is not None and stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()


def _cached(recipe: Recipe, cache: Path, log=print) -> Obtained | None:
    """A cache entry, only after its bytes were checked against the recipe's pin (a tarball's sha256,
    a git export's tree digest); a damaged or replaced entry is removed and None returned. A git
    export without a pinned tree digest is never reused."""
    src = recipe.source
    if src.sha256 and src.file:
        name = src.file
        st = files.entry_stat(cache, name)
        if st is not None:
            why = "is not a regular file of ours"
            if _ours(st):
                try:
                    got = files.sha256_beneath(cache, name, files.MAX_ARCHIVE, owner=os.geteuid())
                    if got == src.sha256:
                        return Obtained(recipe.name, _origin_of(cache, name), src.sha256, archive=cache / name)
                    why = "does not match the pinned sha256"
                except (OSError, files.UnsafePath) as exc:
                    why = f"cannot be read ({exc})"
            _discard(cache, name, why, log)
    if src.git:
        name = _git_archive_name(recipe)
        st = files.entry_stat(cache, name)
        if st is not None:
            want = src.git.tree_sha256
            why = "is not a regular file of ours"
            if not want:
                why = "is an export of a commit without a pinned tree digest (never reused)"
            elif _ours(st):
                try:
                    digest = unpack.archive_tree_digest(cache / name)
                    if digest == want:
                        return Obtained(recipe.name, _origin_of(cache, name), digest, archive=cache / name,
                                        commit=src.git.commit, tree_sha256=digest)
                    why = f"has tree sha256 {digest[:12]}..., not the expected {want[:12]}..."
                except unpack.ArchiveError as exc:
                    why = f"cannot be read ({exc})"
            _discard(cache, name, why, log)
    return None


def _adopt(recipe: Recipe, root: Path, rel: str, cache: Path, origin: str,
           links: str = files.LINKS_BENEATH) -> Obtained:
    """Copy a mirror's (or Debian's) tarball `rel` below `root` into the cache: into a private staging
    directory first (files.Staging), then the copy is hashed, and only a copy with the pinned sha256 is
    renamed into place (what was checked is what is kept, whatever happens to the mirror meanwhile,
    and nobody reads it before)."""
    with files.Staging(cache) as stage:
        try:
            got = stage.copy_from(root, rel, ARCHIVE, MAX_MIRROR_BYTES, links=links)
        except files.UnsafePath as exc:
            raise ChecksumError(f"mirror entry refused: {exc}") from None
        except OSError as exc:
            raise FetchError(f"{root / rel}: cannot copy into the cache ({exc.strerror})") from None
        if got != recipe.source.sha256:
            raise ChecksumError(f"{root / rel}: sha256 {got} does not match the pinned {recipe.source.sha256}")
        dest = _keep(stage, recipe.source.file, origin)
    return Obtained(recipe.name, origin, recipe.source.sha256, archive=dest)


def _in_mirror(recipe: Recipe, mirror: Path) -> str | None:
    """The first mirror candidate there is (a link to it counts only while it stays in the mirror:
    otherwise ChecksumError, one line)."""
    for rel in mirror_candidates(recipe):
        try:
            os.close(files.open_beneath(mirror, rel, links=files.LINKS_BENEATH))
            return rel
        except files.UnsafePath as exc:
            raise ChecksumError(f"mirror entry refused: {exc}") from None
        except OSError:
            continue
    return None


def _hint(recipe: Recipe) -> str:
    src = recipe.source
    where = []
    if src.file:
        where.append(f"{src.file} or {recipe.spack}/{recipe.spack}-{recipe.version}{src.extension} "
                     f"(sha256 {src.sha256[:12]}...)")
    if src.git:
        where.append(f"a git repository {recipe.spack}.git with commit {src.git.commit[:12]} ({src.git.tag})")
    return f"set {MIRROR_VAR}=DIR (or --source-mirror DIR) to a directory holding {' or '.join(where)}"


def obtain(recipe: Recipe, mirror: Path | None = None, log=print, runner=subprocess.run,
           online: bool = True) -> Obtained:
    """The recipe's verified source (see the module docstring for the order). ChecksumError when a
    file has the wrong bytes or a mirror entry is refused; files.UnsafePath when the cache is not
    root's own; SourceUnavailable when no place has it."""
    src = recipe.source
    if src.repository:
        return _from_repository(recipe)
    cache = own_cache(recipe)
    hit = _cached(recipe, cache, log=lambda m: log(f"{recipe.name}: {m}"))
    if hit:
        return hit
    tried = []
    mirror = mirror if mirror is not None else mirror_dir()
    if mirror is not None:
        if not mirror.is_dir():
            raise SourceUnavailable(f"{MIRROR_VAR}={mirror} is not a directory")
        rel = _in_mirror(recipe, mirror)
        if rel is not None:
            log(f"{recipe.name}: from the mirror {mirror / rel}")
            return _adopt(recipe, mirror, rel, cache, f"mirror {mirror / rel}")
        for repo in mirror_git_repos(recipe, mirror):
            try:
                log(f"{recipe.name}: fetching commit {src.git.commit[:12]} from the mirror {repo}")
                return _export_git(recipe, repo, cache, f"mirror {repo}@{src.git.commit}", log)
            except ChecksumError:
                raise
            except FetchError as exc:
                tried.append(str(exc))
        tried.append(f"mirror {mirror} has no {recipe.name} {recipe.version}")
    if src.debian:
        try:
            debian = files.check_owned_dir(cache / "debian", "source cache", create=True)
            orig = fetch_debian(src.debian, src.sha256, debian, runner=runner, log=log)
            return _adopt(recipe, debian, orig.name, cache,
                          f"debian {src.debian.package}={src.debian.version} ({src.debian.orig})", links=files.LINKS_REFUSED)
        except ChecksumError:
            raise
        except FetchError as exc:
            tried.append(str(exc))
    if online and src.url:
        log(f"{recipe.name}: downloading {src.url}")
        try:
            path = download(src.url, cache / src.file, src.sha256, log=lambda m: log(f"{recipe.name}: {m}"))
            with files.Staging(cache) as stage:
                stage.write(RECORD, _record(f"upstream {src.url}"))
                stage.commit(RECORD, src.file + ".origin")
            return Obtained(recipe.name, f"upstream {src.url}", src.sha256, archive=path)
        except ChecksumError:
            raise
        except FetchError as exc:
            tried.append(str(exc))
    if online and src.git:
        log(f"{recipe.name}: fetching commit {src.git.commit[:12]} from {src.git.url} ({src.git.tag})")
        try:
            return _export_git(recipe, src.git.url, cache, f"git {src.git.url}@{src.git.commit}", log)
        except ChecksumError:
            raise
        except FetchError as exc:
            tried.append(str(exc))
    if mirror is None:
        tried.insert(0, f"{MIRROR_VAR} is not set")
    raise SourceUnavailable(f"{recipe.name} {recipe.version}: no source ({'; '.join(tried)}): {_hint(recipe)}")
