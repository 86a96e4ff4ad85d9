"""What produced each stack's results: the stack file and its hash, the bench build's
`<bench_dir>/provenance.json` ({benchmark: {version, source, sha256, binaries: {name: sha256},
inputs: {name: sha256}}}, written by the bench build; absent: said so), the node type, the profile
and the node image when known. Read by the report's Provenance section."""
from __future__ import annotations

import json
import re
from pathlib import Path

from stackproof.files import sha256_of
from stackproof.stacks import StackError
from stackproof.stacks.model import load_stack

HEX = re.compile(r"^(files:)?[0-9a-f]{16,128}$")      # files: a hash over a directory's files
NAME = re.compile(r"^[\w.+-]{1,100}$")
RELPATH = re.compile(r"^(?!.*\.\.)[\w.+-]+(/[\w.+-]+){0,8}$")      # bin/hpcc, share/hpcc/_hpccinf.txt


def sha256(path: Path) -> str | None:
    try:
        return sha256_of(path)
    except OSError:
        return None


def _text(v, limit: int = 200) -> str | None:
    return v if isinstance(v, str) and len(v) <= limit and v.isprintable() else None


def _hashes(d) -> dict:
    if not isinstance(d, dict):
        return {}
    return {k: v for k, v in d.items()
            if isinstance(k, str) and RELPATH.match(k) and isinstance(v, str) and HEX.match(v)}


def read_bench_provenance(path: Path) -> tuple[dict, str | None]:
    """({benchmark: record}, note): a missing file is a note, a malformed one too (never a crash);
    only names, versions and hex hashes are kept (the file comes from a build, it reaches a page)."""
    if not path.is_file():
        return {}, f"no {path.name} in {path.parent}"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return {}, f"{path}: not JSON ({exc})"
    if not isinstance(doc, dict):
        return {}, f"{path}: not an object"
    out = {}
    for name, rec in doc.items():
        if not (isinstance(name, str) and NAME.match(name) and isinstance(rec, dict)):
            continue
        out[name] = {"version": _text(rec.get("version"), 80), "source": _text(rec.get("source")),
                     "sha256": rec.get("sha256") if isinstance(rec.get("sha256"), str) and HEX.match(rec["sha256"])
                     else None, "binaries": _hashes(rec.get("binaries")), "inputs": _hashes(rec.get("inputs"))}
    return out, None


def stack_provenance(name: str, node_type: str, profile: str, node_image: str | None = None) -> dict:
    rec = {"node_type": node_type, "profile": profile, "node_image": node_image}
    try:
        st = load_stack(name)
    except StackError as exc:
        return {**rec, "benchmarks_note": str(exc)}
    rec["stack_file"] = str(st.file) if st.file else None
    rec["stack_file_sha256"] = sha256(st.file) if st.file else None
    try:
        bench = st.bench_dir()
    except StackError as exc:
        return {**rec, "benchmarks_note": str(exc)}
    rec["benchmarks"], note = read_bench_provenance(Path(bench) / "provenance.json")
    if note:
        rec["benchmarks_note"] = note
    return rec
