"""Alt text for figures: the output's own, the cell's, or the docstring of the function that drew it."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

NUMBERED_TITLE_RE = re.compile(r"^\d+\s*[·.:-]\s*")
ALT_COMMENT_RE = re.compile(r"^\s*#\s*alt:\s*(.+)$", re.MULTILINE)
PLOT_TITLE_RE = re.compile(r"""\b(suptitle|set_title|title)\(\s*(["'])(.+?)(?<!\\)\2""")
PLOTTER_RE = re.compile(r"\b((?:plot|show|draw)_\w+)\b")
DRAWS_RE = re.compile(r"\bplot_\w+\(|\bplt\.|\.plot\(")
ROLE_RE = re.compile(r":\w+:`~?([^`]+)`")
PACKAGE_DIR = Path(__file__).resolve().parents[2] / "nailseg_common"


def plain_text(markdown: str) -> str:
    """Markdown as one line of plain text: links as their text, no emphasis or code marks."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    return re.sub(r"\s+", " ", re.sub(r"[*_`#\[\]]", "", text)).strip()


def heading_text(heading: str) -> str:
    """A heading as plain text without its number (``01 · Data`` -> ``Data``)."""
    return plain_text(NUMBERED_TITLE_RE.sub("", heading))


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
                    draws = node.name.startswith("plot_") or bool(DRAWS_RE.search(ast.unparse(node)))
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


def plotters(cell_sources) -> dict[str, tuple[str, bool]]:
    """The package's plotting functions and those the notebook (its code cells) defines."""
    own = docstrings(cell_sources)
    return {**package_docstrings(), **{k: v for k, v in own.items() if PLOTTER_RE.fullmatch(k)}}


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
            return plain_text(str(where.get("alt") or where.get("title")))
    comment = ALT_COMMENT_RE.search(source)
    if comment:
        return plain_text(comment.group(1))
    titles = sorted(PLOT_TITLE_RE.findall(source), key=lambda t: t[0] != "suptitle")
    if titles:
        return plain_text(titles[0][2])
    described = described or {}
    called = [m for m in PLOTTER_RE.finditer(source) if m.group(1) in described]
    drawing = [m for m in called if described[m.group(1)][1]] or called
    passed = [m for m in drawing if source[m.end() : m.end() + 1] != "("]
    if drawing:
        return described[(passed or drawing)[-1].group(1)][0]
    return heading_text(heading)


def unique_alt(alt: str, heading: str, alts: set) -> str:
    """``alt``, or with the section's heading when another figure of the post has it."""
    title = heading_text(heading)
    alt = f"{alt} ({title})" if alt in alts and title not in alt else alt
    alts.add(alt)
    return alt
