"""Real Spack for spack-envs/ (SPACK_ROOT): one checkout driven with private scopes, its audits and
the offline concretization of an environment.

Scopes (docs/spack.md "Scopes"): Spack runs with a private *user* scope (builtin repo from
$SPACK_PACKAGES_ROOT, bootstrap off, no mirrors, install tree under the work dir) and a private
*system* scope (empty, or one site packages.yaml from spack-envs/site/). Both rank below the
environment scope, so an environment's own `repos:` and `packages:` always win, exactly as on a site.
The Spack checkout's own scopes ($SPACK_ROOT/etc/spack and its site/) must hold no configuration:
otherwise the result would depend on that checkout, and the driver stops.
Imports: basics only.
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

from stackproof.errors import StackproofError
from stackproof.paths import REPO

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
            # on stderr: `stackproof spack env` prints shell code on stdout for `eval`
            print(f"stackproof spack: installing clingo into {venv} ({req.name})", file=sys.stderr, flush=True)
            subprocess.run(["/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable,
                            "-m", "venv", str(venv)], check=True, stdout=sys.stderr)
            subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                            "--disable-pip-version-check", "--require-hashes", "-r", str(req)], check=True,
                           stdout=sys.stderr)
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
                                       # not $SPACK_ROOT/var/spack/cache: nothing written into the checkout
                                       "source_cache": str(self.work / "cache" / "source"),
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
            print(f"stackproof spack: spack audit {what[0]}: {'passed' if rc == 0 else f'FAILED (log {log})'}",
                  flush=True)
        return results

    def concretize(self, envs_dir, name, site=None):
        """Concretize a copy of spack-envs/<name> (next to a link to the project repo); returns a result."""
        tag = f"site-{site.parent.name}" if site else "isolated"
        dst = stage_env(self.work / "envs" / tag, envs_dir, name)
        (dst / "spack.yaml").write_text(without_view((Path(envs_dir) / name / "spack.yaml").read_text()))
        print(f"stackproof spack: concretize {name} ({tag}) ...", flush=True)
        rc, secs, log = self.run(["-e", str(dst), "concretize", "-f"], f"{tag}-{name}",
                                 env=self.scopes(site), cwd=dst)
        lock = json.loads((dst / "spack.lock").read_text()) if rc == 0 and (dst / "spack.lock").is_file() \
            else None
        nodes = len(lock["concrete_specs"]) if lock else None
        print(f"stackproof spack: {name} ({tag}): {secs:.1f} s, {nodes if lock else '-'} specs, "
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


def open_pinned(pins, workdir=None, offline=True) -> "Spack":
    """The Spack at $SPACK_ROOT, refused unless it is the version pins.yaml names."""
    spack = Spack(pins, workdir, offline=offline)
    version = spack.version()
    if not version.startswith(pins["spack"]["version"]) or pins["spack"]["commit"][:10] not in version:
        raise StackproofError(f"Spack at {spack.root} is {version!r}; pins.yaml says "
                              f"{pins['spack']['version']} ({pins['spack']['commit'][:10]})")
    return spack
