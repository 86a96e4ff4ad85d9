"""Write the report: one Jinja2 template per format (templates/report.html.j2, report.md.j2) over the
same sections; the HTML is self-contained (figures embedded as data URIs), the Markdown links img/."""
from __future__ import annotations

import base64
import re
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup


def _text(c) -> str:
    return c[0] if isinstance(c, tuple) else str(c)


def _md_cell(c) -> str:
    return _text(c).replace("|", "\\|").replace("\n", "<br>")


def _td_class(c) -> str:
    cls = c[1] if isinstance(c, tuple) and c[1] else ""
    if not cls and re.fullmatch(r"[-+]?[\d,.]+(e[-+]?\d+)?( %)?( \[.*)?( \(\d+\))?", _text(c)):
        cls = "num"
    # an attribute we write ourselves: Markup, so autoescape keeps its quotes; the class is escaped
    return Markup(' class="{}"').format(cls) if cls else ""


def _fence(text: str) -> str:
    runs = [len(m) for m in re.findall(r"`{3,}", text)]
    return "`" * max([3] + [n + 1 for n in runs])


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode()


def environment(autoescape: bool) -> Environment:
    env = Environment(loader=PackageLoader("stackproof.report", "templates"), undefined=StrictUndefined,
                      # the template is report.html.j2: select_autoescape(["html"]) would not match it
                      autoescape=select_autoescape(["html", "html.j2"]) if autoescape else False,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(cell_text=_text, md_cell=_md_cell, td_class=_td_class, fence=_fence, data_uri=_data_uri)
    return env


def write(outdir: Path, title: str, intro: str, sections) -> None:
    for name, esc in (("report.md", False), ("report.html", True)):
        text = environment(esc).get_template(f"{name}.j2").render(title=title, intro=intro, sections=sections)
        (outdir / name).write_text(re.sub(r"\n{3,}", "\n\n", text) if name.endswith(".md") else text)
