"""Sources a root process can trust (issue 33, items 1 and 2): a source mirror or cache written by an
attacker. Each test reproduces an attack on `stackproof stack build`'s sources and asserts that it
fails with one line, or is harmless, and that nothing the attacker wrote ran or was kept:

- a mirror git repository whose own configuration runs commands (a smudge filter with
  info/attributes, core.fsmonitor, hooks, uploadpack.packObjectsHook, core.sshCommand, ...), also
  when another user owns it, and whose refs/replace swaps the pinned commit's files;
- a tampered cache entry (a git export, a tarball, a symlink in the cache), before reuse and between
  the check and the unpack;
- a mirror tarball swapped after it was chosen (a symlink re-pointed: deterministic, through the copy
  function as a seam, not by timing).
Offline: repositories and tarballs made here."""
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from attacker import INTERPRETERS, root_python
from sourcetest import make_tarball, no_apt

from stackproof import files
from stackproof.stacks import fetch, sources, unpack
from stackproof.stacks.recipes import parse_recipe

GIT_ENV = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")


def git(*args, cwd):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True, env=GIT_ENV).stdout.strip()


def expected_digest(files: dict[str, bytes], top="demo-1.0") -> str:
    return unpack.tree_digest([(f"{top}/{name}", "file 644", hashlib.sha256(data).hexdigest())
                               for name, data in files.items()])


PINNED = {"Makefile": b"all:\n\techo pinned\n", "src/a.c": b"int a;\n"}
OTHER = {"Makefile": b"all:\n\techo not the pinned commit\n", "src/a.c": b"int evil;\n"}


def recipe_body(commit, tree_sha256=None, sha256=None) -> dict:
    git_ = {"url": "https://example.org/demo.git", "tag": "v1", "commit": commit,
            **({"tree_sha256": tree_sha256} if tree_sha256 else {})}
    return {"version": "1.0", "spack": "demo", "licence": "MIT", "measures": "nothing",
            "source": {"top": "demo-1.0", "git": git_, **({"file": "demo-1.0.tar.gz", "sha256": sha256} if sha256 else {})},
            "build": [{"run": ["make"]}], "install": {"bin/demo": "demo"}}


def recipe(commit, tree_sha256=None, sha256=None):
    return parse_recipe("demo", recipe_body(commit, tree_sha256, sha256), "test")


# sources.obtain in the interpreter under test (/usr/bin/python3 or the venv's): one JSON line
OBTAIN = r"""
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from stackproof.errors import StackproofError
from stackproof.stacks import gitsource, sources
from stackproof.stacks.recipes import parse_recipe
a = json.loads(sys.argv[2])
gitsource.GIT_TIMEOUT_S = a.get("timeout", gitsource.GIT_TIMEOUT_S)
lines = []
try:
    got = sources.obtain(parse_recipe("demo", a["recipe"], "test"), mirror=Path(a["mirror"]) if a["mirror"] else None,
                         log=lines.append, runner=None, online=False)
    print(json.dumps({"ok": str(got.archive), "log": lines}))
except StackproofError as exc:
    print(json.dumps({"refused": str(exc), "log": lines}))
"""


def obtain_in(python, stacks_root, body, mirror, **extra):
    return root_python(python, OBTAIN, json.dumps({"recipe": body, "mirror": str(mirror) if mirror else None, **extra}),
                       env={"STACKPROOF_STACKS_ROOT": str(stacks_root)})


def _commits(work: Path) -> tuple[str, str]:
    """A repository with the pinned commit and a later, different one."""
    work.mkdir()
    git("init", "-q", cwd=work)
    for tree in (PINNED, OTHER):
        for name, data in tree.items():
            (work / name).parent.mkdir(exist_ok=True)
            (work / name).write_bytes(data)
        git("add", ".", cwd=work)
        git("commit", "-qm", "x", cwd=work)
    return git("rev-parse", "HEAD~1", cwd=work), git("rev-parse", "HEAD", cwd=work)


