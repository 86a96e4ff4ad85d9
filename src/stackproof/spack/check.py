"""`stackproof spack lint`: what Spack cannot check without being installed (CI).

The pins are present (spack-envs/pins.yaml), every file parses (spack.yaml, site packages.yaml,
recipes, lockfiles), each committed spack.lock has the roots of its spack.yaml and was made by the
pinned Spack, and pins.yaml, the recipes, spack.yaml and spack.lock agree on the project's own release
(version, sha256 of `git archive` of the pinned commit). Everything about whether a stack is *right*
(variants, satisfiability, recipes) is Spack's job: `stackproof spack check` (driver.py, lock.py).
Imports: basics and spack.pins.
"""
import ast
import json
import os
import re
import sys
from pathlib import Path

from stackproof.yamlfile import read_yaml
from stackproof.spack.pins import ENVS_DIR, RECIPES, load_pins, lock_inputs, locked_on_host, release_tarball_sha256

# ---------------------------------------------------------------------------------------------
# root specs: compared through Spack's parser when SPACK_ROOT is set, else by a normal form that
# ignores what Spack normalises (token order, spaces between variants)

def _spack_spec_class():
    root = os.environ.get("SPACK_ROOT")
    if not root or not (Path(root) / "lib" / "spack" / "spack").is_dir():
        return None
    sys.path.insert(0, str(Path(root) / "lib" / "spack"))
    try:
        import spack.spec  # noqa: E402  (Spack's own parser)
        return spack.spec.Spec
    except Exception:
        return None
    finally:
        sys.path.pop(0)


def normal_form(spec):
    text = re.sub(r"\s+", " ", str(spec).strip())
    text = re.sub(r"(?<=\S)([+~])", r" \1", text)      # 'hypre@2.33.0+mpi' -> 'hypre@2.33.0 +mpi'
    return tuple(sorted(text.split()))


def spec_name(spec):
    return re.split(r"[@+~%^ ]", str(spec).strip(), maxsplit=1)[0]


def same_roots(yaml_specs, lock_specs, spec_cls=None):
    if spec_cls is not None:
        a = sorted(str(spec_cls(s)) for s in yaml_specs)
        b = sorted(str(spec_cls(s)) for s in lock_specs)
        return a == b
    return sorted(map(normal_form, yaml_specs)) == sorted(map(normal_form, lock_specs))


# ---------------------------------------------------------------------------------------------
# the checks

def check_recipes(envs_dir, pins, errors):
    """Every recipe parses; each release package declares the pinned version and sha256."""
    for path in sorted((Path(envs_dir) / RECIPES).glob("*/package.py")):
        try:
            ast.parse(path.read_text(), str(path))
        except SyntaxError as exc:
            errors.append(f"{path}: does not parse: {exc.msg} (line {exc.lineno})")
    rel = pins["stackproof_release"]
    want = f'version("{rel["version"]}", sha256="{rel["sha256"]}")'
    for pkg in rel["packages"]:
        path = Path(envs_dir) / RECIPES / pkg.replace("-", "_") / "package.py"
        if not path.is_file():
            errors.append(f"{path}: recipe of {pkg} (pins.yaml stackproof_release.packages) missing")
        elif want not in path.read_text():
            errors.append(f"{path}: must declare {want} (pins.yaml stackproof_release)")


