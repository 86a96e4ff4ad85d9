"""The no-systemd side of core specialization: the static `stackproof-corespec` script and the data
file it reads (one process name per line). The script is the same file for every profile; process
names are data, checked here (validate.process_name) and again by the script, never spliced into shell.
"""
from __future__ import annotations

from importlib import resources

from stackproof import validate

SCRIPT = "usr/local/sbin/stackproof-corespec"
PROCESSES = "etc/stackproof/corespec.processes"


def script_text() -> str:
    return (resources.files("stackproof.nodes") / "data" / "stackproof-corespec").read_text()


def process_names(daemons: dict[str, dict]) -> list[str]:
    """The sorted process names of a profile's daemon groups, each checked (a hostile comm such as
    `$(touch /tmp/pwned)` is refused with the group it came from)."""
    names = set()
    for group, spec in daemons.items():
        for p in spec.get("processes", []):
            names.add(validate.process_name(p, f"daemon group {group!r}: process name"))
    return sorted(names)


def files(daemons: dict[str, dict], header: str) -> dict[str, str]:
    """{relative path: text} of the script and its process list (stackproof-corespec reads the
    system CPUs from etc/stackproof/profile.env, rendered beside it)."""
    return {SCRIPT: script_text(),
            PROCESSES: header + "".join(f"{n}\n" for n in process_names(daemons))}
