"""Issue 42's holes, each reproduced with a local attacker running as `nobody` at the same time as
root's operation (tests/attacker.py: an inotify watcher that reads whatever appears, a symlink
planter), root's side under Debian's /usr/bin/python3 and the venv's interpreter. Each is refused in
one line or harmless: no secret read by the attacker, no file written through a planted link.

- HIGH, a mirror link to a root-only file: its bytes were copied into <cache>/<file>.part (0644, in a
  0755 cache) before the hash; a watcher read them (1 of 3 tries at 35 bytes, 3 of 3 at 4 MB).
- a mirror file of root's with other bytes than the pin: the same copy, the same window.
- MEDIUM, planted links (.part, .origin, the entry itself, `--into`'s): root wrote through them.
  A cache or --into directory the attacker may write is refused before anything is written.
- MEDIUM, the report: a job's stage directory (here the attacker's) whose rfm_job.err keeps turning
  into a link to a root-only file while root builds the report.
The other holes have their own files: SW4's unpinned export (test_sources_hostile.py), the header
bombs under a memory limit (test_unpack_hostile.py), the git timeout's process group
(test_sources_hostile.py), sdists in `stack lock` (test_pip_sdist_hostile.py), Slurm's listening
addresses (test_cluster_listen_live.py), report.md (test_report_hostile.py)."""
import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
from attacker import INTERPRETERS, Attacker, root_python
from conftest import require_root
from sourcetest import make_tarball

SECRET = "ROOT-ONLY-SECRET-7f3a"
ROUNDS = 12