def _arm(repo_git_dir: Path, marks: Path) -> None:
    """Every way a repository's own files can make git run a command: each one touches a file in
    `marks` (world-writable, so a command run as another user would leave its mark too)."""
    def cmd(name):
        return f"touch {marks}/{name}"
    settings = {"filter.x.smudge": cmd("smudge"), "filter.x.clean": cmd("clean"), "filter.x.process": cmd("process"),
                "filter.x.required": "true", "core.fsmonitor": cmd("fsmonitor"), "core.sshCommand": cmd("ssh"),
                "core.pager": cmd("pager"), "core.alternateRefsCommand": cmd("alternate-refs"),
                "uploadpack.packObjectsHook": cmd("pack-objects-hook"), "core.hooksPath": str(repo_git_dir / "evil-hooks"),
                "diff.external": cmd("diff"), "core.editor": cmd("editor"), "credential.helper": f"!{cmd('credential')}",
                "protocol.ext.allow": "always", "remote.origin.url": f"ext::sh -c {cmd('ext')}",
                "remote.origin.promisor": "true", "extensions.partialClone": "origin"}
    for key, value in settings.items():
        subprocess.run(["git", f"--git-dir={repo_git_dir}", "config", key, value], check=True, env=GIT_ENV)
    (repo_git_dir / "info").mkdir(exist_ok=True)
    (repo_git_dir / "info" / "attributes").write_text("* filter=x\n* diff=x\n")
    for hooks in (repo_git_dir / "hooks", repo_git_dir / "evil-hooks"):
        hooks.mkdir(exist_ok=True)
        for hook in ("pre-upload-pack", "post-upload-pack", "reference-transaction", "post-checkout", "post-merge",
                     "pre-receive", "post-receive", "update", "post-update", "push-to-checkout", "fsmonitor-watchman",
                     "post-index-change", "pre-auto-gc"):
            (hooks / hook).write_text(f"#!/bin/sh\n{cmd('hook-' + hook)}\n")
            (hooks / hook).chmod(0o755)


def _hostile_mirror(tmp_path, bare=True, owner=None):
    """A mirror whose repository holds the pinned commit, is armed (_arm), and whose refs/replace
    swaps the pinned commit for the other one; owned by `owner` when given."""
    pinned, other = _commits(tmp_path / "work")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    if bare:
        repo = mirror / "demo.git"
        subprocess.run(["git", "clone", "-q", "--bare", str(tmp_path / "work"), str(repo)], check=True, env=GIT_ENV)
        git_dir = repo
    else:
        repo = mirror / "demo"
        subprocess.run(["git", "clone", "-q", str(tmp_path / "work"), str(repo)], check=True, env=GIT_ENV)
        git_dir = repo / ".git"
    subprocess.run(["git", f"--git-dir={git_dir}", "replace", pinned, other], check=True, env=GIT_ENV)
    # the mirror itself shows the swap: git run in it (as the old export did) sees the other files
    shown = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{pinned}:Makefile"], env=GIT_ENV,
                           capture_output=True).stdout
    assert shown == OTHER["Makefile"]
    marks = tmp_path / "marks"
    marks.mkdir()
    marks.chmod(0o777)
    _arm(git_dir, marks)
    if owner is not None:
        subprocess.run(["chown", "-R", owner, str(mirror)], check=True)
    return mirror, pinned, marks


