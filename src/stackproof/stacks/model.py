"""The software stacks under test, each described once in a YAML file a site edits.

A stack file (reframe-tests/stacks/<name>.yaml, or a site's own directory in
$STACKPROOF_STACKS_DIR, searched first) names the MPI, its compilers, its environment, its launcher
per system kind and where each benchmark lives. Everything else (ReFrame environments, launchers,
binary paths, installation, `stackproof stack check`) is derived from the `Stack` read here.

Values may use ${prefix}, ${view} and ${ENV_VAR} (${STACKPROOF_STACKS_ROOT} defaults to
/opt/stackproof/stacks). $STACKPROOF_<NAME>_VIEW (e.g. STACKPROOF_COMMODITY_NEXT_VIEW) overrides a
stack's Spack view; benchmarks then resolve inside that view.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from stackproof.errors import InputError, StackproofError
from stackproof.paths import REPO
from stackproof.yamlfile import read_yaml

DEFAULT_STACKS_ROOT = Path("/opt/stackproof/stacks")
SHIPPED_DIR = REPO / "reframe-tests" / "stacks"
MPI_FAMILIES = ("openmpi", "mpich", "intelmpi")
SYSTEM_KINDS = ("local", "slurm")
# launcher options placing rank i on the i-th CPU of {cpus} with the local launcher (profiles, FWQ)
LAUNCHER_EXTRAS = ("local_bind",)
KEYS = {"name", "description", "prefix", "install", "modules", "view", "env", "path", "ld_library_path",
        "compilers", "blas_lapack", "mpi", "launcher", "benchmarks"}


class StackError(StackproofError):
    """A stack that cannot be used as described (unknown, malformed, not installed)."""


class StackFileError(StackError, InputError):
    """A stack file (or stack name) that is not what it may be: bad input, exit 2 at the CLI."""


def stacks_root() -> Path:
    return Path(os.environ.get("STACKPROOF_STACKS_ROOT") or DEFAULT_STACKS_ROOT)


def stack_dirs() -> list[Path]:
    """Where stack files are looked up: $STACKPROOF_STACKS_DIR (colon-separated) first, then the shipped ones."""
    extra = [Path(p) for p in os.environ.get("STACKPROOF_STACKS_DIR", "").split(":") if p]
    return extra + [SHIPPED_DIR]


def stack_file(name: str) -> Path | None:
    for d in stack_dirs():
        path = d / f"{name}.yaml"
        if path.is_file():
            return path
    return None


def stack_names() -> list[str]:
    names = {p.stem for d in stack_dirs() if d.is_dir() for p in d.glob("*.yaml")}
    return sorted(names)


def view_var(name: str) -> str:
    """STACKPROOF_<NAME>_VIEW: the environment variable overriding a stack's view."""
    return f"STACKPROOF_{re.sub(r'[^A-Za-z0-9]', '_', name).upper()}_VIEW"


