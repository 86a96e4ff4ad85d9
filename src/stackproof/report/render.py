"""Write the report: one Jinja2 template per format (templates/report.html.j2, report.md.j2) over the
same sections; the HTML is self-contained (figures embedded as data URIs), the Markdown links img/.

A figure is embedded only when it is a regular PNG file below the report directory, owned by the
user writing the report, with one link, reached without following any symlink (read_figure): a
`hunt/<p>/timeline.png` pointing at someone's 0600 file is left out with a note, never base64'd
into a page that gets mailed around. The figure is opened through stackproof.files (no link below
the report directory, a regular file, capped).

Third-party text (test and stack names, failure reasons, job output, process names) reaches both
formats: the HTML through Jinja2's autoescape, the Markdown through `_md_escape` on every value the
template prints (HTML's `&`, `<`, `>` as entities, so a fail_reason `<img src=x onerror=...>` never
appears as raw HTML in a Markdown viewer, and `](` escaped so that it makes no link or image);
a job's output goes inside a code fence longer than any backtick run in it.
"""
from __future__ import annotations

import base64
import os
import re
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from stackproof import files


def _text(c) -> str:
    return c[0] if isinstance(c, tuple) else str(c)


def _md_escape(value) -> str:
    """A value as Markdown text: no raw HTML, no link or image syntax (already-escaped Markup as is)."""
    if isinstance(value, Markup):
        return value
    text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("](", "]\\(")          # [text](url) makes no link or image


def _md_cell(c) -> Markup:
    """A table cell: escaped, its pipes escaped, its line breaks as <br> (the one tag we write)."""
    return Markup(_md_escape(_text(c)).replace("|", "\\|").replace("\n", "<br>"))


def _md_block(text: str) -> Markup:
    """Markdown of our own (a section's tables and headings) holding third-party names: HTML escaped,
    the Markdown kept."""
    return Markup(str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))


def _td_class(c) -> str:
    cls = c[1] if isinstance(c, tuple) and c[1] else ""
    if not cls and re.fullmatch(r"[-+]?[\d,.]+(e[-+]?\d+)?( %)?( \[.*)?( \(\d+\))?", _text(c)):
        cls = "num"
    # an attribute we write ourselves: Markup, so autoescape keeps its quotes; the class is escaped
    return Markup(' class="{}"').format(cls) if cls else ""


def _md_anchor(title: str) -> str:
    """The anchor GitHub-style Markdown gives a heading: lower case, punctuation dropped, spaces as -."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def _fence(text: str) -> str:
    runs = [len(m) for m in re.findall(r"`{3,}", text)]
    return "`" * max([3] + [n + 1 for n in runs])


MAX_FIGURE_BYTES = files.MAX_FIGURE
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def read_figure(root: Path, path: Path) -> bytes:
    """The bytes of figure `path`, opened below `root` through stackproof.files (no symbolic link on
    the way, a regular file, at most MAX_FIGURE_BYTES); it must be a PNG file of ours with a single
    link. ValueError saying why not."""
    base = os.path.abspath(root)
    rel = os.path.relpath(os.path.abspath(path), base)
    if rel.startswith("..") or os.path.isabs(rel) or rel == ".":
        raise ValueError("not inside the report directory")
    try:
        fh, st = files.open_file(base, rel, MAX_FIGURE_BYTES, owner=os.geteuid())
    except files.UnsafePath as exc:
        raise ValueError(str(exc).removeprefix(os.path.join(base, rel) + ": ").removesuffix(": refused")) from None
    except OSError as exc:
        raise ValueError(f"unreadable ({exc.strerror})") from None
    with fh:
        if st.st_nlink != 1:
            raise ValueError(f"a hard link ({st.st_nlink} names)")
        data = fh.read(MAX_FIGURE_BYTES + 1)
    if len(data) > MAX_FIGURE_BYTES:
        raise ValueError(f"larger than {MAX_FIGURE_BYTES} bytes")
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG image")
    return data


def _data_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def embeddable(outdir: Path, sections) -> dict[str, str]:
    """Read every figure once (read_figure): {path: data URI}; a refused figure is dropped from its
    section, which gets a line saying which and why."""
    uris = {}
    for sec in sections:
        kept = []
        for cap, path in sec.figures:
            try:
                uris[str(path)] = _data_uri(read_figure(outdir, path))
                kept.append((cap, path))
            except ValueError as why:
                sec.text.append(f"Figure not embedded: {cap} ({Path(path).name}: {why}).")
        sec.figures = kept
    return uris


def environment(autoescape: bool, uris: dict[str, str] | None = None) -> Environment:
    env = Environment(loader=PackageLoader("stackproof.report", "templates"), undefined=StrictUndefined,
                      # the template is report.html.j2: select_autoescape(["html"]) would not match it
                      autoescape=select_autoescape(["html", "html.j2"]) if autoescape else False,
                      # the Markdown: every printed value escaped unless a filter made it Markup
                      finalize=None if autoescape else _md_escape,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(cell_text=_text, md_cell=_md_cell, td_class=_td_class, fence=_fence, md_block=_md_block,
                       data_uri=lambda path: (uris or {})[str(path)], md_anchor=_md_anchor)
    return env


def write(outdir: Path, title: str, intro: str, sections) -> None:
    uris = embeddable(Path(outdir), sections)
    for name, esc in (("report.md", False), ("report.html", True)):
        text = environment(esc, uris).get_template(f"{name}.j2").render(title=title, intro=intro, sections=sections)
        (outdir / name).write_text(re.sub(r"\n{3,}", "\n\n", text) if name.endswith(".md") else text)
