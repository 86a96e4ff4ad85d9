"""Hostile input to `stackproof report` (issue 28 items 2 and 5, issue 42): a `<script>` in a stack name,
test name, failure reason or a job's stderr shows as text and never runs, in report.html and as
escaped text (never raw HTML) in report.md; a run report of the wrong shape is refused in one line (no
traceback); the job output a failed case shows is read only from a relative name below its stage
directory, never through a link, only a regular file, only its tail (a root-only file named by an
absolute job_stdout or linked from the stage directory used to appear in report.html)."""
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from conftest import stackproof_cli
from stackproof.report import build, load_run

PAYLOAD = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"


def _hostile_run(tmp_path):
    stage = tmp_path / "stage"
    stage.mkdir()
    (stage / "rfm_job.err").write_text(f"mpirun: {PAYLOAD}\n")
    tcs = []
    for stack in ("good", f"evil{PAYLOAD}"):
        for i in range(3):
            tcs.append({"name": f"Bench{PAYLOAD} %repeat_index={i}", "unique_name": f"B_{stack}_{i}",
                        "system": "s", "partition": "p", "environ": stack, "stack": stack, "result": "pass",
                        "perfvalues": {"s:p:lat_8B": [1.0 + i / 10, 0, None, None, f"us{PAYLOAD}"]},
                        "perf_better": {"lat_*": "lower"}})
    tcs.append({"name": "Failing", "unique_name": "F", "system": "s", "partition": "p", "environ": "good",
                "stack": "good", "result": "fail", "fail_phase": "sanity", "fail_reason": f"bad {PAYLOAD}",
                "stagedir": str(stage), "job_stderr": "rfm_job.err"})
    tcs.append({"name": "Skipped", "unique_name": "S", "system": "s", "partition": "p", "environ": "good",
                "stack": "good", "result": "skip", "skip_reason": f"why {PAYLOAD}"})
    p = tmp_path / "hostile.json"
    p.write_text(json.dumps({"session_info": {"uuid": f"u{PAYLOAD}"}, "runs": [{"testcases": tcs}]}))
    return p


class _Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.attrs = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [k for k, _ in attrs]


def test_hostile_names_are_escaped_in_the_html_report(tmp_path):
    build(load_run(str(_hostile_run(tmp_path))), tmp_path / "r", f"title{PAYLOAD}")
    html = (tmp_path / "r" / "report.html").read_text()
    parsed = _Elements()
    parsed.feed(html)
    assert "script" not in parsed.tags and "onerror" not in parsed.attrs
    assert "&lt;script&gt;" in html
    # our own attributes survive autoescape: the verdict cells keep their colour class
    assert '<td class="nm">' in html or '<td class="worse">' in html or '<td class="num">' in html
    # every place the payload came from shows it as text: stack, test name, reason, stderr, title
    for where in ("evil&lt;script&gt;", "Bench&lt;script&gt;", "bad &lt;script&gt;", "mpirun: &lt;script&gt;",
                  "why &lt;script&gt;", "title&lt;script&gt;"):
        assert where in html, where


def test_hostile_text_is_never_raw_html_in_report_md(tmp_path):
    build(load_run(str(_hostile_run(tmp_path))), tmp_path / "r", f"title{PAYLOAD}")
    md = (tmp_path / "r" / "report.md").read_text()
    outside_fences = "".join(md.split("```")[::2])       # job output is fenced: text there is not HTML
    assert "<img" not in outside_fences and "<script" not in outside_fences
    assert "bad &lt;script&gt;" in md and "&lt;img src=x onerror=" in md        # the reason, escaped
    assert "mpirun: <script>" in md.split("```text\n", 1)[1]     # the stderr, verbatim inside its fence
    assert "](" not in "".join(outside_fences.split("](#"))     # no link but our own anchors


def test_markdown_links_from_third_parties_are_not_links(tmp_path):
    from stackproof.report.render import environment
    from stackproof.report.sections import Section, Table
    sec = Section("s", text=["see ![x](https://tracker.example/p.png)"],
                  tables=[Table(["a"], [["[click](javascript:alert(1))"]])])
    md = environment(False).get_template("report.md.j2").render(title="t", intro="i", sections=[sec])
    assert "](https://tracker" not in md and "](javascript" not in md and "]\\(javascript" in md


SECRET = "ROOT-ONLY-SECRET"


def _failed_case(tmp_path, stagedir, job_stderr="rfm_job.err", job_stdout="rfm_job.out"):
    tc = {"name": "Failing", "unique_name": "F", "system": "s", "partition": "p", "environ": "good",
          "stack": "good", "result": "fail", "fail_phase": "sanity", "fail_reason": "bad",
          "stagedir": str(stagedir), "job_stderr": job_stderr, "job_stdout": job_stdout}
    good = [{"name": f"Bench %repeat_index={i}", "unique_name": f"B_{i}", "system": "s", "partition": "p",
             "environ": "good", "stack": "good", "result": "pass",
             "perfvalues": {"s:p:lat_8B": [1.0 + i / 10, 0, None, None, "us"]}, "perf_better": {"lat_*": "lower"}}
            for i in range(3)]
    p = tmp_path / "run.json"
    p.write_text(json.dumps({"session_info": {"uuid": "u"}, "runs": [{"testcases": good + [tc]}]}))
    return p


