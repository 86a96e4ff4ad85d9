"""Committed spack.lock files: concretize every environment with the pinned Spack and compare with
(`stackproof spack check`) or rewrite (`stackproof spack lock`) the committed locks, in a canonical
order. Imports: basics, spack.pins (the driver object is passed in)."""
import json
from pathlib import Path

from stackproof.errors import StackproofError
from stackproof.spack.pins import lock_inputs, locked_on_host


def root_hashes(lock):
    return sorted((r["spec"], r["hash"]) for r in lock.get("roots") or [])


def write_lock(lock, path):
    """The lock as Spack wrote it, in a canonical order (Spack's order of roots and specs varies from
    run to run with the same hashes) and indented, so that the same inputs give the same bytes and a
    diff shows what changed."""
    lock = dict(lock, roots=sorted(lock["roots"], key=lambda r: (r["spec"], r["hash"])),
                concrete_specs=dict(sorted(lock["concrete_specs"].items())))
    path.write_text(json.dumps(lock, indent=1) + "\n")


def concretize_all(spack, envs_dir, pins, envs=None, audit=False, write=False, sites=None):
    """Concretize every environment offline; with `write`, write the committed locks (and their
    inputs), else compare their root hashes with the committed ones. With `audit`: spack audit first
    and each environment of pins.yaml `sites` with that site's packages.yaml (only `sites` if given).
    StackproofError naming every failure."""
    envs = envs or pins["environments"]
    hosted = locked_on_host(pins)
    report = {"spack": spack.version(), "builtin": str(spack.builtin), "offline": bool(spack.prefix), "audit": [],
              "concretize": []}
    failures = []
    if audit:
        report["audit"] = spack.audit(envs_dir)
        failures += [f"spack audit {a['audit']}" for a in report["audit"] if a["rc"] != 0]
    for name in envs:
        res = spack.concretize(envs_dir, name)
        lock_path = Path(envs_dir) / name / "spack.lock"
        if res["rc"] != 0:
            failures.append(f"concretize {name}")
        elif write and name in hosted:
            write_lock(res["lock"], lock_path)
            lock_path.with_name("spack.lock.inputs").write_text(lock_inputs(envs_dir, name))
            print(f"stackproof spack: wrote {lock_path}")
        elif name in hosted:
            committed = json.loads(lock_path.read_text()) if lock_path.is_file() else {}
            res["reproduced"] = root_hashes(committed) == root_hashes(res["lock"])
            print(f"stackproof spack: {name}: committed spack.lock "
                  f"{'reproduced (same root hashes)' if res['reproduced'] else 'DIFFERS: make spack-lock'}")
            if not res["reproduced"]:
                failures.append(f"{name}/spack.lock is stale")
        report["concretize"].append({k: v for k, v in res.items() if k != "lock"})
    if audit:
        for site, site_envs in (pins.get("sites") or {}).items():
            if sites and site not in sites:
                continue
            site_file = Path(envs_dir) / "site" / site / "packages.yaml"
            for name in [e for e in site_envs if e in envs]:
                res = spack.concretize(envs_dir, name, site_file)
                if res["rc"] != 0:
                    failures.append(f"concretize {name} with the {site} site externals")
                report["concretize"].append({k: v for k, v in res.items() if k != "lock"})
    (spack.work / "spack-report.json").write_text(json.dumps(report, indent=2) + "\n")
    total = sum(r["seconds"] for r in report["concretize"])
    print(f"stackproof spack: {len(report['concretize'])} concretizations in {total:.0f} s "
          f"({'offline, unshare -n' if spack.prefix else 'NETWORK ALLOWED'}); report {spack.work}/spack-report.json")
    if failures:
        raise StackproofError("Spack check failed: " + "; ".join(failures))
    return 0
