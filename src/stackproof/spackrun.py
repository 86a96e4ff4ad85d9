"""Real Spack for spack-envs/ (SPACK_ROOT): audits, offline concretization, lockfiles, source mirror,
an offline install of an environment from its lock.

Scopes (docs/spack.md "Scopes"): Spack runs with a private *user* scope (builtin repo from
$SPACK_PACKAGES_ROOT, bootstrap off, no mirrors, install tree under the work dir) and a private
*system* scope (empty, or one site packages.yaml from spack-envs/site/). Both rank below the
environment scope, so an environment's own `repos:` and `packages:` always win, exactly as on a site.
The Spack checkout's own scopes ($SPACK_ROOT/etc/spack and its site/) must hold no configuration:
otherwise the result would depend on that checkout, and the driver stops.
"""
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
from .paths import REPO
from .spackcheck import lock_inputs, locked_on_host, release_tarball_sha256

OUR_PACKAGES = ["fwq-mpi", "stackproof-mpibind", "py-stackproof", "reframe", "osu-micro-benchmarks", "amg2023"]


def builtin_repo(pins):
    root = os.environ.get("SPACK_PACKAGES_ROOT") or str(Path(os.environ["SPACK_ROOT"]).parent / "spack-packages")
    path = Path(root) / pins["spack_packages"]["builtin_path"]
    if not (path / "repo.yaml").is_file():
        raise StackproofError(f"builtin recipes not found at {path}: set SPACK_PACKAGES_ROOT to a checkout of "
                              f"spack-packages {pins['spack_packages']['tag']}")
    return path


def foreign_config(spack_root):
    """Configuration files in the checkout's own scopes (spack, site) that would leak into results."""
    etc = Path(spack_root) / "etc" / "spack"
    found = [p for p in etc.glob("*.yaml") if p.name != "include.yaml"]
    return sorted(found + list((etc / "site").glob("*.yaml")))


