"""vcluster hardening (issue 28, cases 6 and 9): the artifact server serves only listed files, each
node its own overlays (munge key), no listings; secrets written with their final mode from the first
byte; per-cluster namespaces and runtime dirs; TFTP served from a root-owned world-traversable runtime
dir, so dnsmasq (user nobody) reads it when the checkout is under a 0700 directory."""
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from stackproof.errors import StackproofError
from stackproof.provision.vcluster import artifacts, head, httpserve, netboot, nodesconf


@pytest.fixture
def nodes():
    spec = nodesconf.load_spec(nodesconf.DEFAULT_SPEC, nodes=2)
    return nodesconf.resolve(nodesconf.generate(spec))


def test_allow_list_gives_each_node_only_its_own_overlays(nodes):
    allow = httpserve.allow_list(nodes, ("share.img",))
    n1, n2 = nodes
    assert "vmlinuz" in allow["*"] and "share.img" in allow["*"] and artifacts.image_rel(n1.image) in allow["*"]
    assert not any("overlays" in f or "munge" in f for f in allow["*"])
    assert httpserve.allowed(allow, n1.ipaddr, f"/overlays/{n1.name}/system.img") == f"overlays/{n1.name}/system.img"
    assert httpserve.allowed(allow, n1.ipaddr, f"/overlays/{n2.name}/system.img") is None
    assert httpserve.allowed(allow, "10.77.0.99", f"/overlays/{n1.name}/system.img") is None
    assert httpserve.allowed(allow, n2.ipaddr, f"/ipxe/{netboot.mac_name(n2.hwaddr)}.ipxe")
    for bad in ("/", "/overlays/", "/../cache/munge.key", "/vmlinuz/../overlays/n01/system.img", "//etc/passwd"):
        assert httpserve.allowed(allow, n1.ipaddr, bad) is None, bad
    # every file a node's iPXE script names is on its list (the server would 404 the boot otherwise)
    for n in nodes:
        script = netboot.node_script(n, extra_initrds=("share.img",))
        for url in [w for line in script.splitlines() for w in line.split() if w.startswith("http://")]:
            assert httpserve.allowed(allow, n.ipaddr, url.split(netboot.base_url(), 1)[1]), url


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "http"
    (root / "overlays" / "n01").mkdir(parents=True)
    (root / "overlays" / "n02").mkdir(parents=True)
    (root / "vmlinuz").write_bytes(b"kernel")
    (root / "overlays" / "n01" / "system.img").write_bytes(b"n01 secret")
    (root / "overlays" / "n02" / "system.img").write_bytes(b"n02 secret")
    (root / "link").symlink_to(root / "overlays" / "n02" / "system.img")
    httpserve.Handler.root = root
    httpserve.Handler.allow = {"*": ["vmlinuz", "link"], "127.0.0.1": ["overlays/n01/system.img"],
                               "10.77.0.12": ["overlays/n02/system.img"]}
    srv = ThreadingHTTPServer(("127.0.0.1", 0), httpserve.Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_server_serves_listed_files_only_no_listing(server):
    assert _get(server + "/vmlinuz") == (200, b"kernel")
    assert _get(server + "/overlays/n01/system.img") == (200, b"n01 secret")
    for path in ("/", "/overlays/", "/overlays/n01/", "/overlays/n02/system.img", "/../http/vmlinuz", "/link",
                 "/nonexistent"):
        code, body = _get(server + path)
        assert code == 404, path
        assert b"secret" not in body and b"Directory listing" not in body, path


def test_secrets_are_created_with_their_mode(tmp_path, monkeypatch):
    """write_if_changed opens the file with its final mode (no chmod after a 0644 write) and never
    writes through a symlink planted at its temporary name."""
    calls = []
    real_open = os.open
    monkeypatch.setattr(artifacts.os, "open", lambda p, flags, mode=0o777: calls.append((str(p), flags, mode))
                        or real_open(p, flags, mode))
    monkeypatch.setattr(artifacts.os, "chmod", lambda *a: pytest.fail(f"chmod after write: {a}"))
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    out = tmp_path / "overlays" / "n01" / "system.img"
    out.parent.mkdir(parents=True)
    (out.parent / "system.img.tmp").symlink_to(victim)
    assert artifacts.write_if_changed(out, b"munge key inside", 0o400)
    assert oct(out.stat().st_mode & 0o777) == oct(0o400) and out.read_bytes() == b"munge key inside"
    assert victim.read_text() == "untouched"
    assert calls and calls[0][2] == 0o400 and calls[0][1] & os.O_EXCL and calls[0][1] & os.O_NOFOLLOW


def test_two_roots_two_namespaces_and_runtime_dirs(tmp_path):
    a, b = tmp_path / "a" / "vcluster", tmp_path / "b" / "vcluster"
    assert head.cluster_id(a) != head.cluster_id(b)
    assert head.runtime_dir(a) != head.runtime_dir(b)
    before = head.NETNS
    try:
        head.select(a)
        ns_a = head.ns()
        head.select(b)
        assert head.ns() != ns_a and head.ns()[3].startswith("spk-vc-")
    finally:
        head.NETNS = before


def _as_nobody(*cmd):
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd],
                          capture_output=True, text=True)


