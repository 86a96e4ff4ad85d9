"""The import graph of src/stackproof against the layer order of docs/architecture.md: no import circle
between modules, no module importing one of a higher layer. Every import counts, also the ones inside
functions (a lazy import is still a dependency). Known exceptions are listed below with their issue;
the package move of issue 27 removes them (an exception that no longer occurs is reported, not failed,
so the move can land in any order)."""
import ast
import re
import warnings
from pathlib import Path

import pytest

from stackproof.paths import REPO

SRC = REPO / "src" / "stackproof"

# Lowest first. A module may import its own layer and the layers below it. Names are module paths under
# stackproof; a package name covers its submodules. Today's names and the ones the move gives them.
LAYERS = [
    ("basics", ["__init__", "errors", "paths", "yamlfile", "cpulist", "hostlist", "validate", "files", "benchparse",
                "comparison", "reframe_output"]),
    ("gpus", ["gpus"]),
    ("nodes", ["nodes"]),
    ("noise", ["noise"]),
    ("cluster", ["cluster"]),
    ("spack", ["spack"]),
    ("stacks", ["stacks"]),
    ("report", ["report"]),
    ("provision", ["provision"]),
    ("reframe", ["reframe"]),
    ("acceptance", ["acceptance"]),
    ("cli", ["cli"]),
]

# (importer, imported) -> why it is still there. Issue 27 ("one house") removes each.
ALLOWED_UPWARD: dict = {}
ALLOWED_CIRCLES: dict = {}


def modules(src: Path = SRC) -> dict[str, tuple[Path, bool]]:
    """'cluster.core' -> (file, is_package) for every module of the package."""
    found = {}
    for f in sorted(src.rglob("*.py")):
        parts = list(f.relative_to(src).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_pkg else parts) or "__init__"
        found[name] = (f, is_pkg)
    return found


