"""Hostile input to `stackproof report` (issue 28 items 2 and 5): a `<script>` in a stack name, test
name, failure reason or a job's stderr shows as text and never runs; a run report of the wrong shape
is refused in one line (no traceback)."""
import json
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
