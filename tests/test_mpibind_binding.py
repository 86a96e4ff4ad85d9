"""mpibind Python binding as installed in the venv (make mpibind-build), plus the CLI.

The exhaustive golden replay and robustness runs are ctest targets (make mpibind-test);
these tests check what ReFrame checks and other Python code rely on: the installed
package finds its library, predicts a node type's mapping, honours HWLOC_XMLFILE, and
fails loudly on bad input.
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import require_files, require_module
from stackproof.paths import REPO

BUILD = REPO / "build" / "mpibind"
CLI = BUILD / "bin" / "mpibind"


@pytest.fixture(scope="module")
def mpibind():
    """The installed binding. Only its absence skips (checked before importing it); an import or
    library load that fails is the code under test failing."""
    require_module("mpibind", "run `make mpibind-build`, or set MPIBIND_LIBRARY and "
                   "PYTHONPATH=build/mpibind/python")
    import mpibind as module
    module.load_library()
    return module


@pytest.fixture(scope="module")
def golden(shared):
    def load(name):
        return json.loads((shared / "mpibind-golden" / f"{name}.json").read_text())
    return load


def _case_kwargs(case):
    p = case["params"]
    return {k: p[k] for k in ("nthreads", "smt", "greedy", "gpu_optim", "restrict_type",
                              "restrict_ids")}


@pytest.mark.parametrize("name", ["mpibind__coral-lassen", "mpibind__eas-tioga",
                                  "flux-core__tuo.SPX", "mpibind__cts1-pascal"])
def test_predicts_reference_mapping(mpibind, shared, golden, name):
    data = golden(name)
    with mpibind.Topology(shared / data["topology"]["file"]) as topo:
        cases = data["cases"][::7]
        assert len(cases) >= 2, f"{name}: {len(data['cases'])} golden cases"
        for case in cases:
            tasks = mpibind.mapping(case["params"]["ntasks"], topology=topo, **_case_kwargs(case))
            got = [{k: t[k] for k in ("task", "nthreads", "cpus", "gpus", "gpus_pci")}
                   for t in tasks]
            want = [{k: t.get(k, []) for k in ("task", "nthreads", "cpus", "gpus", "gpus_pci")}
                    for t in case["tasks"]]
            assert got == want, case["id"]


def test_env_vars_follow_gpu_vendor(mpibind, shared):
    tioga = mpibind.mapping(8, topology_file=shared / "topologies" / "mpibind__eas-tioga.xml")
    assert [t["env"]["ROCR_VISIBLE_DEVICES"] for t in tioga] == ["4", "5", "2", "3", "6", "7",
                                                                  "0", "1"]
    assert all(t["env"]["OMP_PLACES"] == "threads" and t["env"]["OMP_PROC_BIND"] == "spread"
               for t in tioga)
    lassen = mpibind.mapping(2, topology_file=shared / "topologies" / "mpibind__coral-lassen.xml")
    assert lassen[1]["env"]["CUDA_VISIBLE_DEVICES"] == "2,3"
    quartz = mpibind.mapping(2, topology_file=shared / "topologies"
                             / "mpibind__cts1-quartz-smt1.xml")
    assert set(quartz[0]["env"]) == {"OMP_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND"}
    assert quartz[0]["env"]["OMP_NUM_THREADS"] == "18"


def test_hwloc_xmlfile_selects_topology(mpibind, shared, monkeypatch):
    xml = shared / "topologies" / "mpibind__cts1-pascal.xml"
    monkeypatch.setenv("HWLOC_XMLFILE", str(xml))
    via_env = mpibind.mapping(4)
    monkeypatch.delenv("HWLOC_XMLFILE")
    assert via_env == mpibind.mapping(4, topology_file=xml)
    assert via_env[0]["gpus"] == ["0"] and via_env[3]["gpus"] == ["1"]


def test_handle_api(mpibind, shared):
    xml = shared / "topologies" / "mpibind__coral-lassen.xml"
    with mpibind.MpibindHandle(4, nthreads=2, topology_file=xml) as h:
        h.mpibind()
        assert h.num_gpus == 4 and h.num_numas == 2 and h.hw_smt == 4 and not h.greedy_path
        assert h.nthreads == [2, 2, 2, 2]
        # 2 tasks x 2 threads per socket match at the L3 level: one PU of 5 L3s each.
        assert h.get_cpus_ptask(0) == [8, 16, 24, 32, 40]
        assert h.get_gpus_ptask(2, "pci") == ["0035:03:00.0"]
        assert h.mapping_text().splitlines()[0].startswith("mpibind: task   0 nths  2 gpus 0 cpus 8,")


def test_bad_input_raises(mpibind, shared, tmp_path):
    xml = shared / "topologies" / "mpibind__coral-lassen.xml"
    with pytest.raises(mpibind.MpibindError, match="ntasks"):
        mpibind.mapping(0, topology_file=xml)
    with pytest.raises(mpibind.MpibindError, match="exceeds the hardware SMT"):
        mpibind.mapping(2, topology_file=xml, smt=8)
    with pytest.raises(mpibind.MpibindError, match="cannot read topology file"):
        mpibind.Topology(tmp_path / "missing.xml")
    bad = tmp_path / "bad.xml"
    bad.write_text("<topology><object")
    with pytest.raises(mpibind.MpibindError, match="cannot load topology"):
        mpibind.Topology(bad)
    with pytest.raises(mpibind.MpibindError, match="not in this topology"):
        mpibind.mapping(2, topology_file=xml, restrict_ids="500-600")


def test_wrong_mpibind_library_fails_loudly(mpibind):
    env = dict(os.environ, MPIBIND_LIBRARY="/nonexistent/libmpibind.so")
    out = subprocess.run([sys.executable, "-c", "import mpibind; mpibind.load_library()"],
                         capture_output=True, text=True, env=env)
    assert out.returncode != 0
    assert "MPIBIND_LIBRARY" in out.stderr


def test_cli_json_matches_binding(mpibind, shared):
    require_files(CLI, hint="make mpibind-build")
    xml = shared / "topologies" / "mpibind__eas-tioga.xml"
    out = subprocess.run([str(CLI), "--topology", str(xml), "--ntasks", "6", "--nthreads", "3",
                          "--json"], capture_output=True, text=True, check=True)
    cli_tasks = json.loads(out.stdout)["tasks"]
    lib_tasks = mpibind.mapping(6, topology_file=xml, nthreads=3)
    assert cli_tasks == [{k: t[k] for k in ("task", "nthreads", "cpus", "gpus")}
                         for t in lib_tasks]
