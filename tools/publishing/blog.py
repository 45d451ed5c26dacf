"""Blog posts and a browsable site from the executed course notebooks.

``python -m tools.publishing.blog --notebooks build/notebooks --posts build/blog/_posts
--site build/site`` writes

* one Jekyll post per notebook, ``<posts>/YYYY-MM-DD-<slug>.md``, front matter from the
  notebook's ``blog`` metadata, figures in ``<posts>/../assets/images/<slug>/`` linked
  relatively (the post's ``permalink`` is one level deep, so the same relative link works
  on disk, on GitHub and in the built blog, whatever its ``baseurl``);
* a self-contained static site: ``<site>/index.html`` and one page per notebook (figures
  embedded, CSS inlined, no script or font from a CDN, so it works offline).

Both are rendered with nbconvert from a cleaned copy of each notebook: ANSI colour codes
removed, carriage-return progress updates collapsed to their final state, Python warnings
dropped from stderr (other stderr, such as Lightning's info lines, is kept), matplotlib
object reprs such as ``[<matplotlib.lines.Line2D at 0x...>]`` dropped, and local path
prefixes rewritten (the repository root becomes a relative path, the home folder ``~``,
site-packages ``<site-packages>``; ``--replace`` adds more). Cells tagged ``remove-cell``,
``remove-input`` or ``remove-output`` lose that part.

Posts are made only from clean runs. A notebook that was not executed, holds an error
output, has a top-level ``plt.show()`` without a figure (executed with ``MPLBACKEND=Agg``),
or lacks complete ``blog`` metadata stops the render before anything is written, with a
message naming the notebook and the cell.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import html
import os
import re
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml
from jinja2 import DictLoader
from nbconvert import HTMLExporter, MarkdownExporter
from traitlets.config import Config

from nailseg_common import paths
from tools.publishing.export import ExportError, notebook_title

ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
# ``warnings.formatwarning``: "<file>:<line>: <Category>: <message>", then the source
# line indented; logging's default format: "WARNING:<logger>:<message>".
WARNING_HEADER_RE = re.compile(r"^\S.*?:\d+: \w*Warning: |^WARNING:")
MATPLOTLIB_REPR_RE = re.compile(r"\[?<matplotlib\.[^\n]*>\]?|Text\([^\n]*\)")
SHOW_RE = re.compile(r"^plt\.show\(\)", re.MULTILINE)  # top level, not in a def
DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
TEXT_MIME_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex")

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
<nav class="site-nav">{{ resources.site_nav }}</nav>
{%- endblock body_header -%}
"""

INDEX_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
  color: #1f2328; background: #fff; }
