"""stackproof.files is the only way the code that touches a path another party controls opens one
(issue 42): the source mirror and cache, `stack fetch --into`, ReFrame's stage and output
directories, the virtual cluster's share, a report's inputs. An AST scan of those modules (or, where
a module also reads files of ours, of the functions that read the other party's) fails on any call
that opens, reads, writes or copies a path by name: open(), os.open, Path.open/read_*/write_*,
shutil.copy*, tarfile.open of a name, a hash or parser of a path. A function allowed an exception
is named here with the reason."""
import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "stackproof"
CHECKS = Path(__file__).resolve().parents[1] / "reframe-tests" / "checks"

# module -> None (all of it) or the functions that read what another party wrote
SCOPE = {
    SRC / "stacks" / "sources.py": None,
    SRC / "stacks" / "fetch.py": None,
    SRC / "stacks" / "commands.py": None,
    SRC / "stacks" / "debsource.py": None,
    SRC / "stacks" / "gitsource.py": None,
    SRC / "stacks" / "unpack.py": None,
    SRC / "report" / "rows.py": ["failure_detail", "_job_text"],
    SRC / "report" / "render.py": ["read_figure", "embeddable"],
    SRC / "report" / "curves.py": None,
    SRC / "report" / "measures.py": ["runs_from_cases"],
    SRC / "noise" / "trace.py": ["load_in"],
    SRC / "noise" / "scale" / "cli.py": ["_noises", "_parse_output"],
    SRC / "reframe" / "check.py": ["parse_output", "read", "_record", "_tail", "_write_new", "_write_block"],
    SRC / "provision" / "vcluster" / "share.py": None,
    CHECKS / "apps" / "hpcc.py": ["prepare_launch_dir"],
    CHECKS / "microbenchmarks" / "netpipe.py": ["points", "write_curve"],
}

ALLOWED = {
    ("sources.py", "_from_repository"): "hashes this checkout's own fwq/ sources (installed with the package)",
    ("unpack.py", "_write"): "creates the tree's files O_CREAT|O_EXCL|O_NOFOLLOW inside the private staging "
                             "directory extract() just made (files.Staging)",
    ("share.py", "kernel_modules"): "reads the cached Debian kernel package's tar stream from dpkg-deb's pipe",
}

BANNED_NAMES = {"open", "sha256_of", "verify_file", "parse_file", "load", "copyfile", "copy", "copy2", "copytree"}
BANNED_ATTRS = {"read_text", "read_bytes", "write_text", "write_bytes", "copyfile", "copy", "copy2", "copytree",
                "sha256_of", "parse_file", "verify_file", "mkstemp"}


def _violations(tree: ast.AST, where: str) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        keywords = {k.arg for k in node.keywords}
        if isinstance(f, ast.Name) and f.id in BANNED_NAMES:
            out.append(f"{where}:{node.lineno}: {f.id}()")
        elif isinstance(f, ast.Attribute):
            base = f.value.id if isinstance(f.value, ast.Name) else ""
            if f.attr in BANNED_ATTRS and base not in ("files", "stage", "self"):
                out.append(f"{where}:{node.lineno}: .{f.attr}()")
            elif f.attr == "open" and base == "tarfile" and "fileobj" not in keywords:
                out.append(f"{where}:{node.lineno}: tarfile.open() of a name")
            elif f.attr == "open" and base not in ("tarfile", "files"):
                out.append(f"{where}:{node.lineno}: {base or '<expr>'}.open()")
            elif f.attr == "load" and base in ("fwqtrace", "trace"):
                out.append(f"{where}:{node.lineno}: {base}.load()")
    return out


def scan(path: Path, functions) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found, seen = [], set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            seen.add(node.name)
            if functions is not None and node.name not in functions:
                continue
            if (path.name, node.name) in ALLOWED:
                continue
            found += _violations(node, f"{path.relative_to(path.parents[2])}::{node.name}")
    if functions is None:           # module level too, outside every function
        body = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        found += _violations(ast.Module(body=body, type_ignores=[]), str(path.name))
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for item in cls.body:
                if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found += _violations(item, f"{path.name}::{cls.name}")
    else:
        missing = set(functions) - seen
        assert not missing, f"{path}: no function {sorted(missing)} (renamed? update SCOPE)"
    return sorted(set(found))


@pytest.mark.parametrize("path", sorted(SCOPE), ids=lambda p: str(p.relative_to(p.parents[2])))
def test_paths_another_party_controls_are_opened_only_through_stackproof_files(path):
    assert scan(path, SCOPE[path]) == []


def test_every_exception_names_a_function_that_exists():
    for (module, function), reason in ALLOWED.items():
        path = next(p for p in SCOPE if p.name == module)
        names = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
        assert function in names and reason, (module, function)


@pytest.mark.parametrize("code", [
    "def f(p):\n    return open(p).read()\n",
    "import os\ndef f(p):\n    return os.open(p, os.O_RDONLY)\n",
    "def f(p):\n    return p.read_text()\n",
    "def f(p):\n    p.write_bytes(b'x')\n",
    "import shutil\ndef f(a, b):\n    shutil.copyfile(a, b)\n",
    "import tarfile\ndef f(p):\n    return tarfile.open(p)\n",
    "def f(p):\n    with p.open() as fh:\n        return fh.read()\n",
    "from stackproof.files import sha256_of\ndef f(p):\n    return sha256_of(p)\n",
])
def test_the_scan_finds_a_path_opened_another_way(tmp_path, code):
    (tmp_path / "a" / "b").mkdir(parents=True)
    module = tmp_path / "a" / "b" / "m.py"
    module.write_text(code)
    assert scan(module, None), code
