"""Hostile archives (issue 33, item 3), unpacked by stackproof.stacks.unpack under both interpreters we
support: Debian 12's /usr/bin/python3 (3.11.2, no tarfile.data_filter) and the venv's. Each attack is
refused in one line before anything is written (nothing outside the destination, no destination, no
temporary directory left); a good tree with links inside it unpacks the same on both.

The attacks: symlink chains that leave the tree only once every component is resolved
(t/d/q -> ../.., t/d/p -> q/../.. then t/d/p/flag), the long-path + symlink + hard-link chain of
CVE-2025-4517, a hard link to a file outside or to a link, a file written through a symlink inside
the tree, absolute and '..' names, devices, two top directories, and the caps on members and bytes."""
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from stackproof.paths import REPO

SYSTEM_PYTHON = "/usr/bin/python3"
INTERPRETERS = [pytest.param(SYSTEM_PYTHON, id="system-python"), pytest.param(sys.executable, id="venv")]

# Runs in the interpreter under test: loads unpack.py by path (only the standard library and
# stackproof.errors), unpacks, prints one JSON line.
DRIVER = r"""
import importlib.util, json, resource, sys
src, archive, dest, kwargs = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
sys.path.insert(0, src)
spec = importlib.util.spec_from_file_location("spk_unpack", src + "/stackproof/stacks/unpack.py")
mod = sys.modules["spk_unpack"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
call = mod.archive_tree_digest if kwargs.pop("digest_only", False) else lambda a, d, **kw: mod.extract(a, d, **kw)
limit = kwargs.pop("rlimit_as", None)
if limit:            # a memory limit on this process alone: an allocation past it is a MemoryError
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    digest = call(archive, dest, **kwargs) if call is not mod.archive_tree_digest else call(archive)
    print(json.dumps({"ok": digest, "python": sys.version.split()[0],
                      "data_filter": hasattr(__import__("tarfile"), "data_filter")}))
except mod.ArchiveError as exc:
    print(json.dumps({"refused": str(exc), "unsafe": isinstance(exc, mod.UnsafeArchive),
                      "python": sys.version.split()[0]}))
"""


def run_unpack(python, archive, dest, **kwargs):
    if not os.path.exists(python):
        pytest.fail(f"{python} is missing: Debian 12's python3 is part of every supported machine")
    proc = subprocess.run([python, "-c", DRIVER, str(REPO / "src"), str(archive), str(dest), json.dumps(kwargs)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0])


def add(tar, name, kind="file", data=b"x", link="", mode=0o644):
    info = tarfile.TarInfo(name)
    info.mode, info.mtime = mode, 1_600_000_000
    if kind == "file":
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        return
    info.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
                 "fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE}[kind]
    info.linkname = link
    tar.addfile(info)


def chain_from_the_issue(tar, flag):
    """On /usr/bin/python3 (name check only) this wrote t/d/p/flag outside the destination."""
    add(tar, "t", "dir")
    add(tar, "t/d", "dir")
    add(tar, "t/d/q", "symlink", link="../..")
    add(tar, "t/d/p", "symlink", link="q/../..")
    add(tar, "t/d/p/flag", data=b"written outside\n")


