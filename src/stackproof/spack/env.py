"""`stackproof spack env`: shell exports that put the project's pinned Spack on PATH with the
project's private configuration (builtin recipes of spack-packages at its pin plus our own repo,
bootstrap off, the offline source mirror of `make spack-mirror` when it exists, install tree under
build/spack), so that `spack` from PATH works the same in ReFrame's process, its build scripts and
its jobs (ReFrame's `build_system = 'Spack'` calls plain `spack`):

  eval "$(stackproof spack env)"                  # system scope empty: Spack builds everything but gcc
  eval "$(stackproof spack env --site debian12)"  # system scope = spack-envs/site/debian12/packages.yaml

Spack itself is in no package registry: SPACK_ROOT must name a checkout of the pinned version
(spack-envs/pins.yaml; docs/spack.md), else one error says so."""
from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from stackproof.errors import InputError, StackproofError
from stackproof.paths import REPO
from stackproof.spack.driver import Spack
from stackproof.spack.pins import load_pins


def spack_root(pins) -> Path:
    root = os.environ.get("SPACK_ROOT")
    want = pins["spack"]["version"]
    if not root:
        raise StackproofError(f"Spack is not installed here: set SPACK_ROOT to a Spack v{want} checkout "
                              "(Spack is in no package registry; see docs/spack.md)")
    path = Path(root)
    if not (path / "bin" / "spack").is_file():
        raise StackproofError(f"SPACK_ROOT={root}: bin/spack not found")
    return path


def site_file(envs_dir: Path, site: str | None) -> Path | None:
    """spack-envs/site/<site>/packages.yaml (the site's externals, Spack's system scope), or None."""
    if site is None:
        return None
    known = sorted(p.parent.name for p in (envs_dir / "site").glob("*/packages.yaml"))
    if site not in known:
        raise InputError(f"--site {site!r}: no spack-envs/site/{site}/packages.yaml (known: {', '.join(known)})")
    return envs_dir / "site" / site / "packages.yaml"


def exports(workdir: Path | None = None, site: str | None = None) -> dict[str, str]:
    """The environment variables selecting the pinned Spack and its private scopes (written here);
    with `site`, that site's packages.yaml (externals: compiler, gmake, ...) is the system scope."""
    import yaml
    envs_dir = REPO / "spack-envs"
    pins = load_pins(envs_dir)
    externals = site_file(envs_dir, site)
    root = spack_root(pins)
    spack = Spack(pins, workdir or REPO / "build" / "spack" / "reframe", offline=False)
    env = spack.scopes(externals)
    user = Path(env["SPACK_USER_CONFIG_PATH"])
    repos = {"builtin": str(spack.builtin),
             "stackproof": str((envs_dir / "repo" / "spack_repo" / "stackproof").resolve())}
    (user / "repos.yaml").write_text(yaml.safe_dump({"repos": repos}, sort_keys=False))
    mirror = REPO / "build" / "spack" / "mirror"
    mirrors = {"stackproof-offline": f"file://{mirror}"} if mirror.is_dir() else {}
    (user / "mirrors.yaml").write_text("mirrors:: " + (yaml.safe_dump(mirrors, default_flow_style=True).strip()
                                                       if mirrors else "{}") + "\n")
    out = {"SPACK_ROOT": str(root), "PATH": f"{root / 'bin'}:{os.environ.get('PATH', '')}"}
    for key in ("SPACK_PYTHON", "SPACK_USER_CONFIG_PATH", "SPACK_SYSTEM_CONFIG_PATH", "SPACK_USER_CACHE_PATH"):
        out[key] = env[key]
    return out


def check_version(out: dict[str, str], pins) -> None:
    proc = subprocess.run([str(Path(out["SPACK_ROOT"]) / "bin" / "spack"), "--version"], capture_output=True,
                          text=True, env=dict(os.environ, **out))
    got = (proc.stdout or proc.stderr).strip()
    if not got.startswith(pins["spack"]["version"]):
        raise StackproofError(f"SPACK_ROOT={out['SPACK_ROOT']} is Spack {got or '?'}, the project pins "
                              f"{pins['spack']['version']} (spack-envs/pins.yaml)")


def cmd_env(args) -> int:
    out = exports(site=getattr(args, "site", None))
    check_version(out, load_pins(REPO / "spack-envs"))
    print("unset SPACK_DISABLE_LOCAL_CONFIG")
    for key, value in out.items():
        print(f"export {key}={shlex.quote(value)}")
    return 0

