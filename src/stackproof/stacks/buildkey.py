"""What one benchmark build depends on, as one key, and the record a build leaves beside its outputs.

`stack build` rebuilds a target when its key changes, and takes a build made elsewhere (`--reuse
DIR`: the host's, inside the laptop image) only when the key computed here, from this machine's own
files, equals the key recorded with it. The key hashes everything the build reads that can change:
  - the target: its recipe (recipes.yaml entry + the data files its steps use) or packaged C source,
    and the verified source's digest;
  - the build code: appbuild.py, which runs every recipe (and BUILD_FORMAT for probe/hello);
  - the stack: its file's sha256 and the resolved fields a build uses (prefix, compilers,
    environment, paths, BLAS/LAPACK), so a stack under another prefix is another build;
  - the toolchain: the versions of the Debian packages a build can read (toolchain_packages), the
    pip stack's installed distributions and hash lock (its manifest), the sha256 of the MPI library
    files the binaries link.
Nothing in it depends on where or when the build ran (no host name, no mtime): two machines with the
same inputs compute the same key. The record (<bench>/.stamps/<target>.json) keeps the key, the
parts it was computed from (so a key that differs says what differs) and the sha256 of every file
the build installed (checked again when another machine reuses them).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from stackproof.stacks.fetch import sha256_of
from stackproof.stacks.install import read_manifest
from stackproof.stacks.model import Stack

BUILD_FORMAT = 3               # bump when what a key covers, or how probe/hello are built, changes
# the roots of the toolchain: the compilers (the stacks' wrappers call them), the C library headers and
# the tools the recipes run (make, cmake, autotools); each stack adds its install.apt
TOOLCHAIN_ROOTS = ("gcc", "g++", "gfortran", "libc6-dev", "make", "cmake", "autoconf", "automake", "libtool")
_DPKG_FORMAT = "${Package}\t${Version}\t${Section}\t${source:Package}\t${Depends}, ${Pre-Depends}\t${Provides}\t" \
               "${db:Status-Abbrev}\n"


@functools.lru_cache(maxsize=1)
def _dpkg_database() -> tuple[dict[str, tuple[str, str, str, str]], dict[str, str]] | None:
    """{package: (version, section, source, depends)} of the installed packages and {virtual: provider},
    or None where dpkg-query is missing (not Debian)."""
    try:
        out = subprocess.run(["dpkg-query", "-W", f"-f={_DPKG_FORMAT}"], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    packages, provides = {}, {}
    for line in out.splitlines():
        fields = line.split("\t")
        if len(fields) != 7 or not fields[6].startswith("ii"):
            continue
        name, version, section, source, depends, provided, _ = fields
        name = name.split(":")[0]
        packages[name] = (version, section, source or name, depends)
        for virtual in provided.split(","):
            if virtual.strip():
                provides.setdefault(virtual.strip().split()[0], name)
    return packages, provides


def toolchain_packages(roots) -> dict[str, str] | None:
    """{package: version} of the Debian packages a build can read: in the Depends closure of `roots`
    (installed ones; the first installed choice of an alternative), every package built from the same
    source as a development package there (section devel/libdevel or a -dev name): the compilers and
    their runtime libraries, binutils, the C library and kernel headers, the MPI's and BLAS's packages,
    make, cmake. Not the rest of the closure (perl, libssl3, ...), which no compile reads.
    None where there is no dpkg."""
    db = _dpkg_database()
    if db is None:
        return None
    packages, provides = db

    def installed(name: str) -> str | None:
        name = name.strip().split(" ")[0].split(":")[0]
        return name if name in packages else provides.get(name)

    seen: set[str] = set()
    todo = [p for p in map(installed, roots) if p]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for dependency in packages[name][3].split(","):
            choice = next((p for p in map(installed, dependency.split("|")) if p), None) if dependency.strip() else None
            if choice:
                todo.append(choice)
    dev_sources = {packages[p][2] for p in seen if packages[p][1] in ("devel", "libdevel") or p.endswith("-dev")}
    return {p: packages[p][0] for p in sorted(seen) if packages[p][2] in dev_sources}


def outdated(packages: dict[str, str]) -> list[str]:
    """The packages of `packages` ({name: installed version}) whose apt candidate is another version:
    what `apt-get install --only-upgrade` brings to the archive's current versions, the ones a node
    image built now gets (then the host's builds and the image's have the same key)."""
    if not packages:
        return []
    try:
        out = subprocess.run(["apt-cache", "policy", *sorted(packages)], capture_output=True, text=True).stdout
    except OSError:
        return []
    candidates, name = {}, None
    for line in out.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            name = line[:-1].split(":")[0]
        elif name and line.strip().startswith("Candidate:"):
            candidates[name] = line.split(":", 1)[1].strip()
    return [p for p, v in sorted(packages.items()) if candidates.get(p) not in (None, "(none)", v)]


def _compiler_versions(stack: Stack, env: dict[str, str]) -> dict[str, str]:
    """Where there is no dpkg: what each compiler says it is (`CC --version`'s first line)."""
    out = {}
    for cc in filter(None, (stack.cc, stack.cxx, stack.fc)):
        try:
            proc = subprocess.run([cc, "--version"], capture_output=True, text=True, env=env, timeout=60)
            out[cc] = (proc.stdout or proc.stderr).splitlines()[0] if (proc.stdout or proc.stderr) else ""
        except (OSError, subprocess.TimeoutExpired):
            out[cc] = "not runnable"
    return out


def mpi_library_digests(stack: Stack) -> dict[str, str]:
    """{file name: sha256} of the stack's MPI library files (mpi.library in mpi.library_dir, links
    resolved): the bytes the binaries link, whatever package or wheel brought them."""
    if not stack.mpi_library_dir or not Path(stack.mpi_library_dir).is_dir():
        return {}
    rx = re.compile(stack.mpi_library)
    out = {}
    for path in sorted(Path(stack.mpi_library_dir).iterdir()):
        if rx.search(path.name):
            real = Path(os.path.realpath(path))
            out[path.name] = sha256_of(real) if real.is_file() else "missing"
    return out


def _pip_part(stack: Stack) -> dict | None:
    if not stack.install_pip or stack.prefix is None:
        return None
    manifest = read_manifest(stack.prefix) or {}
    return {"pins": manifest.get("pins"), "installed": manifest.get("installed")}


def _code_digest() -> str:
    return sha256_of(Path(__file__).with_name("appbuild.py"))


def stack_parts(stack: Stack, env: dict[str, str]) -> dict:
    """The key's parts that every target of `stack` shares (computed once per stack and run)."""
    toolchain = toolchain_packages((*TOOLCHAIN_ROOTS, *stack.install_apt))
    return {"format": BUILD_FORMAT, "build_code": _code_digest(),
            "stack_file": sha256_of(stack.file) if stack.file and Path(stack.file).is_file() else None,
            "stack": {"prefix": str(stack.prefix) if stack.prefix else None, "cc": stack.cc, "cxx": stack.cxx,
                      "fc": stack.fc, "env": stack.env, "path": list(stack.path),
                      "ld_library_path": list(stack.ld_library_path), "blas": stack.blas_lapack},
            "toolchain": toolchain if toolchain is not None else {"compilers": _compiler_versions(stack, env)},
            "pip": _pip_part(stack), "mpi_libraries": mpi_library_digests(stack)}


def target_parts(shared: dict, target: str, recipe: str, source: str) -> dict:
    """All parts of one target's key: `recipe` is its recipe fingerprint (or its C source's sha256),
    `source` the verified source's digest."""
    return {**shared, "target": target, "recipe": hashlib.sha256(recipe.encode()).hexdigest(), "source": source}


def key_of(parts: dict) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def differences(mine: dict, theirs: dict) -> list[str]:
    """What differs between two keys' parts, in a few words each (a reused build that does not match)."""
    out = []
    for name in sorted(set(mine) | set(theirs)):
        a, b = mine.get(name), theirs.get(name)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict) and name == "toolchain":
            diff = [f"{p} {a.get(p, 'absent')} here, {b.get(p, 'absent')} there" for p in sorted(set(a) | set(b))
                    if a.get(p) != b.get(p)]
            out.append(f"toolchain ({'; '.join(diff[:4])}{'; ...' if len(diff) > 4 else ''})")
        elif isinstance(a, dict) and isinstance(b, dict):
            out.append(f"{name} ({', '.join(k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))})")
        else:
            out.append(name)
    return out


