"""Bad and hostile input to every reader (node types, profiles, stack files, YAML, ReFrame run reports,
FWQ traces, CPU lists, hostlists, OSU/AMG/SW4 output; issue 28 case 4): one line naming the file and
the field, exit 2 (InputError, like an argparse usage error), nothing written (not in the output
directory, not outside it), never a traceback. Other problems the user can fix (a missing file, a
missing package) stay exit 1. Each case is here once; hostile process names have their own file
(test_hostile_names.py: nothing they name is ever executed)."""
import json

import numpy as np
import pytest
import yaml

from conftest import run_cli
from stackproof.benchparse import BenchParseError
from stackproof.cpulist import CpuListError, parse_hwloc_bitmap, parse_list
from stackproof.errors import InputError, StackproofError
from stackproof.hostlist import expand
from stackproof.noise import trace as fwqtrace
from stackproof.noise.trace import TraceError
from stackproof.paths import nodetypes_dir
from stackproof.stacks.model import SHIPPED_DIR, StackError, StackFileError


def _nodetype(tmp_path, drop=(), gpu=None, **changes):
    d = yaml.safe_load((nodetypes_dir() / "pascal.yaml").read_text())
    d.update(changes)
    for key in drop:
        del d[key]
    if gpu is not None:
        d["gpus"] = [{"index": 0, "vendor": "nvidia", "model": "Tesla P100", "pci_bus_id": None, "numa": [0], **gpu}]
    p = tmp_path / "bad-node.yaml"
    p.write_text(yaml.safe_dump(d))
    return str(p)


def _profiles(tmp_path, profiles=None, daemons=None):
    p = tmp_path / "prof.yaml"
    p.write_text(yaml.safe_dump({"profiles": profiles or {"evil": {"free": True, "reserve": True, "daemons": ["evil"]}},
                                 "daemons": daemons or {"evil": {"units": ["ok.service"], "processes": ["ok"]}}}))
    return str(p)


def _render(tmp_path, nodetype="pascal", profile="baseline", *extra):
    """`slurm render` into tmp_path/out (which must stay absent)."""
    return ["slurm", "render", "--nodetype", nodetype, "--profile", profile, "--mpibind-plugin", "none",
            "-o", str(tmp_path / "out"), *extra]


def _stack(tmp_path, monkeypatch, **changes):
    d = yaml.safe_load((SHIPPED_DIR / "commodity.yaml").read_text())
    d.update(changes)
    d.pop("name", None)
    (tmp_path / "badstack.yaml").write_text(yaml.safe_dump(d))
    monkeypatch.setenv("STACKPROOF_STACKS_DIR", str(tmp_path))
    return "badstack"