class Spack:
    """One Spack checkout driven with private user/system scopes; every command logged."""

    def __init__(self, pins, workdir, offline=True):
        self.pins = pins
        self.root = Path(os.environ["SPACK_ROOT"])
        self.exe = self.root / "bin" / "spack"
        if not self.exe.is_file():
            raise StackproofError(f"SPACK_ROOT={self.root}: bin/spack not found")
        leaks = foreign_config(self.root)
        if leaks:
            raise StackproofError("Spack checkout carries its own configuration, results would not be "
                                  f"reproducible: {', '.join(map(str, leaks))} (move them away; put site "
                                  "files in /etc/spack or test them with spack-envs/site/)")
        self.builtin = builtin_repo(pins)
        self.work = Path(workdir or REPO / "build" / "spack").resolve()
        self.logs = self.work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.prefix = []
        if offline:
            if not shutil.which("unshare") or \
                    subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
                raise StackproofError("unshare -n is not permitted here (needs root or user namespaces); "
                                      "pass --allow-network to run Spack without the no-network proof")
            self.prefix = ["unshare", "-n"]
        self.python = self._python()

    def _python(self):
        given = os.environ.get("SPACK_PYTHON")
        if given:
            return given
        venv = self.work / "venv"
        req = REPO / "spack-envs" / self.pins["clingo"]["requirements"]
        stamp = venv / ".installed"
        if not stamp.is_file() or stamp.read_text() != req.read_text():
            print(f"spack-check: installing clingo into {venv} ({req.name})", flush=True)
            subprocess.run(["/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable,
                            "-m", "venv", str(venv)], check=True)
            subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                            "--disable-pip-version-check", "-r", str(req)], check=True)
            stamp.write_text(req.read_text())
        return str(venv / "bin" / "python")

    def scopes(self, site_file=None):
        """Fresh private user and system scopes; returns the environment variables that select them."""
        user, system = self.work / "scope-user", self.work / "scope-system"
        for d in (user, system):
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
        files = {
            "repos.yaml": {"repos": {"builtin": str(self.builtin)}},   # merged: env repos stay
            "bootstrap.yaml": {"bootstrap": {"enable": False}},
            "mirrors.yaml": {"mirrors": {}},
            "config.yaml": {"config": {"install_tree": {"root": str(self.work / "opt")},
                                       "build_stage": [str(self.work / "stage")],
                                       "misc_cache": str(self.work / "cache" / "misc"),
                                       "build_jobs": 2}},
        }
        for name, data in files.items():
            (user / name).write_text(yaml.safe_dump(data, sort_keys=False))
        # 'mirrors::' (replace Spack's default spack-public mirror): yaml.safe_dump would quote the key
        (user / "mirrors.yaml").write_text("mirrors:: {}\n")
        if site_file:
            shutil.copy2(site_file, system / "packages.yaml")
        env = {k: v for k, v in os.environ.items() if k != "SPACK_DISABLE_LOCAL_CONFIG"}
        env.update({"SPACK_PYTHON": self.python, "SPACK_USER_CONFIG_PATH": str(user),
                    "SPACK_SYSTEM_CONFIG_PATH": str(system),
                    "SPACK_USER_CACHE_PATH": str(self.work / "cache")})
        return env

    def run(self, args, log_name, env=None, cwd=None):
        log = self.logs / f"{log_name}.log"
        cmd = self.prefix + ["nice", "-n", "10", str(self.exe)] + list(args)
        t0 = time.monotonic()
        with open(log, "w") as out:
            out.write("$ " + " ".join(cmd) + "\n")
            out.flush()
            rc = subprocess.run(cmd, env=env or self.scopes(), stdout=out, stderr=subprocess.STDOUT,
                                cwd=cwd).returncode
        return rc, round(time.monotonic() - t0, 1), log

    def version(self):
        out = subprocess.run([str(self.exe), "--version"], env=self.scopes(), capture_output=True, text=True)
        return (out.stdout or out.stderr).strip()

    def audit(self, envs_dir):
        """spack audit configs, packages and packages-https on the project's recipes."""
        scope = self.work / "scope-audit"
        shutil.rmtree(scope, ignore_errors=True)
        scope.mkdir(parents=True)
        repo = (Path(envs_dir) / "repo" / "spack_repo" / "stackproof").resolve()
        (scope / "repos.yaml").write_text(yaml.safe_dump({"repos": {"stackproof": str(repo)}}))
        results = []
        for what in (["configs"], ["packages"] + OUR_PACKAGES, ["packages-https"] + OUR_PACKAGES):
            rc, secs, log = self.run(["-C", str(scope), "audit"] + what, f"audit-{what[0]}")
            results.append({"audit": what[0], "rc": rc, "seconds": secs, "log": str(log)})
            print(f"spack-check: spack audit {what[0]}: {'passed' if rc == 0 else f'FAILED (log {log})'}",
                  flush=True)
        return results

    def concretize(self, envs_dir, name, site=None):
        """Concretize a copy of spack-envs/<name> (next to a link to the project repo); returns a result."""
        tag = f"site-{site.parent.name}" if site else "isolated"
        dst = stage_env(self.work / "envs" / tag, envs_dir, name)
        (dst / "spack.yaml").write_text(without_view((Path(envs_dir) / name / "spack.yaml").read_text()))
        print(f"spack-check: concretize {name} ({tag}) ...", flush=True)
        rc, secs, log = self.run(["-e", str(dst), "concretize", "-f"], f"{tag}-{name}",
                                 env=self.scopes(site), cwd=dst)
        lock = json.loads((dst / "spack.lock").read_text()) if rc == 0 and (dst / "spack.lock").is_file() \
            else None
        nodes = len(lock["concrete_specs"]) if lock else None
        print(f"spack-check: {name} ({tag}): {secs:.1f} s, {nodes if lock else '-'} specs, "
              f"{'ok' if rc == 0 else f'FAILED (log {log})'}", flush=True)
        return {"env": name, "scope": tag, "rc": rc, "seconds": secs, "specs": nodes, "log": str(log),
                "lock": lock}


