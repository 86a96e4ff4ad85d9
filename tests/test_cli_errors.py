"""Bad input to every command: one clear error line and a non-zero exit, never a traceback.
(The cluster's bad-input cases that need root but start nothing are here too; live faults are in
test_cluster_faults_live.py.)"""
import os

import pytest

from conftest import require_tools, run_cli, stackproof_cli
from stackproof import cli
from stackproof.hostlist import MAX_HOSTS, expand
from stackproof.errors import StackproofError

OSU_HEAD = "# OSU MPI Allreduce Latency Test v7.2\n# Size       Avg Latency(us)\n"


def assert_one_error_line(rc, lines, code, fragment):
    assert rc == code, lines
    assert lines, "no error message"
    assert fragment in lines[-1], lines
    assert "stackproof []" not in "\n".join(lines)
    if not lines[0].startswith("usage:"):  # ours are exactly one line (argparse adds its usage above its line)
        assert len(lines) == 1, lines
        assert lines[0].startswith("stackproof "), lines


@pytest.fixture
def osu(tmp_path):
    def make(row):
        p = tmp_path / "osu.txt"
        p.write_text(OSU_HEAD + row + "\n")
        return str(p)
    return make


EVIL = "x\nProlog=/tmp/evil"


@pytest.mark.parametrize("argv, code, fragment", [
    (["slurm", "render", "--nodetype", "lassen", "--profile", "baseline", "--controller", EVIL],
     2, "not a valid host name"),
    (["slurm", "render", "--nodetype", "lassen", "--profile", "baseline", "--cluster-name", "a b"],
     2, "cluster name"),
    (["slurm", "render", "--nodetype", "lassen", "--profile", "baseline", "--slurmctld-port", "0"], 2, "between 1 and 65535"),
    (["slurm", "render", "--nodetype", "lassen", "--profile", "baseline", "--slurmd-port", "70000"], 2, "between 1 and 65535"),
    (["slurm", "render", "--nodetype", "lassen", "--profile", "baseline", "--nodes", "node]"], 2, "']' without '['"),
    (["slurm", "render", "--nodetype", "lassen", "--profile", "baseline", "--nodes", "a b"], 2, "bad hostlist"),
    (["slurm", "render", "--nodetype", "lassen", "--profile", "baseline", "--nodes", ""], 2, "empty hostlist"),
    (["slurm", "render", "--nodetype", "lassen", "--profile", "baseline", "--nodes", "node[01-1000000000]"],
     2, f"more than {MAX_HOSTS} hosts"),
    (["slurm", "render", "--nodetype", "lassen", "--profile", "baseline", "--nodes", "n[3-1]"], 2, "end before start"),
    (["slurm", "render", "--nodetype", "lassen", "--profile", "baseline", "-o", "/proc/no/such/dir"],
     1, "/proc/no"),
    (["slurm", "render", "--nodetype", "nosuchtype", "--profile", "baseline"], 2, "nosuchtype"),
    (["slurm", "render", "--nodetype", "lassen", "--profile", "blink"], 2, "unknown profile 'blink'"),
    (["cluster", "up", "--ports", "0,70000"], 2, "between 1 and 65535"),
    (["cluster", "up", "--ports", "17817"], 2, "SLURMCTLD,SLURMD"),
    (["cluster", "up", "--k", "-1"], 2, "between 0 and"),
    (["noise", "inject", "--freq", "20", "--duration", "1ms", "--cpus", "0"], 1, "--seconds"),
    (["noise", "inject", "--freq", "20", "--duration", "1ms", "--cpus", "0", "--", "/nonexistent"],
     1, "/nonexistent"),
    (["report", "build", "--run", "/nonexistent.json", "-o", "/tmp"], 1, "/nonexistent.json"),
    (["acceptance", "run", "--bogus"], 2, "unrecognized arguments"),
])
def test_bad_input_is_one_line_and_an_exit_code(argv, code, fragment, capsys):
    rc, lines = run_cli(argv, capsys)
    assert_one_error_line(rc, lines, code, fragment)


def test_render_with_empty_nodes_is_not_the_default(capsys):
    rc, lines = run_cli(["slurm", "render", "--nodetype", "lassen", "--profile", "baseline", "--nodes", ""], capsys)
    assert rc == 2