# ---------------------------------------------------------------- the record beside the outputs

def record_path(bench: Path, target: str) -> Path:
    return bench / ".stamps" / f"{target}.json"


def read_record(bench: Path, target: str) -> dict | None:
    try:
        doc = json.loads(record_path(bench, target).read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(doc, dict) and isinstance(doc.get("key"), str) and isinstance(doc.get("parts"), dict) \
        and isinstance(doc.get("files"), dict)
    return doc if ok else None


def output_files(bench: Path, outputs: list[Path]) -> dict[str, str]:
    """{path relative to the bench dir: sha256} of every file under `outputs` (files or directories)."""
    files = {}
    for out in outputs:
        for f in ([out] if out.is_file() else sorted(p for p in out.rglob("*") if p.is_file() and not p.is_symlink())):
            files[str(f.relative_to(bench))] = sha256_of(f)
    return files


def write_record(bench: Path, target: str, parts: dict, outputs: list[Path]) -> None:
    path = record_path(bench, target)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps({"key": key_of(parts), "parts": parts, "files": output_files(bench, outputs)},
                              indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def current(bench: Path, target: str, key: str, outputs: list[Path]) -> bool:
    """The build in `bench` has this key and its outputs are there."""
    rec = read_record(bench, target)
    return rec is not None and rec["key"] == key and all(o.exists() for o in outputs)


# ---------------------------------------------------------------- a build made elsewhere

class NotReusable(Exception):
    """The other build cannot stand in for this one (the message says why)."""


def _open_file(root: Path, rel: str) -> int:
    """A read-only descriptor of the regular file `rel` under `root`, no link followed on the way."""
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or any(p in ("..", ".") for p in parts):
        raise NotReusable(f"its record names {rel!r}, not a path inside the bench directory")
    flags = os.O_RDONLY | os.O_NOFOLLOW
    fd = os.open(root, flags | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], flags, dir_fd=fd)
    except OSError as exc:
        raise NotReusable(f"{rel}: {exc.strerror} (a missing file, or a link)") from None
    finally:
        os.close(fd)


def reuse(other: Path, bench: Path, target: str, parts: dict, outputs: list[Path]) -> None:
    """Install the build of `target` in the bench dir `other` (another machine's) into `bench`, when
    its record's key is the key of `parts` (computed here) and every file it lists has the recorded
    sha256 as copied; NotReusable says why not. Outputs appear all at once (staged, then renamed)."""
    rec = read_record(other, target)
    if rec is None:
        raise NotReusable("no build record")
    if rec["key"] != key_of(rec["parts"]):
        raise NotReusable("its record's key is not the hash of its parts")
    if rec["key"] != key_of(parts):
        raise NotReusable(f"built from other inputs: {', '.join(differences(parts, rec['parts']))}")
    wanted = {str(o.relative_to(bench)) for o in outputs}
    stage = bench / f".reuse-{target}"
    shutil.rmtree(stage, ignore_errors=True)
    try:
        for rel, digest in sorted(rec["files"].items()):
            if not any(rel == w or rel.startswith(w + "/") for w in wanted):
                raise NotReusable(f"its record lists {rel}, not one of the target's outputs")
            fd = _open_file(other, rel)         # checks the path first: nothing is written for a bad one
            dest = stage / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            with os.fdopen(fd, "rb") as src, open(dest, "wb") as out:
                mode = os.fstat(src.fileno()).st_mode & 0o755
                shutil.copyfileobj(src, out)
            os.chmod(dest, mode)
            if sha256_of(dest) != digest:
                raise NotReusable(f"{rel} does not have the sha256 its record gives")
        missing = sorted(w for w in wanted if not (stage / w).exists())
        if missing:
            raise NotReusable(f"its record lacks {', '.join(missing)}")
        for w in sorted(wanted):
            final = bench / w
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.is_dir() and not final.is_symlink():
                shutil.rmtree(final)
            os.replace(stage / w, final)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    write_record(bench, target, parts, outputs)