def stage_env(stage: Path, envs_dir, name) -> Path:
    """An empty working directory stage/<name> for an environment, beside a `repo` link to the
    project's Spack repo (the environments name it by that relative path)."""
    stage.mkdir(parents=True, exist_ok=True)
    link = stage / "repo"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to((Path(envs_dir) / "repo").resolve())
    dst = stage / name
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir()
    return dst


# Open MPI's wrappers (mpicc -showme) print "opal_ifinit: unable to find network interfaces" when no
# interface is up, which CMake's FindMPI mistakes for part of their answer (docs/spack.md "Building
# for real"): a build in a fresh network namespace brings the loopback interface up first.
LO_UP = ["sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


def install(spack, envs_dir, name, scope):
    """`spack install` of spack-envs/<name> from its committed lock, offline, with the user's scope
    (mirrors, git mirrors) on top; the environment's own view is written. Returns a result."""
    if not (Path(envs_dir) / name / "spack.lock").is_file():
        raise StackproofError(f"{name}: no committed spack.lock to install from")
    if not Path(scope).is_dir():
        raise StackproofError(f"--scope {scope}: not a directory (mirrors.yaml, packages.yaml of the site)")
    dst = stage_env(spack.work / "envs" / "install", envs_dir, name)
    for f in ("spack.yaml", "spack.lock"):
        shutil.copy2(Path(envs_dir) / name / f, dst / f)
    prefix, spack.prefix = spack.prefix, (spack.prefix + LO_UP if spack.prefix else [])
    try:
        print(f"spack-check: install {name} from its lock ({'offline, lo up' if prefix else 'network allowed'}) ...",
              flush=True)
        rc, secs, log = spack.run(["-C", str(Path(scope).resolve()), "-e", str(dst), "install", "-j2"],
                                  f"install-{name}", cwd=dst)
    finally:
        spack.prefix = prefix
    print(f"spack-check: install {name}: {secs:.1f} s, {'ok' if rc == 0 else f'FAILED (log {log})'}", flush=True)
    if rc != 0:
        raise StackproofError(f"spack install of {name} failed (log {log})")
    return {"env": name, "rc": rc, "seconds": secs, "log": str(log)}


def without_view(text):
    """spack.yaml text with its `view:` block replaced by `view: false`. Concretizing an environment
    regenerates its views from the store in use: with the committed view roots
    (/opt/stackproof/views/<env>) a check would replace an installed view by an empty one. Edited as
    text: a YAML round trip would quote keys like `python::`, which Spack then rejects."""
    lines, out, skipping = text.splitlines(), [], False
    for line in lines:
        if re.match(r"^  view:", line):
            out.append("  view: false")
            skipping = True
            continue
        if skipping and (not line.strip() or line.startswith("   ") or line.lstrip().startswith("#")):
            continue
        skipping = False
        out.append(line)
    return "\n".join(out) + "\n"


def root_hashes(lock):
    return sorted((r["spec"], r["hash"]) for r in lock.get("roots") or [])


def write_lock(lock, path):
    """The lock as Spack wrote it, in a canonical order (Spack's order of roots and specs varies from
    run to run with the same hashes) and indented, so that the same inputs give the same bytes and a
    diff shows what changed."""
    lock = dict(lock, roots=sorted(lock["roots"], key=lambda r: (r["spec"], r["hash"])),
                concrete_specs=dict(sorted(lock["concrete_specs"].items())))
    path.write_text(json.dumps(lock, indent=1) + "\n")


def write_mirror(envs_dir, pins, mirror):
    """Spack source mirror holding the project's release tarball (git archive of the pinned commit)."""
    rel = pins["stackproof_release"]
    sha = rel["sha256"]
    if release_tarball_sha256(rel["commit"], rel["version"]) != sha:
        raise StackproofError(f"cannot make the release tarball: commit {rel['commit']} is not in this clone "
                              "or its git archive does not have the pinned sha256 (fetch the full history)")
    data = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar",
                           f"--prefix=stackproof-{rel['version']}/", rel["commit"]],
                          capture_output=True, check=True).stdout
    digest = Path(mirror) / "_source-cache" / "archive" / sha[:2] / f"{sha}.tar"
    digest.parent.mkdir(parents=True, exist_ok=True)
    digest.write_bytes(data)
    for pkg in rel["packages"]:
        alias = Path(mirror) / pkg / f"{pkg}-{rel['version']}.tar"
        alias.parent.mkdir(parents=True, exist_ok=True)
        if alias.is_symlink() or alias.exists():
            alias.unlink()
        alias.symlink_to(os.path.relpath(digest, alias.parent))
    print(f"spack-check: mirror {mirror}: stackproof-{rel['version']}.tar (sha256 {sha[:12]}…) for "
          f"{', '.join(rel['packages'])}")


