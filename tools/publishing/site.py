"""The Jekyll site and the offline site: front matter, ``_config.yml``, the index, the theme's stylesheet, and nbconvert's exporters with our templates."""

from __future__ import annotations

import functools
import html
import os
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat
import yaml
from jinja2 import DictLoader
from nbconvert import HTMLExporter, MarkdownExporter
from nbformat.v4 import new_markdown_cell, new_notebook
from traitlets.config import Config

from tools.publishing.series import TITLE_TAG

if TYPE_CHECKING:
    from tools.publishing.blog import Article

TEMPLATES = Path(__file__).with_name("templates")
# The front matter each theme's post layout reads, beyond title, date and permalink (see
# docs/posts.md). Minima 2.5 has no table of contents, and shows Disqus comments on every
# post once the site configures ``disqus.shortname``: ``toc``/``comments`` would do nothing.
THEMES = {
    "minima": {"layout": "post", "fields": (), "gem": "minima"},
    "fastpages": {"layout": "post", "fields": ("toc", "comments"), "gem": None},
    "minimal-mistakes": {"layout": "single", "fields": ("toc", "comments"),
                         "gem": "minimal-mistakes-jekyll"},
}  # fmt: skip
# Minima's stylesheet and what the posts need on top of it: code and printed output wrapped
# at the 740 px column, tables set to fit it (templates/minima.scss).
MINIMA_SCSS = (TEMPLATES / "minima.scss").read_text(encoding="utf-8")


def _template(name: str) -> DictLoader:
    return DictLoader({name: (TEMPLATES / name).read_text(encoding="utf-8")})


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
    lists them newest first) and, for minima, the stylesheet that fits outputs to the column."""
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
        config=config, extra_loaders=[_template("post.md.j2")], template_file="post.md.j2"
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
        config=_exporter_config(), template_name="lab",
        extra_loaders=[_template("site_page.html.j2")], template_file="site_page.html.j2",
    )  # fmt: skip


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
