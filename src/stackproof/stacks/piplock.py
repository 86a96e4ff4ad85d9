"""The hash lock of a pip stack: <name>.pip-lock.txt beside the stack file.

A pip requirements file naming every distribution the stack's install.pip pins resolve to, each
`name==version --hash=sha256:...`: `stackproof stack install NAME` installs exactly these with
`pip install --require-hashes --no-deps -r <lock>`, so a wheel replaced on the index, a proxy or a
local wheel directory is refused by pip before it is installed. `stackproof stack lock NAME` writes
it (pip resolves the pins: `pip install --dry-run --report`, whose report carries each file's
sha256); check_lock() refuses a lock that misses a pin or a hash (tests/test_stack_lock.py checks
the shipped ones in CI).

Offline (an image build, an air-gapped site): download the wheels where there is a network with
  pip download --require-hashes --no-deps -r reframe-tests/stacks/vendor.pip-lock.txt -d DIR
and install from them with `stackproof stack install vendor --wheels DIR` (or STACKPROOF_WHEELS=DIR,
or pip's own PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR): the same hashes are checked.
"""
from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from stackproof.stacks.model import Stack, StackError

WHEELS_VAR = "STACKPROOF_WHEELS"
_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)$")
_HASH = re.compile(r"^--hash=sha256:([0-9a-f]{64})$")


def normal(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_path(stack: Stack) -> Path | None:
    return stack.file.with_name(f"{stack.name}.pip-lock.txt") if stack.file is not None else None


def read_lock(path: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    """{normalised name: (version, sha256 hashes)} of a lock; StackError naming the line that is not
    `name==version --hash=sha256:HEX ...`."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise StackError(f"{path}: cannot read ({exc.strerror})") from None
    out = {}
    for line in re.sub(r"\\\n", " ", text).splitlines():
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        m = _REQ.match(words[0])
        hashes = [h.group(1) for h in map(_HASH.match, words[1:]) if h]
        if not m or len(hashes) != len(words) - 1 or not hashes:
            raise StackError(f"{path}: {words[0][:60]!r}: expected name==version followed by --hash=sha256:... "
                             f"(run `stackproof stack lock`)")
        out[normal(m.group(1))] = (m.group(2), tuple(hashes))
    return out


def check_lock(stack: Stack, pins: list[tuple[str, str]]) -> Path:
    """The stack's lock, when it names every pin at its version with hashes; StackError saying to run
    `stackproof stack lock NAME` otherwise."""
    path = lock_path(stack)
    fix = f"run `stackproof stack lock {stack.name}`"
    if path is None or not path.is_file():
        raise StackError(f"stack {stack.name}: no hash lock {path or stack.name + '.pip-lock.txt'} beside the stack "
                         f"file: {fix}")
    locked = read_lock(path)
    for name, version in pins:
        got = locked.get(normal(name))
        if got is None or got[0] != version:
            raise StackError(f"stack {stack.name}: {path} does not lock {name}=={version}"
                             f"{f' (it has {got[0]})' if got else ''}: {fix}")
    return path


def wheels_dir(value: str | None = None) -> Path | None:
    """A local wheel directory to install from (--wheels DIR, else $STACKPROOF_WHEELS), checked."""
    value = value or os.environ.get(WHEELS_VAR)
    if not value:
        return None
    path = Path(value).resolve()
    if not path.is_dir():
        raise StackError(f"wheel directory {value} is not a directory (--wheels or ${WHEELS_VAR})")
    return path


def index_args(wheels: Path | None) -> list[str]:
    return ["--no-index", "--find-links", str(wheels)] if wheels else []


def _sha256_of_item(item: dict) -> str | None:
    info = item.get("download_info") or {}
    archive = info.get("archive_info") or {}
    digest = (archive.get("hashes") or {}).get("sha256")
    if not digest and str(archive.get("hash", "")).startswith("sha256="):
        digest = archive["hash"].split("=", 1)[1]
    url = str(info.get("url", ""))
    if not digest and url.startswith("file://"):        # a local wheel directory: hash the file itself
        path = urllib.request.url2pathname(urllib.parse.urlparse(url).path)
        with open(path, "rb") as fh:
            digest = hashlib.file_digest(fh, "sha256").hexdigest()
    return digest if digest and re.fullmatch(r"[0-9a-f]{64}", digest) else None


def lock_text(stack: Stack, report: dict) -> str:
    """The lock file's text from pip's installation report (--dry-run --report)."""
    lines = []
    for item in sorted(report.get("install", []), key=lambda i: normal(i["metadata"]["name"])):
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        digest = _sha256_of_item(item)
        if digest is None:
            raise StackError(f"stack {stack.name}: pip gave no sha256 for {name}=={version} "
                             f"({(item.get('download_info') or {}).get('url', 'no url')}): cannot lock it")
        lines.append(f"{normal(name)}=={version} \\\n    --hash=sha256:{digest}")
    if not lines:
        raise StackError(f"stack {stack.name}: pip resolved nothing to lock")
    head = (f"# The {stack.name} stack's distributions with their sha256: `stackproof stack install {stack.name}` "
            "installs exactly these\n# (pip install --require-hashes --no-deps -r). Written by "
            f"`stackproof stack lock {stack.name}` on {time.strftime('%Y-%m-%d', time.gmtime())}\n"
            f"# (Python {sys.version_info.major}.{sys.version_info.minor}, {sys.platform} "
            f"{os.uname().machine}) from the pins in {stack.file.name}; do not edit by hand.\n")
    return head + "\n".join(lines) + "\n"


def write_lock(stack: Stack, report: dict) -> Path:
    path = lock_path(stack)
    if path is None:
        raise StackError(f"stack {stack.name}: has no stack file to write a lock beside")
    text = lock_text(stack, report)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return path

