"""Report figures (issue 33, item 4): report.html embeds a figure only when it is a regular PNG file
of ours below the report directory, reached without following a symlink. A `hunt/<p>/timeline.png`
that is a symlink to a 0600 file, sits in a symlinked directory, is a hard link, or belongs to another
user is left out with a note; its bytes never reach the page."""
import base64
import json
import os
import subprocess

import pytest

from stackproof.report import Section, build, load_run
from stackproof.report.render import PNG_SIGNATURE, read_figure

SECRET = PNG_SIGNATURE + b"SECRET-0600-CONTENT" * 10


def _run(tmp_path):
    tcs = [{"name": f"Bench %repeat_index={i}", "unique_name": f"B_{i}", "system": "s", "partition": "p",
            "environ": "good", "stack": "good", "result": "pass",
            "perfvalues": {"s:p:lat_8B": [1.0 + i / 10, 0, None, None, "us"]}, "perf_better": {"lat_*": "lower"}}
           for i in range(3)]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"session_info": {"uuid": "u"}, "runs": [{"testcases": tcs}]}))
    return load_run(str(path))


def _report(tmp_path, place):
    """Build a report whose extra section shows <report>/hunt/p/timeline.png, placed by `place`."""
    out = tmp_path / "report"
    hunt = out / "hunt" / "p"
    hunt.mkdir(parents=True)
    secret = tmp_path / "secret.png"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    place(hunt / "timeline.png", secret, tmp_path)
    sec = Section("Who stole the time", figures=[("Detours by culprit", hunt / "timeline.png")])
    build(_run(tmp_path), out, "t", extra_sections=[lambda ctx: sec])
    return (out / "report.html").read_text(), (out / "report.md").read_text()


def _symlink(dest, secret, tmp_path):
    dest.symlink_to(secret)


def _symlinked_dir(dest, secret, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "timeline.png").write_bytes(SECRET)
    dest.parent.rmdir()
    dest.parent.symlink_to(elsewhere)


def _hardlink(dest, secret, tmp_path):
    os.link(secret, dest)


def _other_owner(dest, secret, tmp_path):
    dest.write_bytes(SECRET)
    subprocess.run(["chown", "nobody", str(dest)], check=True)


def _fifo(dest, secret, tmp_path):
    os.mkfifo(dest)


@pytest.mark.parametrize("place, why", [
    (_symlink, "hunt/p/timeline.png is a symbolic link"), (_symlinked_dir, "hunt/p is a symbolic link"),
    (_hardlink, "a hard link"),
    (_other_owner, "owned by uid"), (_fifo, "not a regular file"),
])
def test_a_figure_that_is_not_our_own_file_is_not_embedded(tmp_path, place, why):
    if place is _other_owner and os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    html, md = _report(tmp_path, place)
    assert base64.b64encode(SECRET).decode()[:40] not in html and "SECRET" not in html
    assert "Figure not embedded: Detours by culprit (timeline.png:" in html and why in html
    assert "timeline.png)" not in md.replace("(timeline.png:", "")        # no link to it either


def test_our_own_figure_is_embedded(tmp_path):
    def own(dest, secret, tmp_path):
        dest.write_bytes(PNG_SIGNATURE + b"our plot")
    html, _md = _report(tmp_path, own)
    assert "data:image/png;base64," + base64.b64encode(PNG_SIGNATURE + b"our plot").decode() in html
    assert "Figure not embedded" not in html


def test_read_figure_refuses_paths_outside_the_report_and_non_png(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "x.png").write_bytes(PNG_SIGNATURE)
    with pytest.raises(ValueError, match="not inside the report directory"):
        read_figure(tmp_path / "r", tmp_path / "x.png")
    (tmp_path / "r" / "t.png").write_text("<svg onload=alert(1)>")
    with pytest.raises(ValueError, match="not a PNG image"):
        read_figure(tmp_path / "r", tmp_path / "r" / "t.png")
