"""Bad input to every reader (node types, profiles, stack files, YAML, ReFrame run reports, FWQ
traces, CPU lists, hostlists, OSU/AMG/SW4 output): one line naming the file and the field, exit 2
(InputError, like an argparse usage error), never a traceback. Other problems the user can fix (a
missing file, a missing package) stay exit 1."""
import json

import pytest
import yaml

from conftest import run_cli
from stackproof.benchparse import BenchParseError
from stackproof.cpulist import CpuListError, parse_list
from stackproof.errors import InputError, StackproofError
from stackproof.noise.trace import TraceError
from stackproof.paths import nodetypes_dir
from stackproof.stacks.model import SHIPPED_DIR, StackError, StackFileError




def _nodetype(tmp_path, drop=(), **changes):
    d = yaml.safe_load((nodetypes_dir() / "lassen.yaml").read_text())
    d.update(changes)
    for key in drop:
        del d[key]
    p = tmp_path / "bad-node.yaml"
    p.write_text(yaml.safe_dump(d))
    return str(p)


def _stack(tmp_path, monkeypatch, **changes):
    d = yaml.safe_load((SHIPPED_DIR / "commodity.yaml").read_text())
    d.update(changes)
    d.pop("name", None)
    (tmp_path / "badstack.yaml").write_text(yaml.safe_dump(d))
    monkeypatch.setenv("STACKPROOF_STACKS_DIR", str(tmp_path))
    return "badstack"


def _nan_ticks_trace(tmp_path):
    from stackproof import noise
    p = tmp_path / "t.dat"
    noise.write(p, [[1.0, 2.0, 3.0]])
    data = p.read_bytes()
    p.write_bytes(data.replace(b"ticks_per_second=1000000000.000", b"ticks_per_second=nan", 1))
    assert p.read_bytes() != data
    return str(p)


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


RENDER = ["slurm", "render", "--profile", "baseline"]
EVIL_PROFILES = "daemons:\n  g: {units: [], processes: ['$(id)']}\nprofiles:\n  evil: {daemons: [g]}\n"

# (build argv from tmp_path and monkeypatch, fragments the one line must carry: file and field)
CASES = {
    "nodetype negative memory": (lambda t, m: ["nodetype", "show", _nodetype(t, memory_mb=-4750)],
                                 ["bad-node.yaml", "memory_mb", "-4750"]),
    "nodetype not a mapping": (lambda t, m: ["nodetype", "show", _write(t, "bad-node.yaml", "[1, 2]\n")],
                               ["bad-node.yaml", "not a node type"]),
    "nodetype huge cpulist": (lambda t, m: ["nodetype", "show", _nodetype(t, unavailable_cpus="0-999999999")],
                              ["bad-node.yaml", "unavailable_cpus", "above 65535"]),
    "nodetype missing field": (lambda t, m: ["nodetype", "show", _nodetype(t, drop=["arch"])],
                               ["bad-node.yaml", "'arch'", "missing"]),
    "profile file shape": (lambda t, m: RENDER + ["--nodetype", "lassen", "--profile-file",
                                                  _write(t, "prof.yaml", "profiles: [1]\n")],
                           ["prof.yaml", "'profiles'"]),
    "profile hostile process": (lambda t, m: ["slurm", "render", "--nodetype", "lassen", "--profile", "evil",
                                              "--profile-file", _write(t, "prof.yaml", EVIL_PROFILES)],
                                ["prof.yaml", "daemon group 'g'", "not a process name"]),
    "unparseable YAML": (lambda t, m: RENDER + ["--nodetype", "lassen", "--profile-file",
                                                _write(t, "prof.yaml", "profiles: [\n  x: :\n")],
                         ["prof.yaml", "invalid YAML", "line"]),
    "stack file field": (lambda t, m: ["stack", "show", _stack(t, m, mpi={"family": "lam", "version": "1",
                                                                          "library": "x"})],
                         ["badstack.yaml", "mpi.family", "'lam'"]),
    "stack file shape": (lambda t, m: ["stack", "show", _stack(t, m, compilers=["gcc"])],
                         ["badstack.yaml", "compilers"]),
    "reframe report shape": (lambda t, m: ["report", "build", "--run", _write(t, "run.json", json.dumps({"runs": "abc"})),
                                           "-o", str(t / "r")],
                             ["run.json", "runs", "not a list"]),
    "reframe report value": (lambda t, m: ["report", "build", "--run", _write(t, "run.json", json.dumps(
        {"runs": [{"testcases": [{"name": "x", "perfvalues": {"a:b": ["nan", 1, 0, 0, "s"]}}]}]})),
        "-o", str(t / "r")], ["run.json", "perfvalues", "finite"]),
    "reframe report not JSON": (lambda t, m: ["report", "build", "--run", _write(t, "run.json", "{"), "-o", str(t / "r")],
                                ["run.json", "not JSON"]),
    "fwq trace magic": (lambda t, m: ["noise", "stats", _write(t, "t.dat", "XWQ-TRACE 1\n")],
                        ["t.dat", "magic"]),
    "fwq trace NaN ticks": (lambda t, m: ["noise", "stats", _nan_ticks_trace(t)],
                            ["t.dat", "ticks_per_second", "finite"]),
    "hostlist": (lambda t, m: RENDER + ["--nodetype", "lassen", "--nodes", "n[1-"], ["--nodes", "hostlist", "'n[1-'"]),
    "osu output": (lambda t, m: ["bench", "parse", "osu", _write(t, "osu.out", "# OSU MPI Latency Test v7.2\n"
                                                                "# Size Avg Latency(us)\n8 nan\n")],
                   ["osu.out", "nan"]),
    "amg output": (lambda t, m: ["bench", "parse", "amg", _write(t, "amg.out", "Segmentation fault\n")],
                   ["amg.out", "Figure of Merit", "Segmentation fault"]),
    "sw4 output": (lambda t, m: ["bench", "parse", "sw4", _write(t, "sw4.out", "")],
                   ["sw4.out", "empty"]),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_exits_2_in_one_line_naming_file_and_field(case, tmp_path, monkeypatch, capsys):
    make_argv, fragments = CASES[case]
    rc, lines = run_cli(make_argv(tmp_path, monkeypatch), capsys)
    assert rc == 2, lines
    assert len(lines) == 1 and lines[0].startswith("stackproof ") and ": error: " in lines[0], lines
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines)


@pytest.mark.parametrize("argv", [
    ["report", "build", "--run", "/nonexistent/run.json", "-o", "/tmp/r"],
    ["noise", "stats", "/nonexistent/t.dat"],
    ["bench", "parse", "osu", "/nonexistent/osu.out"],
])
def test_a_missing_file_is_not_bad_input_but_still_one_line(argv, capsys):
    rc, lines = run_cli(argv, capsys)
    assert rc == 1 and len(lines) == 1 and "/nonexistent/" in lines[0], lines


def test_input_errors_are_still_stackproof_errors():
    """Callers that catch StackproofError (or the readers' own classes, or ValueError for CPU lists)
    keep working: InputError only refines the exit status."""
    for cls in (TraceError, BenchParseError, StackFileError, CpuListError):
        assert issubclass(cls, InputError) and issubclass(cls, StackproofError)
    assert issubclass(StackFileError, StackError) and issubclass(CpuListError, ValueError)
    with pytest.raises(ValueError, match="above"):
        parse_list("0-999999999")
    with pytest.raises(StackproofError):
        parse_list("x")
