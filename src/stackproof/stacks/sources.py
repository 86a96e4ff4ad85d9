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
A mirror and a cache are hostile: a tarball is copied to a .part file first and the copy is hashed
(a mirror entry swapped after a check cannot slip in), and the archive is hashed again as it is
unpacked (fetch.safe_extract). A git source is never read with the repository's own configuration:
gitsource.py fetches the pinned commit into a repository of ours and writes the tarball itself, and
its tree digest must be the recipe's source.git.tree_sha256. When none is reachable,
SourceUnavailable says exactly what to set.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from stackproof.paths import REPO
from stackproof.stacks import gitsource, unpack
from stackproof.stacks.debsource import fetch_debian
from stackproof.stacks.fetch import ChecksumError, FetchError, download, sha256_of, verify_file
from stackproof.stacks.model import StackError, stacks_root
from stackproof.stacks.recipes import Recipe

MIRROR_VAR = "STACKPROOF_SOURCE_MIRROR"
GIT_TIMEOUT_S = gitsource.GIT_TIMEOUT_S
MAX_MIRROR_BYTES = 512 << 20        # a mirror tarball larger than this is not copied (the largest pin: 6.7 MB)


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


def _remember(archive: Path, origin: str, **extra: str) -> None:
    """<archive>.origin: where a cache entry came from (and, for a git export, the commit and the tree
    digest it had when it was written)."""
    archive.with_name(archive.name + ".origin").write_text(json.dumps({"origin": origin, **extra}) + "\n")