@dataclass(frozen=True)
class Stack:
    name: str
    description: str
    prefix: Path | None
    install_pip: tuple[str, ...]
    install_apt: tuple[str, ...]
    modules: tuple[str, ...]
    view: Path | None
    env: dict[str, str]
    path: tuple[str, ...]
    ld_library_path: tuple[str, ...]
    cc: str
    cxx: str
    fc: str | None
    blas_lapack: str
    mpi_family: str
    mpi_version: str
    mpi_library: str
    mpi_library_dir: str | None
    launcher: dict[str, tuple[str, ...]]
    benchmarks: dict[str, str]
    file: Path | None = field(default=None, compare=False)

    def bench_dir(self) -> Path:
        """Where relative benchmark paths are resolved: the view when there is one, else ${prefix}/bench."""
        if self.view is not None:
            return self.view
        if self.prefix is None:
            raise StackFileError(f"stack {self.name}: neither prefix nor view is set ({self.file}): "
                                 f"set one, or {view_var(self.name)}")
        return self.prefix / "bench"

    def benchmark(self, name: str) -> Path:
        """Absolute path of benchmark `name` (existence not checked); StackError when the stack has none."""
        rel = self.benchmarks.get(name)
        if not rel:
            raise StackFileError(f"stack {self.name} declares no benchmark {name!r} ({self.file}: benchmarks)")
        path = Path(rel)
        return path if path.is_absolute() else self.bench_dir() / path

    def bind_options(self, cpus: str) -> list[str]:
        """Local-launcher options putting rank i on the i-th CPU of `cpus` (launcher.local_bind)."""
        return [opt.replace("{cpus}", cpus) for opt in self.launcher.get("local_bind", ())]

    def launch_command(self, kind: str) -> tuple[str, ...]:
        """The launcher for a system kind (local | slurm); StackError naming the file when absent."""
        cmd = self.launcher.get(kind)
        if not cmd:
            raise StackFileError(f"stack {self.name} has no launcher for {kind} systems: add "
                             f"`launcher: {{{kind}: [...]}}` to {self.file}")
        return cmd

    def env_recipe(self) -> dict:
        """How this stack's environment is made from any other (apply_env): its variables (`set`), the
        other stacks' variables it does not set (`unset`), its PATH / LD_LIBRARY_PATH prepends and the
        directories other stacks put there (`drop`), as plain data (a launch file carries it into a job
        that another stack's environment started)."""
        others = set()
        for other in stack_names():
            if other != self.name:
                try:
                    others |= set(load_stack(other).env)
                except StackError:
                    continue
        return {"set": dict(self.env), "unset": sorted(others - set(self.env)),
                "prepend": {"PATH": list(self.path), "LD_LIBRARY_PATH": list(self.ld_library_path)},
                "drop": sorted(_foreign_dirs(self.name))}

    def env_changes(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The variables this stack sets on top of `base`: its env, PATH and LD_LIBRARY_PATH prepends
        (entries another stack put there are dropped, so nothing of stack A leaks into stack B)."""
        base = dict(os.environ if base is None else base)
        recipe = {"set": dict(self.env), "unset": [],
                  "prepend": {"PATH": list(self.path), "LD_LIBRARY_PATH": list(self.ld_library_path)},
                  "drop": sorted(_foreign_dirs(self.name))}
        after = apply_env(recipe, base)
        return {k: v for k, v in after.items() if base.get(k) != v}

    def run_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """A full environment for building and running with this stack."""
        env = dict(os.environ if base is None else base)
        env.update(self.env_changes(env))
        return env


def apply_env(recipe: dict, base: dict[str, str]) -> dict[str, str]:
    """The environment `base` with a stack's recipe (Stack.env_recipe) applied: its `unset` variables
    removed, each `prepend` list in front of what `base` has there minus the `drop` directories, its
    `set` variables set. Plain data in, plain data out: the block launcher (stackproof.reframe.launch)
    uses it inside a job."""
    env = {k: v for k, v in base.items() if k not in set(recipe.get("unset") or ())}
    drop = set(recipe.get("drop") or ())
    for var, prepend in (recipe.get("prepend") or {}).items():
        kept = [p for p in base.get(var, "").split(":") if p and p not in drop and p not in prepend]
        value = ":".join(list(prepend) + kept)
        if value or var in base:
            env[var] = value
    env.update(recipe.get("set") or {})
    return env


def _foreign_dirs(name: str) -> set[str]:
    """PATH / LD_LIBRARY_PATH entries of the other stacks (those whose files load)."""
    dirs: set[str] = set()
    for other in stack_names():
        if other == name:
            continue
        try:
            st = load_stack(other)
        except StackError:
            continue
        dirs |= set(st.path) | set(st.ld_library_path)
    # system directories belong to everyone
    return dirs - {"/usr/bin", "/bin", "/usr/local/bin", "/usr/lib/x86_64-linux-gnu", "/usr/lib"}


_VAR = re.compile(r"\$\{(\w+)\}")


class _Expander:
    def __init__(self, origin: str, names: dict[str, str]):
        self.origin, self.names = origin, names

    def __call__(self, value, key: str):
        if value is None:
            return None
        if not isinstance(value, (str, int, float)):
            raise StackFileError(f"{self.origin}: {key}: expected a string, got {type(value).__name__}")

        def sub(m):
            var = m.group(1)
            if var in self.names:
                return self.names[var]
            if var in os.environ:
                return os.environ[var]
            raise StackError(f"{self.origin}: {key}: ${{{var}}} is not set (export it, or write the value)")
        return _VAR.sub(sub, str(value))

    def seq(self, value, key: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise StackFileError(f"{self.origin}: {key}: expected a list")
        return tuple(self(v, key) for v in value)


def load_stack(name: str) -> Stack:
    """Read stack `name`; StackError naming the file and the fix on any problem."""
    path = stack_file(name)
    if path is None:
        known = ", ".join(stack_names()) or "none"
        raise StackFileError(f"unknown stack {name!r} (known: {known}): add {SHIPPED_DIR}/{name}.yaml or a file "
                             "in $STACKPROOF_STACKS_DIR")
    try:
        data = read_yaml(path, f"stack {name}")
    except StackproofError as exc:
        kind = StackFileError if isinstance(exc, InputError) else StackError
        raise kind(f"stack {name}: {exc}") from None
    return parse_stack(data, path, name)


def parse_stack(data, path: Path, name: str | None = None) -> Stack:
    origin = f"stack {name or path.stem} ({path})"
    if not isinstance(data, dict):
        raise StackFileError(f"{origin}: expected a mapping of stack settings")
    unknown = set(data) - KEYS
    if unknown:
        raise StackFileError(f"{origin}: unknown keys {sorted(unknown)} (known: {sorted(KEYS)})")
    sname = str(data.get("name") or path.stem)
    if name and sname != name:
        raise StackFileError(f"{origin}: name {sname!r} differs from the file name: rename one")
    names = {"STACKPROOF_STACKS_ROOT": str(stacks_root())}
    ex = _Expander(origin, names)
    prefix = ex(data.get("prefix"), "prefix")
    names["prefix"] = prefix or ""
    view = os.environ.get(view_var(sname)) or ex(data.get("view"), "view")
    names["view"] = view or ""
    install = data.get("install") or {}
    if not isinstance(install, dict):
        raise StackFileError(f"{origin}: install: expected a mapping {{pip: [..], apt: [..]}}")
    mpi = data.get("mpi")
    if not isinstance(mpi, dict) or not all(mpi.get(k) for k in ("family", "version", "library")):
        raise StackFileError(f"{origin}: `mpi` needs family, version (regex) and library (regex)")
    if mpi["family"] not in MPI_FAMILIES:
        raise StackFileError(f"{origin}: mpi.family {mpi['family']!r} is not one of {', '.join(MPI_FAMILIES)}")
    for key in ("version", "library"):
        try:
            re.compile(str(mpi[key]))
        except re.error as exc:
            raise StackFileError(f"{origin}: mpi.{key}: invalid regex ({exc})") from None
    launcher = data.get("launcher")
    if not isinstance(launcher, dict) or not launcher:
        raise StackFileError(f"{origin}: no launcher: add `launcher: {{local: [mpirun], slurm: [srun, --mpi=pmix]}}`")
    bad = set(launcher) - set(SYSTEM_KINDS) - set(LAUNCHER_EXTRAS)
    if bad:
        raise StackFileError(f"{origin}: launcher kinds {sorted(bad)} unknown (use {', '.join(SYSTEM_KINDS)}, "
                             f"and {', '.join(LAUNCHER_EXTRAS)} for binding options)")
    if not set(launcher) & set(SYSTEM_KINDS):
        raise StackFileError(f"{origin}: no launcher: add `launcher: {{local: [mpirun], slurm: [srun, --mpi=pmix]}}`")
    compilers = data.get("compilers") or {}
    if not isinstance(compilers, dict) or not compilers.get("cc") or not compilers.get("cxx"):
        raise StackFileError(f"{origin}: compilers need cc and cxx (the MPI wrappers)")
    env = data.get("env") or {}
    if not isinstance(env, dict):
        raise StackFileError(f"{origin}: env: expected a mapping VAR: value")
    benchmarks = data.get("benchmarks") or {}
    if not isinstance(benchmarks, dict):
        raise StackFileError(f"{origin}: benchmarks: expected a mapping name: path")
    return Stack(
        name=sname,
        description=str(data.get("description") or ""),
        prefix=Path(prefix) if prefix else None,
        install_pip=ex.seq(install.get("pip"), "install.pip"),
        install_apt=ex.seq(install.get("apt"), "install.apt"),
        modules=ex.seq(data.get("modules"), "modules"),
        view=Path(view) if view else None,
        env={str(k): ex(v, f"env.{k}") for k, v in env.items()},
        path=ex.seq(data.get("path"), "path"),
        ld_library_path=ex.seq(data.get("ld_library_path"), "ld_library_path"),
        cc=ex(compilers["cc"], "compilers.cc"),
        cxx=ex(compilers["cxx"], "compilers.cxx"),
        fc=ex(compilers.get("fc"), "compilers.fc"),
        blas_lapack=ex(data.get("blas_lapack") or "", "blas_lapack"),
        mpi_family=mpi["family"],
        mpi_version=str(mpi["version"]),
        mpi_library=str(mpi["library"]),
        mpi_library_dir=ex(mpi.get("library_dir"), "mpi.library_dir"),
        launcher={k: ex.seq(v, f"launcher.{k}") for k, v in launcher.items()},
        benchmarks={str(k): ex(v, f"benchmarks.{k}") for k, v in benchmarks.items() if v},
        file=path,
    )
