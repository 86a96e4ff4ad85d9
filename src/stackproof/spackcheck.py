"""`stackproof spack-check`: structural check of spack-envs/ and offline concretization with Spack.

The structural check always runs (no Spack needed): every environment has its required packages,
variants, pins and view, the compilers are pinned per language, and the project's Spack repository
(spack-envs/repo) is a valid Spack v1 repository. With --concretize, every environment is concretized
by the Spack checkout in $SPACK_ROOT (builtin recipes from $SPACK_PACKAGES_ROOT), offline: clingo from
a private venv, bootstrap disabled, no mirrors, and the command under `unshare -n` (no network).
"""
import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from .errors import StackproofError
from .yamlfile import read_yaml
from .paths import REPO

ENVS_DIR = REPO / "spack-envs"
REPO_NAMESPACE = "stackproof"
REPO_REL = Path("repo") / "spack_repo" / REPO_NAMESPACE
REPO_ENTRY = "$env/../repo/spack_repo/stackproof"
SHA1 = re.compile(r"^[0-9a-f]{40}$")
SKIP_MESSAGE = ("spack-check: concretization SKIPPED: set SPACK_ROOT to a Spack v{version} checkout "
                "(and SPACK_PACKAGES_ROOT to a spack-packages {tag} checkout) to concretize offline")

# What every environment must contain. "any" lists alternatives (one suffices).
BENCHMARKS = ["osu-micro-benchmarks", "fwq-mpi", "stackproof-mpibind"]
REQUIRED = {
    "commodity-cpu": {"specs": BENCHMARKS + ["openmpi", "ucx", "hwloc", "hypre", "sw4"],
                      "any": [["amg2023", "amg2013"]], "gpu": False, "built_mpi": True},
    "commodity-gpu": {"specs": BENCHMARKS + ["openmpi", "ucx", "hwloc", "hypre", "sw4", "cuda"],
                      "any": [["amg2023", "amg2013"]], "gpu": True, "built_mpi": True},
    "vendor": {"specs": BENCHMARKS + ["hypre"], "any": [["amg2023", "amg2013"]], "gpu": True,
               "built_mpi": False},
    "laptop": {"specs": BENCHMARKS + ["openmpi", "hwloc"], "any": [["amg2023", "amg2013"]],
               "gpu": False, "built_mpi": False},
    "container": {"specs": BENCHMARKS + ["openmpi", "ucx", "hwloc", "hypre", "cuda"],
                  "any": [["amg2023", "amg2013"]], "gpu": True, "built_mpi": True},
}
UCX_IB = ["+verbs", "+rdmacm", "+rc", "+ud", "+dc", "+mlx5_dv"]
CUDA_ARCHS = {"70", "90"}
CUDA_MAX = (12, 9)  # sm_70 (V100) is dropped after CUDA 12.9
# packages whose CUDA build must be fat for V100 and H100 (when present and built)
CUDA_SPECS = ["osu-micro-benchmarks", "amg2023", "hypre", "ucx", "openmpi", "hwloc"]
LANGS = ["c", "cxx", "fortran"]


# ---------------------------------------------------------------------------------------------
# spec helpers (a deliberately small parser: name, @version, +/~variants, key=value, commit=)

def spec_name(spec):
    token = str(spec).strip().split()[0] if str(spec).strip() else ""
    return re.split(r"[@+~%^ ]", token, maxsplit=1)[0]


def spec_tokens(spec):
    """Split 'pkg@1.2 +a ~b key=v1,v2' into tokens: '@1.2', '+a', '~b', 'key=v1,v2'."""
    text = str(spec).strip()
    name = spec_name(text)
    rest = text[len(name):]
    rest = re.sub(r"([+~@])", r" \1", rest)
    return [t for t in rest.split() if t]


def spec_values(spec, key):
    for tok in spec_tokens(spec):
        m = re.match(rf"^{re.escape(key)}:?==?(.*)$", tok)
        if m:
            return set(v for v in m.group(1).split(",") if v)
    return None


def spec_has(spec, flag):
    return flag in spec_tokens(spec)


