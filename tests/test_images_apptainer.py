"""The laptop image as a SIF with a real Apptainer (issue 14 item 6): images/laptop/sif.sh builds (or
reuses, keyed on its inputs) build/images/stackproof-laptop.sif from stackproof-laptop.def and runs the
image smoke inside it. Bad input to our Apptainer scripts is checked always; the real build and smoke
need apptainer (PATH or STACKPROOF_APPTAINER; images/laptop/build-apptainer.sh builds v1.4.5), root and
the laptop OCI archive (make images-laptop), and skip with the reason otherwise."""
import os
import re
import shutil
import subprocess

import pytest

from stackproof.paths import REPO

LAPTOP = REPO / "images" / "laptop"
SIF_SH = LAPTOP / "sif.sh"
BUILD_APPTAINER = LAPTOP / "build-apptainer.sh"
OUT = REPO / "build" / "images"
SUMMARY = re.compile(r"^smoke summary: (\d+) passed, (\d+) failed, (\d+) skipped$", re.M)


def _run(*args, env=None, timeout=60):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


def _one_line_error(proc, prefix, needle):
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), proc.stderr
    assert needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_sif_script_rejects_an_unknown_action():
    _one_line_error(_run(SIF_SH, "bogus"), "stackproof-laptop-sif: error:", "usage: sif.sh")


def test_sif_script_rejects_a_missing_apptainer(tmp_path):
    proc = _run(SIF_SH, "--out", tmp_path, "build", env={"STACKPROOF_APPTAINER": str(tmp_path / "none")})
    _one_line_error(proc, "stackproof-laptop-sif: error:", "is not executable")
    assert not list(tmp_path.iterdir())        # nothing built


@pytest.mark.parametrize("args, needle", [
    ((), "usage: build-apptainer.sh SRC_DIR PREFIX"),
    (("/nonexistent-src", "/tmp/x"), "no such directory"),
    (("{tmp}", "/tmp/x"), "not an Apptainer source tree"),
    (("{src}", "/tmp/x"), "want v1.4.5"),
    (("{src}", str(REPO / "build" / "apptainer")), "inside this repository"),
])
def test_build_apptainer_script_bad_input(tmp_path, args, needle):
    src = tmp_path / "src"
    src.mkdir()
    (src / "mconfig").write_text("#!/bin/sh\nexit 1\n")
    (src / "mconfig").chmod(0o755)
    (src / "VERSION").write_text("1.5.3\n")
    args = [a.format(tmp=tmp_path, src=src) for a in args]
    _one_line_error(_run(BUILD_APPTAINER, *args), "build-apptainer: error:", needle)


def _apptainer() -> str:
    path = os.environ.get("STACKPROOF_APPTAINER") or shutil.which("apptainer")
    if not path:
        pytest.skip("no apptainer on PATH and STACKPROOF_APPTAINER unset (CI has none; "
                    "images/laptop/build-apptainer.sh SRC PREFIX builds v1.4.5 from its source)")
    if os.geteuid() != 0:
        pytest.skip("apptainer build from an OCI archive needs root")
    if not (OUT / "stackproof-laptop.oci.tar").is_file():
        pytest.skip(f"{OUT / 'stackproof-laptop.oci.tar'} not built (make images-laptop)")
    return path


def test_laptop_sif_builds_and_passes_the_smoke_inside():
    apptainer = _apptainer()
    env = {"STACKPROOF_APPTAINER": apptainer}
    proc = _run(SIF_SH, "--out", OUT, "smoke", env=env, timeout=1200)
    print(proc.stdout[-4000:], proc.stderr[-2000:])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # two smokes ran (apptainer exec, and the def's %test through apptainer test), every check passed
    summaries = SUMMARY.findall(proc.stdout)
    assert len(summaries) == 2, proc.stdout[-3000:]
    for passed, failed, _ in summaries:
        assert int(passed) >= 5 and int(failed) == 0
    assert proc.stdout.count("PASS mpi-hello-2-ranks") == 2
    sif = OUT / "stackproof-laptop.sif"
    # ...inside this SIF: it carries our def's %test, and the image's own manifest (not the host's files)
    inspect = _run(apptainer, "inspect", "--test", sif)
    assert inspect.returncode == 0 and "stackproof-laptop smoke" in inspect.stdout, inspect.stderr
    inside = _run(apptainer, "exec", sif, "cat", "/usr/share/stackproof/manifest.txt")
    assert inside.returncode == 0, inside.stderr
    built = (OUT / "stackproof-laptop.manifest.txt").read_text()
    assert inside.stdout.strip() and built.startswith(inside.stdout), "SIF is not the laptop image just built"
    # unchanged inputs: the SIF is reused, not rebuilt
    again = _run(SIF_SH, "--out", OUT, "build", env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "reusing" in again.stdout and "built" not in again.stdout
