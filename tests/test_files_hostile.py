"""stackproof.files, the one way root opens a path another party controls (issue 42), under both
interpreters we support (Debian 12's /usr/bin/python3 and the venv's) and both resolvers (the
kernel's openat2 and the component-by-component walk used where a kernel lacks it): links are
refused (or, for a mirror, kept inside their directory), a FIFO does not block, only regular files
of the cap's size are read, new files appear only through a private staging directory, and a
directory root writes into must be its own. Every refusal is one line."""
import json
import os
import subprocess
import sys

import pytest

from stackproof import files
from stackproof.paths import REPO

SYSTEM_PYTHON = "/usr/bin/python3"
INTERPRETERS = [pytest.param(SYSTEM_PYTHON, id="system-python"), pytest.param(sys.executable, id="venv")]
RESOLVERS = [pytest.param("0", id="openat2"), pytest.param("1", id="walk")]

# Runs in the interpreter under test: stackproof.files from this checkout, one call, one JSON line.
DRIVER = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from stackproof import files
call, args = sys.argv[2], json.loads(sys.argv[3])
try:
    if call == "read":
        out = files.read_bytes(args["root"], args["rel"], args.get("cap", 1 << 20), links=args.get("links", "refused"))
        print(json.dumps({"ok": out.decode(errors="replace"), "openat2": files.openat2_available()}))
    elif call == "stage":
        with files.Staging(args["target"]) as st:
            st.write("f", b"new bytes")
            modes = [oct(os.stat(st.path).st_mode & 0o777), oct(os.stat(st.path / "f").st_mode & 0o777)]
            st.commit("f", args["name"])
        print(json.dumps({"ok": modes}))
    elif call == "owned":
        print(json.dumps({"ok": str(files.check_owned_dir(args["path"], "cache", create=args.get("create", False)))}))
except files.UnsafePath as exc:
    print(json.dumps({"refused": str(exc)}))
"""


def run(python, call, resolver="0", **args):
    if not os.path.exists(python):
        pytest.fail(f"{python} is missing: Debian 12's python3 is part of every supported machine")
    env = dict(os.environ, **{files.NO_OPENAT2_VAR: resolver})
    proc = subprocess.run([python, "-c", DRIVER, str(REPO / "src"), call, json.dumps(args)], capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0])


@pytest.fixture
def tree(tmp_path):
    """root/ with a file, a subdirectory, links inside and out, a FIFO; secret beside root/ (0600)."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f").write_text("inside\n")
    (tmp_path / "secret").write_text("SECRET\n")
    (tmp_path / "secret").chmod(0o600)
    (root / "inlink").symlink_to("sub/f")
    (root / "subdirlink").symlink_to("sub")
    (root / "up").symlink_to("../secret")
    (root / "abs").symlink_to(tmp_path / "secret")
    (root / "sub" / "climb").symlink_to("../../secret")
    (root / "loop").symlink_to("loop")
    os.mkfifo(root / "fifo")
    (root / "big").write_bytes(b"x" * 4096)
    return root


CASES = [
    # rel, links, expected content or the refusal's words
    ("sub/f", "refused", "inside\n"),
    ("inlink", "refused", "inlink is a symbolic link"),
    ("subdirlink/f", "refused", "subdirlink is a symbolic link"),
    ("inlink", "beneath", "inside\n"),
    ("subdirlink/f", "beneath", "inside\n"),
    ("up", "beneath", "outside its directory"),
    ("abs", "beneath", "outside its directory"),
    ("sub/climb", "beneath", "outside its directory"),
    ("up", "refused", "up is a symbolic link"),
    ("../secret", "beneath", "not a plain relative name"),
    (None, "refused", "not a plain relative name"),        # the absolute path of the secret
    ("fifo", "refused", "not a regular file (a FIFO)"),
    ("sub", "refused", "not a regular file (a directory)"),
    ("big", "refused", "over the size cap of 1024"),
]


