"""What a test cluster is (Settings), what `up` started (State, saved atomically as cluster.json)
and where it lives: a private run directory (0700, owned by us, not a symlink)."""
from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from stackproof import files
from stackproof.errors import InputError, StackproofError

# root: /run (tmpfs, root-only) or /var/lib when /run is missing; never world-writable /tmp.
DEFAULT_RUN_DIRS = ("/run/stackproof/cluster", "/var/lib/stackproof/cluster")
DEFAULT_PORTS = (17817, 17818)
MAX_NODES = 16
MAX_FAKE_GPUS = 16
NOISE_DAEMON = re.compile(r"(\d+(?:\.\d+)?)Hz-(\d+(?:\.\d+)?(?:ns|us|ms|s))")
MPIBIND_ARGS = re.compile(r"[A-Za-z0-9_=,.:/ -]*")


def default_run_dir() -> Path:
    return Path(DEFAULT_RUN_DIRS[0] if Path("/run").is_dir() else DEFAULT_RUN_DIRS[1])


def run_dir() -> Path:
    env = os.environ.get("STACKPROOF_RUN_DIR")
    return Path(env) if env else default_run_dir()


class CorruptState(StackproofError):
    """cluster.json exists but cannot be read as a State."""


@dataclass
class Settings:
    """What defines a cluster; `up` with equal settings is a no-op."""
    profile: str = "baseline"
    k: int | None = None
    nodes: int = 1
    fake_gpus: int = 0
    ports: tuple[int, int] = DEFAULT_PORTS
    mpibind_plugin: str | None = None
    mpibind_args: str = ""
    noise_daemon: str = ""          # e.g. "10Hz-2500us": a daemon-like noise source on the node
    profile_file: str = ""          # profiles added to the catalog (e.g. a noise hunt's hunt-clean proposal)

    def key(self) -> dict:
        d = asdict(self)
        d["ports"] = list(self.ports)
        return d

    def validate(self, profiles: list[str]) -> None:
        """Every check that needs no running process: bad input fails here, before anything is stopped."""
        def is_int(v):
            return isinstance(v, int) and not isinstance(v, bool)
        if not is_int(self.nodes) or not 1 <= self.nodes <= MAX_NODES:
            raise InputError(f"--nodes must be between 1 and {MAX_NODES} (got {self.nodes})")
        if not is_int(self.fake_gpus) or not 0 <= self.fake_gpus <= MAX_FAKE_GPUS:
            raise InputError(f"--fake-gpus must be between 0 and {MAX_FAKE_GPUS} (got {self.fake_gpus})")
        if self.k is not None and (not is_int(self.k) or self.k < 0):
            raise InputError(f"--k must be >= 0 (got {self.k})")
        if self.profile not in profiles:
            raise InputError(f"unknown profile {self.profile!r} (known: {', '.join(profiles)})")
        ports = tuple(self.ports)
        if len(ports) != 2 or not all(is_int(p) and 1 <= p <= 65535 for p in ports):
            raise InputError(f"--ports must be two ports between 1 and 65535 (got {ports})")
        if ports[0] == ports[1]:
            raise InputError(f"--ports: slurmctld and slurmd need different ports (got {ports[0]} twice)")
        if self.noise_daemon:
            m = NOISE_DAEMON.fullmatch(self.noise_daemon)
            if not m:
                raise InputError(f"--noise-daemon {self.noise_daemon!r}: expected FREQHz-DURATION, e.g. 10Hz-2500us")
            freq, dur = float(m.group(1)), m.group(2)
            unit = next(u for u in ("ns", "us", "ms", "s") if dur.endswith(u))
            seconds = float(dur[:-len(unit)]) * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]
            if freq <= 0 or seconds <= 0 or seconds * freq >= 1:
                raise InputError(f"--noise-daemon {self.noise_daemon}: the duration must be shorter than "
                                      f"the period (1/{m.group(1)} s) and both positive")
        if not MPIBIND_ARGS.fullmatch(self.mpibind_args or ""):
            raise InputError(f"--mpibind-args {self.mpibind_args!r}: only letters, digits and _=,.:/- allowed")
        if self.mpibind_plugin is not None and not Path(self.mpibind_plugin).is_file():
            raise StackproofError(f"mpibind plugin {self.mpibind_plugin}: no such file")


@dataclass
class State:
    settings: dict
    node_names: list[str]
    netns: list[str] = field(default_factory=list)
    munged_pid: int | None = None
    noise_pid: int | None = None
    system_cpus: str = ""
    app_cpus: str = ""

    @classmethod
    def from_json(cls, text: str) -> "State":
        data = json.loads(text)
        if not isinstance(data, dict) or set(data) - {f.name for f in fields(cls)} or \
                not isinstance(data.get("settings"), dict) or not isinstance(data.get("node_names"), list):
            raise ValueError("not a cluster state")
        return cls(**data)


def save_atomic(path: Path, text: str, mode: int = 0o600) -> None:
    """Write a file so that a reader sees the old or the new content, never a prefix."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_state(path: Path) -> State | None:
    """None when there is no state file; CorruptState when there is one we cannot read."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CorruptState(f"{path}: {exc.strerror}") from None
    try:
        return State.from_json(text)
    except (ValueError, TypeError) as exc:
        raise CorruptState(f"{path} is corrupt ({exc})") from None


def save_state(path: Path, st: State) -> None:
    save_atomic(path, json.dumps(asdict(st), indent=1, sort_keys=True) + "\n")


def check_private_dir(path: Path, create: bool) -> None:
    """The run directory holds the munge key and the configs root's daemons read: refuse one that
    another user could have planted or could swap (a symlink, someone else's directory, or a parent
    that others may write to without the sticky bit). Created 0700 when missing and `create`."""
    path = Path(os.path.abspath(path))
    files.check_parents(path, "run dir")
    me = os.geteuid()
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            return
        for parent in reversed(path.parents):
            if not parent.exists():
                os.mkdir(parent, 0o700)
        os.mkdir(path, 0o700)
        st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise StackproofError(f"run dir {path} is a symbolic link: refusing to use it")
    if not stat.S_ISDIR(st.st_mode):
        raise StackproofError(f"run dir {path} exists and is not a directory")
    if st.st_uid != me:
        raise StackproofError(f"run dir {path} is owned by uid {st.st_uid}, not by us (uid {me}): "
                              "someone else created it; remove it or choose another --run-dir")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
