"""`stackproof report`: compare stacks (or sessions) from ReFrame results, with a verdict per benchmark.

Inputs: ReFrame JSON run reports (`reframe --report-file`, or what `reframe-tests/run.py` leaves), or
sessions of the results database; `--compare` finds them in the database. Outputs, in one directory:
`report.html` (self-contained), `report.md` (figures in img/) and `report.json` (the numbers).

  rows.py      read reports/sessions once into cases; labels and sessions; rows of samples
  stats.py     medians, spread, the engine's intervals and designs re-exported, the recorded design
  calls.py     the calls as data: which metrics the verdict judges, every one's call (calls_for for the
               acceptance looks, verdict_rows for the report)
  verdict.py   the verdict in words and tables (first in the report) and the method
  membw.py     bandwidth as a fraction of the memory-copy bandwidth
  runinfo.py   what the acceptance driver recorded: provenance per stack, harness vs benchmark time
  measures.py  message-size curves (OSU, NetPIPE), system noise (Table IV, Fig. 2), other node checks
  sections.py  the section model and the other sections
  curves.py, plots.py   curve extraction and figures
  render.py + templates/  one Jinja2 template per format
  compare.py   finding the sessions for --compare in the results database
  build.py     reduce the cases once, build every section, write the files
  cli.py       the `stackproof report` command

May import: basics, noise/ (plain data it wraps into sections), stacks/. Never acceptance/ or the
CLI.
"""
from stackproof.report.build import Case, Context, Section, Table, build, load_run, load_session, noise_rows
from stackproof.report.cli import register

__all__ = ["build", "load_run", "load_session", "register", "Case", "Context", "Section", "Table", "noise_rows"]