def _tar_files(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


# ---- git mirrors -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("bare, owner", [(True, None), (False, None), (True, "nobody"), (False, "nobody")])
def test_hostile_mirror_repository_runs_nothing_and_replace_refs_do_not_apply(stacks_root, tmp_path, bare, owner):
    if owner and os.geteuid() != 0:
        pytest.skip("needs root to give the mirror to another user")
    mirror, pinned, marks = _hostile_mirror(tmp_path, bare=bare, owner=owner)
    lines = []
    got = sources.obtain(recipe(pinned, expected_digest(PINNED)), mirror=mirror, log=lines.append, runner=no_apt)
    assert list(marks.iterdir()) == [], f"the mirror's configuration ran: {sorted(p.name for p in marks.iterdir())}"
    assert got.commit == pinned and got.tree_sha256 == expected_digest(PINNED)
    assert _tar_files(got.archive) == {f"demo-1.0/{k}": v for k, v in PINNED.items()}
    # the export unpacks (tree digest checked again on the bytes written), still running nothing
    dest = tmp_path / "build" / "src"
    fetch.safe_extract(got.archive, dest, tree_sha256=got.tree_sha256)
    assert (dest / "demo-1.0" / "Makefile").read_bytes() == PINNED["Makefile"]
    assert list(marks.iterdir()) == []


def test_wrong_tree_digest_is_one_line_and_nothing_cached(stacks_root, tmp_path):
    mirror, pinned, marks = _hostile_mirror(tmp_path)
    with pytest.raises(fetch.ChecksumError) as exc:
        sources.obtain(recipe(pinned, "7" * 64), mirror=mirror, log=lambda m: None, runner=no_apt)
    msg = str(exc.value)
    assert "\n" not in msg and f"not the pinned source.git.tree_sha256 {'7' * 64}" in msg
    assert expected_digest(PINNED) in msg            # the digest it did export, for a recipe author
    assert not list((stacks_root / "sources" / "demo").iterdir())
    assert list(marks.iterdir()) == []


def test_mirror_without_the_commit_is_one_line(stacks_root, tmp_path):
    mirror, _pinned, _marks = _hostile_mirror(tmp_path)
    with pytest.raises(sources.SourceUnavailable) as exc:
        sources.obtain(recipe("e" * 40, "7" * 64), mirror=mirror, log=lambda m: None, runner=no_apt, online=False)
    assert "has no commit eeee" in str(exc.value) and "\n" not in str(exc.value)


def _processes_naming(path: Path) -> list[str]:
    """Live processes (not zombies) whose command line names `path`."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if state != "Z" and str(path) in cmd:
            out.append(f"{pid} {cmd.strip()}")
    return out


@pytest.mark.parametrize("python", INTERPRETERS, ids=["system-python", "venv"])
@pytest.mark.parametrize("fifo", ["config", "objects/info/alternates"])
def test_git_timeout_kills_everything_it_started(stacks_root, tmp_path, fifo, python):
    """A mirror whose `config` or `objects/info/alternates` is a FIFO blocks git-upload-pack; the old
    timeout killed only `git fetch` and left upload-pack running as root under PID 1. Now git runs in
    a process group of its own and the group is killed: one line, nothing left running."""
    mirror, pinned, _marks = _hostile_mirror(tmp_path)
    target = mirror / "demo.git" / fifo
    target.unlink(missing_ok=True)
    os.mkfifo(target)
    got = obtain_in(python, stacks_root, recipe_body(pinned, expected_digest(PINNED)), mirror, timeout=2)
    assert "timed out after 2 s" in got.get("refused", "") and "\n" not in got["refused"], got
    left = _processes_naming(mirror)
    for _ in range(100):            # SIGKILL is asynchronous: wait (bounded) for the kernel to finish it
        if not left:
            break
        time.sleep(0.1)
        left = _processes_naming(mirror)
    assert left == [], f"left running: {left}"
    assert list((stacks_root / "sources" / "demo").iterdir()) == []


# ---- the cache -------------------------------------------------------------------------------------------

def test_tampered_git_export_in_the_cache_is_fetched_again_or_refused(stacks_root, tmp_path):
    mirror, pinned, _marks = _hostile_mirror(tmp_path)
    r = recipe(pinned, expected_digest(PINNED))
    first = sources.obtain(r, mirror=mirror, log=lambda m: None, runner=no_apt)
    lines = []
    again = sources.obtain(r, mirror=None, log=lines.append, runner=no_apt, online=False)
    assert again.archive == first.archive and again.tree_sha256 == expected_digest(PINNED)   # verified reuse
    assert not lines, "a verified cache entry is reused silently"
    make_tarball(first.archive, OTHER, mode="w")
    # with the mirror: the entry is removed and exported again from a verified source
    got = sources.obtain(r, mirror=mirror, log=lines.append, runner=no_apt)
    assert any("removed, fetching it again" in line and "tree sha256" in line for line in lines), lines
    assert _tar_files(got.archive) == {f"demo-1.0/{k}": v for k, v in PINNED.items()}
    # without any source: one line, and the tampered tree is never used
    make_tarball(first.archive, OTHER, mode="w")
    with pytest.raises(sources.SourceUnavailable) as exc:
        sources.obtain(r, mirror=None, log=lambda m: None, runner=no_apt, online=False)
    assert "\n" not in str(exc.value) and not first.archive.exists()


@pytest.mark.parametrize("python", INTERPRETERS, ids=["system-python", "venv"])
def test_unpinned_git_export_is_never_reused_from_the_cache(stacks_root, tmp_path, python):
    """SW4's recipe pins only a commit: its only pin used to live in the cache it should check (any
    tree plus a matching <tar>.origin was accepted, and `make sw4` ran its Makefile as root). Now the
    export is made again from the commit every time; an entry in the cache, with whatever record,
    is removed and never used."""
    mirror, pinned, _marks = _hostile_mirror(tmp_path)
    body = recipe_body(pinned)                          # no source.git.tree_sha256
    first = obtain_in(python, stacks_root, body, mirror)
    assert any("never reused from the cache" in line for line in first["log"]), first
    archive = Path(first["ok"])
    # the attack: another tree, and a record claiming its digest for the pinned commit
    make_tarball(archive, OTHER, mode="w")
    forged = unpack.archive_tree_digest(archive)
    archive.with_name(archive.name + ".origin").write_text(
        f'{{"origin": "mirror x", "commit": "{pinned}", "tree_sha256": "{forged}"}}\n')
    got = obtain_in(python, stacks_root, body, None)
    assert "no source" in got["refused"] and "\n" not in got["refused"] and not archive.exists()
    assert any("never reused" in line and "removed" in line for line in got["log"]), got
    # with the mirror it is exported again: the pinned commit's files, whatever the cache held
    make_tarball(archive, OTHER, mode="w")
    again = obtain_in(python, stacks_root, body, mirror)
    assert _tar_files(Path(again["ok"])) == {f"demo-1.0/{k}": v for k, v in PINNED.items()}


def test_git_export_changed_after_the_check_is_refused_as_it_is_unpacked(stacks_root, tmp_path):
    mirror, pinned, _marks = _hostile_mirror(tmp_path)
    got = sources.obtain(recipe(pinned, expected_digest(PINNED)), mirror=mirror, log=lambda m: None, runner=no_apt)
    make_tarball(got.archive, OTHER, mode="w")                       # between obtain() and the unpack
    dest = tmp_path / "build" / "src"
    with pytest.raises(fetch.ChecksumError, match="tree sha256 .* does not match the pinned"):
        fetch.safe_extract(got.archive, dest, tree_sha256=got.tree_sha256)
    assert not dest.exists() and list(dest.parent.iterdir()) == []


def tar_recipe(sha):
    body = {"version": "1.0", "spack": "demo", "licence": "MIT", "measures": "nothing",
            "source": {"top": "demo-1.0", "file": "demo-1.0.tar.gz", "sha256": sha},
            "build": [{"run": ["make"]}], "install": {"bin/demo": "demo"}}
    return parse_recipe("demo", body, "test")


@pytest.mark.parametrize("tamper", ["bytes", "symlink"])
def test_tampered_tarball_in_the_cache_is_fetched_again(stacks_root, tmp_path, tamper):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    sha = make_tarball(mirror / "demo-1.0.tar.gz", PINNED)
    r = tar_recipe(sha)
    first = sources.obtain(r, mirror=mirror, log=lambda m: None, runner=no_apt)
    evil = tmp_path / "evil.tar.gz"
    make_tarball(evil, OTHER)
    first.archive.unlink()
    if tamper == "bytes":
        shutil.copyfile(evil, first.archive)
    else:                       # a link to a file with the pinned bytes is still not our file: refetched
        first.archive.symlink_to(mirror / "demo-1.0.tar.gz")
    lines = []
    got = sources.obtain(r, mirror=mirror, log=lines.append, runner=no_apt)
    assert any("removed, fetching it again" in line for line in lines), lines
    assert not got.archive.is_symlink() and hashlib.sha256(got.archive.read_bytes()).hexdigest() == sha
    # changed between obtain() and the unpack: the copy unpacked is hashed, nothing written
    shutil.copyfile(evil, got.archive)
    dest = tmp_path / "build" / "src"
    with pytest.raises(fetch.ChecksumError, match=f"does not match the pinned {sha}"):
        fetch.safe_extract(got.archive, dest, sha256=got.digest)
    assert not dest.exists() and list(dest.parent.iterdir()) == []


# ---- a mirror tarball swapped after it was chosen ------------------------------------------------------

@pytest.mark.parametrize("when", ["before-the-copy", "after-the-copy"])
def test_symlink_swapped_around_the_copy(stacks_root, tmp_path, monkeypatch, when):
    """The old code hashed the mirror file, then copied it: a symlink re-pointed in between put
    other bytes in the cache under the pinned sha256. Now the copy is what is hashed (the swap is
    made through the copy function as a seam, before and after it: deterministic)."""
    mirror = tmp_path / "mirror"
    (mirror / "files").mkdir(parents=True)
    good, evil = mirror / "files" / "good.tar.gz", mirror / "files" / "evil.tar.gz"
    sha = make_tarball(good, PINNED)
    make_tarball(evil, OTHER)
    entry = mirror / "demo-1.0.tar.gz"
    entry.symlink_to("files/good.tar.gz")              # a link inside the mirror, as Spack's layout has
    real_copy = files.Staging.copy_from

    def swap():
        entry.unlink()
        entry.symlink_to("files/evil.tar.gz")

    def copy_with_swap(self, *args, **kw):
        if when == "before-the-copy":
            swap()
        got = real_copy(self, *args, **kw)
        if when == "after-the-copy":
            swap()
        return got
    monkeypatch.setattr(files.Staging, "copy_from", copy_with_swap)
    cache = stacks_root / "sources" / "demo"
    cached = cache / "demo-1.0.tar.gz"
    if when == "before-the-copy":
        with pytest.raises(fetch.ChecksumError) as exc:
            sources.obtain(tar_recipe(sha), mirror=mirror, log=lambda m: None, runner=no_apt)
        assert f"does not match the pinned {sha}" in str(exc.value) and "\n" not in str(exc.value)
        assert list(cache.iterdir()) == []
    else:
        got = sources.obtain(tar_recipe(sha), mirror=mirror, log=lambda m: None, runner=no_apt)
        assert got.archive == cached and cached.read_bytes() == good.read_bytes()


@pytest.mark.parametrize("kind, why", [("fifo", "not a regular file (a FIFO)"),
                                       ("device", "a link leads outside its directory"),
                                       ("outside", "a link leads outside its directory"),
                                       ("dotdot", "a link leads outside its directory")])
def test_mirror_entry_that_is_no_file_of_the_mirror_is_refused_without_blocking(stacks_root, tmp_path, kind, why):
    """A FIFO (opened without blocking), a link to a device, to a file outside the mirror or climbing
    out of it: refused in one line, nothing copied, nothing left in the cache."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    secret = tmp_path / "secret"
    secret.write_bytes(b"root-only\n")
    secret.chmod(0o600)
    entry = mirror / "demo-1.0.tar.gz"
    if kind == "fifo":
        os.mkfifo(entry)
    else:
        entry.symlink_to({"device": "/dev/zero", "outside": str(secret), "dotdot": "../secret"}[kind])
    with pytest.raises(fetch.ChecksumError) as exc:
        sources.obtain(tar_recipe("1" * 64), mirror=mirror, log=lambda m: None, runner=no_apt)
    assert "mirror entry refused" in str(exc.value) and why in str(exc.value) and "\n" not in str(exc.value)
    assert list((stacks_root / "sources" / "demo").iterdir()) == []


