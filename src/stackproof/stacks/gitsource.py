"""A pinned git commit out of a repository we do not trust (a source mirror, upstream), as a tarball
written by us.

`stack build` runs as root, and a mirror repository's own configuration can run commands: a smudge
filter with `info/attributes`, core.fsmonitor, hooks; `refs/replace` can swap the files of a commit
while its id stays. So git never runs *in* the mirror's repository here:

1. `git init` a repository of our own in a private work directory (no templates, no hooks);
2. `git fetch --no-tags --depth=1 <mirror> <commit>` into it. Only the fetch's server side
   (git-upload-pack) reads the mirror, and git designs upload-pack to be safe in an untrusted
   repository (its one command hook, uploadpack.packObjectsHook, is ignored in a repository's own
   config; lazy fetches are off). The objects that arrive are verified against their ids by
   index-pack, so the pinned commit id pins the tree;
3. read the commit's tree from our repository (`ls-tree`, `cat-file --batch`: raw objects, no
   attributes, filters or replace refs) and write the tarball ourselves, with the tree's digest
   (unpack.tree_digest: every file's path, mode and sha256, every symlink's target), which the recipe
   pins next to the commit (source.git.tree_sha256) and the cache is checked against before reuse.

Every git process gets an environment built from nothing: no system config, a private global config
(GIT_CONFIG_GLOBAL) holding our guards (hooksPath=/dev/null, fsmonitor off, no attributes file, only
the one protocol needed allowed, safe.directory naming exactly this mirror), GIT_NO_REPLACE_OBJECTS,
GIT_NO_LAZY_FETCH, no terminal prompts. Every git runs in a process group of its own, and on a
timeout the whole group is killed: a mirror whose `config` or `objects/info/alternates` is a FIFO
blocks git-upload-pack, which must not stay behind, running as root. Every failure is a FetchError
with one line.
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import signal
import subprocess
import tarfile
from pathlib import Path

from stackproof.files import Staging
from stackproof.stacks.fetch import FetchError
from stackproof.stacks.unpack import MAX_BYTES, MAX_COMPONENT, MAX_MEMBERS, MAX_PATH, tree_digest

GIT_TIMEOUT_S = 300
_PASS_ENV = ("PATH", "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY",
             "SSL_CERT_FILE", "SSL_CERT_DIR", "GIT_SSL_CAINFO")
_COMMITTER = re.compile(rb"^committer .* (\d+) [+-]\d{4}$", re.M)


def _quote(value: str) -> str:
    """A value for a git config file (our own paths; quoted so that no character is special)."""
    if any(c in value for c in "\n\x00"):
        raise FetchError(f"{value!r}: a path git cannot be told about safely")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def isolated_env(stage: Staging, protocol: str, safe_dirs: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment of every git process: nothing inherited but PATH and proxy/CA settings, our own
    global config (written into the private `stage`) with the guards, only `protocol` (file or https)
    allowed."""
    lines = ["[core]", "\thooksPath = /dev/null", "\tfsmonitor = false", "\tattributesFile = /dev/null",
             "[protocol]", "\tallow = never", f'[protocol "{protocol}"]', "\tallow = always",
             "[fetch]", "\trecurseSubmodules = false", "\tfsckObjects = false", "[gc]", "\tauto = 0",
             "[maintenance]", "\tauto = false", "[credential]", "\thelper =", "[http]", "\tlowSpeedLimit = 1000",
             "\tlowSpeedTime = 20", "[safe]", *[f"\tdirectory = {_quote(d)}" for d in safe_dirs]]
    stage.write("gitconfig", ("\n".join(lines) + "\n").encode())
    env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/bin:/bin")
    home = stage.path / "home"
    home.mkdir(mode=0o700, exist_ok=True)
    env.update(HOME=str(home), LC_ALL="C", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=str(stage.path / "gitconfig"),
               GIT_ATTR_NOSYSTEM="1", GIT_NO_REPLACE_OBJECTS="1", GIT_NO_LAZY_FETCH="1", GIT_TERMINAL_PROMPT="0",
               GIT_ASKPASS="/bin/false", SSH_ASKPASS="/bin/false", GIT_PROTOCOL_FROM_USER="0")
    return env


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL to the process group of `proc` (it leads one: start_new_session), then reap it. Only
    before `proc` was reaped: its pid, the group's id, cannot have been reused yet."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _git(repo: Path, args: list[str], env: dict, timeout: float | None = None, **kw) -> subprocess.CompletedProcess:
    """git with our environment, in a new session (its own process group: git-upload-pack and
    whatever else it starts die with it on a timeout)."""
    timeout = GIT_TIMEOUT_S if timeout is None else timeout
    cmd = ["git", f"--git-dir={repo}", *args]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=kw.get("stdout", subprocess.PIPE),
                                stderr=subprocess.PIPE, env=env, start_new_session=True)
    except OSError as exc:
        raise FetchError(f"cannot run git ({exc.strerror})") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise FetchError(f"git {args[0]} timed out after {timeout:g} s (it and every process it started "
                         "were killed)") from None
    except BaseException:
        _kill_group(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _last_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.decode(errors="replace").strip().splitlines()
    return lines[-1].strip() if lines else "no message"


def _safe_dirs(local: Path) -> tuple[str, ...]:
    """The paths git may compare against safe.directory for this mirror (bare or not, via symlinks)."""
    out = []
    for p in (str(local), os.path.realpath(local)):
        out += [p, p + "/.git", os.path.realpath(p + "/.git")]
    return tuple(dict.fromkeys(out))


def fetch_commit(remote: str | Path, commit: str, stage: Staging, timeout: float | None = None) -> tuple[Path, dict]:
    """Our own repository in the private `stage` holding `commit` (fetched from `remote`: a local
    directory, or an https URL), and the environment to read it with. FetchError naming the remote
    otherwise."""
    local = not str(remote).startswith("https://")
    if local:
        remote = Path(os.path.abspath(remote))
        if not remote.is_dir():
            raise FetchError(f"{remote}: not a directory")
    env = isolated_env(stage, "file" if local else "https", _safe_dirs(remote) if local else ())
    repo = stage.path / "repo.git"
    proc = _git(repo, ["init", "--quiet", "--bare", "--template="], env, timeout=60)
    if proc.returncode != 0:
        raise FetchError(f"git init {repo} failed ({_last_line(proc)})")
    # a full path argument, never an option: an absolute path or an https:// URL
    proc = _git(repo, ["fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--no-write-fetch-head",
                       "--depth=1", "--", str(remote), commit], env, timeout=timeout)
    if proc.returncode != 0:
        why = _last_line(proc)
        if "not our ref" in why or "couldn't find remote ref" in why:
            raise FetchError(f"{remote}: has no commit {commit}")
        missing = [ln.strip() for ln in proc.stderr.decode(errors="replace").splitlines() if "unable to read" in ln]
        if missing:
            why = (f"it lacks objects of that commit, a partial or damaged clone: "
                   f"{missing[0].removeprefix('remote: ').removeprefix('fatal: ')}")
        raise FetchError(f"{remote}: fetching commit {commit[:12]} failed ({why})")
    proc = _git(repo, ["cat-file", "-t", commit], env, timeout=60)
    if proc.returncode != 0 or proc.stdout.strip() != b"commit":
        raise FetchError(f"{remote}: has no commit {commit}")
    return repo, env


class _Blob(io.RawIOBase):
    """Exactly `size` bytes of `cat-file --batch` output, hashed as tarfile copies them."""

    def __init__(self, stream, size: int, digest):
        self.stream, self.left, self.digest = stream, size, digest

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = self.left if n is None or n < 0 else min(n, self.left)
        data = self.stream.read(n) if n else b""
        if len(data) != n:
            raise FetchError("git cat-file ended early")
        self.left -= n
        self.digest.update(data)
        return data


def _check_path(path: str) -> None:
    parts = path.split("/")
    if not path or any(p in ("", ".", "..", ".git") for p in parts) or "\x00" in path or \
            len(path.encode(errors="surrogateescape")) > MAX_PATH - 100 or \
            any(len(p.encode(errors="surrogateescape")) > MAX_COMPONENT for p in parts):
        raise FetchError(f"the commit's tree has an unusable path {path[:80]!r}")


def export_commit(repo: Path, env: dict, commit: str, top: str, out) -> str:
    """Write the commit's tree as a tarball (members under `top/`) to the binary file `out` (a new
    file of a files.Staging); its tree digest."""
    meta = _git(repo, ["cat-file", "commit", commit], env, timeout=60)
    stamp = _COMMITTER.search(meta.stdout) if meta.returncode == 0 else None
    if not stamp:
        raise FetchError(f"commit {commit[:12]}: cannot read its committer date ({_last_line(meta)})")
    mtime = int(stamp.group(1))
    listing = _git(repo, ["ls-tree", "-r", "-z", "--full-tree", commit], env)
    if listing.returncode != 0:
        raise FetchError(f"commit {commit[:12]}: git ls-tree failed ({_last_line(listing)})")
    items = []
    for rec in listing.stdout.split(b"\x00"):
        if not rec:
            continue
        head, _, raw = rec.partition(b"\t")
        mode, kind, oid = head.decode().split()
        path = raw.decode(errors="surrogateescape")
        if kind == "commit":                        # a submodule: git archive leaves it empty too
            continue
        _check_path(path)
        items.append((path, mode, oid))
    if len(items) > MAX_MEMBERS:
        raise FetchError(f"commit {commit[:12]}: more than {MAX_MEMBERS} files (the member cap)")
    items.sort(key=lambda i: i[0].encode(errors="surrogateescape"))
    dirs = sorted({"/".join(p.split("/")[:i]) for p, _, _ in items for i in range(1, p.count("/") + 1)})

    def info(name: str, kind: bytes, mode: int, size: int = 0, link: str = "") -> tarfile.TarInfo:
        ti = tarfile.TarInfo(f"{top}/{name}" if name else top)
        ti.type, ti.mode, ti.size, ti.linkname, ti.mtime = kind, mode, size, link, mtime
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = ""
        return ti

    records, total = [], 0
    try:
        batch = subprocess.Popen(["git", f"--git-dir={repo}", "cat-file", "--batch"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    except OSError as exc:
        raise FetchError(f"cannot run git ({exc.strerror})") from None
    try:
        with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
            tar.addfile(info("", tarfile.DIRTYPE, 0o755))
            for d in dirs:
                tar.addfile(info(d, tarfile.DIRTYPE, 0o755))
            for path, mode, oid in items:
                batch.stdin.write(oid.encode() + b"\n")
                batch.stdin.flush()
                header = batch.stdout.readline().split()
                if len(header) != 3 or header[1] != b"blob":
                    raise FetchError(f"commit {commit[:12]}: {path!r} is not a readable blob")
                size = int(header[2])
                total += size
                if total > MAX_BYTES:
                    raise FetchError(f"commit {commit[:12]}: more than {MAX_BYTES} bytes (the size cap)")
                digest = hashlib.sha256()
                if mode == "120000":
                    link = _Blob(batch.stdout, size, digest).read().decode(errors="surrogateescape")
                    tar.addfile(info(path, tarfile.SYMTYPE, 0o777, link=link))
                    records.append((f"{top}/{path}", "symlink", link))
                else:
                    perm = 0o755 if int(mode, 8) & 0o111 else 0o644
                    tar.addfile(info(path, tarfile.REGTYPE, perm, size), _Blob(batch.stdout, size, digest))
                    records.append((f"{top}/{path}", f"file {perm:o}", digest.hexdigest()))
                batch.stdout.read(1)                  # the newline after each object
    except (OSError, ValueError) as exc:
        raise FetchError(f"commit {commit[:12]}: writing its tarball failed ({exc})") from None
    finally:
        batch.stdin.close()
        try:
            batch.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _kill_group(batch)
    return tree_digest(records)
