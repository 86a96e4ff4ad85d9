"""One validation layer for values read from files and command lines that end up in a shell script, a
config file or a path. Each check returns the value (normalised) or raises InputError with one
line naming where the value came from (`what`: "slurm-conf/profiles.yaml: daemon group 'x'").

Rules (docs/security.md):
  names      a fixed character class and length (never quoted into shell: refused instead)
  numbers    finite, integral where counts are meant, inside a range
  paths      relative names joined under a root stay inside it (no '..', no absolute part)
"""
from __future__ import annotations

import math
import re
from pathlib import Path

from stackproof.errors import InputError

# Allowed: what daemon and kernel-thread names use (kworker/0:1H, systemd-journald, nv-hostengine);
# nothing a shell, a regex or a config parser treats specially (no space, quote, $, `, ;, |, &, <, >,
# (, ), *, ?, [, ], \, newline). The kernel's comm holds 15 bytes (TASK_COMM_LEN 16): a longer
# name (the catalog's systemd-journald) is matched on its first 15, as the kernel truncates it.
PROCESS_NAME = re.compile(r"[A-Za-z0-9_.:@%+,=/-]{1,64}")
COMM_LEN = 15
# systemd unit names: name[@instance].type, no '/' (a path separator), no '\' escapes, not '.'-first.
UNIT_NAME = re.compile(r"[A-Za-z0-9_:-][A-Za-z0-9_:.@-]{0,200}\.(service|socket|target|timer|scope|slice|mount)")
# Profile, daemon group, node type and cluster names: they become file names, env values and
# Slurm/Warewulf identifiers.
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
# A value of KEY=VALUE env files (profile.env): no newline, no quote, no shell expansion.
ENV_VALUE = re.compile(r"[A-Za-z0-9_.,:/=+@%-]*")
MAX_DIGITS = 9          # numbers in CPU lists and hostlists: 1e9 is already absurd for either


def _fail(what: str, value, expected: str):
    raise InputError(f"{what}: {_show(value)} {expected}")


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def process_name(value, what: str = "process name") -> str:
    if not isinstance(value, str) or not PROCESS_NAME.fullmatch(value):
        _fail(what, value, "is not a process name (1-64 of A-Z a-z 0-9 _ . : @ % + , = / -)")
    return value


def unit_name(value, what: str = "systemd unit") -> str:
    if not isinstance(value, str) or not UNIT_NAME.fullmatch(value):
        _fail(what, value, "is not a systemd unit name (NAME.service|socket|...; A-Z a-z 0-9 _ : . @ -)")
    return value


def name(value, what: str = "name") -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        _fail(what, value, "must be 1-64 of A-Z a-z 0-9 _ . - (not starting with . or -)")
    return value


def env_value(value, what: str = "value") -> str:
    text = str(value)
    if not ENV_VALUE.fullmatch(text):
        _fail(what, value, "has characters an env file may not carry (A-Z a-z 0-9 _ . , : / = + @ % - only)")
    return text


def integer(value, what: str, lo: int, hi: int) -> int:
    """An int (not a bool, not a float, not a string) with lo <= value <= hi."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        _fail(what, value, f"must be an integer between {lo} and {hi}")
    return value


def number(value, what: str, lo: float, hi: float, *, lo_open: bool = False) -> float:
    """A finite real number in [lo, hi] (or (lo, hi] with lo_open); NaN and infinities refused."""
    if isinstance(value, bool):
        _fail(what, value, "must be a number")
    try:
        x = float(value)
    except (TypeError, ValueError):
        _fail(what, value, "must be a number")
    if not math.isfinite(x) or x > hi or x < lo or (lo_open and x == lo):
        _fail(what, value, f"must be a finite number {'>' if lo_open else '>='} {lo:g} and <= {hi:g}")
    return x


def digits(text: str, what: str) -> int:
    """A decimal number of at most MAX_DIGITS digits (a longer one is a typo or an attack: int() of
    100000 digits is slow, and Python refuses > 4300 digits with a ValueError)."""
    if not text.isascii() or not text.isdigit() or len(text) > MAX_DIGITS:
        _fail(what, text, f"must be a decimal number of 1-{MAX_DIGITS} digits")
    return int(text)


def inside(root: Path, relative: str, what: str = "path") -> Path:
    """root/relative, refused unless it stays under root (no absolute part, no '..', no NUL)."""
    if not isinstance(relative, str) or not relative or "\0" in relative or "\n" in relative:
        _fail(what, relative, "is not a relative path")
    rel = Path(relative)
    if rel.is_absolute() or ".." in rel.parts:
        _fail(what, relative, f"leaves its root {root} (absolute or '..')")
    dest = Path(root) / rel
    try:
        dest.resolve().relative_to(Path(root).resolve())
    except ValueError:
        _fail(what, relative, f"resolves outside its root {root} (a symlink?)")
    return dest