# ---- downloads: a server that never stops ----------------------------------------------------------------

class EndlessServer:
    """A loopback HTTP server: /flood streams zeros without a Content-Length, /trickle sends one byte
    every 50 ms, /huge announces 10 GB; each until the client hangs up."""

    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                if self.path == "/huge":
                    self.send_header("Content-Length", str(10 ** 10))
                self.end_headers()
                block, pause = {"/flood": (bytes(1 << 16), 0), "/trickle": (b"x", 0.05),
                                "/huge": (bytes(1 << 16), 0)}[self.path]
                try:
                    while True:
                        self.wfile.write(block)
                        self.wfile.flush()
                        if pause:
                            time.sleep(pause)
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, path):
        return f"http://127.0.0.1:{self.httpd.server_port}{path}"


@pytest.fixture
def endless(monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    s = EndlessServer()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


@pytest.mark.parametrize("path, message", [
    ("/flood", "more than the size cap of 1048576 bytes"),
    ("/huge", "announces 10000000000 bytes, over the size cap of 1048576 bytes"),
    ("/trickle", "not complete after the deadline of 1 s"),
])
def test_endless_download_stops_at_the_cap_or_the_deadline(endless, tmp_path, path, message):
    dest = tmp_path / "cache" / "f.tgz"
    with pytest.raises(fetch.FetchError) as exc:
        fetch.download(endless.url(path), dest, "0" * 64, log=lambda m: None, timeout=5,
                       max_bytes=1 << 20, deadline_s=1)
    assert message in str(exc.value) and "\n" not in str(exc.value), str(exc.value)
    assert list(dest.parent.iterdir()) == [], "no partial file is kept"
