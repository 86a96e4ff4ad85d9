"""The head's artifact server: GET/HEAD of the files the nodes boot from, and nothing else.

Unlike `python -m http.server` (which it replaces) it lists no directory and serves only the files of
an allow list written by `vcluster up` (run/http-allow.json):
    {"*": [files every node boots from], "<node ip>": [that node's own files]}
A node's overlays (the system overlay holds the munge key) and its iPXE script go to that node's
address only: the static DHCP lease ties each MAC to its address, and the bridge lives in the head's
private namespace where only our own VMs are attached (docs/security.md).

    python -m stackproof.provision.vcluster.httpserve --bind ADDR --port N --root DIR --allow FILE
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from stackproof.provision.vcluster.artifacts import image_rel
from stackproof.provision.vcluster.netboot import mac_name


def allow_list(nodes, extra_common=()) -> dict[str, list[str]]:
    """What each node may fetch (relative to http/), keyed by its address; "*": every node."""
    common = {"vmlinuz", "kmods.img", *extra_common}
    common |= {image_rel(n.image) for n in nodes}
    out = {"*": sorted(common)}
    for n in nodes:
        out[n.ipaddr] = sorted({f"ipxe/{mac_name(n.hwaddr)}.ipxe", f"overlays/{n.name}/system.img",
                                f"overlays/{n.name}/runtime.img"})
    return out


def allowed(allow: dict[str, list[str]], client: str, path: str) -> str | None:
    """The relative file for a request path if `client` may have it, else None. Exact matches only:
    no '..', no directory, no query tricks can name anything the list does not."""
    rel = path.split("?", 1)[0].split("#", 1)[0].lstrip("/")
    if rel in allow.get("*", ()) or rel in allow.get(client, ()):
        return rel
    return None


class Handler(BaseHTTPRequestHandler):
    root: Path = Path("/nonexistent")
    allow: dict[str, list[str]] = {}
    server_version = "stackproof-vcluster"
    sys_version = ""

    def _file(self):
        rel = allowed(self.allow, self.client_address[0], self.path)
        if rel is None:
            self.send_error(404)
            return None
        try:
            fd = os.open(self.root / rel, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            self.send_error(404)
            return None
        fh = os.fdopen(fd, "rb")
        size = os.fstat(fd).st_size
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        return fh

    def do_GET(self):  # noqa: N802 (http.server's naming)
        fh = self._file()
        if fh is not None:
            with fh:
                try:
                    shutil.copyfileobj(fh, self.wfile, 1 << 20)
                except (BrokenPipeError, ConnectionResetError):
                    pass

    def do_HEAD(self):  # noqa: N802
        fh = self._file()
        if fh is not None:
            fh.close()

    def log_message(self, fmt, *args):
        sys.stderr.write(f"{self.client_address[0]} {fmt % args}\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="stackproof.provision.vcluster.httpserve")
    p.add_argument("--bind", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--root", required=True)
    p.add_argument("--allow", required=True)
    args = p.parse_args(argv)
    Handler.root = Path(args.root)
    Handler.allow = json.loads(Path(args.allow).read_text())
    server = ThreadingHTTPServer((args.bind, args.port), Handler)
    server.daemon_threads = True
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
