"""Hostile profile, node-type and trace files (issue 28, case 4): each is refused by the CLI in one
line with a non-zero exit, nothing is written outside the output directory, no traceback."""
import numpy as np
import pytest
import yaml

from conftest import run_cli
from stackproof.cpulist import parse_hwloc_bitmap, parse_list
from stackproof.errors import StackproofError
from stackproof.hostlist import expand
from stackproof.noise import trace as fwqtrace
from stackproof.paths import slurm_conf_dir




def _nodetype(tmp_path, **change):
    doc = yaml.safe_load((slurm_conf_dir() / "nodetypes" / "pascal.yaml").read_text())
    for key, value in change.items():
        if key == "gpu":
            doc["gpus"] = [{"index": 0, "vendor": "nvidia", "model": "Tesla P100", "pci_bus_id": None, "numa": [0],
                            **value}]
        else:
            doc[key] = value
    p = tmp_path / "evil-nt.yaml"
    p.write_text(yaml.safe_dump(doc))
    return str(p)


def _profile_file(tmp_path, profiles=None, daemons=None):
    p = tmp_path / "evil-profiles.yaml"
    p.write_text(yaml.safe_dump({"profiles": profiles or {"evil": {"free": True, "reserve": True,
                                                                   "daemons": ["evil"]}},
                                 "daemons": daemons or {"evil": {"units": ["ok.service"], "processes": ["ok"]}}}))
    return str(p)


def _render(tmp_path, nodetype="pascal", profile="clean", *extra):
    return ["slurm", "render", "--nodetype", nodetype, "--profile", profile, "--mpibind-plugin", "none",
            "-o", str(tmp_path / "out"), *extra]


CASES = {
    "unit-escapes-render-dir": (lambda t: _render(t, "pascal", "evil", "--profile-file", _profile_file(
        t, daemons={"evil": {"units": ["../../../../evil.service"], "processes": ["ok"]}})), "not a systemd unit name"),
    "newline-in-profile-name": (lambda t: _render(t, "pascal", "a\nSTACKPROOF_APP_CPUS=0", "--profile-file", _profile_file(
        t, profiles={"a\nSTACKPROOF_APP_CPUS=0": {"free": True, "reserve": True}})), "profile name"),
    "gpu-index-injects-gres": (lambda t: _render(t, _nodetype(t, gpu={"index": "0 Cores=0\nNodeName=x"}), "baseline",
                                                 "--gpus"), "gpu index"),
    "gpu-index-negative": (lambda t: _render(t, _nodetype(t, gpu={"index": -1}), "baseline", "--gpus"), "gpu index"),
    "gpu-vendor-unknown": (lambda t: _render(t, _nodetype(t, gpu={"vendor": "x\ny"}), "baseline"), "vendor"),
    "memory-negative": (lambda t: _render(t, _nodetype(t, memory_mb=-4750)), "memory_mb"),
    "memory-nan": (lambda t: _render(t, _nodetype(t, memory_mb=float("nan"))), "memory_mb"),
    "memory-inf": (lambda t: _render(t, _nodetype(t, memory_mb=float("inf"))), "memory_mb"),
    "name-with-newline": (lambda t: _render(t, _nodetype(t, name="p\nNodeName=evil")), "name"),
    "huge-cpulist": (lambda t: _render(t, _nodetype(t, unavailable_cpus="0-999999999")), "above 65535"),
    "huge-digits-cpulist": (lambda t: _render(t, _nodetype(t, unavailable_cpus="9" * 5000)), "bad CPU id"),
    "huge-digits-hostlist": (lambda t: _render(t, "pascal", "baseline", "--nodes", "n[1-" + "9" * 5000 + "]"), "digits"),
    "huge-hostlist-range": (lambda t: _render(t, "pascal", "baseline", "--nodes", "n[0-999999999]"), "more than"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_input_is_one_line_and_nonzero(case, tmp_path, capsys):
    argv, fragment = CASES[case]
    rc, lines = run_cli(argv(tmp_path), capsys)
    assert rc not in (0, None), lines
    assert len(lines) == 1 and fragment in lines[0], lines
    assert not (tmp_path / "out").exists() and not (tmp_path.parent / "evil.service").exists()


def test_nan_ticks_per_second_in_a_trace_is_refused(tmp_path, capsys):
    path = fwqtrace.write(tmp_path / "t.fwq", np.full((1, 50), 10.0))
    data = path.read_bytes()
    assert b"ticks_per_second=1000000000.000" in data
    for bad in (b"nan", b"inf", b"-inf"):
        path.write_bytes(data.replace(b"ticks_per_second=1000000000.000", b"ticks_per_second=" + bad))
        with pytest.raises(StackproofError, match="ticks_per_second"):
            fwqtrace.load(path)
        rc, lines = run_cli(["noise", "stats", str(path)], capsys)
        assert rc not in (0, None) and len(lines) == 1 and "ticks_per_second" in lines[0], lines


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
