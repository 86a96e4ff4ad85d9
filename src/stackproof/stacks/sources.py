"""Where a recipe's pinned source comes from, in this order:

1. the work directory's cache (${STACKPROOF_STACKS_ROOT}/sources/<recipe>/): fetched once, re-verified;
2. a local source mirror, $STACKPROOF_SOURCE_MIRROR (`stack build --source-mirror DIR`):
   the tarball by file name (DIR/<file>, or Debian's DIR/<orig>), Spack's mirror layout
   (DIR/<spack>/<spack>-<version>.<ext> as `spack mirror create` writes it, or
   DIR/_source-cache/archive/<sha256[:2]>/<sha256>.<ext>), or a git repository DIR/<spack>.git (bare)
   or DIR/<spack>/ holding the recipe's commit;
3. Debian's source archive (`apt-get source`, .dsc pinned) for recipes that name a Debian package;
4. upstream: the release tarball's URL, else the git repository (cloned, the commit checked).
A tarball is used only when its sha256 is the pinned one; a git source only at the pinned commit
(exported with `git archive`). When none is reachable, SourceUnavailable says exactly what to set.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from stackproof.paths import REPO
from stackproof.stacks.debsource import fetch_debian
from stackproof.stacks.fetch import ChecksumError, FetchError, download, sha256_of, verify_file
from stackproof.stacks.model import StackError, stacks_root
from stackproof.stacks.recipes import Recipe

MIRROR_VAR = "STACKPROOF_SOURCE_MIRROR"
GIT_TIMEOUT_S = 300


class SourceUnavailable(StackError):
    """No place holds the recipe's source: the message names what was tried and what to set."""


@dataclass(frozen=True)
class Obtained:
    """A verified source: an archive to unpack (or this repository's directory) and where it came from."""
    recipe: str
    origin: str                 # "mirror DIR/...", "debian hpcc=1.5.0-3", "upstream URL", "git URL@commit", ...
    digest: str                 # sha256 (hex) of the archive, or of a directory's files
    archive: Path | None = None
    directory: Path | None = None
    commit: str | None = None   # the git commit a git source was exported at


def mirror_dir() -> Path | None:
    value = os.environ.get(MIRROR_VAR)
    return Path(value) if value else None


def cache_dir(recipe: Recipe) -> Path:
    return stacks_root() / "sources" / recipe.name


def _git(args: list[str], timeout: float = GIT_TIMEOUT_S, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="/bin/false")
    kw.setdefault("stdout", subprocess.PIPE)
    return subprocess.run(["git", *args], stderr=subprocess.PIPE, timeout=timeout, env=env, **kw)


def _remember(archive: Path, origin: str) -> None:
    archive.with_name(archive.name + ".origin").write_text(json.dumps({"origin": origin}) + "\n")


def _origin_of(archive: Path) -> str:
    try:
        return json.loads(archive.with_name(archive.name + ".origin").read_text())["origin"]
    except (OSError, ValueError, KeyError):
        return f"cache {archive}"


def _git_archive_name(recipe: Recipe) -> str:
    return f"{recipe.source.top}-git-{recipe.source.git.commit[:12]}.tar"


def export_git(recipe: Recipe, repo: Path, dest: Path) -> Path:
    """`git archive` of the recipe's commit from `repo` (bare or not) into dest (atomically)."""
    commit = recipe.source.git.commit
    git_dir = ["--git-dir", str(repo)] if (repo / "HEAD").is_file() and (repo / "objects").is_dir() \
        else ["-C", str(repo)]
    try:
        ok = _git([*git_dir, "cat-file", "-e", f"{commit}^{{commit}}"], timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FetchError(f"{repo}: git failed ({exc})") from None
    if ok.returncode != 0:
        raise FetchError(f"{repo}: has no commit {commit} ({recipe.name} {recipe.source.git.tag})")
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    try:
        with open(part, "wb") as out:
            proc = _git([*git_dir, "archive", "--format=tar", f"--prefix={recipe.source.top}/", commit],
                        stdout=out)
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            raise FetchError(f"{repo}: git archive {commit[:12]} failed ({err[-1] if err else 'no message'})")
        os.replace(part, dest)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FetchError(f"{repo}: git archive failed ({exc})") from None
    finally:
        part.unlink(missing_ok=True)
    return dest


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


def _cached(recipe: Recipe, cache: Path) -> Obtained | None:
    src = recipe.source
    if src.sha256 and src.file and (cache / src.file).is_file():
        path = cache / src.file
        try:
            verify_file(path, src.sha256)
            return Obtained(recipe.name, _origin_of(path), src.sha256, archive=path)
        except ChecksumError:
            path.unlink()                               # damaged cache: fetch again
    if src.git and (cache / _git_archive_name(recipe)).is_file():
        path = cache / _git_archive_name(recipe)
        return Obtained(recipe.name, _origin_of(path), sha256_of(path), archive=path, commit=src.git.commit)
    return None


def _adopt(recipe: Recipe, path: Path, cache: Path, origin: str) -> Obtained:
    """Copy a verified tarball into the cache (a mirror may be read-only or remote)."""
    verify_file(path, recipe.source.sha256)
    dest = cache / recipe.source.file
    cache.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    shutil.copyfile(path, tmp)
    os.replace(tmp, dest)
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
    hit = _cached(recipe, cache)
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
                log(f"{recipe.name}: git archive {src.git.commit[:12]} from the mirror {repo}")
                archive = export_git(recipe, repo, cache / _git_archive_name(recipe))
                origin = f"mirror {repo}@{src.git.commit}"
                _remember(archive, origin)
                return Obtained(recipe.name, origin, sha256_of(archive), archive=archive, commit=src.git.commit)
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
        bare = cache / f"{recipe.spack}.git"
        log(f"{recipe.name}: git clone {src.git.url} ({src.git.tag})")
        try:
            if not bare.is_dir():
                tmp = cache / f".{recipe.spack}.git.part"
                shutil.rmtree(tmp, ignore_errors=True)
                cache.mkdir(parents=True, exist_ok=True)
                # a stalled transfer (a firewall dropping packets) aborts after 20 s below 1 kB/s
                proc = _git(["-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=20",
                             "clone", "--bare", "--quiet", src.git.url, str(tmp)])
                if proc.returncode != 0:
                    err = proc.stderr.decode(errors="replace").strip().splitlines()
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise FetchError(f"{src.git.url}: git clone failed ({err[-1] if err else 'no message'})")
                os.replace(tmp, bare)
            archive = export_git(recipe, bare, cache / _git_archive_name(recipe))
            origin = f"git {src.git.url}@{src.git.commit}"
            _remember(archive, origin)
            return Obtained(recipe.name, origin, sha256_of(archive), archive=archive, commit=src.git.commit)
        except subprocess.TimeoutExpired:
            tried.append(f"{src.git.url}: git clone timed out after {GIT_TIMEOUT_S} s")
        except FetchError as exc:
            tried.append(str(exc))
    if mirror is None:
        tried.insert(0, f"{MIRROR_VAR} is not set")
    raise SourceUnavailable(f"{recipe.name} {recipe.version}: no source ({'; '.join(tried)}): {_hint(recipe)}")