def cve_2025_4517(tar, flag):
    """CPython's own reproducer of CVE-2025-4517 (gh-135034), under a top directory t/: directories
    with names as long as PATH_MAX allows, reached through one-letter symlinks, so that
    os.path.realpath stops expanding before the last link, which climbs out; a hard link through it
    names the file `flag` beside the destination, and the next member overwrites it."""
    dest_len = len(str(flag.parent / "dest")) + 1 + len("t/")
    steps = "abcdefghijklmnop"
    comp = "d" * ((os.pathconf("/", "PC_PATH_MAX") - dest_len) // (len(steps) + 1))
    path = "t"
    add(tar, "t", "dir")
    for step in steps:
        add(tar, f"{path}/{comp}", "dir", mode=0o777)
        add(tar, f"{path}/{step}", "symlink", link=comp)
        path = f"{path}/{comp}"
    linkpath = "/".join(steps) + "/" + "l" * 254
    add(tar, f"t/{linkpath}", "symlink", link="/".join([".."] * len(steps)))
    add(tar, "t/escape", "symlink", link=f"{linkpath}/../..")
    add(tar, "t/flaglink", "hardlink", link="t/escape/" + flag.name)
    add(tar, "t/flaglink", data=b"overwritten\n")


ATTACKS = {
    "symlink-chain": (chain_from_the_issue, "links outside the tree"),
    "cve-2025-4517": (cve_2025_4517, "longer than"),
    "hardlink-outside": (lambda tar, flag: (add(tar, "t", "dir"), add(tar, "t/h", "hardlink", link="../flag")),
                         "unsafe member"),
    "hardlink-absolute": (lambda tar, flag: (add(tar, "t", "dir"), add(tar, "t/h", "hardlink", link=str(flag))),
                          "unsafe member"),
    "hardlink-to-a-link": (lambda tar, flag: (add(tar, "t", "dir"), add(tar, "t/s", "symlink", link="x"),
                                              add(tar, "t/x"), add(tar, "t/h", "hardlink", link="t/s")),
                           "other than an earlier regular file"),
    "write-through-a-link": (lambda tar, flag: (add(tar, "t", "dir"), add(tar, "t/sub", "dir"),
                                                add(tar, "t/l", "symlink", link="sub"), add(tar, "t/l/f")),
                             "lies below the symlink"),
    "absolute-link": (lambda tar, flag: (add(tar, "t", "dir"), add(tar, "t/l", "symlink", link=str(flag))),
                      "links outside the tree"),
    "link-loop": (lambda tar, flag: (add(tar, "t", "dir"), add(tar, "t/a", "symlink", link="b"),
                                     add(tar, "t/b", "symlink", link="a")), "a loop"),
    "dotdot-name": (lambda tar, flag: (add(tar, "t", "dir"), add(tar, "t/../flag")), "unsafe member"),
    "absolute-name": (lambda tar, flag: add(tar, str(flag)), "unsafe member"),
    "device": (lambda tar, flag: (add(tar, "t", "dir"), add(tar, "t/null", "chr")), "device or fifo"),
    "two-tops": (lambda tar, flag: (add(tar, "t/a"), add(tar, "u/b")), "expected one top directory"),
    "file-beside-the-top": (lambda tar, flag: (add(tar, "t/a"), add(tar, "README")), "not a directory"),
    "duplicate": (lambda tar, flag: (add(tar, "t/a"), add(tar, "t/a", "symlink", link="/etc")), "appears twice"),
}


def make_attack(tmp_path, attack):
    """The attack's tarball, and `outside`: the directory that holds the destination and a file
    `flag` the attacks aim at (b"secret")."""
    outside = tmp_path / "outside"
    outside.mkdir()
    flag = outside / "flag"
    flag.write_bytes(b"secret")
    archive = tmp_path / "evil.tar"
    with tarfile.open(archive, "w", format=tarfile.GNU_FORMAT) as tar:
        ATTACKS[attack][0](tar, flag)
    return archive, outside


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_attack_archives_are_refused_before_anything_is_written(tmp_path, python, attack):
    archive, outside = make_attack(tmp_path, attack)
    got = run_unpack(python, archive, outside / "dest")
    assert "refused" in got, f"{attack} was unpacked on Python {got['python']}"
    assert got["unsafe"] and ATTACKS[attack][1] in got["refused"] and "\n" not in got["refused"], got
    assert [p.name for p in outside.iterdir()] == ["flag"], "nothing may be left: no destination, no temporary tree"
    assert (outside / "flag").read_bytes() == b"secret"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.tar", "outside"]


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("cap, value, message", [
    ("max_members", 10, "more than 10 members (the member cap)"),
    ("max_bytes", 1 << 20, f"more than {1 << 20} bytes unpacked (the size cap)"),
])
def test_caps_on_members_and_bytes(tmp_path, python, cap, value, message):
    archive = tmp_path / "big.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        add(tar, "t", "dir")
        if cap == "max_members":
            for i in range(11):
                add(tar, f"t/f{i}")
        else:
            add(tar, "t/zeros", data=bytes(2 << 20))     # 2 MiB of zeros: a few kB compressed
    got = run_unpack(python, archive, tmp_path / "work" / "dest", **{cap: value})
    assert got.get("refused", "").endswith(message + ": not unpacked"), got
    assert list((tmp_path / "work").iterdir()) == []


@pytest.mark.parametrize("python", INTERPRETERS)
def test_wrong_bytes_are_refused_as_they_are_used(tmp_path, python):
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tar:
        add(tar, "t/a")
    got = run_unpack(python, archive, tmp_path / "work" / "dest", sha256="0" * 64)
    assert "does not match the pinned " + "0" * 64 in got.get("refused", ""), got
    got = run_unpack(python, archive, tmp_path / "work" / "dest", tree_sha256="0" * 64)
    assert "tree sha256" in got.get("refused", "") and list((tmp_path / "work").iterdir()) == []


def _header(kind: bytes, size: int, name: str = "././@PaxHeader") -> bytes:
    """A raw tar header block declaring an extended header body of `size` bytes."""
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(format=tarfile.USTAR_FORMAT if kind != tarfile.GNUTYPE_LONGNAME else tarfile.GNU_FORMAT)


def _pax_record(key: str, value: str) -> bytes:
    body = f" {key}={value}\n"
    n = len(body) + 1
    n = len(str(n + len(str(n)))) + len(body)      # the length counts its own digits
    return f"{n}{body}".encode()


def header_bomb(path: Path, kind: str) -> None:
    """600 MB declared by one header (tarfile read it whole before any check), or 3,000 chained pax
    headers (tarfile recursed once per header), each followed by an ordinary member."""
    with open(path, "wb") as out:
        if kind == "pax-600MB":
            out.write(_header(tarfile.XHDTYPE, 600 << 20) + bytes(4096))
        elif kind == "gnu-longname-600MB":
            out.write(_header(tarfile.GNUTYPE_LONGNAME, 600 << 20, "././@LongLink") + bytes(4096))
        else:
            record = _pax_record("comment", "x" * 20)
            block = _header(tarfile.XHDTYPE, len(record)) + record.ljust(512, b"\0")
            out.write(block * 3000)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            add(tar, "t/a")
        out.write(buf.getvalue())


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("call", ["extract", "digest"])
@pytest.mark.parametrize("kind, message", [
    ("pax-600MB", f"a pax header of {600 << 20} bytes (at most 65536)"),
    ("gnu-longname-600MB", f"a GNU long-name header of {600 << 20} bytes (at most 65536)"),
    ("chain-3000", "more than 8 extended headers in a row"),
])
def test_header_bombs_are_refused_before_tarfile_reads_them_under_a_memory_limit(tmp_path, python, call, kind,
                                                                                   message):
    """Under a 256 MiB address-space limit (the declared body does not fit: the old code died with a
    MemoryError traceback there, and fed the OOM killer without one): one line, nothing written."""
    archive = tmp_path / "bomb.tar"
    header_bomb(archive, kind)
    got = run_unpack(python, archive, tmp_path / "work" / "dest", rlimit_as=256 << 20, digest_only=call == "digest")
    assert "refused" in got and message in got["refused"] and "\n" not in got["refused"], got
    assert got["refused"].startswith(str(archive))
    assert not (tmp_path / "work").exists() or list((tmp_path / "work").iterdir()) == []


def test_recursion_and_memory_errors_are_one_line():
    from stackproof.stacks import unpack
    for exc, words in ((RecursionError(), "nested too deeply"), (MemoryError(), "more memory than")):
        err = unpack._unreadable("a.tar", exc, "read")
        assert isinstance(err, unpack.UnsafeArchive) and words in str(err) and "\n" not in str(err)


@pytest.mark.parametrize("python", INTERPRETERS)
def test_an_archive_swapped_for_a_fifo_does_not_hang_the_tree_digest_path(tmp_path, python):
    """extract with only a tree digest (a git export) used to open the archive by name: a FIFO
    swapped in after the cache check blocked it forever. Now it is opened without blocking."""
    archive = tmp_path / "export.tar"
    os.mkfifo(archive)
    got = run_unpack(python, archive, tmp_path / "work" / "dest", tree_sha256="0" * 64)
    assert "not a regular file (a FIFO)" in got.get("refused", ""), got


def test_a_good_tree_unpacks_the_same_on_both_interpreters(tmp_path):
    """Links that stay inside (SW4 3.0 has three dangling ones like examples/x/sw4 -> ../../optimize_mp/sw4),
    a hard link, executable bits and timestamps (autotools compares them) survive; both give one digest."""
    archive = tmp_path / "good.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        add(tar, "./", "dir")
        add(tar, "./t", "dir")
        add(tar, "t/configure", data=b"#!/bin/sh\n", mode=0o755)
        add(tar, "t/src/a.c", data=b"int a;\n")
        add(tar, "t/examples/x/sw4", "symlink", link="../../optimize_mp/sw4")
        add(tar, "t/include", "symlink", link="src")
        add(tar, "t/src/b.c", "hardlink", link="t/src/a.c")
        add(tar, "t/up", "symlink", link="..")            # the destination itself: inside
    digests = set()
    for i, (python, _) in enumerate([(SYSTEM_PYTHON, 0), (sys.executable, 1)]):
        dest = tmp_path / f"out{i}" / "src"
        got = run_unpack(python, archive, dest)
        assert "ok" in got, got
        digests.add(got["ok"])
        tree = dest / "t"
        assert os.readlink(tree / "examples" / "x" / "sw4") == "../../optimize_mp/sw4"
        assert (tree / "include" / "a.c").read_bytes() == b"int a;\n"
        assert (tree / "src" / "b.c").stat().st_ino == (tree / "src" / "a.c").stat().st_ino
        assert os.access(tree / "configure", os.X_OK) and not os.access(tree / "src" / "a.c", os.X_OK)
        assert (tree / "configure").stat().st_mtime == tar_mtime(archive, "t/configure")
    assert len(digests) == 1


def tar_mtime(archive: Path, name: str) -> int:
    with tarfile.open(archive) as tar:
        return tar.getmember(name).mtime
