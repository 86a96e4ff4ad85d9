"""The stack model (src/stackproof/stacks/model.py) and the preflight (`stackproof stack check`):
shipped stack files, expansion, view overrides, isolation between stacks, and every bad input
giving one error that names the stack and the fix. No MPI needed (ldd output is recorded)."""
import os
from pathlib import Path

import pytest
from stackfiles import write_stack as write

from conftest import stackproof_cli
from stackproof.stacks import StackError, load_stack, stack_names, view_var
from stackproof.stacks import preflight
from stackproof.stacks.model import parse_stack

SHIPPED = {"commodity", "vendor", "commodity-next", "mpich"}


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A site stack directory searched before the shipped one, and a private stacks root."""
    d = tmp_path / "stacks"
    d.mkdir()
    monkeypatch.setenv("STACKPROOF_STACKS_DIR", str(d))
    monkeypatch.setenv("STACKPROOF_STACKS_ROOT", str(tmp_path / "root"))
    for name in SHIPPED:
        monkeypatch.delenv(view_var(name), raising=False)
    return d


def test_shipped_stacks_load(site, tmp_path):
    assert SHIPPED <= set(stack_names())
    v = load_stack("vendor")
    root = tmp_path / "root"
    assert v.prefix == root / "vendor" and v.env == {"I_MPI_ROOT": str(root / "vendor")}
    assert v.install_pip == ("impi-devel==2021.17.2", "impi-rt==2021.17.2", "mkl-devel==2025.2.0")
    assert v.cc == f"{root}/vendor/bin/mpicc" and v.blas_lapack == f"-L{root}/vendor/lib -l:libmkl_rt.so.2"
    assert v.launch_command("slurm") == ("srun", "--mpi=pmi2")
    assert v.launch_command("local") == (f"{root}/vendor/bin/mpirun",)
    assert v.benchmark("netpipe") == root / "vendor/bench/bin/NPmpi"
    c = load_stack("commodity")
    assert c.launch_command("slurm") == ("srun", "--mpi=pmix") and c.mpi_family == "openmpi"
    assert c.bind_options("0,1") == ["--cpu-list", "0,1", "--bind-to", "cpu-list:ordered"]
    nxt = load_stack("commodity-next")
    # Open MPI 4 and 5 share the soname: the library directory tells them apart
    assert nxt.mpi_library == c.mpi_library and nxt.mpi_library_dir != c.mpi_library_dir
    assert nxt.bind_options("1,0") == ["--map-by", "pe-list=1,0:ordered", "--bind-to", "core"]
    assert load_stack("mpich").mpi_family == "mpich"


def test_view_override_moves_every_benchmark(site, tmp_path, monkeypatch):
    monkeypatch.setenv("STACKPROOF_COMMODITY_NEXT_VIEW", str(tmp_path / "view"))
    st = load_stack("commodity-next")
    assert st.view == tmp_path / "view" and st.benchmark("osu") == tmp_path / "view/libexec/osu-micro-benchmarks/mpi"
    assert load_stack("commodity").benchmark("fwq") == tmp_path / "root/commodity/bench/bin/fwq-mpi"


def test_site_file_shadows_shipped_one(site):
    write(site, "commodity", description="site commodity")
    assert load_stack("commodity").description == "site commodity"


def test_run_env_drops_other_stacks_entries(site, tmp_path):
    root = tmp_path / "root"
    base = {"PATH": f"{root}/vendor/bin:/usr/bin", "LD_LIBRARY_PATH": f"{root}/commodity-next/lib:/opt/x/lib"}
    env = load_stack("commodity").run_env(base)
    assert env["PATH"] == "/usr/bin" and env["LD_LIBRARY_PATH"] == "/opt/x/lib"
    venv = load_stack("vendor").run_env(base)
    assert venv["LD_LIBRARY_PATH"] == f"{root}/vendor/lib:/opt/x/lib" and venv["I_MPI_ROOT"] == f"{root}/vendor"
    assert venv["PATH"].split(":")[0] == f"{root}/vendor/bin"


@pytest.mark.parametrize("changes, message", [
    ({"launcher": None}, "no launcher: add `launcher: {local: [mpirun], slurm: [srun, --mpi=pmix]}`"),
    ({"launcher": {"cloud": ["x"]}}, "launcher kinds ['cloud'] unknown"),
    ({"mpi": {"family": "lam", "version": "x", "library": "y"}}, "mpi.family 'lam' is not one of"),
    ({"mpi": {"family": "openmpi", "version": "(", "library": "y"}}, "mpi.version: invalid regex"),
    ({"compilers": {"cc": "mpicc"}}, "compilers need cc and cxx"),
    ({"prefix": "${NO_SUCH_VAR_HERE}/x"}, "prefix: ${NO_SUCH_VAR_HERE} is not set"),
    ({"colour": "blue"}, "unknown keys ['colour']"),
])
def test_malformed_stack_files(site, changes, message):
    path = write(site, "broken", **changes)
    with pytest.raises(StackError) as exc:
        load_stack("broken")
    assert message in str(exc.value) and str(path) in str(exc.value)


def test_unknown_stack_names_the_known_ones(site):
    with pytest.raises(StackError, match=r"unknown stack 'nosuch' \(known: .*commodity.*vendor\): add "):
        load_stack("nosuch")


def test_name_must_match_file(site):
    path = write(site, "a")
    path.rename(site / "b.yaml")
    with pytest.raises(StackError, match="name 'a' differs from the file name"):
        load_stack("b")


def test_no_launcher_for_the_system_kind(site):
    write(site, "localonly", launcher={"local": ["mpirun"]})
    with pytest.raises(StackError, match=r"stack localonly has no launcher for slurm systems: add `launcher: "):
        load_stack("localonly").launch_command("slurm")


# ---- preflight: linkage from recorded ldd output -------------------------------------------------------------

LDD_DEBIAN = {"libmpi.so.40": "/lib/x86_64-linux-gnu/libmpi.so.40", "libc.so.6": "/lib/x86_64-linux-gnu/libc.so.6"}


def test_linkage_problems(site, tmp_path):
    root = tmp_path / "root"
    c, v, n = load_stack("commodity"), load_stack("vendor"), load_stack("commodity-next")
    b = Path("/x/NPmpi")
    assert preflight.linkage_problem(c, b, LDD_DEBIAN) is None
    why = preflight.linkage_problem(v, b, LDD_DEBIAN)
    assert "links libmpi.so.40 (/lib/x86_64-linux-gnu/libmpi.so.40), not this stack's MPI" in why
    assert "stackproof stack build vendor" in why
    # same soname, other stack's directory: the soname trap
    why = preflight.linkage_problem(c, b, {"libmpi.so.40": f"{root}/commodity-next/lib/libmpi.so.40"})
    assert "outside the stack's /usr/lib/x86_64-linux-gnu" in why
    assert preflight.linkage_problem(n, b, {"libmpi.so.40": f"{root}/commodity-next/lib/libmpi.so.40"}) is None
    assert "not found in the stack's environment" in preflight.linkage_problem(v, b, {"libmpi.so.12": "not found"})
    assert "links no MPI library" in preflight.linkage_problem(c, b, {"libc.so.6": "/lib/libc.so.6"})


def test_check_names_missing_benchmarks_once(site, tmp_path):
    with pytest.raises(StackError) as exc:
        preflight.ensure_ready(["commodity"], "local")
    msg = str(exc.value)
    assert msg.startswith("stack commodity: benchmarks fwq, hello, netpipe, probe not built (looked in ")
    assert "run `stackproof stack build commodity`" in msg and len(msg.splitlines()) == 1


def test_check_vendor_not_installed_is_one_problem(site):
    with pytest.raises(StackError) as exc:
        preflight.ensure_ready(["vendor"], "slurm")
    lines = str(exc.value).splitlines()
    assert len(lines) == 1 and "stack vendor: its MPI is not installed" in lines[0]
    assert "stackproof stack install vendor" in lines[0]


def test_cli_stack_check_one_line_error(site):
    proc = stackproof_cli("stack", "check", "nosuch", env=dict(os.environ))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("stackproof stack: error: unknown stack 'nosuch'")


def test_cli_stack_list_and_show(site):
    write(site, "broken", launcher=None)
    out = stackproof_cli("stack", "list").stdout
    assert "vendor" in out and "broken           BROKEN: " in out
    show = stackproof_cli("stack", "show", "vendor")
    assert show.returncode == 0 and '"mpi_family": "intelmpi"' in show.stdout


def test_parse_stack_rejects_non_mapping(tmp_path):
    with pytest.raises(StackError, match="expected a mapping"):
        parse_stack(["x"], tmp_path / "x.yaml")
