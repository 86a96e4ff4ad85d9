"""Write the report: one Jinja2 template per format (templates/report.html.j2, report.md.j2) over the
same sections; the HTML is self-contained (figures embedded as data URIs), the Markdown links img/.

A figure is embedded only when it is a regular PNG file below the report directory, owned by the
user writing the report, with one link, reached without following any symlink (read_figure): a
`hunt/<p>/timeline.png` pointing at someone's 0600 file is left out with a note, never base64'd
into a page that gets mailed around.
"""
from __future__ import annotations

import base64
import os
import re
import stat
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


def _md_anchor(title: str) -> str:
    """The anchor GitHub-style Markdown gives a heading: lower case, punctuation dropped, spaces as -."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def _fence(text: str) -> str:
    runs = [len(m) for m in re.findall(r"`{3,}", text)]
    return "`" * max([3] + [n + 1 for n in runs])


MAX_FIGURE_BYTES = 32 << 20
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def read_figure(root: Path, path: Path) -> bytes:
    """The bytes of figure `path`, opened below `root` one component at a time with O_NOFOLLOW; it must
    be a regular PNG file of ours with a single link. ValueError saying why not."""
    base = os.path.abspath(root)
    rel = os.path.relpath(os.path.abspath(path), base)
    parts = rel.split(os.sep)
    if rel.startswith("..") or os.path.isabs(rel) or not parts or parts == ["."]:
        raise ValueError("not inside the report directory")
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            try:
                nfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                raise ValueError(f"{part}/ is a symlink or unreadable ({exc.strerror})") from None
            os.close(fd)
            fd = nfd
        try:
            ffd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except OSError as exc:
            raise ValueError(f"a symlink or unreadable ({exc.strerror})") from None
    finally:
        os.close(fd)
    with os.fdopen(ffd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_uid != os.geteuid():
            raise ValueError(f"owned by uid {st.st_uid}, not by this user")
        if st.st_nlink != 1:
            raise ValueError(f"a hard link ({st.st_nlink} names)")
        if st.st_size > MAX_FIGURE_BYTES:
            raise ValueError(f"larger than {MAX_FIGURE_BYTES} bytes")
        data = fh.read(MAX_FIGURE_BYTES + 1)
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
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(cell_text=_text, md_cell=_md_cell, td_class=_td_class, fence=_fence,
                       data_uri=lambda path: (uris or {})[str(path)], md_anchor=_md_anchor)
    return env


def write(outdir: Path, title: str, intro: str, sections) -> None:
    uris = embeddable(Path(outdir), sections)
    for name, esc in (("report.md", False), ("report.html", True)):
        text = environment(esc, uris).get_template(f"{name}.j2").render(title=title, intro=intro, sections=sections)
        (outdir / name).write_text(re.sub(r"\n{3,}", "\n\n", text) if name.endswith(".md") else text)
