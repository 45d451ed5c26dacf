"""The course as a series (``series.yml``): each post's opening, and its prose linked to the docs and the other posts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from nbformat.v4 import new_markdown_cell

if TYPE_CHECKING:
    from tools.publishing.blog import Article

SERIES_FILE = Path(__file__).with_name("series.yml")
TITLE_TAG = "blog-title"  # the post's title cell: its layout prints the title

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


def load_series(path: Path = SERIES_FILE) -> dict:
    """The course's series data (``series.yml``)."""
    return yaml.safe_load(path.read_text(encoding="utf-8"))


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