def imports(src: Path = SRC) -> dict[str, set[str]]:
    """module -> the stackproof modules it imports (`from .x import y` names x.y when that is a module)."""
    mods = modules(src)
    graph = {}
    for name, (path, is_pkg) in mods.items():
        here = [] if name == "__init__" else name.split(".")
        package = here if is_pkg else here[:-1]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                cands = [a.name.split(".")[1:] for a in node.names if a.name.split(".")[0] == "stackproof"]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[:len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
                elif (node.module or "").split(".")[0] == "stackproof":
                    base = node.module.split(".")[1:]
                else:
                    continue
                cands = [base + [a.name] for a in node.names]
            else:
                continue
            for parts in cands:
                while parts and ".".join(parts) not in mods:
                    parts = parts[:-1]
                target = ".".join(parts) or "__init__"
                if target != name:
                    targets.add(target)
        graph[name] = targets
    return graph


def layer_of(module: str) -> int:
    for rank, (_, names) in enumerate(LAYERS):
        for n in names:
            if module == n or module.startswith(n + "."):
                return rank
    raise LookupError(module)


def circles(graph: dict[str, set[str]]) -> list[frozenset]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


GRAPH = imports()


def test_the_graph_is_read():
    assert len(GRAPH) >= 40, sorted(GRAPH)
    assert "errors" in GRAPH["cli"] and "cluster.core" in GRAPH["cluster"]
    assert sum(len(t) for t in GRAPH.values()) >= 100


def test_every_module_has_a_layer():
    missing = []
    for m in GRAPH:
        try:
            layer_of(m)
        except LookupError:
            missing.append(m)
    assert not missing, (f"modules without a layer: {missing}: add them to LAYERS here and to "
                         "docs/architecture.md")


def test_no_import_circle():
    found = circles(GRAPH)
    new = [sorted(c) for c in found if c not in ALLOWED_CIRCLES]
    assert not new, f"import circles: {new}"
    _report_stale([c for c in ALLOWED_CIRCLES if c not in found], "allowed circles")


def test_no_lower_layer_imports_a_higher_one():
    upward, seen = [], set()
    for importer, targets in sorted(GRAPH.items()):
        for target in sorted(targets):
            if layer_of(target) > layer_of(importer):
                seen.add((importer, target))
                if (importer, target) not in ALLOWED_UPWARD:
                    upward.append(f"{importer} ({LAYERS[layer_of(importer)][0]}) imports {target} "
                                  f"({LAYERS[layer_of(target)][0]})")
    assert not upward, "upward imports:\n" + "\n".join(upward)
    _report_stale([k for k in ALLOWED_UPWARD if k not in seen], "allowed upward imports")


def test_the_spack_package_imports_only_basics():
    for m, targets in GRAPH.items():
        if m.startswith("spack"):
            assert {layer_of(t) for t in targets if not t.startswith("spack")} <= {0}, (m, targets)


def stated_imports(src: Path = SRC) -> dict[str, set[str]]:
    """package -> the packages its __init__ docstring's 'May import:' paragraph names."""
    names = {name for name, _ in LAYERS}
    out = {}
    for init in sorted(src.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        para = next((p for p in doc.split("\n\n") if p.startswith("May import:")), None)
        assert para is not None, f"{init}: its docstring has no 'May import:' paragraph"
        out[init.parent.name] = {w for w in re.findall(r"\b(\w+)/?", re.split(r"\.\s", para)[0]) if w in names}
    return out


def test_each_package_docstring_names_what_it_imports():
    stated = stated_imports()
    assert len(stated) >= 10, stated
    for importer, targets in GRAPH.items():
        pkg = LAYERS[layer_of(importer)][0]
        if pkg not in stated:
            continue
        used = {LAYERS[layer_of(t)][0] for t in targets} - {pkg}
        assert used <= stated[pkg], f"{importer} imports {sorted(used - stated[pkg])}, which the {pkg} package's " \
                                    f"docstring does not name under 'May import:' ({sorted(stated[pkg])})"


def private_imports(src: Path = SRC) -> list[str]:
    """`from stackproof.x import _name` (or a relative one) anywhere in the package: a name with a leading
    underscore belongs to its own module."""
    found = []
    for f in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == "stackproof"):
                found += [f"{f.relative_to(src)}:{node.lineno} imports {a.name} from {node.module}"
                          for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_module_imports_a_private_name_of_another(tmp_path):
    assert private_imports() == []
    (tmp_path / "a.py").write_text("from stackproof.noise.scale.render import _pct\n")
    assert private_imports(tmp_path) == ["a.py:1 imports _pct from stackproof.noise.scale.render"]


def test_the_checker_finds_a_circle_and_an_upward_import(tmp_path):
    """The checker itself can fail: a made-up package with a circle and an upward import."""
    pkg = tmp_path / "stackproof"
    (pkg / "noise").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("from .noise import run\n")                        # upward
    (pkg / "noise" / "__init__.py").write_text("")
    (pkg / "noise" / "run.py").write_text("def f():\n    from . import stats\n")      # lazy, counted
    (pkg / "noise" / "stats.py").write_text("from stackproof.noise.run import f\n")
    graph = imports(pkg)
    assert graph["errors"] == {"noise.run"}
    assert circles(graph) == [frozenset({"noise.run", "noise.stats"})]
    assert layer_of("errors") < layer_of("noise.run")


def _report_stale(entries, what):
    if entries:
        warnings.warn(pytest.PytestWarning(f"{what} that no longer occur (remove them): {entries}"))


def test_the_order_is_the_one_docs_architecture_md_states():
    text = (REPO / "docs" / "architecture.md").read_text()
    stated = [line for line in text.splitlines() if line.startswith("basics < ")]
    assert len(stated) == 1, "docs/architecture.md states the layer order on one line 'basics < ...'"
    assert stated[0].split(" < ") == [name for name, _ in LAYERS]
