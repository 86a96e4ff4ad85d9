"""What a check learns about the partition's core-specialization profile (stackproof.reframe.profile):
a profile rendered by function (no `stackproof slurm render` subprocess), the profiles a check has cases
for (the catalog and the running test cluster's profile file), each application core's CPUs."""
import json

import pytest

pytest.importorskip("reframe")

from stackproof.nodes.nodetype import load  # noqa: E402
from stackproof.nodes.profiles import plan  # noqa: E402
from stackproof.reframe import profile as rp  # noqa: E402


def test_a_profile_renders_by_function_call(tmp_path, monkeypatch):
    import subprocess
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail(f"a subprocess: {a}"))
    env = rp.render_profile("lassen", "corespec", tmp_path / "r")
    prof = plan(load("lassen"), "corespec")
    assert env["STACKPROOF_PROFILE"] == "corespec" and env["STACKPROOF_APP_CPUS"] == prof.app_cpu_list
    assert env["MPIBIND_RESTRICT"] == prof.app_cpu_list
    assert (tmp_path / "r" / "etc/slurm/slurm.conf").is_file()       # the tree a site would install
    with pytest.raises(RuntimeError, match=r"^rendering profile 'nope' for node type 'lassen' failed: unknown profile"):
        rp.render_profile("lassen", "nope", tmp_path / "x")
    with pytest.raises(RuntimeError, match="unknown node type 'nope'"):
        rp.render_profile("nope", "baseline", tmp_path / "x")


def test_application_cores_from_the_profile_masks(tmp_path):
    nt = load("lassen")
    prof = plan(nt, "corespec")
    env = rp.render_profile("lassen", "corespec", tmp_path)
    cores = rp.app_core_cpus(env)
    assert cores == [set(nt.core_pus(s, c)) for s, c in prof.app_cores] and len(cores[0]) == nt.threads_per_core
    for bad in ("map_cpu:0,1", "mask_cpu:", "mask_cpu:0x0", "mask_cpu:zz"):
        with pytest.raises(ValueError, match="expected mask_cpu:0xMASK"):
            rp.app_core_cpus({"STACKPROOF_SRUN_CPU_BIND": bad})


def test_known_profiles_add_the_running_clusters_profile_file(tmp_path, monkeypatch):
    monkeypatch.setenv("STACKPROOF_RUN_DIR", str(tmp_path))
    catalog = ["baseline", "freecore-first", "freecore-last", "corespec", "clean"]
    assert rp.known_profiles() == catalog                                # no cluster
    proposal = tmp_path / "profiles.yaml"
    proposal.write_text("profiles:\n  hunt-clean: {free: true, reserve: true, daemons: [slurm]}\n")
    (tmp_path / "cluster.json").write_text(json.dumps(
        {"settings": {"profile": "hunt-clean", "profile_file": str(proposal)}, "node_names": ["n1"]}))
    assert rp.known_profiles() == catalog + ["hunt-clean"]
    proposal.unlink()                                                   # a file gone: the catalog holds
    assert rp.known_profiles() == catalog
    (tmp_path / "cluster.json").write_text("{")                          # a corrupt state: likewise
    assert rp.known_profiles() == catalog