def main(envs_dir, pins, args):
    spack = Spack(pins, args.workdir, offline=not args.allow_network)
    version = spack.version()
    if not version.startswith(pins["spack"]["version"]) or pins["spack"]["commit"][:10] not in version:
        raise StackproofError(f"Spack at {spack.root} is {version!r}; pins.yaml says "
                              f"{pins['spack']['version']} ({pins['spack']['commit'][:10]})")
    if args.install:
        install(spack, envs_dir, args.install, args.scope)
        return 0
    envs = args.env or pins["environments"]
    hosted = locked_on_host(pins)
    report = {"spack": version, "builtin": str(spack.builtin), "offline": bool(spack.prefix), "audit": [],
              "concretize": []}
    failures = []
    if args.spack:
        report["audit"] = spack.audit(envs_dir)
        failures += [f"spack audit {a['audit']}" for a in report["audit"] if a["rc"] != 0]
    for name in envs:
        res = spack.concretize(envs_dir, name)
        lock_path = Path(envs_dir) / name / "spack.lock"
        if res["rc"] != 0:
            failures.append(f"concretize {name}")
        elif args.update_lock and name in hosted:
            write_lock(res["lock"], lock_path)
            lock_path.with_name("spack.lock.inputs").write_text(lock_inputs(envs_dir, name))
            print(f"spack-check: wrote {lock_path}")
        elif name in hosted:
            committed = json.loads(lock_path.read_text()) if lock_path.is_file() else {}
            res["reproduced"] = root_hashes(committed) == root_hashes(res["lock"])
            print(f"spack-check: {name}: committed spack.lock "
                  f"{'reproduced (same root hashes)' if res['reproduced'] else 'DIFFERS: make spack-lock'}")
            if not res["reproduced"]:
                failures.append(f"{name}/spack.lock is stale")
        report["concretize"].append({k: v for k, v in res.items() if k != "lock"})
    if args.spack:
        for site, site_envs in (pins.get("sites") or {}).items():
            if args.site and site not in args.site:
                continue
            site_file = Path(envs_dir) / "site" / site / "packages.yaml"
            for name in [e for e in site_envs if e in envs]:
                res = spack.concretize(envs_dir, name, site_file)
                if res["rc"] != 0:
                    failures.append(f"concretize {name} with the {site} site externals")
                report["concretize"].append({k: v for k, v in res.items() if k != "lock"})
    (spack.work / "spack-report.json").write_text(json.dumps(report, indent=2) + "\n")
    total = sum(r["seconds"] for r in report["concretize"])
    print(f"spack-check: {len(report['concretize'])} concretizations in {total:.0f} s "
          f"({'offline, unshare -n' if spack.prefix else 'NETWORK ALLOWED'}); report {spack.work}/spack-report.json")
    if failures:
        raise StackproofError("Spack check failed: " + "; ".join(failures))
    return 0
