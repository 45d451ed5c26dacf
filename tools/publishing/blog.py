"""Blog posts and a browsable site from the executed course notebooks: the command.

``python -m tools.publishing.blog --notebooks build/notebooks --posts build/blog/_posts
--site build/site [--theme minima] [--repo-url URL]`` writes

* one Jekyll post per notebook, ``<posts>/YYYY-MM-DD-<slug>.md``, dated when the notebook
  ran (papermill's or the kernel's timestamps, else its ``blog.date``), never after the
  build; front matter for the theme (``site.THEMES``, docs/posts.md); figures in
  ``<posts>/../assets/images/<slug>/`` linked relatively (the permalink is one level deep,
  so the same relative link works on disk and in the built blog, whatever its ``baseurl``);
* beside ``<posts>``, what makes the folder a Jekyll site as it is: ``_config.yml``,
  ``index.md`` (every post in course order) and, for minima, ``assets/main.scss`` (the
  theme's stylesheet with code wrapped and tables fitted to its 740 px column);
* a self-contained static site: ``<site>/index.html`` and one page per notebook (figures
  embedded, CSS inlined, no script or font from a CDN, so it works offline).

By concern: ``clean`` (outputs a reader should see), ``local_paths`` (paths rewritten, and a
render that still shows one fails, naming the file and the line), ``alt_text`` (figures'
alt text), ``series`` (``series.yml``: each post's opening and its prose linked), ``site``
(the exporters, their templates in ``templates/``, the Jekyll site's files). Layout is the
theme's and the templates' CSS: code and printed output wrap (``white-space: pre-wrap``),
tables are set small with labels that break, so that they fit the column.

Posts are made only from clean runs: a notebook that was not executed, holds an error
output, has a top-level ``plt.show()`` without a figure (executed with ``MPLBACKEND=Agg``),
or lacks ``blog`` metadata stops the render before anything is written, with a message
naming the notebook and the cell. A table that pandas cut when the notebook ran is named in
a warning: set ``pd.set_option("display.max_colwidth", None)`` in the notebook.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbconvert.filters import strip_ansi
from nbformat.v4 import new_markdown_cell

from nailseg_common.core.errors import DataError
from nailseg_common.core.files import FULL_BELOW, disk_full, free_bytes, write_whole
from tools.publishing.alt_text import NUMBERED_TITLE_RE, plotters
from tools.publishing.clean import clean_outputs
from tools.publishing.export import ExportError, notebook_title
from tools.publishing.local_paths import (
    find_local_paths,
    machine_replacements,
    replace_local_paths,
    run_roots,
)
from tools.publishing.series import load_series, prepare
from tools.publishing.site import THEMES, render_post, render_site, site_files

SHOW_RE = re.compile(r"^plt\.show\(\)", re.MULTILINE)  # top level, not in a def
DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
HEADING_RE = re.compile(r"^#{1,6}\s+(.+)$", re.MULTILINE)


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


def slugify(name: str) -> str:
    """``01_data_preparation`` -> ``01-data-preparation``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


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
                    f"{output.ename}: {strip_ansi(output.evalue)}"
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
    described = plotters(c.source for c in notebook.cells if c.cell_type == "code")
    for index, cell in enumerate(notebook.cells):
        cell.source = replace_local_paths(cell.source, replacements)
        if cell.cell_type == "markdown":
            heading = (HEADING_RE.findall(cell.source) or [heading])[-1]
        elif cell.cell_type == "code":
            warnings += clean_outputs(
                cell, replacements, heading, f"{path} cell {index}", described, alts
            )
            if "injected-parameters" in cell.metadata.get("tags", []):
                cell.source = cell.source.removeprefix("# Parameters\n")
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