main { max-width: 52em; margin: 2.5em auto; padding: 0 1.5em; }
h1 { font-size: 1.9em; margin-bottom: 0.2em; }
p.lead { color: #57606a; margin-top: 0; }
ol { list-style: none; padding: 0; }
li { border-top: 1px solid #d0d7de; padding: 1em 0; }
li a { font-size: 1.25em; font-weight: 600; color: #0969da; text-decoration: none; }
li p { margin: 0.3em 0; }
.meta { color: #57606a; font-size: 0.9em; }
.tag { display: inline-block; background: #ddf4ff; color: #0550ae; border-radius: 1em;
  padding: 0 0.6em; margin-right: 0.3em; font-size: 0.85em; }
"""


class BlogError(Exception):
    """A notebook cannot be published; the message names it and the fix."""


@dataclass
class Article:
    """One notebook, checked and cleaned, ready to render."""

    source: Path
    slug: str
    meta: dict
    notebook: nbformat.NotebookNode

    @property
    def post_name(self) -> str:
        return f"{self.meta['date']}-{self.slug}.md"

    @property
    def page_name(self) -> str:
        return f"{self.slug}.html"


def slugify(name: str) -> str:
    """``01_data_preparation`` -> ``01-data-preparation``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def path_replacements(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Local path prefixes and what a reader sees instead; longest prefix wins.

    The repository root maps to ``""`` (paths become relative to it).
    """
    repo = str(paths.REPO_ROOT)
    found: dict[str, str] = {}
    for key in ("purelib", "platlib"):
        found[sysconfig.get_paths()[key]] = "<site-packages>"
    for name, where in (("<data-dir>", paths.data_dir()), ("<runs-dir>", paths.runs_dir())):
        if not str(where).startswith(repo + os.sep):
            found[str(where)] = name
    if os.environ.get("NAILSEG_DATA_ROOT"):
        found[str(Path(os.environ["NAILSEG_DATA_ROOT"]).expanduser().resolve())] = "<data-root>"
    found[repo] = ""
    home = str(Path.home())
    if home not in ("/", ""):
        found[home] = "~"
    found.update(extra or {})
    return dict(sorted(found.items(), key=lambda item: -len(item[0])))


def _prefix_pattern(prefix: str) -> re.Pattern:
    # A prefix only counts as a whole path component: "/root" matches "/root/x", not "/rootfs".
    return re.compile(re.escape(prefix) + r"(?![\w.-])(/?)")


def replace_local_paths(text: str, replacements: dict[str, str]) -> str:
    """Rewrite every local path prefix in ``text`` as ``replacements`` says."""
    for prefix, new in replacements.items():
        if new:
            text = _prefix_pattern(prefix).sub(lambda m, new=new: new + m.group(1), text)
        else:
            text = _prefix_pattern(prefix).sub(lambda m: "" if m.group(1) else ".", text)
    return text


def find_local_paths(text: str, replacements: dict[str, str]) -> list[str]:
    """The local path prefixes still present in ``text``."""
    return [prefix for prefix in replacements if _prefix_pattern(prefix).search(text)]


def collapse_carriage_returns(text: str) -> str:
    """Keep what a terminal would show last on each line (progress bars)."""
    lines = text.replace("\r\n", "\n").split("\n")
    return "\n".join(next((s for s in reversed(line.split("\r")) if s), "") for line in lines)


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


def _clean_outputs(outputs: list, replacements: dict[str, str]) -> list:
    merged: list = []
    for output in outputs:
        if (
            output.output_type == "stream"
            and merged
            and merged[-1].output_type == "stream"
            and merged[-1].name == output.name
        ):
            merged[-1].text += output.text
        else:
            merged.append(output)
    cleaned = []
    for output in merged:
        if output.output_type == "stream":
            text = collapse_carriage_returns(ANSI_RE.sub("", output.text))
            if output.name == "stderr":
                text = drop_warnings(text)
            output.text = replace_local_paths(text, replacements)
            if not output.text.strip():
                continue
        elif output.output_type in ("execute_result", "display_data"):
            data = output.data
            if set(data) == {"text/plain"} and MATPLOTLIB_REPR_RE.fullmatch(data["text/plain"]):
                continue
            for mime in TEXT_MIME_TYPES:
                if mime in data:
                    data[mime] = replace_local_paths(ANSI_RE.sub("", data[mime]), replacements)
        cleaned.append(output)
    return cleaned


def _problems(notebook: nbformat.NotebookNode) -> list[str]:
    problems = []
    blog = notebook.metadata.get("blog")
    if not isinstance(blog, dict):
        problems.append(
            'no "blog" notebook metadata: add {"description", "categories", "date"}'
        )
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
        if not (isinstance(blog.get("date"), str) and DATE_RE.fullmatch(blog["date"])):
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


def load_article(path: Path, replacements: dict[str, str]) -> Article:
    """Read, check and clean one executed notebook; ``BlogError`` if it cannot be published."""
    notebook = nbformat.read(path, as_version=4)
    problems = _problems(notebook)
    if problems:
        raise BlogError(f"{path}: " + "; ".join(problems))
    for cell in notebook.cells:
        cell.source = replace_local_paths(cell.source, replacements)
        if cell.cell_type == "code":
            cell.outputs = _clean_outputs(cell.outputs, replacements)
    meta = {**notebook.metadata.blog, "title": notebook_title(notebook)}
    return Article(source=path, slug=slugify(path.stem), meta=meta, notebook=notebook)


def front_matter(article: Article) -> str:
    """The post's YAML front matter, between ``---`` lines."""
    meta = article.meta
    data = {
        "layout": "post",
        "title": meta["title"],
        "description": meta["description"],
        "toc": True,
        "categories": list(meta["categories"]),
        "date": dt.date.fromisoformat(meta["date"]),
        "permalink": f"/posts/{article.slug}.html",
    }
    dumped = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{dumped}---\n"


def _without_title(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy without the leading ``# Title`` line: the blog layout prints the title."""
    notebook = copy.deepcopy(notebook)
    first = notebook.cells[0] if notebook.cells else None
    if first is not None and first.cell_type == "markdown" and first.source.startswith("# "):
        first.source = first.source.partition("\n")[2].lstrip("\n")
    return notebook


def _exporter_config() -> Config:
    config = Config()
    config.TagRemovePreprocessor.enabled = True
    config.TagRemovePreprocessor.remove_cell_tags = ("remove-cell",)
    config.TagRemovePreprocessor.remove_input_tags = ("remove-input",)
    config.TagRemovePreprocessor.remove_all_outputs_tags = ("remove-output",)
    return config


def write_post(article: Article, posts_dir: Path, assets_dir: Path) -> Path:
    """Write the Jekyll post and its figures; return the post's path."""
    config = _exporter_config()
    config.ExtractOutputPreprocessor.enabled = True
    exporter = MarkdownExporter(config=config)
    figures = assets_dir / article.slug
    link_base = Path(os.path.relpath(figures, posts_dir)).as_posix()
    body, resources = exporter.from_notebook_node(
        _without_title(article.notebook),
        resources={"output_files_dir": link_base, "unique_key": article.slug},
    )
    if figures.exists():
        shutil.rmtree(figures)
    if resources["outputs"]:
        figures.mkdir(parents=True)
    for name, data in resources["outputs"].items():
        (figures / Path(name).name).write_bytes(data)
    body = body.strip() + "\n"
    if "{{" in body or "{%" in body:  # keep Liquid away from code and outputs
        body = "{% raw %}\n" + body + "{% endraw %}\n"
    for stale in posts_dir.glob(f"????-??-??-{article.slug}.md"):
        stale.unlink()
    post = posts_dir / article.post_name
    post.write_text(front_matter(article) + "\n" + body, encoding="utf-8")
    return post


def _nav(articles: list[Article], index: int) -> str:
    links = ['<a href="index.html">&larr; All notebooks</a>']
    if index > 0:
        prev = articles[index - 1]
        links.append(f'<a href="{prev.page_name}">Previous: {html.escape(prev.meta["title"])}</a>')
    if index + 1 < len(articles):
        nxt = articles[index + 1]
        links.append(f'<a href="{nxt.page_name}">Next: {html.escape(nxt.meta["title"])}</a>')
    return " ".join(links)


def write_page(articles: list[Article], index: int, site_dir: Path) -> Path:
    """Write one notebook's self-contained HTML page."""
    article = articles[index]
    exporter = HTMLExporter(
        config=_exporter_config(),
        template_name="lab",
        extra_loaders=[DictLoader({"site_page.html.j2": PAGE_TEMPLATE})],
        template_file="site_page.html.j2",
    )
    body, _ = exporter.from_notebook_node(
        article.notebook,
        resources={"metadata": {"name": article.meta["title"]}, "site_nav": _nav(articles, index)},
    )
    page = site_dir / article.page_name
    page.write_text(body, encoding="utf-8")
    return page


def write_index(articles: list[Article], site_dir: Path, title: str) -> Path:
    """Write the site's index: every notebook with its date, description and categories."""
    items = []
    for article in articles:
        meta = article.meta
        tags = "".join(f'<span class="tag">{html.escape(c)}</span>' for c in meta["categories"])
        items.append(
            f'<li><a href="{article.page_name}">{html.escape(meta["title"])}</a>'
            f"<p>{html.escape(meta['description'])}</p>"
            f'<p class="meta">{meta["date"]} {tags}</p></li>'
        )
    page = site_dir / "index.html"
    page.write_text(
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1.0">\n'
        f"<title>{html.escape(title)}</title>\n<style>{INDEX_STYLE}</style>\n</head>\n"
        f"<body>\n<main>\n<h1>{html.escape(title)}</h1>\n"
        f'<p class="lead">{len(articles)} notebooks, executed and rendered.</p>\n'
        f"<ol>\n{chr(10).join(items)}\n</ol>\n</main>\n</body>\n</html>\n",
        encoding="utf-8",
    )
    return page


def render(
    notebooks_dir: Path,
    posts_dir: Path,
    site_dir: Path,
    assets_dir: Path | None = None,
    title: str = "Fast input pipelines for nail segmentation",
    extra_replacements: dict[str, str] | None = None,
) -> tuple[list[Path], list[Path]]:
    """Render every ``*.ipynb`` in ``notebooks_dir``; return (posts, site pages).

    All notebooks are checked before anything is written: one ``BlogError`` lists every
    notebook that cannot be published.
    """
    notebooks_dir, posts_dir, site_dir = Path(notebooks_dir), Path(posts_dir), Path(site_dir)
    assets_dir = Path(assets_dir) if assets_dir else posts_dir.parent / "assets" / "images"
    sources = sorted(notebooks_dir.glob("*.ipynb"))
    if not sources:
        raise BlogError(f"no notebooks in {notebooks_dir}: run `make course` first")
    replacements = path_replacements(extra_replacements)
    articles, errors = [], []
    for source in sources:
        try:
            articles.append(load_article(source, replacements))
        except BlogError as error:
            errors.append(str(error))
    if errors:
        raise BlogError("cannot publish:\n  " + "\n  ".join(errors))
    posts_dir.mkdir(parents=True, exist_ok=True)
    site_dir.mkdir(parents=True, exist_ok=True)
    posts = [write_post(article, posts_dir, assets_dir) for article in articles]
    pages = [write_index(articles, site_dir, title)]
    pages += [write_page(articles, i, site_dir) for i in range(len(articles))]
    for written in posts + pages:
        leaked = find_local_paths(written.read_text(encoding="utf-8"), replacements)
        if leaked:
            raise BlogError(f"{written}: an output the cleaner does not rewrite shows {leaked}")
    return posts, pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebooks", type=Path, default=Path("build/notebooks"))
    parser.add_argument("--posts", type=Path, default=Path("build/blog/_posts"))
    parser.add_argument("--site", type=Path, default=Path("build/site"))
    parser.add_argument("--assets", type=Path, help="default: <posts>/../assets/images")
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
            args.notebooks, args.posts, args.site, args.assets, extra_replacements=extra
        )
    except BlogError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"{len(posts)} posts in {args.posts}, {len(pages)} pages in {args.site}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