def _record_of(archive: Path) -> dict:
    try:
        data = json.loads(archive.with_name(archive.name + ".origin").read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _origin_of(archive: Path) -> str:
    origin = _record_of(archive).get("origin")
    return origin if isinstance(origin, str) else f"cache {archive}"


def _git_archive_name(recipe: Recipe) -> str:
    return f"{recipe.source.top}-git-{recipe.source.git.commit[:12]}.tar"


def _export_git(recipe: Recipe, remote, cache: Path, origin: str, log) -> Obtained:
    """Fetch the recipe's commit from `remote` (a mirror directory or the upstream URL) into a
    repository of ours and write its tarball into the cache; ChecksumError unless its tree digest
    is the pinned one."""
    git = recipe.source.git
    cache.mkdir(parents=True, exist_ok=True)
    dest = cache / _git_archive_name(recipe)
    work = Path(tempfile.mkdtemp(prefix=".git-", dir=cache))
    try:
        repo, env = gitsource.fetch_commit(remote, git.commit, work)
        part = work / "export.tar"
        digest = gitsource.export_commit(repo, env, git.commit, recipe.source.top, part)
        if git.tree_sha256 and digest != git.tree_sha256:
            raise ChecksumError(f"{remote}: commit {git.commit[:12]} exports a tree with sha256 {digest}, not the "
                                f"pinned source.git.tree_sha256 {git.tree_sha256}")
        if not git.tree_sha256:
            log(f"{recipe.name}: commit {git.commit[:12]} exports tree sha256 {digest} (recipes.yaml pins no "
                "source.git.tree_sha256: the cache is checked against this one)")
        os.replace(part, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _remember(dest, origin, commit=git.commit, tree_sha256=digest)
    return Obtained(recipe.name, origin, digest, archive=dest, commit=git.commit, tree_sha256=digest)


def mirror_candidates(recipe: Recipe, mirror: Path) -> list[Path]:
    """Tarball paths a mirror may hold for the recipe (any of them must match the pinned sha256)."""
    src = recipe.source
    if not src.sha256:
        return []
    names = [n for n in (src.file, src.debian.orig if src.debian else None) if n]
    out = [mirror / n for n in names]
    out.append(mirror / recipe.spack / f"{recipe.spack}-{recipe.version}{src.extension}")
    out.append(mirror / "_source-cache" / "archive" / src.sha256[:2] / f"{src.sha256}{src.extension}")
    return out


def mirror_git_repos(recipe: Recipe, mirror: Path) -> list[Path]:
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


def _regular_file(path: Path) -> bool:
    """A plain file (not a symlink, fifo or device) owned by us: the only cache entry worth checking."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()


def _discard(path: Path, why: str, log) -> None:
    log(f"cache entry {path} {why}: removed, fetching it again")
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
        path.with_name(path.name + ".origin").unlink(missing_ok=True)
    except OSError as exc:
        raise FetchError(f"{path}: cannot remove a damaged cache entry ({exc.strerror})") from None


def _cached(recipe: Recipe, cache: Path, log=print) -> Obtained | None:
    """A cache entry, only after its bytes were checked against the recipe's pin (a tarball's sha256,
    a git export's tree digest); a damaged or replaced entry is removed and None returned."""
    src = recipe.source
    if src.sha256 and src.file:
        path = cache / src.file
        if os.path.lexists(path):
            if not _regular_file(path):
                _discard(path, "is not a regular file of ours", log)
            else:
                try:
                    verify_file(path, src.sha256)
                    return Obtained(recipe.name, _origin_of(path), src.sha256, archive=path)
                except ChecksumError:
                    _discard(path, "does not match the pinned sha256", log)
    if src.git:
        path = cache / _git_archive_name(recipe)
        if os.path.lexists(path):
            why = "is not a regular file of ours"
            record = _record_of(path)
            # the recipe's pin; without one, the digest recorded beside the commit when it was exported
            want = src.git.tree_sha256 or (record.get("tree_sha256") if record.get("commit") == src.git.commit
                                           else None)
            if not isinstance(want, str) or not want:
                why = "has no recorded tree digest"
            elif _regular_file(path):
                try:
                    digest = unpack.archive_tree_digest(path)
                    if digest == want:
                        return Obtained(recipe.name, _origin_of(path), digest, archive=path, commit=src.git.commit,
                                        tree_sha256=digest)
                    why = f"has tree sha256 {digest[:12]}..., not the expected {want[:12]}..."
                except unpack.ArchiveError as exc:
                    why = f"cannot be read ({exc})"
            _discard(path, why, log)
    return None


def _copy_file(source: Path, dest: Path, limit: int = MAX_MIRROR_BYTES) -> None:
    """Copy a mirror file (a regular file, symlinks followed: Spack mirrors link into their source
    cache) to `dest`, a new file; at most `limit` bytes."""
    fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK)         # a fifo must not block the open
    with os.fdopen(fd, "rb") as src:
        if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
            raise FetchError(f"{source}: not a regular file")
        out_fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(out_fd, "wb") as out:
            copied = 0
            for block in iter(lambda: src.read(1 << 20), b""):
                copied += len(block)
                if copied > limit:
                    raise FetchError(f"{source}: larger than the size cap of {limit} bytes")
                out.write(block)


def _adopt(recipe: Recipe, path: Path, cache: Path, origin: str) -> Obtained:
    """Copy a mirror's (or Debian's) tarball into the cache: to a .part file first, then the copy is
    hashed, and only a copy with the pinned sha256 is renamed into place (what was checked is what
    is kept, whatever happens to `path` meanwhile)."""
    dest = cache / recipe.source.file
    cache.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    part.unlink(missing_ok=True)
    try:
        _copy_file(path, part)
        got = sha256_of(part)
        if got != recipe.source.sha256:
            raise ChecksumError(f"{path}: sha256 {got} does not match the pinned {recipe.source.sha256}")
        os.replace(part, dest)
    except OSError as exc:
        raise FetchError(f"{path}: cannot copy into the cache ({exc.strerror})") from None
    finally:
        part.unlink(missing_ok=True)
    _remember(dest, origin)
    return Obtained(recipe.name, origin, recipe.source.sha256, archive=dest)


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
    file has the wrong bytes; SourceUnavailable when no place has it."""
    src = recipe.source
    if src.repository:
        return _from_repository(recipe)
    cache = cache_dir(recipe)
    hit = _cached(recipe, cache, log=lambda m: log(f"{recipe.name}: {m}"))
    if hit:
        return hit
    tried = []
    mirror = mirror if mirror is not None else mirror_dir()
    if mirror is not None:
        if not mirror.is_dir():
            raise SourceUnavailable(f"{MIRROR_VAR}={mirror} is not a directory")
        for path in mirror_candidates(recipe, mirror):
            if path.is_file():
                log(f"{recipe.name}: from the mirror {path}")
                return _adopt(recipe, path, cache, f"mirror {path}")
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
            orig = fetch_debian(src.debian, src.sha256, cache / "debian", runner=runner, log=log)
            return _adopt(recipe, orig, cache, f"debian {src.debian.package}={src.debian.version} ({src.debian.orig})")
        except ChecksumError:
            raise
        except FetchError as exc:
            tried.append(str(exc))
    if online and src.url:
        log(f"{recipe.name}: downloading {src.url}")
        try:
            path = download(src.url, cache / src.file, src.sha256, log=lambda m: log(f"{recipe.name}: {m}"))
            _remember(path, f"upstream {src.url}")
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