@pytest.mark.parametrize("row, fragment", [
    ("8 nan", "nan"), ("8 inf", "inf"), ("8 -1.5", "-1.5"), ("8 1e999", "1e999"),
])
def test_bench_parsers_reject_non_finite_and_negative(osu, row, fragment, capsys):
    rc, lines = run_cli(["bench", "parse", "osu", osu(row)], capsys)
    assert_one_error_line(rc, lines, 2, fragment)


@pytest.mark.parametrize("text", [
    "Figure of Merit (FOM_1): -3.5e+08\n",
    "Figure of Merit (FOM): nnz_AP / (Setup Phase Time + 3 * Solve Phase Time) -1.0e+07\n",
])
def test_amg_parser_rejects_negative(tmp_path, text, capsys):
    p = tmp_path / "amg.txt"
    p.write_text(text)
    rc, lines = run_cli(["bench", "parse", "amg", str(p)], capsys)
    assert_one_error_line(rc, lines, 2, "fom")


def test_bench_parser_output_is_valid_json(osu, capsys):
    import json
    assert cli.main(["bench", "parse", "osu", osu("8 1.25")]) == 0
    json.loads(capsys.readouterr().out)       # strict JSON: no NaN/Infinity can reach it


@pytest.mark.parametrize("text, n", [("n[1-3,5]", 4), ("a,b", 2), ("r[01-02]-ib,x", 3), ("n7", 1)])
def test_hostlist_grammar(text, n):
    assert len(expand(text)) == n


def test_hostlist_bound_is_checked_before_expanding():
    with pytest.raises(StackproofError, match="more than"):
        expand("n[0-99999999999999]")


def test_an_import_failure_is_an_error_not_a_missing_command(monkeypatch, capsys):
    monkeypatch.setitem(cli.COMMANDS, "broken", "stackproof.no_such_module_for_test")
    rc, lines = run_cli(["broken", "x"], capsys)
    assert_one_error_line(rc, lines, 1, "unavailable")


def test_a_bug_prints_its_traceback_and_asks_for_a_report(monkeypatch, capsys):
    from stackproof.nodes import slurmconf

    def boom(args):
        raise ZeroDivisionError("bug")
    monkeypatch.setattr(slurmconf, "_cmd_render", boom)
    rc = cli.main(["slurm", "render", "--nodetype", "lassen", "--profile", "baseline"])
    err = capsys.readouterr().err
    assert rc == cli.EX_SOFTWARE
    assert "Traceback" in err and "ZeroDivisionError" in err and "please report" in err.splitlines()[-1]


def test_every_command_is_noun_verb():
    parser = cli.build_parser()
    nouns = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    for noun in ("acceptance", "noise", "cluster", "slurm", "bench"):
        assert noun in nouns
    noise_verbs = cli._subparsers(nouns["noise"]).choices
    assert {"experiment", "bench", "inject", "run"} <= set(noise_verbs)
    assert "run" in cli._subparsers(nouns["acceptance"]).choices


