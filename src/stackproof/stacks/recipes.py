"""The benchmarks stackproof builds, read from one file (stacks/data/recipes.yaml) and validated.

A recipe pins its source (release tarball + sha256, git tag + commit, Debian source package + .dsc
sha256, or this repository's own directory), says how to build it with a stack's compiler wrappers
and BLAS/LAPACK (argv lists with placeholders, never a shell line) and what it installs into the
stack's bench dir. Every value is checked here, so nothing unchecked reaches a command line or a path.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from stackproof.errors import StackproofError
from stackproof.yamlfile import read_yaml

PLACEHOLDERS = ("cc", "cxx", "fc", "blas", "jobs", "src", "stage", "data", "repo")
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,39}$")
_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,199}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_URL = re.compile(r"^https://[A-Za-z0-9.-]+(?::\d+)?/[A-Za-z0-9._~/+%-]*$")
_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$")
_HOLE = re.compile(r"\{([a-z]+)\}")
KEYS = {"version", "spack", "key", "licence", "measures", "needs", "source", "build", "install", "inputs"}
SOURCE_KEYS = {"file", "top", "sha256", "url", "git", "debian", "repository"}


class RecipeError(StackproofError):
    """recipes.yaml (or a site's copy) says something that cannot be built safely."""


@dataclass(frozen=True)
class GitSource:
    url: str
    tag: str
    commit: str
    tree_sha256: str | None = None   # digest of the commit's exported tree (stackproof.stacks.unpack.tree_digest)


@dataclass(frozen=True)
class DebianSource:
    package: str
    version: str           # Debian version, e.g. 1.5.0-3
    dsc_sha256: str
    orig: str              # the upstream tarball's name in the archive (<package>_<upstream>.orig.tar.gz)

    @property
    def dsc(self) -> str:
        return f"{self.package}_{self.version}.dsc"


@dataclass(frozen=True)
class Source:
    top: str                                   # the tree's top directory once unpacked
    file: str | None = None                    # the release tarball's file name
    sha256: str | None = None
    url: str | None = None
    git: GitSource | None = None
    debian: DebianSource | None = None
    repository: str | None = None              # a directory of this repository (fwq/)

    @property
    def extension(self) -> str:
        """The tarball's extension (.tar.gz, .tgz, .tar.xz, .tar.bz2)."""
        for ext in (".tar.gz", ".tar.xz", ".tar.bz2", ".tgz", ".tar"):
            if self.file and self.file.endswith(ext):
                return ext
        return ".tar.gz"


@dataclass(frozen=True)
class Step:
    argv: tuple[str, ...]
    cwd: str | None = None


@dataclass(frozen=True)
class Recipe:
    name: str
    version: str
    spack: str
    key: str                                    # the stack file's benchmarks: key
    measures: str
    licence: str
    source: Source
    build: tuple[Step, ...]
    install: dict[str, str] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)
    needs: tuple[str, ...] = ()


def recipes_file() -> Path:
    return Path(str(resources.files("stackproof.stacks") / "data" / "recipes.yaml"))


def data_dir() -> Path:
    return recipes_file().parent


def _need(cond: bool, origin: str, msg: str) -> None:
    if not cond:
        raise RecipeError(f"{origin}: {msg}")