def spec_version(spec):
    for tok in spec_tokens(spec):
        if tok.startswith("@"):
            return tok[1:].lstrip("=")
    return None


def version_tuple(text):
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def cuda_version_ok(constraint):
    """True when every version the constraint allows is <= CUDA_MAX ('12.9', '12:12.9', '12.4.1')."""
    if constraint is None:
        return False
    hi = constraint.split(":")[-1] if ":" in constraint else constraint
    if not hi:  # open upper bound, e.g. '12:'
        return False
    return version_tuple(hi)[:2] <= CUDA_MAX


# ---------------------------------------------------------------------------------------------
# structural check

class Report:
    def __init__(self):
        self.errors, self.warnings, self.notes = [], [], []

    def error(self, where, msg):
        self.errors.append(f"{where}: {msg}")

    def warn(self, where, msg):
        self.warnings.append(f"{where}: {msg}")


def load_pins(envs_dir):
    path = Path(envs_dir) / "pins.yaml"
    if not path.is_file():
        raise StackproofError(f"{path} not found: is {envs_dir} the spack-envs/ directory?")
    pins = yaml.safe_load(path.read_text())
    for key in ("spack", "spack_packages", "views_root", "environments"):
        if key not in (pins or {}):
            raise StackproofError(f"{path}: missing key '{key}'")
    return pins


def load_env(envs_dir, name):
    path = Path(envs_dir) / name / "spack.yaml"
    data = read_yaml(path, f"environment {name}")
    if not isinstance(data, dict) or not isinstance(data.get("spack"), dict):
        raise StackproofError(f"{path}: top-level key 'spack' missing")
    return data["spack"]


def _requirements(pkgcfg, name):
    req = (pkgcfg.get(name) or {}).get("require") or []
    if isinstance(req, str):
        req = [req]
    out = []
    for r in req:
        if isinstance(r, dict):
            out.extend(r.get("one_of") or r.get("any_of") or [r.get("spec", "")])
        else:
            out.append(str(r))
    return out


def _externals(pkgcfg, name):
    return [e.get("spec", "") for e in (pkgcfg.get(name) or {}).get("externals") or []]


def _constraints(env, name):
    """Every spec string that constrains package `name`: root specs, requirements, externals."""
    pkgcfg = env.get("packages") or {}
    roots = [s for s in env.get("specs") or [] if spec_name(s) == name]
    reqs = [f"{name} {r}" for r in _requirements(pkgcfg, name)]
    return roots, reqs, _externals(pkgcfg, name)


