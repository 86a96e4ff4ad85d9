"""`stackproof spack install NAME --scope DIR`: spack install of an environment from its committed
lock, offline (loopback up), with the site's mirrors. Imports: basics, spack.driver."""
import shutil
from pathlib import Path

from stackproof.errors import StackproofError
from stackproof.spack.driver import stage_env

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
        print(f"stackproof spack: install {name} from its lock ({'offline, lo up' if prefix else 'network allowed'}) ...",
              flush=True)
        rc, secs, log = spack.run(["-C", str(Path(scope).resolve()), "-e", str(dst), "install", "-j2"],
                                  f"install-{name}", cwd=dst)
    finally:
        spack.prefix = prefix
    print(f"stackproof spack: install {name}: {secs:.1f} s, {'ok' if rc == 0 else f'FAILED (log {log})'}", flush=True)
    if rc != 0:
        raise StackproofError(f"spack install of {name} failed (log {log})")
    return {"env": name, "rc": rc, "seconds": secs, "log": str(log)}
