"""Every dotted name the docs cite resolves: `report.rows.better_of` or `stackproof.stacks.load_stack`
in docs/*.md and the README imports (the longest module prefix) and has the rest as attributes. A
name that is a file of the repository (`spack.lock.inputs`, `cluster.json`) is not a dotted name."""
import importlib
import re

from stackproof.paths import REPO

TOKEN = re.compile(r"`([^`\s]+)`")
DOTTED = re.compile(r"[a-z_]+(\.[A-Za-z_][A-Za-z0-9_]*)+")
SOURCES = ("src", "docs", "reframe-tests", "slurm-conf", "spack-envs", "images", "fwq", "mpibind", "scripts")


def package_names() -> set[str]:
    """The first components a name of the package can start with: its subpackages and modules."""
    pkg = REPO / "src" / "stackproof"
    return {p.stem for p in pkg.glob("*.py") if p.stem != "__init__"} | \
        {p.name for p in pkg.iterdir() if (p / "__init__.py").is_file()}


def file_names() -> set[str]:
    return {p.name for top in SOURCES if (REPO / top).is_dir() for p in (REPO / top).rglob("*")
            if "__pycache__" not in p.parts}


def cited(docs) -> list[tuple[str, int, str]]:
    """(document, line, name) of every dotted name of the package a document cites in backticks."""
    tops, files, out = package_names(), file_names(), []
    for doc in docs:
        for i, line in enumerate(doc.read_text().splitlines(), 1):
            for tok in TOKEN.findall(line):
                name = tok.removesuffix("()").removeprefix("stackproof.")
                if DOTTED.fullmatch(name) and name.split(".")[0] in tops and tok not in files \
                        and not re.search(r"\.(py|md|json|ya?ml|html|png|csv|txt|sh|j2|conf|env|dat|xml|log|out|db|sif|tar|gz)$", name):
                    out.append((doc.name, i, name))
    return out


def resolves(name: str) -> bool:
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module("stackproof." + ".".join(parts[:k]))
        except ModuleNotFoundError:
            continue
        try:
            for attr in parts[k:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def test_every_dotted_name_in_the_docs_resolves():
    names = cited(sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"])
    assert len(names) >= 30, names            # the docs do cite the code: the scan sees them
    broken = [f"{doc}:{line}: {name}" for doc, line, name in names if not resolves(name)]
    assert not broken, "docs cite names the code does not have:\n" + "\n".join(broken)


def test_a_name_that_is_not_there_is_found(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("See `report.stats.direction` and `stackproof.report.rows.better_of()`, `cluster.json`.\n")
    names = cited([doc])
    assert [n for _, _, n in names] == ["report.stats.direction", "report.rows.better_of"]
    assert [resolves(n) for _, _, n in names] == [False, True]


def test_every_file_docs_architecture_md_names_exists():
    """The package table's main modules (relative to their package) and the walks' files (relative to
    src/stackproof or the repository) are files of the code."""
    text = (REPO / "docs" / "architecture.md").read_text()
    pkg_dir = REPO / "src" / "stackproof"
    missing, seen = [], 0
    for line in text.splitlines():
        row = re.match(r"\| `(\w+)/` \|", line)
        for tok in TOKEN.findall(line):
            if not re.fullmatch(r"[\w./-]+\.(py|yaml)", tok):
                continue
            seen += 1
            where = [REPO / tok, pkg_dir / tok] + ([pkg_dir / row.group(1) / tok] if row else [])
            if not any(p.is_file() for p in where):
                missing.append(tok)
    assert seen >= 60 and not missing, missing