def check_env(envs_dir, name, pins, known_repo_pkgs, report):
    where = f"{name}/spack.yaml"
    env = load_env(envs_dir, name)
    rules = REQUIRED.get(name)
    specs = [str(s) for s in env.get("specs") or []]
    names = {spec_name(s) for s in specs}
    pkgcfg = env.get("packages") or {}
    if rules is None:
        report.warn(where, "environment has no rules in spackcheck.REQUIRED; only generic checks ran")
        rules = {"specs": BENCHMARKS, "any": [], "gpu": False, "built_mpi": False}

    for pkg in rules["specs"]:
        if pkg not in names:
            report.error(where, f"required package '{pkg}' is not a root spec")
    for alts in rules["any"]:
        if not names.intersection(alts):
            report.error(where, f"needs one of {alts} as a root spec")

    # amg2023 has only branch versions: it must be pinned to a commit
    for s in specs:
        if spec_name(s) == "amg2023":
            commit = spec_values(s, "commit")
            if not commit or not SHA1.match(next(iter(commit))):
                report.error(where, f"'{s}': amg2023 must be pinned with commit=<40-hex sha>")

    # compilers pinned per language, never through all:require:%compiler
    all_req = _requirements(pkgcfg, "all")
    if any("%" in r for r in all_req):
        report.error(where, "packages:all:require pins a compiler with '%' (unsatisfiable in Spack v1); "
                            "pin c/cxx/fortran instead")
    for lang in LANGS:
        req = _requirements(pkgcfg, lang)
        if not req:
            report.error(where, f"packages:{lang}:require missing (compilers are pinned per language)")
            continue
        comp = spec_name(req[0])
        ext = _externals(pkgcfg, comp)
        if not ext:
            report.error(where, f"packages:{lang} requires '{req[0]}' but no external '{comp}' is declared")
        elif not any(spec_version(e) and spec_version(e).startswith(spec_version(req[0]) or "")
                     for e in ext):
            report.error(where, f"packages:{lang} requires '{req[0]}' but the '{comp}' externals are {ext}")
    if (pkgcfg.get("all") or {}).get("target") is None:
        report.warn(where, "packages:all:target not set (node binaries follow the build host's target)")

    # Slurm is always the site's
    slurm = pkgcfg.get("slurm") or {}
    if not _externals(pkgcfg, "slurm") or slurm.get("buildable", True):
        report.error(where, "slurm must be a non-buildable external (the site's Slurm)")

    # MPI: openmpi over UCX with Slurm where the stack builds its MPI
    if rules["built_mpi"]:
        roots, reqs, _ = _constraints(env, "openmpi")
        ompi = " ".join(roots + reqs)
        fabrics = spec_values(ompi, "fabrics") or set()
        scheds = spec_values(ompi, "schedulers") or set()
        if "ucx" not in fabrics:
            report.error(where, "openmpi must be built with fabrics=ucx")
        if "slurm" not in scheds:
            report.error(where, "openmpi must be built with schedulers=slurm")
        roots, reqs, _ = _constraints(env, "ucx")
        ucx = " ".join(roots + reqs)
        missing = [v for v in UCX_IB if not spec_has(ucx, v)]
        if missing:
            report.error(where, f"ucx lacks InfiniBand transports {missing}")
    else:
        mpi_req = _requirements(pkgcfg, "mpi")
        if not mpi_req:
            report.error(where, "packages:mpi:require missing (which MPI the benchmarks use)")
        else:
            mpi = spec_name(mpi_req[0])
            if not _externals(pkgcfg, mpi) or (pkgcfg.get(mpi) or {}).get("buildable", True):
                report.error(where, f"MPI '{mpi}' must be a non-buildable external in this environment")

    # CUDA: fat binaries for V100 + H100, CUDA <= 12.9
    if rules["gpu"]:
        roots, reqs, exts = _constraints(env, "cuda")
        versions = [spec_version(s) for s in roots + reqs + exts if spec_version(s)]
        if not versions:
            report.error(where, "CUDA version not constrained (must be <= 12.9 while V100 is targeted)")
        for v in versions:
            if not cuda_version_ok(v):
                report.error(where, f"cuda@{v} allows CUDA > 12.9 (sm_70/V100 is dropped after 12.9)")
        for pkg in CUDA_SPECS:
            roots, reqs, exts = _constraints(env, pkg)
            if not roots and not reqs:
                continue
            if exts and (pkgcfg.get(pkg) or {}).get("buildable") is False:
                continue
            text = " ".join(roots + reqs)
            if not spec_has(text, "+cuda"):
                report.error(where, f"{pkg} must be built +cuda in a GPU environment")
            archs = spec_values(text, "cuda_arch") or set()
            if pkg != "hwloc" and not CUDA_ARCHS <= archs:
                report.error(where, f"{pkg} must carry cuda_arch=70,90 (got {sorted(archs) or 'none'})")
        roots, reqs, _ = _constraints(env, "hwloc")
        hw = " ".join(roots + reqs)
        if hw and not (spec_has(hw, "+cuda") and spec_has(hw, "+nvml")):
            report.error(where, "hwloc must be +cuda +nvml in a GPU environment")
        roots, reqs, _ = _constraints(env, "ucx")
        ucx = " ".join(roots + reqs)
        if ucx and not spec_has(ucx, "+gdrcopy"):
            report.error(where, "ucx must be +gdrcopy in a GPU environment")
        for s in specs:
            if spec_name(s) == "stackproof-mpibind" and not spec_has(s, "+cuda"):
                report.error(where, "stackproof-mpibind must be +cuda in a GPU environment")

    # views: predictable roots
    view = env.get("view")
    expected = f"{pins['views_root'].rstrip('/')}/{name}"
    if not isinstance(view, dict) or not isinstance(view.get("default"), dict):
        report.error(where, f"view 'default' missing (expected root {expected})")
    else:
        root = view["default"].get("root")
        if root != expected:
            report.error(where, f"view root is {root!r}, expected {expected!r}")
        # AMG2023 and AMG2013 both install bin/amg: one view cannot hold both
        if {"amg2023", "amg2013"} <= names:
            amg = view.get("amg2013") or {}
            if "amg2013" not in (view["default"].get("exclude") or []):
                report.error(where, "view 'default' must exclude amg2013 (bin/amg clashes with amg2023)")
            if amg.get("root") != f"{expected}-amg2013" or "amg2013" not in (amg.get("select") or []):
                report.error(where, f"view 'amg2013' must select amg2013 with root {expected}-amg2013")

    # our packages come from the stackproof repository
    ours = [spec_name(s) for s in specs if spec_name(s) in known_repo_pkgs]
    repos = env.get("repos") or {}
    repo_paths = list(repos.values()) if isinstance(repos, dict) else list(repos)
    if ours and REPO_ENTRY not in repo_paths:
        report.error(where, f"uses {ours} but repos does not list {REPO_ENTRY}")
    for s in specs:
        n = spec_name(s)
        if n in ("fwq-mpi", "stackproof-mpibind", "py-stackproof") and n not in known_repo_pkgs:
            report.error(where, f"'{n}' is not a package of spack-envs/{REPO_REL}")

    if name == "container":
        images = ((env.get("container") or {}).get("images") or {})
        if images.get("spack") != pins["spack"]["tag"]:
            report.error(where, f"container:images:spack must be {pins['spack']['tag']} (pins.yaml)")

    check_lock(envs_dir, name, specs, pins, report)
    return env