def _str(value, origin: str, key: str, rx: re.Pattern | None = None, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    _need(isinstance(value, (str, int, float)) and not isinstance(value, bool), origin,
          f"{key}: expected a string, got {type(value).__name__}")
    value = str(value)
    if rx is not None:
        _need(bool(rx.match(value)), origin, f"{key}: {value!r} does not match {rx.pattern}")
    return value


def _relpath(value, origin: str, key: str) -> str:
    """A relative path (placeholders {src} {stage} {repo} allowed at its start) without '..'."""
    text = _str(value, origin, key)
    rest = re.sub(r"^\{(src|stage|repo)\}/", "", text)
    _need(bool(rest) and not rest.startswith("/") and ".." not in Path(rest).parts and "\n" not in rest
          and "{" not in rest, origin, f"{key}: {text!r} must be a relative path inside the tree (no '..')")
    return text


def _argv_item(value, origin: str, key: str) -> str:
    text = _str(value, origin, key)
    _need("\n" not in text and "\0" not in text, origin, f"{key}: control characters")
    for hole in _HOLE.findall(text):
        _need(hole in PLACEHOLDERS, origin, f"{key}: unknown placeholder {{{hole}}} "
                                            f"(known: {', '.join(PLACEHOLDERS)})")
    return text


def _source(data, origin: str) -> Source:
    _need(isinstance(data, dict), origin, "source: expected a mapping")
    unknown = set(data) - SOURCE_KEYS
    _need(not unknown, origin, f"source: unknown keys {sorted(unknown)}")
    repo = _str(data.get("repository"), origin, "source.repository", _NAME, optional=True)
    if repo:
        return Source(top=repo, repository=repo)
    git = data.get("git")
    if git is not None:
        _need(isinstance(git, dict), origin, "source.git: expected {url, tag, commit, tree_sha256}")
        unknown = set(git) - {"url", "tag", "commit", "tree_sha256"}
        _need(not unknown, origin, f"source.git: unknown keys {sorted(unknown)}")
        git = GitSource(url=_str(git.get("url"), origin, "source.git.url", _URL),
                        tag=_str(git.get("tag"), origin, "source.git.tag", _TAG),
                        commit=_str(git.get("commit"), origin, "source.git.commit", _COMMIT),
                        # the commit pins the tree through git's SHA-1; this pins it again, and the cache
                        tree_sha256=_str(git.get("tree_sha256"), origin, "source.git.tree_sha256", _SHA256,
                                         optional=True))
    deb = data.get("debian")
    if deb is not None:
        _need(isinstance(deb, dict), origin, "source.debian: expected {package, version, dsc_sha256, orig}")
        deb = DebianSource(package=_str(deb.get("package"), origin, "source.debian.package", _NAME),
                           version=_str(deb.get("version"), origin, "source.debian.version", _VERSION),
                           dsc_sha256=_str(deb.get("dsc_sha256"), origin, "source.debian.dsc_sha256", _SHA256),
                           orig=_str(deb.get("orig"), origin, "source.debian.orig", _FILE))
    src = Source(top=_str(data.get("top"), origin, "source.top", _FILE),
                 file=_str(data.get("file"), origin, "source.file", _FILE, optional=True),
                 sha256=_str(data.get("sha256"), origin, "source.sha256", _SHA256, optional=True),
                 url=_str(data.get("url"), origin, "source.url", _URL, optional=True),
                 git=git, debian=deb)
    _need(bool(src.file) == bool(src.sha256), origin, "source: file and sha256 go together")
    _need(not (src.url or deb) or bool(src.sha256), origin, "source: a url or debian source needs the sha256")
    _need(bool(src.sha256 or git), origin, "source: needs a tarball (file + sha256) or git (url, tag, commit)")
    return src


def _paths(data, origin: str, key: str) -> dict[str, str]:
    if data is None:
        return {}
    _need(isinstance(data, dict), origin, f"{key}: expected a mapping <bench path>: <tree path>")
    out = {}
    for dest, src in data.items():
        d = _relpath(dest, origin, f"{key} {dest!r}")
        _need(not d.startswith("{"), origin, f"{key}: {dest!r} must be a path under the bench dir")
        out[d] = _relpath(src, origin, f"{key}.{dest}")
    return out


def parse_recipe(name: str, data, origin: str) -> Recipe:
    origin = f"{origin}: {name}"
    _need(bool(_NAME.match(str(name))), origin, "recipe names are lower-case words")
    _need(isinstance(data, dict), origin, "expected a mapping")
    unknown = set(data) - KEYS
    _need(not unknown, origin, f"unknown keys {sorted(unknown)} (known: {sorted(KEYS)})")
    steps = []
    build = data.get("build") or []
    _need(isinstance(build, list) and build, origin, "build: expected a list of steps")
    for i, step in enumerate(build):
        where = f"build[{i}]"
        _need(isinstance(step, dict) and set(step) <= {"run", "cwd"} and isinstance(step.get("run"), list)
              and step["run"], origin, f"{where}: expected {{run: [argv...], cwd: dir}}")
        cwd = step.get("cwd")
        steps.append(Step(argv=tuple(_argv_item(a, origin, where) for a in step["run"]),
                          cwd=_relpath(cwd, origin, f"{where}.cwd") if cwd is not None else None))
    needs = tuple(data.get("needs") or ())
    _need(set(needs) <= {"fc"}, origin, f"needs: only fc is known, got {list(needs)}")
    install = _paths(data.get("install"), origin, "install")
    _need(bool(install), origin, "install: nothing installed")
    return Recipe(name=name, version=_str(data.get("version"), origin, "version", _VERSION),
                  spack=_str(data.get("spack"), origin, "spack", _NAME),
                  key=_str(data.get("key", name), origin, "key", _NAME),
                  measures=_str(data.get("measures"), origin, "measures"),
                  licence=_str(data.get("licence"), origin, "licence"),
                  source=_source(data.get("source"), origin), build=tuple(steps),
                  install=install, inputs=_paths(data.get("inputs"), origin, "inputs"), needs=needs)


def load_recipes(path: Path | None = None) -> dict[str, Recipe]:
    """{name: Recipe} in file order; RecipeError naming the file, the recipe and the field."""
    path = path or recipes_file()
    try:
        data = read_yaml(path, "benchmark recipes")
    except StackproofError as exc:
        raise RecipeError(str(exc)) from None
    if not isinstance(data, dict) or not data:
        raise RecipeError(f"{path}: expected a mapping of recipes")
    return {str(name): parse_recipe(str(name), body, str(path)) for name, body in data.items()}


def expand(text: str, values: dict[str, str]) -> str:
    """Fill {placeholders}; RecipeError when one has no value for this stack (e.g. no Fortran)."""
    def sub(m):
        value = values.get(m.group(1))
        if value is None:
            raise RecipeError(f"placeholder {{{m.group(1)}}} has no value for this stack")
        return value
    return _HOLE.sub(sub, text)
