"""A bad data file breaks no command with a traceback (issue 33, item 6): building the argument parser
reads no data file, and what a command's registration does read is inside the CLI's error handler.
The profile catalog (slurm-conf/profiles.yaml) with a process name `$(touch x)` is refused in one line
by the commands that use it, with a non-zero exit; the others keep working."""
import pytest

from stackproof import cli
from stackproof.nodes import profiles

HOSTILE = """\
profiles:
  baseline: {description: d, daemons: [evil]}
daemons:
  evil: {units: [evil.service], processes: ['$(touch x)']}
"""


@pytest.fixture
def hostile_catalog(tmp_path, monkeypatch):
    (tmp_path / "profiles.yaml").write_text(HOSTILE)
    monkeypatch.setattr(profiles, "slurm_conf_dir", lambda: tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(argv, capsys):
    try:
        rc = cli.main(argv)
    except SystemExit as exc:
        rc = exc.code
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err
    return rc, captured.out, [line for line in captured.err.splitlines() if line.strip()]


def test_a_command_that_reads_the_catalog_says_so_in_one_line(hostile_catalog, capsys):
    rc, _out, err = run(["slurm", "render", "--nodetype", "pascal", "--profile", "baseline", "--out", "out"], capsys)
    assert rc == 2 and len(err) == 1, err
    assert "profiles.yaml" in err[0] and "$(touch x)" in err[0]
    assert not (hostile_catalog / "x").exists()


@pytest.mark.parametrize("argv", [["stack", "list"], ["slurm", "render", "--help"], ["cluster", "up", "--help"]])
def test_other_commands_and_help_do_not_read_the_catalog(hostile_catalog, capsys, argv):
    rc, out, err = run(argv, capsys)
    assert rc == 0 and not err and out


def test_a_data_file_read_while_registering_is_one_line(monkeypatch, capsys):
    """Whatever a noun's register() reads (recipes.yaml for the stack verbs' help, ...) is handled."""
    from stackproof.errors import InputError
    from stackproof.nodes import slurmconf

    def broken(sub):
        raise InputError("/site/recipes.yaml: build: expected a list")
    monkeypatch.setattr(slurmconf, "register", broken)
    rc, _out, err = run(["slurm", "render"], capsys)
    assert rc == 2 and err == ["stackproof: error: /site/recipes.yaml: build: expected a list"]