def test_no_traceback_from_a_separate_process():
    """The installed entry point itself (not only main()): cluster exec of a missing program."""
    proc = stackproof_cli("cluster", "--run-dir", "/nonexistent/run",
                           "exec", "--", "/nonexistent", timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "no cluster is up" in proc.stderr


# ---- the cluster: bad input is rejected before anything is stopped or started --------------------

def require_cluster_packages():
    """`cluster up` names missing packages before it reads its arguments: check them first, so that
    message is never mistaken for (or turned into a skip of) the behaviour under test."""
    from stackproof.cluster.core import REQUIRED
    require_tools(*(t for t in REQUIRED if not os.path.exists(f"/usr/sbin/{t}")))


root_only = pytest.mark.skipif(os.geteuid() != 0, reason="cluster up checks root before its arguments")


@root_only
@pytest.mark.parametrize("args, fragment", [
    (["--nodes", "0"], "--nodes must be between 1 and 16"),
    (["--nodes", "17"], "--nodes must be between 1 and 16"),
    (["--fake-gpus", "-1"], "--fake-gpus must be between 0 and 16"),
    (["--profile", "blink"], "unknown profile 'blink'"),
    (["--noise-daemon", "bogus"], "expected FREQHz-DURATION"),
    (["--noise-daemon", "10Hz-200ms"], "shorter than the period"),
    (["--noise-daemon", "0Hz-2ms"], "shorter than the period"),
    (["--mpibind-args", "x\nProlog=/tmp/evil"], "--mpibind-args"),
    (["--ports", "17890,17890"], "different ports"),
    (["--profile", "corespec", "--k", "4096"], "application cores"),
])
def test_cluster_up_rejects_bad_input_before_acting(tmp_path, args, fragment, capsys):
    require_cluster_packages()
    rc, lines = run_cli(["cluster", "--run-dir", str(tmp_path / "c"), "up", *args], capsys)
    assert_one_error_line(rc, lines, 2, fragment)     # every one is a bad value: exit 2
    assert not (tmp_path / "c").exists()          # nothing created, nothing started


@root_only
def test_cluster_up_refuses_a_run_dir_under_a_parent_others_may_write(tmp_path, capsys):
    require_cluster_packages()
    shared = tmp_path / "open"
    shared.mkdir()
    shared.chmod(0o777)                  # world-writable, no sticky bit: anyone could swap our dir
    rc, lines = run_cli(["cluster", "--run-dir", str(shared / "c"), "up", "--ports", "17891,17892"], capsys)
    assert_one_error_line(rc, lines, 1, "writable by others")
    assert not (shared / "c").exists()


def test_state_is_written_atomically_and_corruption_is_detected(tmp_path):
    from stackproof.cluster.state import CorruptState, State, load_state, save_state
    path = tmp_path / "cluster.json"
    assert load_state(path) is None
    st = State(settings={"profile": "baseline"}, node_names=["n1"], netns=["spkabc-ctl"])
    save_state(path, st)
    assert load_state(path) == st and oct(path.stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.json"]       # no temporary left behind
    for damage in (path.read_text()[:20], "[1, 2]", '{"settings": {}, "node_names": [], "bogus": 1}', ""):
        path.write_text(damage)
        with pytest.raises(CorruptState):
            load_state(path)


def test_slurm_values_are_validated_before_rendering():
    from stackproof.nodes.nodetype import load
    from stackproof.nodes.profiles import plan
    from stackproof.nodes.slurmconf import Site, render
    nt = load("lassen")
    prof = plan(nt, "baseline")
    for bad in (dict(controller="x\nProlog=/tmp/evil"), dict(nodes=["n1", "n 2"]), dict(slurmctld_port=0),
                dict(slurmd_port=65536), dict(run_dir="/tmp/a b"), dict(mpibind_args="x\ny"),
                dict(extra=["A=1\nB=2"]), dict(controller_addr="1.2.3.4\n"), dict(cluster_name="")):
        site = Site(**{"cluster_name": "c", "nodes": ["n1"], **bad})
        with pytest.raises(StackproofError):
            render(nt, prof, site)


@pytest.mark.parametrize("k", ["18", "99", "-1"])
def test_nodetype_k_is_bounded_by_the_node_type(k, shared, tmp_path, capsys):
    """--k is the system cores reserved per socket (corespec.cores_per_socket): 0..17 on 18-core sockets."""
    out = tmp_path / "quartz.yaml"
    rc, lines = run_cli(["nodetype", "from-xml", str(shared / "topologies/mpibind__cts1-quartz-smt1.xml"),
                         "--k", k, "-o", str(out)], capsys)
    assert_one_error_line(rc, lines, 2, "between 0 and 17")
    assert f"(got {k})" in lines[-1]
    assert not out.exists()


def test_nodetype_k_at_the_bound_is_written(shared, tmp_path, capsys):
    import yaml
    out = tmp_path / "quartz.yaml"
    assert cli.main(["nodetype", "from-xml", str(shared / "topologies/mpibind__cts1-quartz-smt1.xml"),
                     "--k", "17", "-o", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["corespec"]["cores_per_socket"] == 17


def test_nodetype_file_with_k_out_of_range_is_rejected(shared, tmp_path):
    from stackproof.nodes.nodetype import from_xml, load
    nt = from_xml(shared / "topologies/mpibind__cts1-quartz-smt1.xml")
    nt.corespec["cores_per_socket"] = 18
    path = tmp_path / "bad.yaml"
    path.write_text(nt.to_yaml())
    with pytest.raises(StackproofError, match="between 0 and 17"):
        load(str(path))
