"""A noise hunt's proposal as a profile the test cluster can load: `cluster up --profile-file`
(profiles.yaml schema), checked before anything is torn down (issue 15, --apply)."""
import argparse

import pytest

from stackproof.cluster.cli import settings_from_args
from stackproof.cluster.state import Settings
from stackproof.errors import StackproofError
from stackproof.nodes.nodetype import load
from stackproof.nodes.profiles import catalog_with, plan, profile_names, read_profile_file

PROPOSAL = """\
# Proposed by `stackproof noise hunt`
profiles:
  hunt-clean:
    description: clean plus fwq-noise
    free: true
    reserve: true
    daemons: [slurm, munge, snmpd, monitoring, cron, systemd, time, irqbalance, hunt-fwq-noise]
    irqs: [36]
daemons:
  hunt-fwq-noise: {units: [], processes: [fwq-noise]}
"""


def _args(**kw):
    base = dict(profile=None, profile_file=None, k=None, nodes=None, fake_gpus=None, ports=None, mpibind="off",
                mpibind_args=None, noise_daemon=None)
    return argparse.Namespace(**{**base, **kw})


@pytest.fixture
def pfile(tmp_path):
    p = tmp_path / "profiles.yaml"
    p.write_text(PROPOSAL)
    return p


def test_profile_file_adds_a_profile_and_its_daemon_groups(pfile):
    assert "hunt-clean" in profile_names(pfile) and "hunt-clean" not in profile_names()
    nt = load("pascal")
    pl = plan(nt, "hunt-clean", profile_file=pfile)
    assert pl.reserve and pl.cpu_spec_list == plan(nt, "clean").cpu_spec_list
    assert pl.daemons["hunt-fwq-noise"]["processes"] == ["fwq-noise"] and pl.irqs == [36]
    with pytest.raises(StackproofError, match="unknown profile 'hunt-clean'"):
        plan(nt, "hunt-clean")


def test_cluster_up_takes_the_files_only_profile_and_keeps_it(pfile):
    s = settings_from_args(_args(profile_file=str(pfile)))
    assert (s.profile, s.profile_file) == ("hunt-clean", str(pfile))
    inherited = settings_from_args(_args(nodes=2), s.key())
    assert (inherited.profile, inherited.profile_file) == ("hunt-clean", str(pfile))
    back = settings_from_args(_args(profile="clean"), s.key())      # a catalog profile drops the file
    assert (back.profile, back.profile_file) == ("clean", "")
    assert Settings(**{k: v for k, v in s.key().items() if k != "profile_file"}).profile_file == ""  # old state


@pytest.mark.parametrize("text, msg", [
    ("profiles: {}\n", "at least one profile"),
    ("profiles:\n  x: {free: true, bogus: 1}\n", "unknown key"),
    ("profiles:\n  x: {free: true, daemons: [nope]}\n", "unknown daemon group"),
    ("profiles:\n  x: {free: true, irqs: [a]}\n", "irqs a list of IRQ numbers"),
    ("profiles:\n  clean: {free: false}\n", "redefine the catalog"),
    ("profiles:\n  x: {free: true}\ndaemons:\n  g: {units: nope}\n", "daemon group 'g'"),
    ("profiles: [\n", "invalid YAML"),
])
def test_bad_profile_files_are_one_line_errors(tmp_path, text, msg):
    p = tmp_path / "p.yaml"
    p.write_text(text)
    with pytest.raises(StackproofError, match=msg):
        catalog_with(p)


def test_cli_bad_profile_file_fails_before_anything_is_stopped(tmp_path, capsys):
    from stackproof.cli import main
    p = tmp_path / "two.yaml"
    p.write_text("profiles:\n  a: {free: true}\n  b: {free: true}\n")
    assert main(["cluster", "--run-dir", str(tmp_path / "run"), "up", "--profile-file", str(p)]) == 2   # bad input
    assert "choose one with --profile" in capsys.readouterr().err
    assert main(["cluster", "--run-dir", str(tmp_path / "run"), "up", "--profile-file", str(tmp_path / "none")]) == 1
    assert "profile file not found" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_read_profile_file_of_a_hunt_proposal(pfile):
    doc = read_profile_file(pfile)
    assert list(doc["profiles"]) == ["hunt-clean"] and "hunt-fwq-noise" in doc["daemons"]