def check_lock(envs_dir, name, specs, pins, report):
    path = Path(envs_dir) / name / "spack.lock"
    where = f"{name}/spack.lock"
    if not path.is_file():
        report.warn(where, "not committed yet (make spack-lock with SPACK_ROOT set)")
        return None
    try:
        lock = json.loads(path.read_text())
    except ValueError as exc:
        report.error(where, f"not valid JSON: {exc}")
        return None
    meta = lock.get("_meta") or {}
    if "lockfile-version" not in meta:
        report.error(where, "no _meta.lockfile-version: not a Spack lockfile")
    roots = [r.get("spec", "") for r in lock.get("roots") or []]
    if sorted(roots) != sorted(specs):
        report.error(where, "roots differ from spack.yaml specs: re-run make spack-lock")
    spack_meta = lock.get("spack") or {}
    version = spack_meta.get("version")
    if version and version != pins["spack"]["version"]:
        report.error(where, f"concretized by Spack {version}, pins.yaml says {pins['spack']['version']}")
    return lock


def _class_name(pkg):
    """Spack's package-name -> class-name rule (mod_to_class): split on - and _, capitalize."""
    return "".join(part.capitalize() for part in re.split(r"[-_]", pkg) if part)


def check_repo(envs_dir, report, builtin_dir=None):
    """The project's Spack v1 repository; returns the package names it defines."""
    root = Path(envs_dir) / REPO_REL
    where = f"{REPO_REL}"
    meta_path = root / "repo.yaml"
    if not meta_path.is_file():
        report.error(where, "repo.yaml missing")
        return set()
    meta = (yaml.safe_load(meta_path.read_text()) or {}).get("repo") or {}
    if meta.get("namespace") != REPO_NAMESPACE:
        report.error(where, f"repo.yaml namespace must be '{REPO_NAMESPACE}' (the directory name)")
    if not re.match(r"^v2\.\d+$", str(meta.get("api", ""))):
        report.error(where, f"repo.yaml api must be v2.x (Spack v1 layout), got {meta.get('api')!r}")
    pkgs = set()
    pkg_dir = root / "packages"
    for d in sorted(p for p in pkg_dir.iterdir() if p.is_dir()) if pkg_dir.is_dir() else []:
        if d.name == "__pycache__":
            continue
        f = d / "package.py"
        w = f"{REPO_REL}/packages/{d.name}"
        if not f.is_file():
            report.error(w, "package.py missing")
            continue
        if d.name != d.name.lower() or "-" in d.name:
            report.error(w, "v2 package directories use lowercase and '_' for '-'")
        pkg = d.name.replace("_", "-")
        try:
            tree = ast.parse(f.read_text(), str(f))
        except SyntaxError as exc:
            report.error(w, f"package.py does not parse: {exc}")
            continue
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        cls = classes.get(_class_name(pkg))
        if cls is None:
            report.error(w, f"package.py must define class {_class_name(pkg)}")
            continue
        imports = [n.module for n in tree.body if isinstance(n, ast.ImportFrom)]
        if "spack.package" not in imports:
            report.error(w, "package.py must import from spack.package")
        if not any(m and m.startswith("spack_repo.builtin.build_systems.") for m in imports):
            report.error(w, "build system must come from spack_repo.builtin.build_systems (v1 API)")
        calls = [n.value.func.id for n in cls.body
                 if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
                 and isinstance(n.value.func, ast.Name)]
        if "version" not in calls:
            report.error(w, "no version() directive")
        if builtin_dir and (Path(builtin_dir) / "packages" / d.name).is_dir():
            report.error(w, f"'{pkg}' also exists in builtin: rename it (see docs/spack.md)")
        pkgs.add(pkg)
    if not pkgs:
        report.error(where, "no packages")
    check_cmake_options(root, report)
    return pkgs