@pytest.fixture
def private_root(monkeypatch):
    """A vcluster root under a 0700 `mktemp -d` (a clone in a private directory), and a runtime base
    of its own under /run (root-owned, world-traversable), removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root (a runtime dir under /run, reading as nobody)")
    private = Path(tempfile.mkdtemp(prefix="spk-private-"))
    assert oct(private.stat().st_mode & 0o777) == oct(0o700)
    base = Path(f"/run/stackproof-test-{os.getpid()}")
    monkeypatch.setattr(head, "RUNTIME_BASE", base)
    yield private / "checkout" / "build" / "vcluster"
    shutil.rmtree(private, ignore_errors=True)
    shutil.rmtree(base, ignore_errors=True)


def test_tftp_root_is_readable_by_nobody_from_a_0700_checkout(private_root, nodes):
    runtime = head.make_runtime_dir(private_root)
    tftp = artifacts.boot_files(private_root, runtime, nodes, "nodes", netboot.boot_script(), netboot.node_script)
    assert not str(tftp).startswith(str(private_root.parents[2]))
    assert _as_nobody("cat", str(tftp / "boot.ipxe")).stdout == netboot.boot_script()
    # what broke before: the same file inside the private checkout is out of nobody's reach
    (private_root / "tftp").mkdir(parents=True)
    (private_root / "tftp" / "boot.ipxe").write_text("x")
    assert _as_nobody("cat", str(private_root / "tftp" / "boot.ipxe")).returncode != 0
    conf = netboot.dnsmasq_conf(nodes, private_root / "run", tftp)
    assert f"tftp-root={tftp}\n" in conf


def test_runtime_dir_planted_symlink_is_refused(private_root):
    head.RUNTIME_BASE.mkdir(mode=0o755)
    target = Path(tempfile.mkdtemp())
    try:
        head.runtime_dir(private_root).symlink_to(target)
        with pytest.raises(StackproofError, match="symlink, or someone else's"):
            head.make_runtime_dir(private_root)
    finally:
        shutil.rmtree(target)


def test_cleanup_removes_only_its_own_runtime_dir(private_root, tmp_path):
    other = tmp_path / "other" / "vcluster"
    mine, theirs = head.make_runtime_dir(private_root), head.make_runtime_dir(other)
    head.remove_runtime_dir(private_root)
    assert not mine.exists() and theirs.is_dir()
    head.remove_runtime_dir(other)
    assert not head.RUNTIME_BASE.exists()


def test_dnsmasq_as_nobody_serves_tftp_from_a_0700_checkout(private_root, nodes, tmp_path):
    """The real daemon: dnsmasq (which drops to nobody) in a scratch namespace serves boot.ipxe over
    TFTP to curl, with the vcluster root inside a 0700 directory."""
    for tool in ("dnsmasq", "curl", "ip"):
        if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists():
            pytest.skip(f"{tool} not installed (make vcluster-tools)")
    runtime = head.make_runtime_dir(private_root)
    tftp = artifacts.boot_files(private_root, runtime, nodes, "nodes", netboot.boot_script(), netboot.node_script)
    name = f"spk-tftp-test-{os.getpid()}"
    run = tmp_path / "run"
    run.mkdir()
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        ns = ["ip", "netns", "exec", name]
        subprocess.run(ns + ["ip", "link", "set", "lo", "up"], check=True)
        subprocess.run(ns + ["dnsmasq", "--port=0", "--enable-tftp", f"--tftp-root={tftp}", "--interface=lo",
                             "--bind-interfaces", f"--pid-file={run}/dnsmasq.pid", f"--log-facility={run}/log"],
                       check=True)
        for _ in range(50):
            got = subprocess.run(ns + ["curl", "-s", "--max-time", "5", "tftp://127.0.0.1/boot.ipxe"],
                                 capture_output=True, text=True)
            if got.returncode == 0:
                break
            time.sleep(0.1)
        assert got.stdout == netboot.boot_script(), (got.returncode, (run / "log").read_text(errors="replace"))
    finally:
        pid = (run / "dnsmasq.pid").read_text().strip() if (run / "dnsmasq.pid").is_file() else ""
        if pid.isdigit():
            os.kill(int(pid), 15)
        subprocess.run(["ip", "netns", "del", name], check=False)


def test_up_writes_the_allow_list_it_serves():
    """core.up writes run/http-allow.json from httpserve.allow_list and hands it to start_http."""
    src = (Path(head.__file__).parent / "core.py").read_text()
    assert "httpserve.allow_list(vnodes" in src and "head.start_http(self.root, self.run, allow)" in src
    assert "http.server" not in (Path(head.__file__).parent / "head.py").read_text().replace("stackproof.provision.vcluster.httpserve", "")
    assert json.dumps(httpserve.allow_list([], ())) == '{"*": ["kmods.img", "vmlinuz"]}'