@pytest.fixture
def base():
    """A directory `nobody` may traverse (pytest's tmp_path is 0700): root's own, 0755, under /tmp.
    Root is needed: the attacker runs as nobody."""
    require_root()
    d = Path(tempfile.mkdtemp(prefix="spk-attack-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _secret(base: Path, size: int) -> Path:
    path = base / "root-only"
    body = (SECRET + "\n").encode()
    path.write_bytes(body * max(1, size // len(body)))
    path.chmod(0o600)
    return path


def _recipe(sha: str) -> dict:
    return {"version": "1.0", "spack": "demo", "licence": "MIT", "measures": "nothing",
            "source": {"top": "demo-1.0", "file": "demo-1.0.tar.gz", "sha256": sha},
            "build": [{"run": ["make"]}], "install": {"bin/demo": "demo"}}


# root's side: obtain the recipe's source ROUNDS times (the cache entry removed after each, so that it is
# copied again), then optionally seed --into; one JSON line: each round's outcome
OBTAIN = r"""
import json, os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from stackproof.errors import StackproofError
from stackproof.stacks import commands, sources
from stackproof.stacks.recipes import parse_recipe
a = json.loads(sys.argv[2])
recipe = parse_recipe("demo", a["recipe"], "test")
def no_apt(*args, **kw):
    raise AssertionError("apt-get must not run")
out = []
for _ in range(a["rounds"]):
    try:
        got = sources.obtain(recipe, mirror=Path(a["mirror"]), log=lambda m: None, runner=no_apt, online=False)
        if a.get("into"):
            commands._seed(got, Path(a["into"]))
        out.append({"ok": str(got.archive)})
        os.unlink(got.archive)
    except StackproofError as exc:
        out.append({"refused": str(exc)})
print(json.dumps(out))
"""


def _obtain(python, base, mirror, sha, rounds=ROUNDS, into=None):
    return root_python(python, OBTAIN, json.dumps({"recipe": _recipe(sha), "mirror": str(mirror), "rounds": rounds,
                                                   "into": str(into) if into else None}),
                       env={"STACKPROOF_STACKS_ROOT": str(base / "stacks")})


def _cache(base: Path) -> Path:
    cache = base / "stacks" / "sources" / "demo"
    cache.mkdir(parents=True, exist_ok=True)
    for d in (base / "stacks", base / "stacks" / "sources", cache):
        d.chmod(0o755)
    return cache


@pytest.mark.parametrize("python", INTERPRETERS, ids=["system-python", "venv"])
@pytest.mark.parametrize("size", [35, 4 << 20], ids=["35B", "4MB"])
def test_a_mirror_link_to_a_root_only_file_is_refused_and_nothing_is_read(base, python, size):
    secret = _secret(base, size)
    mirror = base / "mirror"
    mirror.mkdir()
    (mirror / "demo-1.0.tar.gz").symlink_to(secret)
    cache = _cache(base)
    attacker = Attacker(base / "attacker", SECRET, watch=[cache])
    try:
        results = _obtain(python, base, mirror, "1" * 64)
        control = attacker.control(cache, SECRET)
    finally:
        seen = attacker.stop()
    assert len(results) == ROUNDS
    for r in results:
        assert "refused" in r and "mirror entry refused" in r["refused"] and "outside its directory" in r["refused"]
        assert "\n" not in r["refused"] and SECRET not in r["refused"]
    assert seen["leaks"] == [str(control)], seen         # the control file only: the watcher could read there
    assert sorted(p.name for p in cache.iterdir()) == ["control"]


@pytest.mark.parametrize("python", INTERPRETERS, ids=["system-python", "venv"])
def test_unverified_mirror_bytes_are_never_readable_in_the_cache(base, python):
    """A mirror file of root's (0600 inside the mirror) that is not the pinned tarball: copied, hashed,
    refused; the copy lived only in a 0700 staging directory the watcher cannot enter."""
    mirror = base / "mirror"
    mirror.mkdir()
    shutil.move(_secret(base, 4 << 20), mirror / "demo-1.0.tar.gz")
    cache = _cache(base)
    attacker = Attacker(base / "attacker", SECRET, watch=[cache])
    try:
        results = _obtain(python, base, mirror, "1" * 64)
        control = attacker.control(cache, SECRET)
    finally:
        seen = attacker.stop()
    assert all("does not match the pinned" in r.get("refused", "") for r in results), results
    assert seen["leaks"] == [str(control)] and seen["events"] > 0, seen
    assert seen["watch_refused"] > 0, "the staging directories were there, and closed to the watcher"


@pytest.mark.parametrize("python", INTERPRETERS, ids=["system-python", "venv"])
def test_planted_links_are_never_written_through(base, python):
    """The planter keeps trying every name root writes (<file>, <file>.part, <file>.origin in the cache,
    the same in --into/demo): the directories are root's, so it cannot, and a link left there from
    before (planted here as root) is replaced, never written through."""
    victim = base / "victim"
    victim.write_text("root's file\n")
    victim.chmod(0o600)
    mirror = base / "mirror"
    mirror.mkdir()
    sha = make_tarball(mirror / "demo-1.0.tar.gz", {"Makefile": b"all:\n"})
    cache = _cache(base)
    into = base / "into"
    (into / "demo").mkdir(parents=True)
    for d in (into, into / "demo"):
        d.chmod(0o755)
    names = ["demo-1.0.tar.gz", "demo-1.0.tar.gz.part", "demo-1.0.tar.gz.origin", ".demo-1.0.tar.gz.part"]
    for d in (cache, into / "demo"):
        for n in names[1:]:
            (d / n).symlink_to(victim)          # left by an earlier owner of the directory
    attacker = Attacker(base / "attacker", SECRET, watch=[cache, into / "demo"],
                        plant=[(d, n, victim) for d in (cache, into / "demo") for n in names])
    try:
        results = _obtain(python, base, mirror, sha, rounds=4, into=into)
    finally:
        seen = attacker.stop()
    assert all("ok" in r for r in results), results
    assert victim.read_text() == "root's file\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert seen["planted"] == 0 and seen["refused"].get("EACCES", 0) > 0, seen
    for d in (cache, into / "demo"):
        for n in ("demo-1.0.tar.gz.origin",):
            assert not (d / n).is_symlink() and (d / n).is_file()
    seeded = into / "demo" / "demo-1.0.tar.gz"
    assert not seeded.is_symlink() and hashlib.sha256(seeded.read_bytes()).hexdigest() == sha


@pytest.mark.parametrize("python", INTERPRETERS, ids=["system-python", "venv"])
@pytest.mark.parametrize("where", ["cache", "into"])
def test_a_directory_the_attacker_may_write_is_refused_before_anything_is_written(base, python, where):
    victim = base / "victim"
    victim.write_text("root's file\n")
    mirror = base / "mirror"
    mirror.mkdir()
    sha = make_tarball(mirror / "demo-1.0.tar.gz", {"Makefile": b"all:\n"})
    cache = _cache(base)
    into = base / "into"
    target = cache if where == "cache" else into / "demo"
    into.mkdir(mode=0o755)
    target.mkdir(parents=True, exist_ok=True)
    os.chown(target, 65534, 65534)              # the attacker's directory
    attacker = Attacker(base / "attacker", SECRET, watch=[target],
                        plant=[(target, n, victim) for n in ("demo-1.0.tar.gz", "demo-1.0.tar.gz.origin",
                                                              "demo-1.0.tar.gz.part")])
    try:
        results = _obtain(python, base, mirror, sha, rounds=2, into=into)
    finally:
        seen = attacker.stop()
    assert seen["planted"] > 0, "the attacker could plant there"
    for r in results:
        assert "refused" in r and "owned by uid 65534" in r["refused"] and "\n" not in r["refused"], r
    assert victim.read_text() == "root's file\n"


READ_STAGE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from stackproof import files
out = []
for _ in range(int(sys.argv[3])):
    try:
        out.append(files.read_in(sys.argv[2], "rfm_job.err").decode(errors="replace"))
    except (OSError, files.UnsafePath) as exc:
        out.append("refused: " + str(exc))
print(json.dumps(out))
"""


def _stage(base: Path):
    stage = base / "stage"
    (stage / "sub").mkdir(parents=True)
    for d in (stage, stage / "sub"):
        os.chown(d, 65534, 65534)           # a job's directory: its user writes it
    return stage


@pytest.mark.parametrize("python", INTERPRETERS, ids=["system-python", "venv"])
def test_a_stage_directory_flipping_to_a_link_never_yields_the_secret(base, python):
    secret = _secret(base, 4096)
    stage = _stage(base)
    attacker = Attacker(base / "attacker", SECRET, swap=True,
                        plant=[(stage, "rfm_job.err", secret), (stage / "sub", "rfm_job.err", secret)])
    try:
        reads = root_python(python, READ_STAGE, str(stage), "400")
    finally:
        seen = attacker.stop()
    assert seen["planted"] > 0
    assert all(SECRET not in r for r in reads)
    assert {r.split(":")[0] for r in reads} <= {"harmless\n", "refused"} or all(
        r == "harmless\n" or r.startswith("refused: ") for r in reads), set(reads)
    assert any(r.startswith("refused: ") for r in reads), "the planter's links were met (and refused)"


def test_the_report_never_embeds_what_a_stage_directory_links_to(base, tmp_path):
    from stackproof.report import build, load_run
    secret = _secret(base, 4096)
    stage = _stage(base)
    run = tmp_path / "run.json"
    good = [{"name": f"Bench %repeat_index={i}", "unique_name": f"B_{i}", "system": "s", "partition": "p",
             "environ": "good", "stack": "good", "result": "pass",
             "perfvalues": {"s:p:lat_8B": [1.0 + i / 10, 0, None, None, "us"]}, "perf_better": {"lat_*": "lower"}}
            for i in range(3)]
    failing = {"name": "Failing", "unique_name": "F", "system": "s", "partition": "p", "environ": "good",
               "stack": "good", "result": "fail", "fail_phase": "sanity", "fail_reason": "bad",
               "stagedir": str(stage), "job_stderr": "rfm_job.err", "job_stdout": "sub/rfm_job.err"}
    run.write_text(json.dumps({"runs": [{"testcases": good + [failing]}]}))
    attacker = Attacker(base / "attacker", SECRET, swap=True,
                        plant=[(stage, "rfm_job.err", secret), (stage / "sub", "rfm_job.err", secret)])
    try:
        for i in range(ROUNDS):
            build(load_run(str(run)), tmp_path / f"r{i}", "t")
    finally:
        seen = attacker.stop()
    assert seen["planted"] > 0
    for i in range(ROUNDS):
        for name in ("report.html", "report.md"):
            assert SECRET not in (tmp_path / f"r{i}" / name).read_text()