def check_cmake_options(repo_root, report):
    """Warn when a recipe passes a -D option that the component's CMakeLists.txt never mentions."""
    for pkg_py in sorted(repo_root.glob("packages/*/package.py")):
        text = pkg_py.read_text()
        m = re.search(r'root_cmakelists_dir\s*=\s*"([^"]+)"', text)
        if not m:
            continue
        cmakelists = REPO / m.group(1) / "CMakeLists.txt"
        if not cmakelists.is_file():
            report.warn(pkg_py.parent.name, f"{m.group(1)}/CMakeLists.txt not found; options unchecked")
            continue
        cm = "\n".join(p.read_text(errors="replace") for p in cmakelists.parent.rglob("*.cmake")) \
            + cmakelists.read_text(errors="replace")
        for opt in re.findall(r'define(?:_from_variant)?\(\s*"([A-Z0-9_]+)"', text):
            if opt in ("BUILD_SHARED_LIBS", "BUILD_TESTING", "Python3_EXECUTABLE"):
                continue
            if opt not in cm:
                report.warn(pkg_py.parent.name, f"option {opt} is not used by {m.group(1)}/CMakeLists.txt")


def structural_check(envs_dir=ENVS_DIR, envs=None, builtin_dir=None):
    envs_dir = Path(envs_dir)
    pins = load_pins(envs_dir)
    report = Report()
    known = check_repo(envs_dir, report, builtin_dir)
    for name in envs or pins["environments"]:
        try:
            check_env(envs_dir, name, pins, known, report)
        except StackproofError as exc:
            report.error(name, str(exc))
    return report


# ---------------------------------------------------------------------------------------------
# offline concretization

def _spack_python(workdir, envs_dir, pins):
    """SPACK_PYTHON: the caller's if it imports clingo, else a private venv with the pinned clingo."""
    given = os.environ.get("SPACK_PYTHON")
    if given:
        return given
    venv = Path(workdir) / "venv"
    py = venv / "bin" / "python"
    req = Path(envs_dir) / pins["clingo"]["requirements"]
    stamp = venv / ".installed"
    if not stamp.is_file() or stamp.read_text() != req.read_text():
        print(f"spack-check: installing clingo into {venv} ({req.name})", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "-r", str(req)], check=True)
        stamp.write_text(req.read_text())
    return str(py)