@pytest.mark.parametrize("resolver", RESOLVERS)
@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("rel, links, expected", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_reads_beneath_a_directory(tree, python, resolver, rel, links, expected):
    rel = rel or str(tree.parent / "secret")
    got = run(python, "read", resolver, root=str(tree), rel=rel, links=links, cap=1024)
    if expected.endswith("\n"):
        assert got.get("ok") == expected, got
        assert got["openat2"] is (resolver == "0")        # the resolver the case meant to test
    else:
        assert "refused" in got and expected in got["refused"] and "\n" not in got["refused"], got
        assert "SECRET" not in got["refused"]


@pytest.mark.parametrize("resolver", RESOLVERS)
def test_a_loop_is_refused(tree, resolver):
    got = run(sys.executable, "read", resolver, root=str(tree), rel="loop", links="beneath")
    assert "refused" in got and ("loop" in got["refused"] or "symbolic link" in got["refused"]), got


@pytest.mark.parametrize("python", INTERPRETERS)
def test_staging_is_private_and_replaces_a_planted_link(tmp_path, python):
    """A link planted at the final name (to a root-only victim) is replaced by the rename, never
    written through; the staging directory is 0700, the file 0600, and nothing is left of it."""
    target = tmp_path / "cache"
    target.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("root-only\n")
    (target / "entry").symlink_to(victim)
    got = run(python, "stage", target=str(target), name="entry")
    assert got["ok"] == ["0o700", "0o600"]
    assert victim.read_text() == "root-only\n"
    assert not (target / "entry").is_symlink() and (target / "entry").read_bytes() == b"new bytes"
    assert sorted(p.name for p in target.iterdir()) == ["entry"]


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("case, expected", [
    ("group-writable", "writable by group or others (mode 775)"),
    ("link", "is a symbolic link"),
    ("other-owner", "owned by uid 65534"),
    ("parent-writable", "its parent"),
    ("file", "is not a directory"),
])
def test_a_directory_root_writes_into_must_be_its_own(tmp_path, python, case, expected):
    if case == "other-owner" and os.geteuid() != 0:
        pytest.skip("needs root to give the directory to another user")
    path = tmp_path / "cache"
    if case == "group-writable":
        path.mkdir()
        path.chmod(0o775)
    elif case == "link":
        (tmp_path / "real").mkdir()
        path.symlink_to(tmp_path / "real")
    elif case == "other-owner":
        path.mkdir()
        os.chown(path, 65534, 65534)
    elif case == "parent-writable":
        (tmp_path / "open").mkdir()
        (tmp_path / "open").chmod(0o777)
        path = tmp_path / "open" / "cache"
    else:
        path.write_text("")
    got = run(python, "owned", path=str(path), create=True)
    assert "refused" in got and expected in got["refused"] and "\n" not in got["refused"], got


def test_a_directory_of_ours_is_created_0755_and_accepted(tmp_path):
    got = run(sys.executable, "owned", path=str(tmp_path / "a" / "b"), create=True)
    assert got["ok"] == str(tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b").stat().st_mode & 0o777 == 0o755


def test_open_path_refuses_a_link_anywhere_on_an_absolute_path(tmp_path):
    (tmp_path / "real" / "stage").mkdir(parents=True)
    (tmp_path / "real" / "stage" / "out").write_text("x")
    (tmp_path / "via").symlink_to(tmp_path / "real")
    fd = files.open_path(tmp_path / "real" / "stage")
    try:
        assert files.read_bytes(fd, "out", 10) == b"x"
    finally:
        os.close(fd)
    with pytest.raises(files.UnsafePath, match=f"{tmp_path}/via is a symbolic link"):
        files.open_path(tmp_path / "via" / "stage")


def test_remove_specials_leaves_only_regular_files_and_directories(tmp_path):
    """What StackCheck runs on a stage directory before ReFrame copies from it (shutil.copy follows
    links): links, FIFOs and sockets go, files and directories stay, nothing is followed."""
    import socket
    stage = tmp_path / "stage"
    (stage / "sub").mkdir(parents=True)
    (stage / "rfm_job.out").write_text("out\n")
    (stage / "rfm_job.err").symlink_to("/etc/shadow")
    (stage / "sub" / "np.out").symlink_to(tmp_path)
    os.mkfifo(stage / "sub" / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(stage / "sock"))
    sock.close()
    (tmp_path / "kept").mkdir()
    (stage / "linkdir").symlink_to(tmp_path / "kept")
    removed = files.remove_specials(stage)
    assert sorted(removed) == ["linkdir", "rfm_job.err", "sock", "sub/fifo", "sub/np.out"]
    assert sorted(p.name for p in stage.rglob("*")) == ["rfm_job.out", "sub"]
    assert (tmp_path / "kept").is_dir()