def check_env(envs_dir, name, pins, errors, spec_cls=None, need_lock=True, check_lock=True):
    path = Path(envs_dir) / name / "spack.yaml"
    data = read_yaml(path, f"Spack environment {name}")
    env = data.get("spack") if isinstance(data, dict) else None
    if not isinstance(env, dict) or not isinstance(env.get("specs"), list):
        errors.append(f"{path}: no spack: specs: list")
        return
    specs = [str(s) for s in env["specs"]]
    rel = pins["stackproof_release"]
    for s in specs:
        if spec_name(s) in rel["packages"] and \
                not re.match(rf"{re.escape(spec_name(s))}@={{0,1}}{re.escape(rel['version'])}(?![\w.])", s.strip()):
            errors.append(f"{path}: '{s}' must pin @{rel['version']} (pins.yaml stackproof_release)")
    lock_path = path.with_name("spack.lock")
    if not check_lock:
        return
    if not lock_path.is_file():
        if need_lock:
            errors.append(f"{lock_path}: missing: run `make spack-lock` with SPACK_ROOT set and commit it")
        return
    try:
        lock = json.loads(lock_path.read_text())
    except ValueError as exc:
        errors.append(f"{lock_path}: not valid JSON ({exc})")
        return
    if (lock.get("_meta") or {}).get("file-type") != "spack-lockfile":
        errors.append(f"{lock_path}: not a Spack lockfile (_meta.file-type)")
        return
    made_by = lock.get("spack") or {}
    if made_by.get("version") != pins["spack"]["version"] or \
            not str(made_by.get("commit", "")).startswith(pins["spack"]["commit"]):
        errors.append(f"{lock_path}: made by Spack {made_by.get('version')} ({made_by.get('commit')}), "
                      f"pins.yaml says {pins['spack']['version']} ({pins['spack']['commit']}): make spack-lock")
    inputs = lock_path.with_name("spack.lock.inputs")
    if not inputs.is_file() or inputs.read_text() != lock_inputs(envs_dir, name):
        errors.append(f"{lock_path}: {path.name} or our recipes changed since the lock was made "
                      f"({inputs.name} differs): make spack-lock")
    roots = [r.get("spec", "") for r in lock.get("roots") or []]
    if not same_roots(specs, roots, spec_cls):
        errors.append(f"{lock_path}: roots differ from {path.name} specs: make spack-lock")
    concrete = lock.get("concrete_specs") or {}
    for r in lock.get("roots") or []:
        node = concrete.get(r.get("hash"))
        if node is None:
            errors.append(f"{lock_path}: root {r.get('spec')} has no concrete spec")
        elif node.get("name") in rel["packages"] and node.get("version") != rel["version"]:
            errors.append(f"{lock_path}: {node['name']}@{node.get('version')} is locked, pins.yaml says "
                          f"{rel['version']}: make spack-lock")


def consistency_check(envs_dir=ENVS_DIR, envs=None, verify_tarball=True, check_locks=True):
    """Returns (errors, notes); errors empty = consistent. check_locks=False: the locks are about to be
    rewritten (make spack-lock) or are not needed (make spack-mirror)."""
    envs_dir = Path(envs_dir)
    pins = load_pins(envs_dir)
    errors, notes = [], []
    req = envs_dir / pins["clingo"]["requirements"]
    if not req.is_file():
        errors.append(f"{req}: clingo requirements (pins.yaml clingo.requirements) missing")
    check_recipes(envs_dir, pins, errors)
    for site, site_envs in (pins.get("sites") or {}).items():
        site_file = envs_dir / "site" / site / "packages.yaml"
        if not site_file.is_file():
            errors.append(f"{site_file}: site file listed in pins.yaml (sites) is missing")
        elif not isinstance((read_yaml(site_file, "site packages.yaml") or {}).get("packages"), dict):
            errors.append(f"{site_file}: no packages: mapping")
        for e in site_envs or []:
            if e not in pins["environments"]:
                errors.append(f"pins.yaml sites.{site}: unknown environment '{e}'")
    spec_cls = _spack_spec_class()
    notes.append("roots compared with " + ("Spack's parser" if spec_cls else "the normal form (no SPACK_ROOT)"))
    hosted = locked_on_host(pins)
    for name in envs or pins["environments"]:
        if not (envs_dir / name / "spack.yaml").is_file():
            errors.append(f"{envs_dir / name / 'spack.yaml'}: environment listed in pins.yaml is missing")
            continue
        check_env(envs_dir, name, pins, errors, spec_cls, need_lock=name in hosted, check_lock=check_locks)
    rel = pins["stackproof_release"]
    if verify_tarball:
        sha = release_tarball_sha256(rel["commit"], rel["version"])
        if sha is None:
            notes.append(f"release tarball not verified: commit {rel['commit'][:12]} is not in this clone")
        elif sha != rel["sha256"]:
            errors.append(f"pins.yaml stackproof_release.sha256 {rel['sha256'][:12]}… is not the sha256 of "
                          f"git archive of {rel['commit'][:12]} ({sha[:12]}…)")
        else:
            notes.append(f"release {rel['version']}: git archive of {rel['commit'][:12]} has the pinned sha256")
    return errors, notes