def write_scope(config_dir, builtin, workdir):
    """The command-line config scope (spack -C): builtin repo from disk, no bootstrap, no mirrors."""
    config_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "repos.yaml": {"repos::": {"builtin": str(builtin)}},
        "bootstrap.yaml": {"bootstrap": {"enable": False}},
        "mirrors.yaml": {"mirrors::": {}},
        "config.yaml": {"config": {"install_tree": {"root": str(workdir / "opt")},
                                   "build_stage": [str(workdir / "stage")],
                                   "misc_cache": str(workdir / "cache"),
                                   "build_jobs": 2}},
    }
    for fname, data in files.items():
        (config_dir / fname).write_text(yaml.safe_dump(data, sort_keys=False))


def resolve_builtin(spack_root):
    env_root = os.environ.get("SPACK_PACKAGES_ROOT")
    candidates = [Path(env_root)] if env_root else [Path(spack_root).parent / "spack-packages"]
    for c in candidates:
        for b in (c / "repos" / "spack_repo" / "builtin", c):
            if (b / "repo.yaml").is_file() and (b / "packages").is_dir():
                return b
    raise StackproofError(
        f"builtin recipes not found (looked in {', '.join(map(str, candidates))}): set SPACK_PACKAGES_ROOT "
        "to a checkout of spack-packages at the tag in spack-envs/pins.yaml")


def can_unshare():
    return shutil.which("unshare") is not None and \
        subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


