"""A run per profile (stackproof.reframe.session: one cluster configuration and ReFrame session each,
reports merged; reframe-tests/run.py --profile) and the small pieces of the check library that need
no ReFrame session."""
import json
import subprocess
import sys

import pytest

from stackproof.errors import InputError
from stackproof.paths import REPO
from stackproof import reframe_output
from stackproof.reframe import session

SUITE = REPO / "reframe-tests"


def test_report_option_is_taken_out_of_the_reframe_args():
    assert session.report_option(["-n", "X", "--report-file", "r.json", "-x", "Y"]) == ("r.json", ["-n", "X", "-x", "Y"])
    assert session.report_option(["--report-file=r.json"]) == ("r.json", [])
    assert session.report_option(["-n", "X"]) == (None, ["-n", "X"])


def test_merged_report_keeps_each_case_where_it_ran():
    docs = []
    for i, (a, b) in enumerate((("pass", "skip"), ("skip", "fail"))):
        doc = {"session_info": {"uuid": f"u{i}", "num_cases": 3, "time_end": f"t{i}"},
               "runs": [{"num_cases": 3, "testcases": [
                   {"name": "a", "system": "tc", "partition": "cpu", "environ": "e", "result": a},
                   {"name": "b", "system": "tc", "partition": "cpu", "environ": "e", "result": b},
                   {"name": "c", "system": "tc", "partition": "cpu", "environ": "e", "result": "skip"}]}]}
        docs.append(json.loads(json.dumps(doc)))
    merged = reframe_output.merge_reports(docs)
    results = {tc["name"]: tc["result"] for tc in merged["runs"][0]["testcases"]}
    assert results == {"a": "pass", "b": "fail", "c": "skip"}
    info = merged["session_info"]
    assert (info["num_cases"], info["num_failures"], info["num_skipped"]) == (3, 1, 1)
    assert info["stackproof_sessions"] == ["u0", "u1"] and info["time_end"] == "t1"


def test_merged_retries_keep_the_final_result_and_blocks_keep_their_names():
    """Run i of every session is one retry round: a case that failed and passed on retry counts as
    passed; a later look's blocks carry their own global index in the name (STACKPROOF_FIRST_BLOCK),
    so they join the earlier ones' although ReFrame's unique_name numbers both N_0."""
    tc = {"name": "N %block_index=0", "unique_name": "N_0", "system": "tc", "partition": "cpu", "environ": "e",
          "block_index": 0}
    first = {"session_info": {"uuid": "u0"}, "runs": [{"testcases": [dict(tc, result="fail")]},
                                                      {"testcases": [dict(tc, result="pass")]}]}
    later = {"session_info": {"uuid": "u1"}, "runs": [{"testcases": [dict(tc, result="pass", name="N %block_index=1",
                                                                          block_index=1)]}]}
    merged = reframe_output.merge_reports([first, later], {"design": {}})
    assert [[t["name"] for t in r["testcases"]] for r in merged["runs"]] == \
        [["N %block_index=0", "N %block_index=1"], ["N %block_index=0"]]
    info = merged["session_info"]
    assert (info["num_cases"], info["num_failures"]) == (2, 0) and merged["stackproof"] == {"design": {}}
    assert [t["result"] for t in reframe_output.final_cases(merged)] == ["pass", "pass"]


def test_profiles_all_are_the_catalog_profiles_this_node_type_can_run():
    from stackproof.nodes.profiles import profile_names
    profiles = session.profiles_to_run(["all"])
    assert profiles and set(profiles) <= set(profile_names()) and "baseline" in profiles
    assert session.profiles_to_run(["corespec", "baseline", "corespec"]) == ["corespec", "baseline"]
    with pytest.raises(InputError, match="unknown profile"):
        session.profiles_to_run(["nope"])


@pytest.mark.parametrize("args, message", [
    (["--noise-daemon", "10Hz-2500us"], "--noise-daemon needs --profile"),
    (["--profile", "baseline", "--dry-run"], "--profile switches the test cluster"),
])
def test_run_py_profile_options_are_checked(args, message, tmp_path):
    env_cmd = [sys.executable, str(SUITE / "run.py"), "--system", "testcluster", "--stack", "commodity", *args]
    proc = subprocess.run(env_cmd, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "STACKPROOF_RUN_DIR": str(tmp_path / "run"),
                               "STACKPROOF_RFM_PREFIX": str(tmp_path / "p"),
                               "STACKPROOF_RESULTS_DB": str(tmp_path / "db" / "r.db"), "HOME": str(tmp_path)})
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-1500:]
    assert "Traceback" not in proc.stderr


def test_nodes_needed_rounds_up():
    from stackproof.reframe.layout import nodes_needed
    assert nodes_needed(2, 1) == 2 and nodes_needed(3, 2) == 2 and nodes_needed(1, None) == 1
    assert nodes_needed(None, None) == 1


def test_fwq_references_exist_for_every_stack_and_can_fail():
    import yaml
    from stackproof.stacks import stack_names
    for stack in stack_names():
        path = SUITE / "references" / stack / "fwq.yaml"
        if not path.is_file():
            continue                       # a site's own stack file: it brings its references
        refs = yaml.safe_load(path.read_text())["FWQNoise"]
        injected = refs["10Hz-2500us"][".*"][".*"]["noise_fraction"]
        assert injected[0] > 0 and injected[1] < 0, injected    # a lower bound: unseen noise fails
        site = refs[".*"][".*"][".*"]["noise_fraction"]
        assert site[2] is not None and site[2] < 1, site      # an upper bound a noisy node fails


def test_every_named_reference_file_exists_for_every_shipped_stack():
    """A check that names references/<stack>/<file> finds it for every stack the project ships; the
    stacks whose benchmarks are built here (commodity, vendor) carry measured values with bounds for
    this machine's systems, not only a site's placeholder."""
    import re
    import yaml
    named = set()
    for check in (SUITE / "checks").rglob("*.py"):
        named |= set(re.findall(r"^\s+reference_file = '([\w.-]+\.yaml)'", check.read_text(), re.M))
    assert {"osu.yaml", "amg.yaml", "hpcc.yaml", "fwq.yaml"} <= named
    shipped = sorted(p.stem for p in (SUITE / "stacks").glob("*.yaml"))
    for stack in shipped:
        for name in named:
            assert (SUITE / "references" / stack / name).is_file(), f"references/{stack}/{name} missing"
    for stack in ("commodity", "vendor"):
        osu = yaml.safe_load((SUITE / "references" / stack / "osu.yaml").read_text())["OSUBenchmark"]
        lat = osu["osu_latency"]["host"]["on-node"]["(testcluster|local):.*"]["lat_8B"]
        assert lat[0] > 0 and lat[2] is not None, lat            # a measured value and an upper bound
        # the network is judged by its own values, never by the ones measured within a node
        net = osu["osu_latency"]["host"]["across-nodes"]["testcluster:.*"]["lat_8B"]
        assert net[0] > lat[0] and net[2] is not None, net
        amg = yaml.safe_load((SUITE / "references" / stack / "amg.yaml").read_text())["AMGBenchmark"]
        fom = amg["amg"]["ci"]["(testcluster|local):.*"]["fom"]
        assert fom[0] > 0 and fom[1] is not None, fom            # a measured value and a lower bound
