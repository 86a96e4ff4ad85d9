"""Every name the docs cite is in the code. A dotted name (`report.rows.better_of`,
`stackproof.stacks.load_stack`) in docs/*.md and the README imports (the longest module prefix) and has
the rest as attributes; a name that is a file of the repository (`spack.lock.inputs`, `cluster.json`)
is not a dotted name. A bare name that reads as code (`sequential_calls`, `EXTRA_SECTIONS`,
`CpuSpecList`, `verdict_rows(ctx)`) occurs in the repository's code; "`stackproof.X` (`Name`)" names
where Name is defined. Every docs/*.md a file cites exists."""
import importlib
import inspect
import re
from pathlib import Path

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


# ---- bare names ----------------------------------------------------------------------------------------

# The repository's code: the package, the checks, make, our C (mpibind, FWQ), scripts, image recipes,
# CI, the Slurm and Spack data, and the tests (docs cite conftest's helpers and the tests that prove a
# claim). Not docs/: a name only the docs hold is what this test exists to find.
CODE = ("src", "reframe-tests", "mk", "Makefile", "tests", "mpibind", "fwq", "scripts", "images", ".ci",
        "slurm-conf", "spack-envs")
# Names of other projects the docs cite to explain a fact, and names the docs cite as removed.
NOT_OURS = {
    "CompilerPropertyDetector": "Spack v1.1's class that finds a compiler's libc (docs/spack.md)",
    "posix_local": "Debian's Python install scheme (docs/spack.md)",
    "add_procs": "Open MPI's internal step of MPI_Init a crash analysis names (docs/acceptance.md)",
    # Open MPI's and Slurm's PMIx settings that crash analysis tried (docs/acceptance.md)
    "mpi_add_procs_cutoff": "Open MPI MCA parameter", "pmix_base_async_modex": "PMIx MCA parameter",
    "collect_data": "PMIx fence attribute", "SLURM_PMIX_FENCE": "Slurm's PMIx fence variable",
    "AMG_BIN": "a per-benchmark variable docs/acceptance.md says no longer exists",
}
THIS = Path(__file__).resolve()
BARE = re.compile(r"@?\$?([A-Za-z_][A-Za-z0-9_]*)(\([^()]*\))?(=\S*)?")


def code_words() -> set[str]:
    words: set[str] = set()
    for top in CODE:
        root = REPO / top
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()
                                                  and "__pycache__" not in p.parts and p.stat().st_size < 2_000_000]
        for f in files:
            if f.resolve() == THIS:             # this test names what the code must not have
                continue
            try:
                words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", f.read_text(errors="ignore")))
            except OSError:
                continue
    return words


def reads_as_code(name: str, called: bool) -> bool:
    """snake_case or UPPER_CASE with an inner underscore, camelCase or CapWords with two humps, or a
    call (`name(...)`); a plain word (`baseline`, `srun`) is not told from prose and is left alone."""
    return called or "_" in name.strip("_") or bool(re.search(r"[a-z0-9][A-Z]", name))


def bare_cited(docs) -> list[tuple[str, int, str]]:
    out = []
    for doc in docs:
        for i, line in enumerate(doc.read_text().splitlines(), 1):
            for tok in TOKEN_ANY.findall(line):
                m = BARE.fullmatch(tok.strip())
                if m and reads_as_code(m.group(1), bool(m.group(2))):
                    out.append((doc.name, i, m.group(1)))
    return out


TOKEN_ANY = re.compile(r"`([^`\n]+)`")


def test_every_bare_name_in_the_docs_is_in_the_code():
    names = bare_cited(sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"])
    assert len(names) >= 200, len(names)       # the scan sees the docs' names
    words = code_words()
    unused = set(NOT_OURS) - {n for _, _, n in names}
    assert not unused, f"NOT_OURS names no doc cites any more: {sorted(unused)}"
    broken = [f"{doc}:{line}: {name}" for doc, line, name in names if name not in words and name not in NOT_OURS]
    assert not broken, "docs cite names the code does not have:\n" + "\n".join(broken)
    ours = [n for n in NOT_OURS if n in words]
    assert not ours, f"NOT_OURS names the code has (drop them from the list): {ours}"


def test_a_bare_name_that_is_not_there_is_found(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("`sequential_judge` and `verdict_rows(ctx)` and `CpuSpecList=0` and `$STACKPROOF_RUN_DIR`, "
                   "but not `baseline`, `make test` or `a b`.\n")
    assert [n for _, _, n in bare_cited([doc])] == ["sequential_judge", "verdict_rows", "CpuSpecList",
                                                    "STACKPROOF_RUN_DIR"]
    words = code_words()
    assert "sequential_judge" not in words and {"verdict_rows", "CpuSpecList", "STACKPROOF_RUN_DIR"} <= words


DEFINED_IN = re.compile(r"`(stackproof(?:\.\w+)+)` \(`(\w+)`\)")


def defined_in(module: str, name: str) -> bool:
    """`name` is an attribute of `module` defined there (or, for a package, in one of its modules):
    a re-export elsewhere is not where the name lives."""
    mod = importlib.import_module(module)
    obj = getattr(mod, name, None)
    if obj is None:
        return False
    home = getattr(obj, "__module__", None) if inspect.isclass(obj) or inspect.isfunction(obj) else None
    package = hasattr(mod, "__path__")
    return home is None or home == module or (package and home.startswith(module + "."))


def test_a_module_and_the_name_it_defines():
    pairs = [(doc.name, m.group(1), m.group(2)) for doc in sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]
             for m in DEFINED_IN.finditer(doc.read_text())]
    assert pairs, "the docs name no module with its name (`stackproof.x` (`Name`))"
    broken = [f"{doc}: {mod} ({name})" for doc, mod, name in pairs if not defined_in(mod, name)]
    assert not broken, "docs place names in modules that do not define them:\n" + "\n".join(broken)
    assert not defined_in("stackproof.report.stats", "Design")          # a re-export of comparison's


def test_every_doc_a_file_cites_exists():
    """docs/NAME.md cited in the code, the tests and the docs is a file."""
    missing = []
    for top in CODE + ("docs", "README.md"):
        root = REPO / top
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file() and p.suffix in
                                                  (".py", ".md", ".mk", ".sh", ".c", ".h", ".yaml", ".txt", "")]
        for f in files:
            try:
                text = "" if f.resolve() == THIS else f.read_text(errors="ignore")
            except OSError:
                continue
            for name in re.findall(r"\bdocs/([\w.-]+\.md)\b", text):
                if not (REPO / "docs" / name).is_file():
                    missing.append(f"{f.relative_to(REPO)}: docs/{name}")
    assert not missing, "\n".join(missing)
