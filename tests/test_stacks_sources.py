"""Benchmark sources without the internet: recipes.yaml validation, downloads from a loopback HTTP
server serving a tarball made here (good sha256, wrong sha256, truncated, 404, unsafe members: each a
one-line error and nothing installed), the source mirror layouts (tarball by name, Spack's layout,
Spack's source cache, bare and non-bare git repositories), the cache (never fetched twice) and the
message that says what to set when no source is reachable."""
import hashlib
import subprocess
import tarfile
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from sourcetest import make_tarball, no_apt

from stackproof.stacks import fetch, recipes, sources, unpack
from stackproof.stacks.recipes import GitSource, RecipeError, load_recipes, parse_recipe


class Server:
    """A loopback HTTP server: path -> (bytes, announced length or None)."""

    def __init__(self):
        self.files, self.hits = {}, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                outer.hits.append(self.path)
                if self.path not in outer.files:
                    self.send_error(404)
                    return
                data, length = outer.files[self.path]
                self.send_response(200)
                self.send_header("Content-Length", str(length if length is not None else len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        return f"http://127.0.0.1:{self.httpd.server_port}{path}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def recipe(sha256=None, file="demo-1.0.tar.gz", git=None, url=None, debian=None):
    body = {"version": "1.0", "spack": "demo", "licence": "MIT", "measures": "nothing",
            "source": {"top": "demo-1.0", **({"file": file, "sha256": sha256} if sha256 else {}),
                       **({"url": url} if url else {}), **({"git": git} if git else {}),
                       **({"debian": debian} if debian else {})},
            "build": [{"run": ["make", "CC={cc}"]}], "install": {"bin/demo": "demo"}}
    return parse_recipe("demo", body, "test")


def with_url(r, url):
    """parse_recipe only accepts https URLs; the loopback server is plain http (tests only)."""
    return replace(r, source=replace(r.source, url=url))


# ---- recipes.yaml -------------------------------------------------------------------------------------

def test_shipped_recipes_load_and_pin_every_source():
    all_ = load_recipes()
    assert {"fwq", "netpipe", "hpcc", "hypre", "osu", "amg", "sw4"} <= set(all_)
    assert all_["hypre"].key == "hypre_ij" and all_["hpcc"].key == "hpcc"
    for r in all_.values():
        src = r.source
        assert src.repository or src.sha256 or (src.git and len(src.git.commit) == 40), r.name
    assert all_["hpcc"].source.debian.orig == "hpcc_1.5.0.orig.tar.gz"
    assert all_["hypre"].source.debian.orig == "hypre_2.26.0.orig.tar.gz"
    assert all_["osu"].version.startswith("7.")


@pytest.mark.parametrize("change, message", [
    ({"build": [{"run": ["make", "{shell}"]}]}, "unknown placeholder {shell}"),
    ({"install": {"bin/x": "../../etc/passwd"}}, "no '..'"),
    ({"install": {"/usr/bin/x": "x"}}, "relative path"),
    ({"source": {"top": "d", "file": "d.tgz", "sha256": "abc"}}, "source.sha256"),
    ({"source": {"top": "d", "git": {"url": "http://x/y.git", "tag": "v1", "commit": "0" * 40}}}, "source.git.url"),
    ({"bogus": 1}, "unknown keys ['bogus']"),
])
def test_bad_recipes_are_one_line_errors(change, message):
    body = {"version": "1.0", "spack": "demo", "licence": "MIT", "measures": "x",
            "source": {"top": "d", "file": "d.tgz", "sha256": "0" * 64},
            "build": [{"run": ["make"]}], "install": {"bin/x": "x"}, **change}
    with pytest.raises(RecipeError) as exc:
        parse_recipe("demo", body, "recipes.yaml")
    assert message in str(exc.value) and "\n" not in str(exc.value)


# ---- downloads from a loopback server ------------------------------------------------------------------

def test_download_good_sha_is_cached_and_never_fetched_twice(server, stacks_root, tmp_path):
    tgz = tmp_path / "demo-1.0.tar.gz"
    sha = make_tarball(tgz, {"Makefile": b"all:\n"})
    server.files["/demo-1.0.tar.gz"] = (tgz.read_bytes(), None)
    r = with_url(recipe(sha), server.url("/demo-1.0.tar.gz"))
    lines = []
    got = sources.obtain(r, log=lines.append, runner=no_apt)
    assert got.digest == sha and got.origin.startswith("upstream http://127.0.0.1")
    assert got.archive == stacks_root / "sources" / "demo" / "demo-1.0.tar.gz"
    assert any("done" in line for line in lines)         # progress was shown
    again = sources.obtain(r, log=lines.append, runner=no_apt)
    assert again.archive == got.archive and again.origin == got.origin
    assert server.hits == ["/demo-1.0.tar.gz"]           # fetched once


@pytest.mark.parametrize("case", ["wrong-sha", "truncated", "404"])
def test_bad_downloads_leave_nothing(server, tmp_path, case):
    tgz = tmp_path / "src.tar.gz"
    sha = make_tarball(tgz, {"Makefile": b"all:\n"})
    data = tgz.read_bytes()
    if case == "wrong-sha":
        server.files["/f.tgz"] = (data, None)
        sha = "0" * 64
    elif case == "truncated":
        server.files["/f.tgz"] = (data[: len(data) // 2], len(data))
    dest = tmp_path / "cache" / "f.tgz"
    with pytest.raises(fetch.FetchError) as exc:
        fetch.download(server.url("/f.tgz"), dest, sha, log=lambda m: None, timeout=5)
    msg = str(exc.value)
    assert "\n" not in msg and server.url("/f.tgz") in msg
    assert {"wrong-sha": "does not match the pinned", "truncated": "truncated", "404": "HTTP 404"}[case] in msg
    assert isinstance(exc.value, fetch.ChecksumError) == (case == "wrong-sha")
    assert not dest.exists() and not dest.with_name("f.tgz.part").exists()


def test_unreachable_upstream_skips_saying_what_to_set(stacks_root):
    r = with_url(recipe("1" * 64), "http://127.0.0.1:9/demo-1.0.tar.gz")       # discard port: refused
    with pytest.raises(sources.SourceUnavailable) as exc:
        sources.obtain(r, log=lambda m: None, runner=no_apt)
    msg = str(exc.value)
    assert "STACKPROOF_SOURCE_MIRROR is not set" in msg and "unreachable" in msg
    assert "set STACKPROOF_SOURCE_MIRROR=DIR" in msg and "demo/demo-1.0.tar.gz" in msg and "\n" not in msg


@pytest.mark.parametrize("members, links, message", [
    ({"../evil": b"x"}, (), "unsafe member '../evil'"),
    ({"/etc/evil": b"x"}, (), "unsafe member '/etc/evil'"),
    ({"ok": b"x", "a/../../evil": b"x"}, (), "unsafe member"),
    ({"ok": b"x"}, [("link", "../../outside")], "links outside the tree"),
    ({"ok": b"x"}, [("abs", "/etc/passwd")], "links outside the tree"),
])
def test_unsafe_archives_are_refused_and_nothing_unpacked(tmp_path, members, links, message):
    tgz = tmp_path / "bad.tar.gz"
    make_tarball(tgz, members, links=links)
    dest = tmp_path / "build" / "src"
    with pytest.raises(fetch.ChecksumError) as exc:
        fetch.safe_extract(tgz, dest)
    assert message in str(exc.value) and "\n" not in str(exc.value)
    assert not dest.exists() and list((tmp_path / "build").iterdir()) == []
    assert not (tmp_path / "evil").exists()


def test_truncated_archive_unpacks_nothing(tmp_path):
    tgz = tmp_path / "t.tar.gz"
    make_tarball(tgz, {f"f{i}": bytes(5000) for i in range(20)})
    tgz.write_bytes(tgz.read_bytes()[:300])
    with pytest.raises(fetch.FetchError, match="cannot unpack"):
        fetch.safe_extract(tgz, tmp_path / "out" / "src")
    assert list((tmp_path / "out").iterdir()) == []


def test_safe_extract_replaces_an_older_tree(tmp_path):
    tgz = tmp_path / "t.tar.gz"
    make_tarball(tgz, {"new": b"1"})
    dest = tmp_path / "src"
    (dest / "old").mkdir(parents=True)
    fetch.safe_extract(tgz, dest)
    assert sorted(p.name for p in (dest / "demo-1.0").iterdir()) == ["new"] and not (dest / "old").exists()


# ---- mirror layouts -------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["by-name", "spack", "spack-source-cache"])
def test_tarball_mirror_layouts(stacks_root, tmp_path, monkeypatch, layout):
    tgz = tmp_path / "made.tar.gz"
    sha = make_tarball(tgz, {"Makefile": b"all:\n"})
    mirror = tmp_path / "mirror"
    where = {"by-name": mirror / "demo-1.0.tar.gz", "spack": mirror / "demo" / "demo-1.0.tar.gz",
             "spack-source-cache": mirror / "_source-cache" / "archive" / sha[:2] / f"{sha}.tar.gz"}[layout]
    where.parent.mkdir(parents=True)
    where.write_bytes(tgz.read_bytes())
    monkeypatch.setenv(sources.MIRROR_VAR, str(mirror))
    got = sources.obtain(with_url(recipe(sha), "http://127.0.0.1:9/never"), log=lambda m: None, runner=no_apt)
    assert got.origin == f"mirror {where}" and got.digest == sha
    assert got.archive.read_bytes() == tgz.read_bytes()


def test_mirror_with_wrong_bytes_is_an_error_not_a_fallback(stacks_root, tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    make_tarball(mirror / "demo-1.0.tar.gz", {"x": b"other"})
    with pytest.raises(fetch.ChecksumError, match="does not match the pinned"):
        sources.obtain(recipe("2" * 64), mirror=mirror, log=lambda m: None, runner=no_apt)
    assert not (stacks_root / "sources" / "demo" / "demo-1.0.tar.gz").exists()


def git(*args, cwd):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.mark.parametrize("bare", [True, False])
def test_git_mirror_exports_the_pinned_commit(stacks_root, tmp_path, bare):
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", cwd=work)
    (work / "Makefile").write_text("all:\n")
    git("add", ".", cwd=work)
    git("commit", "-qm", "v1", cwd=work)
    commit = git("rev-parse", "HEAD", cwd=work)
    (work / "later").write_text("not in the pinned commit\n")
    git("add", ".", cwd=work)
    git("commit", "-qm", "later", cwd=work)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    if bare:
        subprocess.run(["git", "clone", "-q", "--bare", str(work), str(mirror / "demo.git")], check=True)
    else:
        subprocess.run(["git", "clone", "-q", str(work), str(mirror / "demo")], check=True)
    r = recipe(git={"url": "https://example.org/demo.git", "tag": "v1", "commit": commit})
    got = sources.obtain(r, mirror=mirror, log=lambda m: None, runner=no_apt)
    assert got.commit == commit and got.origin.endswith(f"@{commit}")
    assert got.digest == got.tree_sha256 == unpack.archive_tree_digest(got.archive)
    with tarfile.open(got.archive) as tar:
        assert sorted(tar.getnames()) == ["demo-1.0", "demo-1.0/Makefile"]
    r2 = replace(r, source=replace(r.source, git=GitSource("https://example.org/demo.git", "v9", "f" * 40)))
    with pytest.raises(sources.SourceUnavailable, match="has no commit ffff"):
        sources.obtain(r2, mirror=mirror, log=lambda m: None, runner=no_apt, online=False)


def test_debian_source_is_checked_against_the_dsc(stacks_root, tmp_path):
    """apt-get source (faked) delivers a .dsc and the orig tarball; the orig is adopted only when the
    .dsc's Checksums-Sha256 and the recipe agree."""
    orig = tmp_path / "demo_1.0.orig.tar.gz"
    sha = make_tarball(orig, {"Makefile": b"all:\n"})
    dsc_text = f"Format: 3.0 (quilt)\nChecksums-Sha256:\n {sha} {orig.stat().st_size} demo_1.0.orig.tar.gz\n"
    dsc_sha = hashlib.sha256(dsc_text.encode()).hexdigest()

    def runner(cmd, cwd, **kw):
        assert cmd == ["apt-get", "source", "--download-only", "demo=1.0-1"]
        (Path(cwd) / "demo_1.0-1.dsc").write_text(dsc_text)
        (Path(cwd) / "demo_1.0.orig.tar.gz").write_bytes(orig.read_bytes())
        return subprocess.CompletedProcess(cmd, 100, "", "E: Failed to fetch ...debian.tar.xz  404  Not Found")
    deb = {"package": "demo", "version": "1.0-1", "dsc_sha256": dsc_sha, "orig": "demo_1.0.orig.tar.gz"}
    got = sources.obtain(recipe(sha, debian=deb), log=lambda m: None, runner=runner, online=False)
    assert got.origin == "debian demo=1.0-1 (demo_1.0.orig.tar.gz)" and got.digest == sha
    bad = dict(deb, dsc_sha256="3" * 64)
    (stacks_root / "sources").rename(tmp_path / "old-cache")
    with pytest.raises(sources.SourceUnavailable, match="does not match the pinned sha256"):
        sources.obtain(recipe(sha, debian=bad), log=lambda m: None, runner=runner, online=False)


def test_recipes_module_names_every_placeholder():
    assert set(recipes.PLACEHOLDERS) == {"cc", "cxx", "fc", "blas", "jobs", "src", "stage", "data", "repo"}


# ---- Spack stacks: the environment's installs, not rebuilt -----------------------------------------------

def test_view_stack_is_reported_from_spack_not_rebuilt(tmp_path, monkeypatch):
    from stackproof.stacks import benchbuild, spackbench
    from stackproof.stacks.model import parse_stack
    view = tmp_path / "view"
    (view / "bin").mkdir(parents=True)
    (view / "bin" / "hpcc").write_text("")
    st = parse_stack({"name": "spacky", "view": str(view), "compilers": {"cc": "mpicc", "cxx": "mpicxx"},
                      "mpi": {"family": "openmpi", "version": "x", "library": "y"},
                      "launcher": {"local": ["mpirun"]},
                      "benchmarks": {"hpcc": "bin/hpcc", "hypre_ij": "bin/ij"}}, tmp_path / "spacky.yaml")
    monkeypatch.setattr(spackbench.shutil, "which", lambda cmd: None)
    lines = list(benchbuild.build_stack(st))
    assert lines[0] == f"stack spacky: benchmarks from the view {view}, not rebuilt"
    assert f"stack spacky: hpcc: {view}/bin/hpcc present (Spack hpcc: spack is not on PATH)" in lines
    assert f"stack spacky: hypre_ij: {view}/bin/ij missing (Spack hypre: spack is not on PATH)" in lines
    monkeypatch.setattr(spackbench.shutil, "which", lambda cmd: "/opt/spack/bin/spack")

    def runner(cmd, **kw):
        assert cmd[:4] == ["/opt/spack/bin/spack", "find", "--format", "{name}@{version} /{hash:7}"]
        return subprocess.CompletedProcess(cmd, 0, "hpcc@1.5.0 /abcdefg\n", "")
    lines = list(spackbench.view_report(st, runner=runner))
    assert f"stack spacky: hpcc: {view}/bin/hpcc present (Spack hpcc: hpcc@1.5.0 /abcdefg)" in lines
    assert f"stack spacky: hypre_ij: {view}/bin/ij missing (Spack hypre: not installed)" in lines