def _ticks_trace(tmp_path, ticks: bytes):
    """An FWQ trace whose ticks_per_second is `ticks`."""
    p = fwqtrace.write(tmp_path / "t.dat", np.full((1, 50), 10.0))
    data = p.read_bytes()
    p.write_bytes(data.replace(b"ticks_per_second=1000000000.000", b"ticks_per_second=" + ticks, 1))
    assert p.read_bytes() != data
    return str(p)


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# (build argv from tmp_path and monkeypatch, fragments the one line must carry: file and field)
CASES = {
    "nodetype negative memory": (lambda t, m: _render(t, _nodetype(t, memory_mb=-4750)),
                                 ["bad-node.yaml", "memory_mb", "-4750"]),
    "nodetype NaN memory": (lambda t, m: _render(t, _nodetype(t, memory_mb=float("nan"))), ["bad-node.yaml", "memory_mb"]),
    "nodetype infinite memory": (lambda t, m: _render(t, _nodetype(t, memory_mb=float("inf"))),
                                 ["bad-node.yaml", "memory_mb"]),
    "nodetype name with a newline": (lambda t, m: _render(t, _nodetype(t, name="p\nNodeName=evil")),
                                     ["bad-node.yaml", "name"]),
    "nodetype gpu index injects gres": (lambda t, m: _render(t, _nodetype(t, gpu={"index": "0 Cores=0\nNodeName=x"}),
                                                             "baseline", "--gpus"), ["bad-node.yaml", "gpu index"]),
    "nodetype negative gpu index": (lambda t, m: _render(t, _nodetype(t, gpu={"index": -1}), "baseline", "--gpus"),
                                    ["bad-node.yaml", "gpu index"]),
    "nodetype unknown gpu vendor": (lambda t, m: _render(t, _nodetype(t, gpu={"vendor": "x\ny"})),
                                    ["bad-node.yaml", "vendor"]),
    "nodetype not a mapping": (lambda t, m: ["nodetype", "show", _write(t, "bad-node.yaml", "[1, 2]\n")],
                               ["bad-node.yaml", "not a node type"]),
    "nodetype huge cpulist": (lambda t, m: _render(t, _nodetype(t, unavailable_cpus="0-999999999")),
                              ["bad-node.yaml", "unavailable_cpus", "above 65535"]),
    "nodetype cpulist of 5000 digits": (lambda t, m: _render(t, _nodetype(t, unavailable_cpus="9" * 5000)),
                                        ["bad-node.yaml", "unavailable_cpus", "bad CPU id"]),
    "nodetype missing field": (lambda t, m: ["nodetype", "show", _nodetype(t, drop=["arch"])],
                               ["bad-node.yaml", "'arch'", "missing"]),
    "profile file shape": (lambda t, m: _render(t, "lassen", "baseline", "--profile-file",
                                                _write(t, "prof.yaml", "profiles: [1]\n")),
                           ["prof.yaml", "'profiles'"]),
    "profile unit escapes the render dir": (lambda t, m: _render(t, "pascal", "evil", "--profile-file", _profiles(
        t, daemons={"evil": {"units": ["../../../../evil.service"], "processes": ["ok"]}})),
        ["prof.yaml", "not a systemd unit name"]),
    "profile name with a newline": (lambda t, m: _render(t, "pascal", "a\nSTACKPROOF_APP_CPUS=0", "--profile-file",
                                                         _profiles(t, profiles={"a\nSTACKPROOF_APP_CPUS=0": {
                                                             "free": True, "reserve": True}})),
                                    ["prof.yaml", "profile name"]),
    "unparseable YAML": (lambda t, m: _render(t, "lassen", "baseline", "--profile-file",
                                              _write(t, "prof.yaml", "profiles: [\n  x: :\n")),
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
    "fwq trace NaN ticks": (lambda t, m: ["noise", "stats", _ticks_trace(t, b"nan")], ["t.dat", "ticks_per_second", "finite"]),
    "fwq trace infinite ticks": (lambda t, m: ["noise", "stats", _ticks_trace(t, b"inf")], ["t.dat", "ticks_per_second"]),
    "fwq trace negative infinite ticks": (lambda t, m: ["noise", "stats", _ticks_trace(t, b"-inf")],
                                          ["t.dat", "ticks_per_second"]),
    "hostlist": (lambda t, m: _render(t, "lassen", "baseline", "--nodes", "n[1-"), ["--nodes", "hostlist", "'n[1-'"]),
    "hostlist of 5000 digits": (lambda t, m: _render(t, "pascal", "baseline", "--nodes", "n[1-" + "9" * 5000 + "]"),
                                ["--nodes", "digits"]),
    "hostlist of a billion hosts": (lambda t, m: _render(t, "pascal", "baseline", "--nodes", "n[0-999999999]"),
                                    ["--nodes", "more than"]),
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
    assert not (tmp_path / "out").exists() and not (tmp_path.parent / "evil.service").exists()


@pytest.mark.parametrize("argv", [
    ["report", "build", "--run", "/nonexistent/run.json", "-o", "/tmp/r"],
    ["noise", "stats", "/nonexistent/t.dat"],
    ["bench", "parse", "osu", "/nonexistent/osu.out"],
])
def test_a_missing_file_is_not_bad_input_but_still_one_line(argv, capsys):
    rc, lines = run_cli(argv, capsys)
    assert rc == 1 and len(lines) == 1 and "/nonexistent/" in lines[0], lines


def test_input_errors_are_still_stackproof_errors(tmp_path):
    """Callers that catch StackproofError (or the readers' own classes, or ValueError for CPU lists)
    keep working: InputError only refines the exit status."""
    for cls in (TraceError, BenchParseError, StackFileError, CpuListError):
        assert issubclass(cls, InputError) and issubclass(cls, StackproofError)
    assert issubclass(StackFileError, StackError) and issubclass(CpuListError, ValueError)
    with pytest.raises(StackproofError):
        parse_list("x")
    with pytest.raises(StackproofError, match="ticks_per_second"):
        fwqtrace.load(_ticks_trace(tmp_path, b"nan"))


@pytest.mark.parametrize("text", ["0-999999999", "1" * 5000, "0-" + "9" * 20, "x", "5-1"])
def test_cpulist_refuses_huge_or_bad(text):
    with pytest.raises(ValueError):
        parse_list(text)


def test_bitmap_refuses_huge():
    with pytest.raises(ValueError):
        parse_hwloc_bitmap(",".join(["0xffffffff"] * 5000))
    with pytest.raises(ValueError):
        parse_hwloc_bitmap("0x" + "f" * 5000)


def test_hostlist_refuses_huge_digits_quickly():
    with pytest.raises(StackproofError, match="digits"):
        expand("n[" + "1" * 60000 + "]")