def _stage_attack(tmp_path, attack):
    """A stage directory as a job (or a VM on the share) leaves it, and a root-only secret beside it."""
    secret = tmp_path / "secret"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o600)
    stage = tmp_path / "stage"
    stage.mkdir()
    kw = {}
    if attack == "absolute-job-stdout":
        kw = {"job_stdout": str(secret)}
    elif attack == "stderr-link":
        (stage / "rfm_job.err").symlink_to(secret)
    elif attack == "stderr-dotdot":
        kw = {"job_stderr": "../secret"}
    elif attack == "link-in-stage-dir":
        (stage / "sub").symlink_to(tmp_path)
        kw = {"job_stderr": "sub/secret"}
    elif attack == "stage-dir-is-a-link":
        (tmp_path / "real").mkdir()
        (tmp_path / "real" / "rfm_job.err").symlink_to(secret)
        stage.rmdir()
        stage.symlink_to(tmp_path / "real")
    elif attack == "fifo":
        os.mkfifo(stage / "rfm_job.err")
    return _failed_case(tmp_path, stage, **kw)


@pytest.mark.parametrize("attack, why", [
    ("absolute-job-stdout", "not a plain relative name"),
    ("stderr-link", "rfm_job.err is a symbolic link"),
    ("stderr-dotdot", "not a plain relative name"),
    ("link-in-stage-dir", "sub is a symbolic link"),
    ("stage-dir-is-a-link", "stage is a symbolic link"),
    ("fifo", "not a regular file (a FIFO)"),
])
def test_job_output_is_read_only_below_the_stage_directory(tmp_path, attack, why):
    run = _stage_attack(tmp_path, attack)
    build(load_run(str(run)), tmp_path / "r", "t")
    html = (tmp_path / "r" / "report.html").read_text()
    md = (tmp_path / "r" / "report.md").read_text()
    assert SECRET not in html and SECRET not in md
    assert "not shown: " in md and why in md, md[md.find("## Failed"):]


def test_job_output_shows_only_its_tail(tmp_path):
    """150 lines of 20 kB (3 MB): the stderr view keeps the last 200 lines, but only of the last MiB."""
    stage = tmp_path / "stage"
    stage.mkdir()
    with open(stage / "rfm_job.err", "wb") as out:
        out.write(b"FIRST-LINE " + b"x" * 20_000 + b"\n")
        out.write((b"y" * 20_000 + b"\n") * 150)
        out.write(b"LAST-LINE\n")
    build(load_run(str(_failed_case(tmp_path, stage))), tmp_path / "r", "t")
    md = (tmp_path / "r" / "report.md").read_text()
    assert "LAST-LINE" in md and "FIRST-LINE" not in md


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine (apt-get install chromium)")
def test_no_script_runs_in_a_browser(tmp_path):
    """Headless Chromium loads the report: the document title is the report's (a script that ran would
    have set it to 'pwned'), and the payload shows literally in the page text."""
    build(load_run(str(_hostile_run(tmp_path))), tmp_path / "r", "hostile")
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=3000",
                           "--dump-dom", (tmp_path / "r" / "report.html").as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert "<title>hostile</title>" in dom and "pwned</title>" not in dom
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom


@pytest.mark.parametrize("doc,message", [
    ({"runs": "abc"}, "runs is str, not a list"),
    ({"runs": [1]}, "runs[0] is not an object with a testcases list"),
    ({"runs": [{"testcases": [{"name": 3}]}]}, "runs[0].testcases[0].name is not a string"),
    ({"runs": [{"testcases": [{"name": "x", "perfvalues": {"a": [float("nan"), 0, 0, 0, "us"]}}]}]},
     "value nan is not a finite number"),
    ({"runs": [{"testcases": [{"name": "x", "perfvalues": {"a": "1"}}]}]}, "is not [value, ref, lower"),
    ({"runs": [{"testcases": [{"name": "x", "perf_better": {"a": "up"}}]}]}, "perf_better must map"),
    ({"runs": [], "stackproof": []}, "stackproof is not an object"),
    ({"runs": [{"testcases": [{"name": "x", "perfvalues": {"a": [1.0, 0, 0, 0, "us"]}}]}],
      "stackproof": {"design": {"looks": [-1], "alpha": 0.05, "margin": 0.05}}}, "design: looks must be"),
    ([], "not a ReFrame run report (no 'runs')"),
])
def test_a_report_of_the_wrong_shape_is_refused_in_one_line(tmp_path, doc, message):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    proc = stackproof_cli("report", "build", "--run", str(bad), "-o",
                           str(tmp_path / "out"))
    assert proc.returncode != 0 and proc.returncode != 70, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert str(bad) in proc.stderr and message in proc.stderr, proc.stderr
