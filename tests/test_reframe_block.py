"""Blocks of launches (stackproof.reframe.block) and the block launcher (stackproof.reframe.launch), on
plain data: the alternating order and pair indices, and a block file run for real with small programs
(each launch in its own directory, each stack's environment, captured values, a failed launch
recorded without stopping the block, hostile text passed as data, never as shell)."""
import json
import os
import sys

import pytest

from stackproof.reframe.block import Slot, block_file, check_names, order
from stackproof.reframe.launch import LaunchFileError, main, run_block
from stackproof.stacks.model import apply_env


def test_two_stacks_alternate_abba_then_baab_and_pair_across_the_block():
    even = order(["A", "B"], 4, 2)
    assert [(s.stack, s.pair) for s in even] == [("A", 8), ("B", 8), ("B", 9), ("A", 9)]
    assert [s.position for s in even] == [0, 1, 2, 3] and {s.block for s in even} == {4}
    odd = order(["A", "B"], 5, 2)
    assert [(s.stack, s.pair) for s in odd] == [("B", 10), ("A", 10), ("A", 11), ("B", 11)]
    # (A1, B2) is pair 2j and (A4, B3) pair 2j + 1, as the comparison engine expects
    assert even[0].dir == "launch-00-A" and even[3].dir == "launch-03-A"


def test_more_stacks_go_forward_then_back_and_more_launches_keep_alternating():
    assert [s.stack for s in order(["A", "B", "C"], 0, 2)] == list("ABCCBA")
    assert [s.stack for s in order(["A", "B", "C"], 1, 2)] == list("CBAABC")
    # 3 launches per stack: the round order follows the global pair index, so blocks chain A B | B A
    assert [s.stack for s in order(["A", "B"], 0, 3)] == list("ABBAAB")
    assert [s.stack for s in order(["A", "B"], 1, 3)] == list("BAABBA")
    # one stack alone: the block is its launches
    assert [(s.stack, s.pair) for s in order(["A"], 2, 3)] == [("A", 6), ("A", 7), ("A", 8)]
    # every stack is first in half of the pairs over two blocks
    firsts = [s.stack for b in (0, 1) for s in order(["A", "B"], b, 2) if s.position % 2 == 0]
    assert firsts.count("A") == firsts.count("B")


@pytest.mark.parametrize("stacks", [[], ["a b"], ["../x"], ["A", "A"], [""], ["-x"]])
def test_bad_stack_names_are_refused(stacks):
    with pytest.raises(ValueError):
        check_names(stacks)
    with pytest.raises(ValueError):
        order(["A"], -1, 2)


def test_env_recipe_applied_on_top_of_another_stacks_environment():
    base = {"PATH": "/stackB/bin:/usr/bin", "LD_LIBRARY_PATH": "/stackB/lib", "I_MPI_ROOT": "/stackB", "HOME": "/h"}
    recipe = {"set": {"OMPI_X": "1"}, "unset": ["I_MPI_ROOT"], "prepend": {"PATH": ["/a/bin"], "LD_LIBRARY_PATH": []},
              "drop": ["/stackB/bin", "/stackB/lib"]}
    env = apply_env(recipe, base)
    assert env["PATH"] == "/a/bin:/usr/bin" and env["LD_LIBRARY_PATH"] == "" and env["OMPI_X"] == "1"
    assert "I_MPI_ROOT" not in env and env["HOME"] == "/h"


def _sh(script):
    return [sys.executable, "-c", script]


def test_block_file_runs_each_launch_in_its_directory_with_its_stacks_environment(tmp_path):
    slots = order(["A", "B"], 1, 2)
    hostile = "x; rm -rf / $(touch pwned) `id` 'q\""
    stacks = {
        "A": {"env": {"set": {"WHO": "A"}, "unset": ["ONLY_B"]},
              "setup": [{"argv": _sh("print(7, 8)"), "capture": ["N", "M"], "stdout": "probe.out"}]},
        "B": {"env": {"set": {"WHO": "B", "ONLY_B": "1"}},
              "setup": [{"argv": _sh("print(9, 10)"), "capture": ["N", "M"]}]},
    }
    prog = ("import os, sys; open('out.txt', 'w').write(os.environ['WHO'] + ' ' + os.environ.get('ONLY_B', '-') + "
            "' ' + ' '.join(sys.argv[1:]))")
    doc = block_file(slots, stacks, lambda s: [{"argv": _sh(prog) + ["{N}", "{M}", hostile], "stdout": "stdout",
                                                "stderr": "stderr"}])
    assert json.loads(json.dumps(doc)) == doc             # plain data
    rc = run_block(doc, base_env={"PATH": os.environ["PATH"], "ONLY_B": "leaked"}, workdir=str(tmp_path))
    assert rc == 0
    for s in slots:
        text = (tmp_path / s.dir / "out.txt").read_text()
        assert text == (f"A - 7 8 {hostile}" if s.stack == "A" else f"B 1 9 10 {hostile}")
    assert not (tmp_path / "pwned").exists() and (tmp_path / "setup-A" / "probe.out").read_text() == "7 8\n"
    record = json.loads((tmp_path / "launches.json").read_text())["launches"]
    assert [(r["stack"], r["position"], r["pair"], r["block"], r["rc"]) for r in record] == \
        [(s.stack, s.position, s.pair, s.block, 0) for s in slots]
    assert all(r["end"] >= r["start"] for r in record)


def test_a_failed_launch_is_recorded_and_the_block_goes_on(tmp_path):
    slots = order(["A", "B"], 0, 2)
    stacks = {"A": {"env": {}}, "B": {"env": {}}}

    def steps(s):
        code = "import sys; sys.stderr.write('boom\\n'); sys.exit(3)" if s.position == 1 else "print('ok')"
        return [{"argv": _sh(code), "stdout": "stdout", "stderr": "stderr"}]
    assert run_block(block_file(slots, stacks, steps), workdir=str(tmp_path)) == 1
    record = json.loads((tmp_path / "launches.json").read_text())["launches"]
    assert [r["rc"] for r in record] == [0, 3, 0, 0]
    assert (tmp_path / slots[1].dir / "stderr").read_text() == "boom\n"
    # a value no setup step captured: the launch does not start and says why
    doc = block_file(slots[:1], {"A": {"env": {}}}, lambda s: [{"argv": _sh("pass") + ["{NOPE}"], "stderr": "stderr"}])
    (tmp_path / "b").mkdir()
    assert run_block(doc, workdir=str(tmp_path / "b")) == 1
    assert "NOPE was not set" in (tmp_path / "b" / slots[0].dir / "stderr").read_text()


def test_bad_block_files_exit_2_in_one_line(tmp_path, capsys):
    path = tmp_path / "block.json"
    path.write_text("{not json")
    assert main([str(path)]) == 2
    assert capsys.readouterr().err.startswith(f"stackproof launch: {path}: ")
    with pytest.raises(LaunchFileError):
        run_block({"stacks": {}, "launches": [{"stack": "X", "dir": "d", "steps": []}], "record": "r.json"},
                  workdir=str(tmp_path))
    assert main([]) == 2
    assert Slot("A", 0, 0, 0).dir == "launch-00-A"
