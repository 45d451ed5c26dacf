"""Blog posts and a browsable site from the executed course notebooks.

``python -m tools.publishing.blog --notebooks build/notebooks --posts build/blog/_posts
--site build/site [--theme minima] [--repo-url URL]`` writes

* one Jekyll post per notebook, ``<posts>/YYYY-MM-DD-<slug>.md``, dated when the notebook
  ran (papermill's or the kernel's timestamps, else its ``blog.date``), never after the
  build; front matter ``layout``, ``title`` (the first heading, numbered "01 · ..."),
  ``description``, ``author``, ``date``, ``categories``, ``image`` (the first figure),
  ``permalink``, and ``toc``/``comments`` only for a theme that reads them (``THEMES``,
  docs/posts.md); figures in ``<posts>/../assets/images/<slug>/``
  linked relatively (the permalink is one level deep, so the same relative link works on
  disk and in the built blog, whatever its ``baseurl``);
* beside ``<posts>``, what makes the folder a Jekyll site as it is: ``_config.yml`` (the
  theme, its plugins, the course's title), ``index.md`` (every post in course order, not
  newest first) and, for minima, ``assets/main.scss`` (the theme's stylesheet, code blocks
  wrapped to the column instead of scrolling sideways);
* a self-contained static site: ``<site>/index.html`` (every notebook with its date,
  description and categories) and one page per notebook (figures embedded, CSS inlined, no
  script or font from a CDN, so it works offline).

``series.yml`` ties the course's numbering to the original series: every post opens with
the part it remakes (or says it is new) and the whole mapping; its prose links the docs in
``links`` at their first mention and every "notebook 0N" to that post (a relative link that
works in Jekyll and in the site).

Both are rendered by nbconvert's exporters (Markdown, and HTML with its ``lab`` template),
each with a small template of ours, from a cleaned copy of each notebook: ANSI codes
removed; streams merged and carriage-return progress collapsed to its last state
(``CoalesceStreamsPreprocessor``); Python warnings dropped from stderr, which then reads
as plain output; matplotlib reprs dropped; ``<style>`` blocks removed from HTML outputs;
tables made readable (no NaN, ranges as "972–1050") and split into column groups to fit a
740 px column, printed tables likewise and long printed lines wrapped; tables over 20 rows
and logs over 40 lines shortened to head and tail; figures given alt text (``figure_alt``);
papermill's injected parameters labelled. Local paths are rewritten
from where each notebook ran: the repository root found in its outputs and papermill paths
becomes relative, home folders ``~``, site-packages ``<site-packages>``, ``/tmp`` ``<tmp>``
(``--replace`` adds more); a render that still shows an absolute local path fails, naming
the file and the line. Cells tagged ``remove-cell``, ``remove-input`` or ``remove-output``
lose that part.

Posts are made only from clean runs: a notebook that was not executed, holds an error
output, has a top-level ``plt.show()`` without a figure (executed with ``MPLBACKEND=Agg``),
or lacks ``blog`` metadata stops the render before anything is written, with a message
naming the notebook and the cell. A table that pandas cut when the notebook ran is named in
a warning: set ``pd.set_option("display.max_colwidth", None)`` in the notebook.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import functools
import html
import os
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import yaml
from jinja2 import DictLoader
from nbconvert import HTMLExporter, MarkdownExporter
from nbconvert.preprocessors import CoalesceStreamsPreprocessor
from nbformat.v4 import new_markdown_cell, new_notebook
from traitlets.config import Config

from nailseg_common.core.errors import DataError
from nailseg_common.core.files import FULL_BELOW, disk_full, free_bytes, write_whole
from nailseg_common.setup import paths
from tools.publishing.export import ExportError, notebook_title

SERIES_FILE = Path(__file__).with_name("series.yml")
ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
# ``warnings.formatwarning``: "<file>:<line>: <Category>: <message>", then the source
# line indented; logging's default format: "WARNING:<logger>:<message>".
WARNING_HEADER_RE = re.compile(r"^\S.*?:\d+: \w*Warning: |^WARNING:")
MATPLOTLIB_REPR_RE = re.compile(r"\[?<matplotlib\.[^\n]*>\]?|Text\([^\n]*\)")
SHOW_RE = re.compile(r"^plt\.show\(\)", re.MULTILINE)  # top level, not in a def
DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
NUMBERED_TITLE_RE = re.compile(r"^\d+\s*[·.:-]\s*")
COALESCE = CoalesceStreamsPreprocessor()
TITLE_TAG = "blog-title"  # the post's title cell: its layout prints the title
TEXT_MIME_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex")

# Paths no reader should see: a post or page holding one fails the render.
_AFTER = r"(?![\w.-])"
LOCAL_PATH_RE = re.compile(
    r"(?<![\w.~:/-])(?:/root|/home/[\w.-]+|/Users/[\w.-]+|/work|/workspace|/tmp|/mnt"
    r"|/scratch|/private|/var/folders)" + _AFTER
)
# A repository the notebook ran in shows as the parent of one of the course's folders.
RUN_ROOT_RE = re.compile(
    r"(?<![\w.~:/-])((?:/[\w.+@-]+)+?)/(?:data|runs|notebooks|results|build|nailseg_common)/"
)
GENERIC_PATHS = (  # after the known prefixes: what any machine's paths become
    (re.compile(r"(?<![\w.~:/-])(?:/[^\s/'\"<>()]+)+/(?:site|dist)-packages" + _AFTER),
     "<site-packages>"),
    (re.compile(r"(?<![\w.~:/-])(?:/root|/home/[\w.-]+|/Users/[\w.-]+)" + _AFTER), "~"),
    (re.compile(r"(?<![\w.~:/-])(?:/private)?/tmp" + _AFTER), "<tmp>"),
)  # fmt: skip

# A progress bar that never moved ("Training: |    | 0/? [00:00<?, ?it/s]") says nothing.
IDLE_PROGRESS_RE = re.compile(r"^.*\| *0/(?:\d+|\?) \[00:00<.*\n?", re.MULTILINE)
STYLE_RE = re.compile(r"<style\b.*?</style>\s*", re.DOTALL | re.IGNORECASE)
TBODY_RE = re.compile(r"(<tbody>\s*)(.*?)(</tbody>)", re.DOTALL)
ROW_RE = re.compile(r"<tr\b.*?</tr>\s*", re.DOTALL)
CUT_CELL_RE = re.compile(r"<t[dh][^>]*>[^<]*(?:\.\.\.|…)</t[dh]>")
TABLE_ROWS, TABLE_HEAD, TABLE_TAIL = 20, 10, 5
LOG_LINES, LOG_HEAD, LOG_TAIL = 40, 20, 10
PLOT_TITLE_RE = re.compile(r"""\b(suptitle|set_title|title)\(\s*(["'])(.+?)(?<!\\)\2""")
HEADING_RE = re.compile(r"^#{1,6}\s+(.+)$", re.MULTILINE)

# Markdown a link must not go into: code, math, links, tags, headings, bare URLs.
PROSE_SKIP = (
    r"```.*?```|~~~.*?~~~|\$\$.*?\$\$|\$[^$\n]+\$|!?\[[^\]]*\]\([^)]*\)|<[^>\n]*>"
    r"|^[ \t]*#[^\n]*$|https?://[^\s)>]+"
)
_NUMBER = r"\d\d\b(?:\s\([^()\n]*\))?"  # "03" or "03 (Kornia)"
_BETWEEN = r"(?:,\s*|\s+(?:and|or|to)\s+|\s*[-–]\s*)"  # "02, 03", "02 and 03", "02-04"
NOTEBOOK_REF = rf"\b[Nn]otebooks?\s+{_NUMBER}(?:{_BETWEEN}{_NUMBER})*"
ORIGINAL_REF = r"\boriginal (?:series|posts?)\b"
PART_OF_RE = re.compile(r"\b[Pp]art\s+[IVX]+\]?(?:\([^)]*\))?\s+of\s+(?:the\s+|its\s+)?$")

PAGE_TEMPLATE = """\
{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block extra_css -%}
<style type="text/css">
nav.site-nav { display: flex; gap: 1.5em; padding: 0.8em 0; margin-bottom: 1em;
  border-bottom: 1px solid var(--jp-border-color2); font-family: var(--jp-ui-font-family); }
nav.site-nav a { color: var(--jp-brand-color1); text-decoration: none; }
</style>
{%- endblock extra_css -%}
{%- block body_header -%}
{{ super() }}
{%- if resources.site_nav %}
<nav class="site-nav">{% for href, text in resources.site_nav %}
<a href="{{ href }}">{{ text | escape_html }}</a>{% endfor %}</nav>
{%- endif %}
{%- endblock body_header -%}
{% block data_png scoped %}
<div class="jp-RenderedImage jp-OutputArea-output">
<img src="data:image/png;base64,{{ output.data['image/png'] | escape_html }}"
 alt="{{ output.metadata.get('alt', '') | escape_html }}">
</div>
{% endblock data_png %}
{% block data_jpg scoped %}
<div class="jp-RenderedImage jp-OutputArea-output">
<img src="data:image/jpeg;base64,{{ output.data['image/jpeg'] | escape_html }}"
 alt="{{ output.metadata.get('alt', '') | escape_html }}">
</div>
{% endblock data_jpg %}
"""

POST_TEMPLATE = """\
{%- extends 'index.md.j2' -%}
{% block data_png %}
![{{ output.metadata.alt }}]({{ output.metadata.filenames['image/png'] | path2url }})
{% endblock data_png %}
{% block data_jpg %}
![{{ output.metadata.alt }}]({{ output.metadata.filenames['image/jpeg'] | path2url }})
{% endblock data_jpg %}
"""


class BlogError(Exception):
    """A notebook cannot be published; the message names it and the fix."""


@dataclass
class Article:
    """One notebook, checked and cleaned, ready to render."""

    source: Path
    slug: str
    number: int | None
    meta: dict
    notebook: nbformat.NotebookNode
    roots: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def post_name(self) -> str:
        return f"{self.meta['date']:%Y-%m-%d}-{self.slug}.md"

    @property
    def page_name(self) -> str:
        return f"{self.slug}.html"


def load_series(path: Path = SERIES_FILE) -> dict:
    """The course's series data (``series.yml``)."""
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def slugify(name: str) -> str:
    """``01_data_preparation`` -> ``01-data-preparation``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


# -- dates -------------------------------------------------------------------------------


def run_time(notebook: nbformat.NotebookNode) -> dt.datetime | None:
    """When the notebook started running (UTC, to the second): papermill's start, else the
    first cell's."""
    stamps = [notebook.metadata.get("papermill", {}).get("start_time")]
    for cell in notebook.cells:
        stamps.append(cell.metadata.get("papermill", {}).get("start_time"))
        stamps.append(cell.metadata.get("execution", {}).get("iopub.execute_input"))
    for stamp in stamps:
        if isinstance(stamp, str):
            try:
                ran = dt.datetime.fromisoformat(stamp)
                ran = ran if ran.tzinfo else ran.replace(tzinfo=dt.UTC)
                return ran.astimezone(dt.UTC).replace(microsecond=0)
            except ValueError:
                continue
    return None


# -- local paths -------------------------------------------------------------------------


def machine_replacements(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This checkout's folders, as a reader should see them, and ``--replace``'s."""
    repo = str(paths.REPO_ROOT)
    found: dict[str, str] = {}
    for name, where in (("<data-dir>", paths.data_dir()), ("<runs-dir>", paths.runs_dir())):
        if not str(where).startswith(repo + os.sep):
            found[str(where)] = name
    if os.environ.get("NAILSEG_DATA_ROOT"):
        found[str(Path(os.environ["NAILSEG_DATA_ROOT"]).expanduser().resolve())] = "<data-root>"
    found[repo] = ""
    found.update(extra or {})
    return found


def run_roots(notebook: nbformat.NotebookNode) -> dict[str, str]:
    """Where the notebook ran, read from the notebook: the repository folders that its
    papermill paths and its outputs name (``<root>/data/...``), each shown as relative."""
    texts = [
        str(v) for k, v in notebook.metadata.get("papermill", {}).items() if k.endswith("_path")
    ]
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text", ""))
            texts += [output.get("data", {}).get(mime, "") for mime in TEXT_MIME_TYPES]
    roots = {}
    for text in texts:
        for match in RUN_ROOT_RE.finditer(text if isinstance(text, str) else ""):
            if LOCAL_PATH_RE.match(match.group(1)):
                roots[match.group(1)] = ""
    return roots


def _prefix_pattern(prefix: str) -> re.Pattern:
    # A prefix only counts as a whole path component: "/root" matches "/root/x", not "/rootfs".
    return re.compile(r"(?<![\w.~:/-])" + re.escape(prefix) + r"(?![\w.-])(/?)")


def replace_local_paths(text: str, replacements: dict[str, str], markup: bool = False) -> str:
    """Rewrite the known prefixes (longest first), then any home, site-packages or /tmp;
    ``markup``: ``text`` is HTML, so ``<tmp>`` is written ``&lt;tmp&gt;``."""
    show = html.escape if markup else str
    for prefix, new in sorted(replacements.items(), key=lambda item: -len(item[0])):
        if new:
            shown = show(new)
            text = _prefix_pattern(prefix).sub(lambda m, shown=shown: shown + m.group(1), text)
        else:
            text = _prefix_pattern(prefix).sub(lambda m: "" if m.group(1) else ".", text)
    for pattern, new in GENERIC_PATHS:
        text = pattern.sub(show(new), text)
    return text


def find_local_paths(text: str, prefixes=()) -> list[tuple[int, str]]:
    """(line number, path) of every absolute local path left in ``text``."""
    text = re.sub(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+", "data:", text)
    patterns = [LOCAL_PATH_RE] + [_prefix_pattern(p) for p in prefixes if p]
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern in patterns:
            for match in pattern.finditer(line):
                rest = re.match(r"[^\s'\"<>)\]]*", line[match.start() :]).group()
                found.append((number, rest))
    return sorted(set(found))


# -- outputs -----------------------------------------------------------------------------


def drop_warnings(text: str) -> str:
    """Remove Python warnings (header plus indented source lines) from stderr text."""
    kept, in_warning = [], False
    for line in text.splitlines(keepends=True):
        if WARNING_HEADER_RE.match(line):
            in_warning = True
        elif in_warning and line[:1] in (" ", "\t"):
            continue
        else:
            in_warning = False
            kept.append(line)
    return "".join(kept)


def shorten_log(text: str) -> str:
    """A log over ``LOG_LINES`` lines as its head and tail, saying how much is left out."""
    lines = text.splitlines(keepends=True)
    if len(lines) <= LOG_LINES:
        return text
    omitted = len(lines) - LOG_HEAD - LOG_TAIL
    return "".join(lines[:LOG_HEAD] + [f"… {omitted} lines omitted …\n"] + lines[-LOG_TAIL:])


def shorten_table(table: str) -> str:
    """An HTML table over ``TABLE_ROWS`` body rows as its head and tail rows, whole cells."""

    def body(match: re.Match) -> str:
        rows = ROW_RE.findall(match.group(2))
        if len(rows) <= TABLE_ROWS:
            return match.group(0)
        columns = len(re.findall(r"<t[dh]\b", rows[0]))
        omitted = len(rows) - TABLE_HEAD - TABLE_TAIL
        gap = f'<tr><td colspan="{columns}">… {omitted} rows omitted …</td></tr>\n'
        return (
            match.group(1)
            + "".join(rows[:TABLE_HEAD] + [gap] + rows[-TABLE_TAIL:])
            + match.group(3)
        )

    return TBODY_RE.sub(body, table)


# -- tables and text for a column of 740 px ----------------------------------------------

# Minima's column: 740 px; 16 px text in tables, 15 px monospace in code blocks.
COLUMN_PX = 740
TABLE_CHAR_PX, TABLE_CELL_PX = 9, 32  # a character of a 16 px sans font; a cell's padding
TEXT_COLUMNS = 78  # monospace characters of a code block that fit the column
TABLE_RE = re.compile(r"<table\b[^>]*>.*?</table>", re.DOTALL)
SECTION_RE = re.compile(r"<(thead|tbody)>(.*?)</\1>", re.DOTALL)
ROW_PARTS_RE = re.compile(r"(<tr\b[^>]*>)(.*?)</tr>", re.DOTALL)
CELL_RE = re.compile(r"<(t[dh])\b([^>]*)>(.*?)</\1>", re.DOTALL)
_NUM = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
NUMBER_RE = re.compile(_NUM)
RANGE_RE = re.compile(rf"({_NUM})\s*[-–]\s*({_NUM})")
MISSING = {"nan", "<na>", "nat", "none", "null"}
WHOLE_FLOAT_RE = re.compile(r"-?\d+\.0")
WORD_FLOAT_RE = re.compile(r"(?<![\d.])(\d+)\.0(?![\d.])")  # "batch 32.0" -> "batch 32"


def readable_number(text: str) -> str:
    """``1.05e+03`` -> ``1050``; other numbers as they are."""
    if "e" not in text.lower():
        return text
    value = float(text)
    if value == 0:
        return "0"
    if abs(value) >= 100 and abs(value) < 1e7:
        return f"{round(value):d}"
    return f"{value:.3g}" if abs(value) >= 1e-3 else text


def readable_cell(text: str) -> str:
    """A cell as a reader wants it: no NaN or <NA>, ``972-1.05e+03`` as ``972–1050``, and
    whole numbers inside words (``batch 32.0``) as integers."""
    text = text.strip()
    if text.lower() in MISSING:
        return ""
    if NUMBER_RE.fullmatch(text):
        return readable_number(text)
    match = RANGE_RE.fullmatch(text)
    if match and not text.startswith("-"):
        return f"{readable_number(match.group(1))}–{readable_number(match.group(2))}"
    return WORD_FLOAT_RE.sub(r"\1", text)


def _readable_columns(rows: list[list[str]], first: int) -> list[list[str]]:
    """``readable_cell`` on the cells from column ``first``; a column of whole floats only
    (``32.0``, ``3.0``) becomes integers."""
    rows = [row[:first] + [readable_cell(c) for c in row[first:]] for row in rows]
    for column in range(first, max((len(r) for r in rows), default=0)):
        values = [r[column] for r in rows if column < len(r) and r[column]]
        if values and all(WHOLE_FLOAT_RE.fullmatch(v) for v in values):
            for row in rows:
                if column < len(row) and row[column]:
                    row[column] = row[column][:-2]
    return rows


def _cell_px(text: str) -> int:
    """About how wide a cell must be: its longest word, or up to 16 characters of it."""
    plain = html.unescape(re.sub(r"<[^>]+>", "", text)).strip()
    longest = max((len(word) for word in plain.split()), default=0)
    return max(longest, min(len(plain), 16)) * TABLE_CHAR_PX + TABLE_CELL_PX


def _column_groups(widths: list[int], keep: int, budget: int) -> list[list[int]]:
    """Columns after the first ``keep`` (the index, repeated) in groups that fit ``budget``."""
    base = sum(widths[:keep])
    groups: list[list[int]] = [[]]
    used = base
    for column in range(keep, len(widths)):
        if groups[-1] and used + widths[column] > budget:
            groups.append([])
            used = base
        groups[-1].append(column)
        used += widths[column]
    return groups


def readable_table(table: str, budget: int = COLUMN_PX) -> str:
    """A pandas HTML table for reading in a column: cells readable, rows and columns with no
    value dropped, and over ``budget`` px split into tables of column groups, each repeating the
    index."""
    sections = {name: [] for name in ("thead", "tbody")}
    for name, body in SECTION_RE.findall(table):
        for opening, cells in ROW_PARTS_RE.findall(body):
            sections[name].append((opening, CELL_RE.findall(cells)))
    rows = sections["thead"] + sections["tbody"]
    if not sections["tbody"]:
        return table
    if any(re.search(r"\b(?:col|row)span", a) for _, r in rows for _, a, _ in r):
        wide = max(sum(_cell_px(c) for _, _, c in cells) for _, cells in rows) > budget
        return f'<div class="compact-table">\n{table}\n</div>' if wide else table
    width = len(rows[0][1])
    if any(len(cells) != width for _, cells in rows):
        return table
    keep = next((i for i, (tag, _, _) in enumerate(sections["tbody"][0][1]) if tag == "td"), 1)
    texts = [[html.unescape(c) if "<" not in c else c for _, _, c in cells] for _, cells in rows]
    heads = len(sections["thead"])
    body = _readable_columns(texts[heads:], keep)
    texts = texts[:heads] + body
    kept = [i for i, row in enumerate(texts) if i < heads or any(row[keep:])]
    widths = [max(_cell_px(html.escape(row[c])) for row in texts) for c in range(width)]
    empty = {c for c in range(keep, width) if not any(row[c] for row in body)}
    widths = [0 if c in empty else w for c, w in enumerate(widths)]
    groups = [[c for c in g if c not in empty] for g in _column_groups(widths, keep, budget)]
    groups = [g for g in groups if g] or [[]]
    opening = re.match(r"<table\b[^>]*>", table).group()
    parts = []
    for group in groups:
        columns = list(range(keep)) + group
        out = [opening, "  <thead>"]
        for i in kept:
            if i == heads:
                out += ["  </thead>", "  <tbody>"]
            row_open, cells = rows[i]
            shown = "".join(
                f"<{cells[c][0]}{cells[c][1]}>"
                f"{cells[c][2] if '<' in cells[c][2] else html.escape(texts[i][c])}"
                f"</{cells[c][0]}>" for c in columns
            )  # fmt: skip
            out.append(f"    {row_open}{shown}</tr>")
        out += ["  </tbody>", "</table>"]
        parts.append("\n".join(out))
    return "\n".join(parts)


def readable_tables(text: str) -> str:
    """``readable_table`` on every pandas table of an HTML output."""
    return TABLE_RE.sub(
        lambda m: readable_table(m.group()) if 'class="dataframe' in m.group() else m.group(),
        text,
    )


# Text tables (a printed DataFrame): columns apart by two spaces or more on most lines.
_GAPS_RE = re.compile(r"\S {2,}(?=\S)")


def _is_table_line(line: str) -> bool:
    return len(_GAPS_RE.findall(line)) >= 2


def _text_table(lines: list[str]) -> tuple[list[str], str, list[list[str]]] | None:
    """A printed DataFrame as (headers, index name, rows of cells); None if it is not one."""
    header, rest = lines[0], lines[1:]
    name = ""
    if rest and len(rest[0].split()) == 1 and rest[0][:1].strip():
        name, rest = rest[0].strip(), rest[1:]
    if len(rest) < 2:
        return None
    width = max(len(line) for line in lines)
    padded = [line.ljust(width) for line in rest]
    filled = [any(line[p] != " " for line in padded) for p in range(width)]
    spans, start = [], None
    for p, full in enumerate(filled + [False]):
        if full and start is None:
            start = p
        elif not full and start is not None:
            spans.append([start, p])
            start = None
    first_head = len(header) - len(header.lstrip())
    index = [s for s in spans if s[0] < first_head]
    columns = [s for s in spans if s[0] >= first_head]
    if not index or not columns:
        return None
    spans = [[0, index[-1][1]]]
    for span in columns:  # a header is right-aligned over its column: none means one column
        spans.append(span)
        if not header[spans[-2][1] : span[1]].strip() and len(spans) > 2:
            spans[-2:] = [[spans[-2][0], span[1]]]
    if header[spans[-1][1] :].strip():
        return None
    heads = [header[(0 if k == 0 else spans[k - 1][1]) : e].strip() for k, (_, e) in
             enumerate(spans)]  # fmt: skip
    heads[0] = ""
    rows = [[line.ljust(width)[s:e].strip() for s, e in spans] for line in rest]
    return heads, name, rows


def _layout_text_table(heads: list[str], name: str, rows: list[list[str]]) -> list[str]:
    rows = _readable_columns(rows, 1)
    widths = [max(len(x) for x in [heads[c], name if c == 0 else ""] + [r[c] for r in rows])
              for c in range(len(heads))]  # fmt: skip
    groups = _column_groups([w + 2 for w in widths], 1, TEXT_COLUMNS)
    out = []
    for group in groups:
        if out:
            out.append("")
        line = [name.ljust(widths[0])] + [heads[c].rjust(widths[c]) for c in group]
        out.append("  ".join(line).rstrip())
        for row in rows:
            out.append("  ".join([row[0].ljust(widths[0])] + [row[c].rjust(widths[c])
                                                               for c in group]).rstrip())
    return out


def readable_text(text: str, columns: int = TEXT_COLUMNS) -> str:
    """Printed output for a column of ``columns`` characters: a printed DataFrame wider than
    that in column groups (cells readable, the index repeated), other long lines wrapped
    with an indent."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and (
            _is_table_line(lines[j]) or (j == i + 1 and len(lines[j].split()) == 1)
        ):
            j += 1
        block = [line.rstrip() for line in lines[i:j]]
        if j - i >= 3 and (
            max(len(line) for line in block) > columns
            or any(cell.lower() in MISSING for line in block for cell in line.split())
        ):
            table = _text_table(block)
            if table:
                out += _layout_text_table(*table)
                i = j
                continue
        if j > i:  # a table left as it is: wrapping would scramble it
            out += lines[i:j]
            i = j
            continue
        out += _wrap(lines[i], columns)
        i += 1
    return "\n".join(out)


def _wrap(line: str, columns: int) -> list[str]:
    if len(line) <= columns:
        return [line]
    lead = line[: len(line) - len(line.lstrip())]
    return textwrap.wrap(line, columns, initial_indent="", subsequent_indent=lead + "  ",
                         break_long_words=False, break_on_hyphens=False,
                         drop_whitespace=True) or [line]  # fmt: skip


def _plain_text(markdown: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    return re.sub(r"\s+", " ", re.sub(r"[*_`#\[\]]", "", text)).strip()


ALT_COMMENT_RE = re.compile(r"^\s*#\s*alt:\s*(.+)$", re.MULTILINE)
PLOTTER_RE = re.compile(r"\b((?:plot|show|draw)_\w+)\b")
ROLE_RE = re.compile(r":\w+:`~?([^`]+)`")
PACKAGE_DIR = Path(__file__).resolve().parents[2] / "nailseg_common"


def docstrings(sources) -> dict[str, tuple[str, bool]]:
    """``{function name: (its docstring's first sentence, whether it draws)}`` of the
    functions ``sources`` (Python texts) define; a function draws when its name starts with
    ``plot_`` or it calls one. A text that does not parse (a notebook's magics) is skipped."""
    found = {}
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    draws = node.name.startswith("plot_") or bool(
                        re.search(r"\bplot_\w+\(|\bplt\.|\.plot\(", ast.unparse(node))
                    )
                    found[node.name] = (first_sentence(doc), draws)
    return found


def first_sentence(doc: str) -> str:
    """A docstring's first sentence, as plain text."""
    paragraph = re.sub(r"\s+", " ", doc.strip().split("\n\n")[0])
    paragraph = ROLE_RE.sub(r"\1", paragraph).replace("``", "")
    sentence = re.split(r"(?<!e\.g)(?<!i\.e)\.\s+", paragraph)[0]
    return sentence.rstrip(".;: ")


@functools.lru_cache(maxsize=1)
def package_docstrings() -> dict[str, tuple[str, bool]]:
    """The plotting functions of the course's package (wherever its modules live)."""
    sources = (path.read_text(encoding="utf-8") for path in sorted(PACKAGE_DIR.rglob("*.py")))
    return {name: doc for name, doc in docstrings(sources).items() if PLOTTER_RE.fullmatch(name)}


def figure_alt(output, source: str, heading: str,
               described: dict[str, tuple[str, bool]] | None = None) -> str:
    """Alt text that says what the figure shows: the output's own ``alt``/``title``, else a
    ``# alt: ...`` comment in the cell, else the cell's literal plot title (``suptitle``
    first), else the docstring of the plotting function the cell calls (one passed to
    another, like ``plot_benchmark_sets(results, plot_throughput)``, first), else the
    nearest heading before the cell."""
    meta = output.get("metadata", {})
    for where in [meta] + [meta.get(m, {}) for m in ("image/png", "image/jpeg")]:
        if isinstance(where, dict) and (where.get("alt") or where.get("title")):
            return _plain_text(str(where.get("alt") or where.get("title")))
    comment = ALT_COMMENT_RE.search(source)
    if comment:
        return _plain_text(comment.group(1))
    titles = sorted(PLOT_TITLE_RE.findall(source), key=lambda t: t[0] != "suptitle")
    if titles:
        return _plain_text(titles[0][2])
    described = described or {}
    called = [m for m in PLOTTER_RE.finditer(source) if m.group(1) in described]
    drawing = [m for m in called if described[m.group(1)][1]] or called
    passed = [m for m in drawing if source[m.end() : m.end() + 1] != "("]
    if drawing:
        return described[(passed or drawing)[-1].group(1)][0]
    return _plain_text(NUMBERED_TITLE_RE.sub("", heading))


def _clean_outputs(cell, replacements: dict[str, str], heading: str, where: str,
                   described: dict | None = None, alts: set | None = None) -> list[str]:
    """Clean one code cell's outputs in place; return warnings about them."""
    warnings, cleaned = [], []
    COALESCE.preprocess_cell(cell, {}, 0)  # consecutive streams merged, progress collapsed
    for output in cell.outputs:
        if output.output_type == "stream":
            text = IDLE_PROGRESS_RE.sub("", ANSI_RE.sub("", output.text).replace("\r", ""))
            if output.name == "stderr":
                text = drop_warnings(text)
            output.name = "stdout"  # what is left of stderr is information, not an error
            output.text = replace_local_paths(text, replacements)
            if not output.text.strip():
                continue
        elif output.output_type in ("execute_result", "display_data"):
            data = output.data
            if set(data) == {"text/plain"} and MATPLOTLIB_REPR_RE.fullmatch(data["text/plain"]):
                continue
            for mime in TEXT_MIME_TYPES:
                if mime in data:
                    text = ANSI_RE.sub("", data[mime])
                    data[mime] = replace_local_paths(text, replacements, mime == "text/html")
            if "text/html" in data:
                table = STYLE_RE.sub("", data["text/html"])
                if 'class="dataframe' in table and CUT_CELL_RE.search(table):
                    warnings.append(
                        f"{where}: pandas cut this table when the notebook ran "
                        "(display.max_colwidth or max_rows): the post shows it cut"
                    )
                data["text/html"] = shorten_table(readable_tables(table))
            if "text/plain" in data:
                data["text/plain"] = readable_text(data["text/plain"])
            if any(mime.startswith("image/") for mime in data):
                alt = figure_alt(output, cell.source, heading, described)
                if alts is not None:  # two figures alike in one post: say where each is
                    title = _plain_text(NUMBERED_TITLE_RE.sub("", heading))
                    alt = f"{alt} ({title})" if alt in alts and title not in alt else alt
                    alts.add(alt)
                output.metadata["alt"] = alt
        cleaned.append(output)
    cell.outputs = cleaned
    COALESCE.preprocess_cell(cell, {}, 0)
    for output in cell.outputs:
        if output.output_type == "stream":
            output.text = readable_text(shorten_log(output.text))
    return warnings


# -- checks ------------------------------------------------------------------------------


def _problems(notebook: nbformat.NotebookNode) -> list[str]:
    problems = []
    blog = notebook.metadata.get("blog")
    if not isinstance(blog, dict):
        problems.append('no "blog" notebook metadata: add {"description", "categories", "date"}')
    else:
        if not isinstance(blog.get("description"), str) or not blog["description"].strip():
            problems.append('blog metadata "description" must be a non-empty string')
        try:
            notebook_title(notebook)
        except ExportError:
            problems.append("no '# Title' heading in the first markdown cell")
        categories = blog.get("categories")
        if not (
            isinstance(categories, list)
            and categories
            and all(isinstance(c, str) and c for c in categories)
        ):
            problems.append('blog metadata "categories" must be a non-empty list of strings')
        date = blog.get("date")
        if not (isinstance(date, str) and DATE_RE.fullmatch(date)) and (
            date is not None or run_time(notebook) is None
        ):
            problems.append('blog metadata "date" must be a "YYYY-MM-DD" string')
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        if cell.source.strip() and cell.execution_count is None:
            problems.append(f"cell {index} was not executed: run `make course` first")
            break
        if SHOW_RE.search(cell.source) and not any(
            mime.startswith("image/") for output in cell.outputs for mime in output.get("data", {})
        ):
            problems.append(
                f"cell {index} calls plt.show() but has no figure: was it executed with a "
                "non-inline matplotlib backend (MPLBACKEND=Agg)? Unset MPLBACKEND and re-run"
            )
        for output in cell.outputs:
            if output.output_type == "error":
                problems.append(
                    f"cell {index} (In [{cell.execution_count}]) raised "
                    f"{output.ename}: {ANSI_RE.sub('', output.evalue)}"
                )
    return problems


def load_article(path: Path, replacements: dict[str, str], now: dt.datetime) -> Article:
    """Read, check and clean one executed notebook; ``BlogError`` if it cannot be published."""
    try:
        notebook = nbformat.read(path, as_version=4)
    except (OSError, ValueError, nbformat.ValidationError) as error:  # NotJSONError: cut short
        raise BlogError(f"{path} cannot be read as a notebook ({type(error).__name__}): execute "
                        "it again (make notebooks), or restore it (git checkout -- "
                        f"{path}).") from None
    problems = _problems(notebook)
    if problems:
        raise BlogError(f"{path}: " + "; ".join(problems))
    roots = run_roots(notebook)
    replacements = {**replacements, **roots}
    heading, warnings, cells, alts = notebook_title(notebook), [], [], set()
    own = docstrings(c.source for c in notebook.cells if c.cell_type == "code")
    described = {**package_docstrings(), **{k: v for k, v in own.items()
                                         if PLOTTER_RE.fullmatch(k)}}
    for index, cell in enumerate(notebook.cells):
        cell.source = replace_local_paths(cell.source, replacements)
        if cell.cell_type == "markdown":
            heading = (HEADING_RE.findall(cell.source) or [heading])[-1]
        elif cell.cell_type == "code":
            warnings += _clean_outputs(
                cell, replacements, heading, f"{path} cell {index}", described, alts
            )
            if "injected-parameters" in cell.metadata.get("tags", []):
                cell.source = re.sub(r"^# Parameters\n", "", cell.source)
                cells.append(new_markdown_cell("Parameters injected for this run:"))
        cells.append(cell)
    notebook.cells = cells
    number = re.match(r"\d+", path.stem)
    title = numbered_title(notebook_title(notebook), int(number.group()) if number else None)
    ran = run_time(notebook) or dt.datetime.fromisoformat(notebook.metadata.blog["date"]).replace(
        tzinfo=dt.UTC
    )
    meta = {**notebook.metadata.blog, "title": title, "date": min(ran, now)}
    return Article(
        source=path, slug=slugify(path.stem), number=int(number.group()) if number else None,
        meta=meta, notebook=notebook, roots=roots, warnings=warnings,
    )  # fmt: skip


def numbered_title(heading: str, number: int | None) -> str:
    """``01 · Data preparation`` from the heading ``01 · Data preparation`` or ``Data
    preparation`` of notebook 01; a notebook without a number keeps its heading."""
    if number is None:
        return heading
    return f"{number:02d} · {NUMBERED_TITLE_RE.sub('', heading)}"


# -- the series and links ----------------------------------------------------------------


def link_prose(article: Article, series: dict, pages: dict[int, str]) -> None:
    """Link the markdown cells' prose in place: each ``links`` entry and the original
    series at their first mention in the post, every "notebook NN" to that post."""
    original = series["original"]
    part = series["notebooks"].get(article.number, {}).get("part")
    terms = [(entry["pattern"], entry.get("code"), entry["url"]) for entry in series["links"]]
    terms.append(
        (ORIGINAL_REF, None, original["parts"][part]["url"] if part else original["index"])
    )
    master = re.compile(
        "|".join(
            [f"(?P<skip>{PROSE_SKIP})", r"(?P<code>`[^`\n]+`)", f"(?P<notebooks>{NOTEBOOK_REF})",
             r"(?P<part>\b[Pp]art (?P<roman>[IVX]+)\b)"]
            + [f"(?P<t{i}>{pattern})" for i, (pattern, _, _) in enumerate(terms)]
        ),
        re.DOTALL | re.MULTILINE,
    )  # fmt: skip
    linked: set = set()

    def first(key, text: str, url: str) -> str:
        if key in linked:
            return text
        linked.add(key)
        return f"[{text}]({url})"

    def notebooks(text: str) -> str:
        out, pos = [], 0
        numbers = [m for m in re.finditer(r"\([^()]*\)|\d\d", text) if m.group()[0] != "("]
        for k, number in enumerate(numbers):
            start = 0 if k == 0 else number.start()
            chunk = re.sub(r"\s+", " ", text[start : number.end()])
            page = pages.get(int(number.group())) if int(number.group()) != article.number else None
            out += [text[pos:start], f"[{chunk}]({page})" if page else chunk]
            pos = number.end()
        return "".join(out) + text[pos:]

    def link(match: re.Match) -> str:
        text = match.group()
        if match.group("skip") is not None:
            return text
        if match.group("code") is not None:
            for i, (_, code, url) in enumerate(terms):
                if code and re.search(code, text[1:-1]):
                    return first(i, text, url)
            return text
        if match.group("notebooks") is not None:
            return notebooks(text)
        if match.group("part") is not None:
            known = original["parts"].get(match.group("roman"))
            return first(match.group("roman"), text, known["url"]) if known else text
        i = next(i for i in range(len(terms)) if match.group(f"t{i}") is not None)
        if i == len(terms) - 1 and PART_OF_RE.search(match.string[: match.start()]):
            # "part V of the original series": the part has its link, the series its index
            return first("index", text, original["index"])
        return first(i, text, terms[i][2])

    for cell in article.notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = master.sub(link, cell.source)


def series_opening(article: Article, series: dict, pages: dict[int, str]) -> str:
    """The blockquote a post opens with: the part of the original series it remakes, and
    how the course's numbering maps to the original's parts."""
    original, dataset = series["original"], series["dataset"]
    index = f"[{original['name']}]({original['index']})"
    about = f"{index}, {original['author']}'s series on the [{dataset['name']}]({dataset['url']})"
    entry = series["notebooks"].get(article.number, {})
    if entry.get("part"):
        part = original["parts"][entry["part"]]
        what = f" ({entry['what']})" if entry.get("what") else ""
        link = f"[part {entry['part']}, *{part['title']}*]({part['url']})"
        first = f"This post remakes {link}{what} of {about}."
    else:
        first = f"This post is new in the course: {about}, has no part like it."
    remade, new = [], []
    for number, item in sorted(series["notebooks"].items()):
        name = f"{number:02d}"
        if number in pages and number != article.number:
            name = f"[{name}]({pages[number]})"
        if item.get("part"):
            url = original["parts"][item["part"]]["url"]
            remade.append(f"{name} {item['label']} remakes [part {item['part']}]({url})")
        else:
            new.append(f"{name} {item['label']}")
    new_text = ", ".join(new[:-1]) + f" and {new[-1]}" if len(new) > 1 else "".join(new)
    mapping = "; ".join(remade) + (f"; {new_text} are new." if new else ".")
    opening = f"> {first}\n>\n> The course's notebooks: {mapping}"
    repository = series.get("repository")
    where = (f"[the course's repository]({repository})" if repository
             else "the course's repository (this edition was published without its address)")
    return (
        f"{opening}\n>\n> The code, the notebooks and the commands this post runs (`make ...`, "
        f"`python -m nailseg_common...`) are in {where}; run them from its root."
    )


def prepare(article: Article, series: dict, pages: dict[int, str]) -> None:
    """Link the prose, then put the title without its number (a cell tagged ``TITLE_TAG``: a
    post leaves it to its layout) and the series opening first."""
    link_prose(article, series, pages)
    cells = article.notebook.cells
    at = next(i for i, c in enumerate(cells) if c.cell_type == "markdown"
              and c.source.startswith("# "))  # fmt: skip
    rest = cells[at].source.partition("\n")[2].lstrip("\n")
    cells[at].source = f"{series_opening(article, series, pages)}\n\n{rest}".rstrip() + "\n"
    title = f"# {article.meta['title']}"
    cells.insert(at, new_markdown_cell(title, id=TITLE_TAG, metadata={"tags": [TITLE_TAG]}))


# -- rendering ---------------------------------------------------------------------------


# The front matter each theme's post layout reads, beyond title, date and permalink (see
# docs/posts.md). Minima 2.5 has no table of contents, and shows Disqus comments on every
# post once the site configures ``disqus.shortname``: ``toc``/``comments`` would do nothing.
THEMES = {
    "minima": {"layout": "post", "fields": (), "gem": "minima"},
    "fastpages": {"layout": "post", "fields": ("toc", "comments"), "gem": None},
    "minimal-mistakes": {"layout": "single", "fields": ("toc", "comments"),
                         "gem": "minimal-mistakes-jekyll"},
}
# Minima's stylesheet (its own ``assets/main.scss``) and what the posts need on top: code and
# output blocks wrap at the 740 px column instead of scrolling sideways (tables are split
# into column groups that fit it by ``readable_table``, or, with grouped headers, set smaller).
MINIMA_SCSS = """\
---
# Written by tools.publishing.blog: minima's stylesheet, and code that fits the column.
---
@import "minima";

.post-content pre,
.post-content pre code {
  white-space: pre-wrap;
  overflow-wrap: anywhere;
}

// A table with grouped headers, too wide for the column and not split by readable_table.
.post-content .compact-table table {
  font-size: 12px;
}
.post-content .compact-table th,
.post-content .compact-table td {
  padding: 4px 6px;
}
"""


def front_matter(article: Article, series: dict, theme: dict, image: str | None) -> str:
    """The post's YAML front matter, between ``---`` lines: the fields ``theme`` reads."""
    meta = article.meta
    data = {
        "layout": theme["layout"],
        "title": meta["title"],
        "description": meta["description"],
        "author": series["author"],
        "date": f"{meta['date']:%Y-%m-%d %H:%M:%S} +0000",
        "categories": list(meta["categories"]),
        "image": image,
        "toc": True,
        "comments": bool(series.get("comments", True)),
        "permalink": f"/posts/{article.slug}.html",
    }
    for name in ("toc", "comments"):
        if name not in theme["fields"]:
            del data[name]
    if image is None:
        del data["image"]
    dumped = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{dumped}---\n"


def site_files(articles: list[Article], series: dict, theme: str, title: str) -> dict[str, str]:
    """What makes the folder holding ``_posts`` a Jekyll site, ``{path in it: text}``: its
    ``_config.yml``, an ``index.md`` listing the posts in course order (minima's home layout
    lists them newest first) and, for minima, the stylesheet with code wrapped."""
    config = {
        "title": title,
        "description": f"{len(articles)} notebooks of the course, executed and rendered.",
        "author": series["author"],
        "markdown": "kramdown",
        "plugins": ["jekyll-feed", "jekyll-seo-tag"],
    }
    if THEMES[theme]["gem"]:
        config["theme"] = THEMES[theme]["gem"]
    config_text = (
        "# Written by `make blog` (tools.publishing.blog): rendered again on every run.\n"
        "# Served below a path (https://host/course/)? Add `baseurl: /course`.\n"
        + yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=1000)
    )
    items = []
    for a in articles:
        url = "{{ '/posts/" + a.slug + ".html' | relative_url }}"
        items.append(
            f'  <li>\n    <span class="post-meta">{a.meta["date"]:%b %-d, %Y}</span>\n'
            f'    <h3><a class="post-link" href="{url}">{html.escape(a.meta["title"])}</a></h3>\n'
            f"    <p>{html.escape(a.meta['description'])}</p>\n  </li>"
        )
    index = (
        "---\nlayout: default\n---\n"
        f'<div class="home">\n<h1 class="page-heading">{html.escape(title)}</h1>\n'
        f'<h2 class="post-list-heading">The notebooks, in course order</h2>\n'
        f'<ul class="post-list">\n' + "\n".join(items) + "\n</ul>\n</div>\n"
    )
    files = {"_config.yml": config_text, "index.md": index}
    if theme == "minima":
        files["assets/main.scss"] = MINIMA_SCSS
    return files


def _exporter_config(extra_tags: tuple[str, ...] = ()) -> Config:
    config = Config()
    config.TagRemovePreprocessor.enabled = True
    config.TagRemovePreprocessor.remove_cell_tags = ("remove-cell",) + extra_tags
    config.TagRemovePreprocessor.remove_input_tags = ("remove-input",)
    config.TagRemovePreprocessor.remove_all_outputs_tags = ("remove-output",)
    return config


def render_post(
    article: Article, series: dict, posts_dir: Path, assets_dir: Path, theme: dict
) -> tuple[Path, str, dict[Path, bytes]]:
    """The post's path, its text and its figures (path: bytes)."""
    config = _exporter_config((TITLE_TAG,))
    config.ExtractOutputPreprocessor.enabled = True
    exporter = MarkdownExporter(
        config=config,
        extra_loaders=[DictLoader({"post.md.j2": POST_TEMPLATE})],
        template_file="post.md.j2",
    )
    figures_dir = assets_dir / article.slug
    link_base = Path(os.path.relpath(figures_dir, posts_dir)).as_posix()
    body, resources = exporter.from_notebook_node(
        article.notebook,
        resources={"output_files_dir": link_base, "unique_key": article.slug},
    )
    figures = {figures_dir / Path(name).name: data for name, data in resources["outputs"].items()}
    image = None
    site_root = posts_dir.parent
    if figures and next(iter(figures)).is_relative_to(site_root):
        image = "/" + next(iter(figures)).relative_to(site_root).as_posix()
    body = body.strip() + "\n"
    if "{{" in body or "{%" in body:  # keep Liquid away from code and outputs
        body = "{% raw %}\n" + body + "{% endraw %}\n"
    text = front_matter(article, series, theme, image) + "\n" + body
    return posts_dir / article.post_name, text, figures


@functools.cache
def _page_exporter() -> HTMLExporter:
    return HTMLExporter(
        config=_exporter_config(),
        template_name="lab",
        extra_loaders=[DictLoader({"site_page.html.j2": PAGE_TEMPLATE})],
        template_file="site_page.html.j2",
    )


def render_page(notebook: nbformat.NotebookNode, title: str, nav=()) -> str:
    """A self-contained HTML page of ``notebook``; ``nav``: (href, text) of its links."""
    resources = {"metadata": {"name": title}, "site_nav": list(nav)}
    return _page_exporter().from_notebook_node(notebook, resources=resources)[0]


def render_site(articles: list[Article], title: str) -> dict[str, str]:
    """The offline site, ``{file name: HTML}``: an index listing every notebook with its date,
    description and categories, and one page per notebook linking the previous and next."""
    items = "\n".join(
        f"1. [{a.meta['title']}]({a.page_name}): {a.meta['description']}  \n"
        f"   *{a.meta['date']:%Y-%m-%d}* · {', '.join(a.meta['categories'])}"
        for a in articles
    )
    index = f"# {title}\n\n{len(articles)} notebooks, executed and rendered.\n\n{items}\n"
    site = {"index.html": render_page(new_notebook(cells=[new_markdown_cell(index)]), title)}
    for i, article in enumerate(articles):
        nav = [("index.html", "← All notebooks")]
        nav += [(a.page_name, f"Previous: {a.meta['title']}") for a in articles[:i][-1:]]
        nav += [(a.page_name, f"Next: {a.meta['title']}") for a in articles[i + 1 :][:1]]
        site[article.page_name] = render_page(article.notebook, article.meta["title"], nav)
    return site


def render(
    notebooks_dir: Path,
    posts_dir: Path,
    site_dir: Path,
    assets_dir: Path | None = None,
    title: str = "Fast input pipelines for nail segmentation",
    extra_replacements: dict[str, str] | None = None,
    layout: str | None = None,
    today: dt.date | None = None,
    theme: str = "minima",
    repo_url: str | None = None,
) -> tuple[list[Path], list[Path]]:
    """Render every ``*.ipynb`` in ``notebooks_dir``; return (posts, site pages).

    Everything is checked before anything is written: one ``BlogError`` lists every
    notebook that cannot be published, or every local path a post or page would show.
    """
    notebooks_dir, posts_dir, site_dir = Path(notebooks_dir), Path(posts_dir), Path(site_dir)
    assets_dir = Path(assets_dir) if assets_dir else posts_dir.parent / "assets" / "images"
    # Posts dated after the build are left out by Jekyll: none is dated after now (or
    # ``today``'s start, when given).
    now = (dt.datetime.combine(today, dt.time(), dt.UTC) if today
           else dt.datetime.now(dt.UTC).replace(microsecond=0))  # fmt: skip
    sources = sorted(notebooks_dir.glob("*.ipynb"))
    if not sources:
        raise BlogError(f"no notebooks in {notebooks_dir}: run `make course` first")
    replacements = machine_replacements(extra_replacements)
    series = load_series()
    if repo_url is not None:
        series["repository"] = repo_url
    if theme not in THEMES:
        raise BlogError(f"unknown theme {theme!r}: one of {', '.join(THEMES)}")
    chosen = {**THEMES[theme], **({"layout": layout} if layout else {})}
    articles, errors = [], []
    for source in sources:
        try:
            articles.append(load_article(source, replacements, now))
        except BlogError as error:
            errors.append(str(error))
    if errors:
        raise BlogError("cannot publish:\n  " + "\n  ".join(errors))
    pages = {a.number: a.page_name for a in articles if a.number is not None}
    for article in articles:
        prepare(article, series, pages)

    texts = {site_dir / name: page for name, page in render_site(articles, title).items()}
    jekyll = {posts_dir.parent / name: text
              for name, text in site_files(articles, series, theme, title).items()}
    texts.update(jekyll)
    figures: dict[Path, bytes] = {}
    posts = []
    for article in articles:
        post, text, post_figures = render_post(article, series, posts_dir, assets_dir, chosen)
        texts[post], posts = text, posts + [post]
        figures.update(post_figures)
    prefixes = set(replacements) | {root for a in articles for root in a.roots}
    leaks = [f"{path}:{line}: {found}" for path, text in texts.items()
             for line, found in find_local_paths(text, prefixes)]  # fmt: skip
    if leaks:
        raise BlogError(
            "a local path is left (rewrite it with --replace PREFIX=TEXT):\n  " + "\n  ".join(leaks)
        )

    outputs = {path: data.encode() if isinstance(data, str) else data
               for path, data in list(texts.items()) + list(figures.items())}
    write_outputs(outputs, [posts_dir, assets_dir, site_dir],
                  [stale for article in articles
                   for stale in [*posts_dir.glob(f"????-??-??-{article.slug}.md"),
                                 *(assets_dir / article.slug).glob("*")]])
    for warning in (w for a in articles for w in a.warnings):
        print(f"warning: {warning}", file=sys.stderr)
    if not series.get("repository"):
        print("warning: no repository to link from the posts: pass --repo-url (make blog "
              "BLOG_REPO_URL=...) or set series.yml's repository", file=sys.stderr)
    return posts, [p for p in texts if p not in posts and p not in jekyll]


def write_outputs(outputs: dict[Path, bytes], folders: list[Path], stale: list[Path]) -> None:
    """Write ``outputs`` once their folders' disks have room for all of them, then delete the
    ``stale`` files they replace (an older run's posts and figures under other names). Each
    file is written under a temporary name and renamed into place, so none is ever half
    written; BlogError naming the folder when a disk is full or a file cannot be written."""
    needed = sum(len(data) for data in outputs.values()) + FULL_BELOW
    for folder in folders:
        if free_bytes(folder) < needed:
            raise BlogError(f"cannot write the posts: {disk_full(folder)}, and they need about "
                            f"{needed} bytes: free some space, or pass other --posts, --site "
                            "or --assets folders; nothing was written")
    for path, data in outputs.items():
        try:
            write_whole(path, lambda buffer, data=data: buffer.write(data),
                        ("free some space and render again", "pass folders you can write"))
        except DataError as error:
            raise BlogError(str(error)) from None
    for path in stale:
        if path not in outputs:
            path.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebooks", type=Path, default=Path("build/notebooks"))
    parser.add_argument("--posts", type=Path, default=Path("build/blog/_posts"))
    parser.add_argument("--site", type=Path, default=Path("build/site"))
    parser.add_argument("--assets", type=Path, help="default: <posts>/../assets/images")
    parser.add_argument(
        "--theme", default="minima", choices=sorted(THEMES),
        help="the Jekyll theme the posts are for: their layout and the front matter it reads",
    )  # fmt: skip
    parser.add_argument("--layout", help="another layout than the theme's post layout")
    parser.add_argument(
        "--repo-url", help="the course's repository, linked from every post (default: "
        "series.yml's repository)",
    )  # fmt: skip
    parser.add_argument(
        "--replace",
        action="append",
        default=[],
        metavar="PREFIX=TEXT",
        help="also show the local path PREFIX as TEXT (repeatable)",
    )
    args = parser.parse_args(argv)
    extra = dict(item.split("=", 1) for item in args.replace)
    try:
        posts, pages = render(
            args.notebooks, args.posts, args.site, args.assets, extra_replacements=extra,
            layout=args.layout, theme=args.theme, repo_url=args.repo_url or None,
        )  # fmt: skip
    except BlogError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopped (Ctrl-C): every file written is whole; run `make blog` again",
              file=sys.stderr)
        return 130
    print(f"{len(posts)} posts in {args.posts}, {len(pages)} pages in {args.site}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