def concretize(envs_dir=ENVS_DIR, envs=None, workdir=None, update_lock=False, offline=True):
    envs_dir = Path(envs_dir)
    pins = load_pins(envs_dir)
    spack_root = os.environ.get("SPACK_ROOT")
    if not spack_root:
        return None
    spack = Path(spack_root) / "bin" / "spack"
    if not spack.is_file():
        raise StackproofError(f"SPACK_ROOT={spack_root}: bin/spack not found")
    builtin = resolve_builtin(spack_root)
    workdir = Path(workdir or REPO / "build" / "spack").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update({
        "SPACK_PYTHON": _spack_python(workdir, envs_dir, pins),
        "SPACK_DISABLE_LOCAL_CONFIG": "1",
        "SPACK_USER_CONFIG_PATH": str(workdir / "home" / ".spack"),
        "SPACK_USER_CACHE_PATH": str(workdir / "home" / "cache"),
    })
    scope = workdir / "config"
    write_scope(scope, builtin, workdir)
    prefix = []
    if offline:
        if not can_unshare():
            raise StackproofError("unshare -n is not permitted here (needs root or user namespaces); "
                                  "pass --allow-network to concretize without the network proof")
        prefix = ["unshare", "-n"]

    ver = subprocess.run(prefix + [str(spack), "-C", str(scope), "--version"], env=env,
                         capture_output=True, text=True)
    version_line = (ver.stdout or ver.stderr).strip()
    if ver.returncode != 0:
        raise StackproofError(f"spack --version failed: {version_line[-2000:]}")
    if not version_line.startswith(pins["spack"]["version"]):
        print(f"spack-check: WARNING: Spack reports {version_line!r}, pins.yaml says "
              f"{pins['spack']['version']} ({pins['spack']['commit']})", flush=True)

    # copies of the environments: the committed spack.lock files change only with --update-lock
    stage = workdir / "envs"
    stage.mkdir(exist_ok=True)
    link = stage / "repo"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to((envs_dir / "repo").resolve())
    results = []
    for name in envs or pins["environments"]:
        src = envs_dir / name / "spack.yaml"
        if not src.is_file():
            raise StackproofError(f"environment {name}: {src} not found")
        dst = stage / name
        if dst.exists():
            shutil.rmtree(dst)
        dst.mkdir()
        shutil.copy2(src, dst / "spack.yaml")
        log = workdir / "logs" / f"{name}.log"
        log.parent.mkdir(exist_ok=True)
        cmd = prefix + [str(spack), "-C", str(scope), "-e", str(dst), "concretize", "-f"]
        print(f"spack-check: concretize {name} ...", flush=True)
        t0 = time.monotonic()
        with open(log, "w") as out:
            out.write("$ " + " ".join(cmd) + "\n")
            out.flush()
            rc = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=dst).returncode
        seconds = time.monotonic() - t0
        lock = dst / "spack.lock"
        nodes = None
        if rc == 0 and lock.is_file():
            nodes = len((json.loads(lock.read_text()).get("concrete_specs") or {}))
            if update_lock:
                shutil.copy2(lock, envs_dir / name / "spack.lock")
        results.append({"env": name, "rc": rc, "seconds": round(seconds, 1), "nodes": nodes,
                        "log": str(log)})
        status = "ok" if rc == 0 else f"FAILED (rc {rc}, log {log})"
        print(f"spack-check: {name}: {seconds:.1f} s, {nodes if nodes is not None else '-'} nodes, {status}",
              flush=True)
    report = {"spack": version_line, "builtin": str(builtin), "offline": bool(prefix), "results": results}
    (workdir / "concretize-report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


# ---------------------------------------------------------------------------------------------
# CLI

def run(args):
    envs_dir = Path(args.envs_dir)
    pins = load_pins(envs_dir)
    envs = args.env or None
    for e in envs or []:
        if e not in pins["environments"]:
            raise StackproofError(f"unknown environment '{e}' (known: {', '.join(pins['environments'])})")
    builtin = None
    if os.environ.get("SPACK_PACKAGES_ROOT") or os.environ.get("SPACK_ROOT"):
        try:
            builtin = resolve_builtin(os.environ.get("SPACK_ROOT", "/nonexistent"))
        except StackproofError:
            builtin = None
    report = structural_check(envs_dir, envs, builtin)
    for w in report.warnings:
        print(f"spack-check: warning: {w}")
    for e in report.errors:
        print(f"spack-check: ERROR: {e}", file=sys.stderr)
    n = len(envs or pins["environments"])
    if report.errors:
        raise StackproofError(f"structural check failed: {len(report.errors)} error(s) in {envs_dir}")
    print(f"spack-check: structural check ok: {n} environments, repo namespace {REPO_NAMESPACE}")
    if not (args.concretize or args.update_lock):
        return 0
    if not os.environ.get("SPACK_ROOT"):
        msg = SKIP_MESSAGE.format(version=pins["spack"]["version"], tag=pins["spack_packages"]["tag"])
        if args.skip_missing:
            print(msg)
            return 0
        raise StackproofError(msg.replace("spack-check: concretization SKIPPED: ", ""))
    result = concretize(envs_dir, envs, args.workdir, args.update_lock, offline=not args.allow_network)
    failed = [r["env"] for r in result["results"] if r["rc"] != 0]
    total = sum(r["seconds"] for r in result["results"])
    print(f"spack-check: concretized {len(result['results']) - len(failed)}/{len(result['results'])} "
          f"environments in {total:.1f} s ({'offline' if result['offline'] else 'NETWORK ALLOWED'})")
    if failed:
        raise StackproofError(f"concretization failed for {', '.join(failed)}")
    return 0


def register(subparsers):
    p = subparsers.add_parser(
        "spack-check", help="check spack-envs/ (structure; with --concretize: offline concretization)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs-dir", default=str(ENVS_DIR), help="the spack-envs/ directory (default: %(default)s)")
    p.add_argument("--env", action="append", metavar="NAME", help="only this environment (repeatable)")
    p.add_argument("--concretize", action="store_true",
                   help="concretize every environment with $SPACK_ROOT (offline, under unshare -n)")
    p.add_argument("--update-lock", action="store_true",
                   help="concretize and copy the new spack.lock files into spack-envs/")
    p.add_argument("--skip-missing", action="store_true",
                   help="without SPACK_ROOT: print the skip message and succeed")
    p.add_argument("--allow-network", action="store_true", help="do not run Spack under unshare -n")
    p.add_argument("--workdir", default=None, help="scratch dir for config, venv, env copies, logs "
                                                   "(default: build/spack)")
    p.set_defaults(func=run)
