"""A local attacker for the hostile tests of issue 42: a process running as `nobody` while root works,
with two tools (Python's ctypes inotify, no package):

- a watcher: inotify on directories (and on each directory created below them that it may enter);
  whenever a file appears, is written to or moved into place it opens and reads it, and between events
  it reads every file it can list, recording any read that held the secret;
- a planter: it keeps creating symbolic links (name -> target) in directories; with `swap`, it
  alternates each name between a harmless regular file and the link (rename: atomic), so that a
  reader meets either at any moment.

`Attacker(...)` starts it and waits until its watches are in place; `control(dir, secret)` leaves a
readable file with the secret (the attacker's last look, after the stop signal, must report it: the
positive control); `stop()` ends it and returns what it saw: leaks (paths whose bytes held the
secret), events, reads, planted (links made), refused (plants the directory refused)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

NOBODY = 65534

SCRIPT = r"""
import ctypes, errno, json, os, select, signal, sys
cfg = json.loads(sys.argv[1])
secret = cfg["secret"].encode()
libc = ctypes.CDLL(None, use_errno=True)
IN_MODIFY, IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE = 0x2, 0x8, 0x80, 0x100
MASK = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE
ino = libc.inotify_init1(os.O_NONBLOCK)
watches, seen = {}, {"leaks": [], "events": 0, "reads": 0, "planted": 0, "refused": {}, "watch_refused": 0}
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))

def watch(d):
    wd = libc.inotify_add_watch(ino, d.encode(), MASK)
    if wd >= 0:
        watches[wd] = d
    else:
        seen["watch_refused"] += 1

def read(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        data = os.read(fd, 64 << 20)
    except OSError:
        data = b""
    finally:
        os.close(fd)
    seen["reads"] += 1
    if secret in data and path not in seen["leaks"]:
        seen["leaks"].append(path)

def plant(d, name, target, swap, turn):
    path = os.path.join(d, name)
    try:
        if swap and turn % 2:
            tmp = os.path.join(d, "." + name + ".tmp")
            with open(tmp, "w") as f:
                f.write("harmless\n")
            os.rename(tmp, path)
            return
        if swap:
            tmp = os.path.join(d, "." + name + ".lnk")
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.symlink(target, tmp)
            os.rename(tmp, path)
        elif os.path.islink(path) and os.readlink(path) == target:
            return
        else:
            os.symlink(target, path)
        seen["planted"] += 1
    except OSError as exc:
        key = errno.errorcode.get(exc.errno, str(exc.errno))
        seen["refused"][key] = seen["refused"].get(key, 0) + 1

for d in cfg["watch"]:
    watch(d)
open(cfg["ready"], "w").close()
turn = 0
while not stop:
    turn += 1
    for d, name, target in cfg["plant"]:
        plant(d, name, target, cfg.get("swap", False), turn)
    r, _, _ = select.select([ino], [], [], 0.002)
    if r:
        try:
            buf = os.read(ino, 1 << 16)
        except BlockingIOError:
            buf = b""
        i = 0
        while i + 16 <= len(buf):
            wd, mask, _cookie, n = int.from_bytes(buf[i:i+4], "little", signed=True), \
                int.from_bytes(buf[i+4:i+8], "little"), 0, int.from_bytes(buf[i+12:i+16], "little")
            name = buf[i+16:i+16+n].split(b"\0", 1)[0].decode(errors="replace")
            i += 16 + n
            seen["events"] += 1
            path = os.path.join(watches.get(wd, ""), name)
            if os.path.isdir(path) and not os.path.islink(path):
                watch(path)
            else:
                read(path)
    for d in list(watches.values()):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            read(os.path.join(d, name))
for d in list(watches.values()):        # a last look at everything there, after the stop signal
    try:
        names = os.listdir(d)
    except OSError:
        continue
    for name in names:
        read(os.path.join(d, name))
with open(cfg["out"], "w") as f:
    json.dump(seen, f)
"""


class Attacker:
    """The attacker process (as `nobody`): watch `watch`, plant `plant` [(dir, name, target)];
    `base` is a directory `nobody` may write (its report goes there)."""

    def __init__(self, base: Path, secret: str, watch=(), plant=(), swap=False):
        self.base = Path(base)
        self.base.mkdir(exist_ok=True)
        os.chown(self.base, NOBODY, NOBODY)
        self.out, ready = self.base / "seen.json", self.base / "ready"
        cfg = {"secret": secret, "watch": [str(d) for d in watch], "out": str(self.out), "ready": str(ready),
               "plant": [[str(d), n, str(t)] for d, n, t in plant], "swap": swap}
        self.proc = subprocess.Popen(["/usr/bin/python3", "-c", SCRIPT, json.dumps(cfg)], user=NOBODY, group=NOBODY,
                                     extra_groups=[], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     cwd="/")
        for _ in range(600):                # until its watches are in place (bounded: 60 s)
            if ready.exists() or self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if not ready.exists():
            self.stop()
            raise RuntimeError(f"the attacker did not start: {self.proc.stderr.read() if self.proc.stderr else ''}")

    def control(self, directory: Path, secret: str) -> Path:
        """A file holding the secret that anyone may read, in a watched directory: the attacker's
        last look must find it (proof that it watched and could read there)."""
        path = Path(directory) / "control"
        path.write_text(secret + "\n")
        path.chmod(0o644)
        return path

    def stop(self) -> dict:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _out, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _out, err = self.proc.communicate()
        if not self.out.exists():
            raise RuntimeError(f"the attacker wrote no report (exit {self.proc.returncode}): {err[-2000:]}")
        return json.loads(self.out.read_text())


def root_python(python: str, code: str, *args: str, env: dict | None = None, timeout: float = 600):
    """Root's side in `python` (/usr/bin/python3 or the venv's) with this checkout's src on sys.path:
    the JSON its last line prints."""
    if not os.path.exists(python):
        raise AssertionError(f"{python} is missing: Debian 12's python3 is part of every supported machine")
    src = str(Path(__file__).resolve().parents[1] / "src")
    proc = subprocess.run([python, "-c", code, src, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


INTERPRETERS = ["/usr/bin/python3", sys.executable]
