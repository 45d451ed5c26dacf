"""Blog posts and site: rendered from small notebooks executed here, read as a reader would,
built by a real Jekyll and opened in a real browser."""

import base64
import contextlib
import datetime as dt
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
import websocket
import yaml
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from nailseg_common.core import files
from nailseg_common.setup import paths
from tools.publishing import alt_text, blog, clean, local_paths
from tools.publishing.series import load_series

TITLE = "01 · A test post: figures & paths"  # the first heading, numbered
BLOG_META = {
    "description": "Checks the renderer end to end.",
    "categories": ["testing", "jekyll"],
    "date": "2026-11-23",
}
RAN = "2026-11-20T23:30:00+00:00"  # papermill's start_time of the first notebook
SERIES = load_series()
LONG_TEXT = "a policy parameter list that pandas would cut at fifty characters, kept whole"
REPO_URL = "https://example.org/course/nailseg"
VERDICT = ("-> kornia and dali are within the noise: the lead is 0.4 standard errors, not more "
           "than two; either will do, and more photos would tell them apart")
# What pandas prints for a benchmark: ranges of floats, <NA>, NaN, whole floats, wide.
WIDE_TABLE = """import numpy as np
import pandas as pd
wide = pd.DataFrame({
    "workers": pd.array([4, 15, None], dtype="Int64"),
    "loader img/s": [294.83, 1026.64, np.nan],
    "loader min-max": ["271-307", "972-1.05e+03", "3.26e+03-3.62e+03"],
    "train img/s": [276.92, 468.25, 819.1],
    "train min-max": ["263-334", "451-511", "815-822"],
    "ratio to bound": [0.34, 0.57, 1.0],
    "GPU util %": [32.44, 59.71, 100.0],
    "CPU util %": [40.29, 39.61, 6.23],
    "batch": [32.0, 32.0, 60.0],
    "validation": [np.nan] * 3,
}, index=pd.Index(["albumentations_w4", "kornia_png_sequential", "bound (batches on device)"],
                  name="pipeline"))
wide.loc["empty"] = [pd.NA, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan]
wide"""

# pandas writes a column MultiIndex with colspans.
GROUPED_TABLE = """columns = pd.MultiIndex.from_product([[f"start number {i}" for i in range(4)],
                                      ["dice", "iou"]])
pd.DataFrame([[0.123456] * 8] * 3, columns=columns)"""

GOOD_CELLS = [
    new_markdown_cell(
        f"# {TITLE}\n\nIntro paragraph with math $x^2$. The model trains with PyTorch "
        "Lightning and\nKornia, builds an `smp.Unet`, then PyTorch Lightning again; notebook\n"
        "02 goes on, as notebooks 01 and 02 (Kornia) say, and this is notebook 01. The original "
        "series used the Lovász hinge.\n\n```python\nLightning(notebook=02)\n```"
    ),
    new_markdown_cell("## PyTorch Lightning in a heading stays plain"),
    new_code_cell('profile = ""', metadata={"tags": ["parameters"]}),
    new_code_cell('# Parameters\nprofile = "gpu"\n', metadata={"tags": ["injected-parameters"]}),
    new_code_cell(
        "import sys, warnings\n"
        "from pathlib import Path\n"
        "import matplotlib.pyplot as plt\n"
        "import pandas as pd\n"
        "from IPython.display import HTML, display\n"
        "from nailseg_common.setup import paths\n"
        'print("\\x1b[1;31mred\\x1b[0m plain")\n'
        'print("repo file:", paths.REPO_ROOT / "data" / "x.npy")'
    ),
    new_code_cell(
        'warnings.warn("a library warning a reader should not see", UserWarning)\n'
        'print("real message on stderr", file=sys.stderr)\n'
        'sys.stderr.write("\\rloading 1/2"); sys.stderr.write("\\rloading 2/2\\n")\n'
        'sys.stderr.write("Training: |          | 0/? [00:00<?, ?it/s]\\n")\n'
        'print("after the warning")'
    ),
    new_markdown_cell("## The figures"),
    new_code_cell(
        "fig, ax = plt.subplots(figsize=(3, 2))\n"
        'ax.plot([0, 1, 2], [2, 0, 1], color="tab:red")\n'
        'ax.set_title("a red zigzag")\n'
        "plt.show()"
    ),
    new_code_cell("plt.plot([0, 1])"),
    new_code_cell('print("secret set-up")', metadata={"tags": ["remove-cell"]}),
    new_code_cell(
        'for i in range(3):\n    print(f"\\rstep {i + 1}/3", end="")\nprint()\n'
        'print("{{ not liquid }}")\n'
        'print("\\n".join(f"epoch {i:02d}" for i in range(60)))'
    ),
    new_code_cell(
        'display(HTML("<style>pre { color: red }</style><pre>styled output</pre>"))\n'
        'pd.set_option("display.max_colwidth", None)\n'
        f'pd.DataFrame({{"row": range(30), "text": ["{LONG_TEXT}"] * 30}})'
    ),
    new_markdown_cell("## Summary\n\nIt works."),
]


def execute(cells, path: Path, blog_meta=BLOG_META, allow_errors=False, mpl_backend="",
            papermill=None) -> Path:  # fmt: skip
    """Write and execute a notebook the way papermill leaves it.

    The kernel gets ``MPLBACKEND=mpl_backend``; "" lets ipykernel pick its inline backend.
    ``papermill`` becomes the notebook's papermill metadata; without it the cells keep no
    timing, so the post's date comes from ``blog_meta``.
    """
    nb = new_notebook(cells=cells)
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata.blog = blog_meta
    env = {**os.environ, "MPLBACKEND": mpl_backend}
    NotebookClient(
        nb, kernel_name="python3", timeout=60, allow_errors=allow_errors, record_timing=False
    ).execute(cwd=str(path.parent), env=env)
    if papermill:
        nb.metadata.papermill = papermill
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    root = tmp_path_factory.mktemp("blog")
    notebooks = root / "notebooks"
    notebooks.mkdir()
    execute(GOOD_CELLS, notebooks / "01_test_post.ipynb", papermill={"start_time": RAN})
    second = {**BLOG_META, "date": "2999-01-01"}  # no run time, and in the future
    execute(
        [new_markdown_cell("# 02 · Second post\n\nMore, after notebook 01. This is part III "
                           "of the original series."),
         new_code_cell('print("second")'),
         new_code_cell(WIDE_TABLE),
         new_code_cell(GROUPED_TABLE),
         new_code_cell(f'print("{VERDICT}")\nprint(wide.to_string())')],
        notebooks / "02_second.ipynb",
        blog_meta=second,
    )  # fmt: skip
    args = ["--notebooks", notebooks, "--posts", root / "blog/_posts", "--site", root / "site",
            "--repo-url", REPO_URL]
    assert blog.main([str(a) for a in args]) == 0
    return root


def split_post(post: Path):
    text = post.read_text(encoding="utf-8")
    assert text.startswith("---\n"), f"{post.name}: no front matter"
    _, header, body = text.split("---\n", 2)
    return yaml.safe_load(header), body


def post_body(rendered, slug: str) -> str:
    (post,) = (rendered / "blog/_posts").glob(f"*-{slug}.md")
    return split_post(post)[1]


def test_posts_have_valid_front_matter_and_dates_from_the_run(rendered):
    posts = sorted((rendered / "blog/_posts").glob("*.md"))
    today = dt.date.today()
    assert [p.name for p in posts] == ["2026-11-20-01-test-post.md", f"{today}-02-second.md"]
    meta, _ = split_post(posts[0])
    image = meta.pop("image")
    assert meta == {  # minima's post layout: no toc, no comments flag
        "layout": "post",
        "title": TITLE,
        "description": BLOG_META["description"],
        "author": SERIES["author"],
        "date": "2026-11-20 23:30:00 +0000",  # when it ran, not its blog date
        "categories": ["testing", "jekyll"],
        "permalink": "/posts/01-test-post.html",
    }
    assert re.fullmatch(r"/assets/images/01-test-post/[\w-]+\.png", image)
    assert (rendered / "blog" / image.lstrip("/")).is_file()
    second, _ = split_post(posts[1])
    assert second["title"] == "02 · Second post" and second["date"].startswith(str(today))  # clamped
    assert "image" not in second


def test_dates_are_never_after_the_run_nor_today(tmp_path):
    execute([new_markdown_cell("# Later")], tmp_path / "03_later.ipynb",
            papermill={"start_time": "2999-05-01T10:00:00+00:00"})  # fmt: skip
    posts, _ = blog.render(
        tmp_path, tmp_path / "_posts", tmp_path / "site", today=dt.date(2026, 11, 24)
    )
    assert [p.name for p in posts] == ["2026-11-24-03-later.md"]


def test_posts_keep_their_run_times_and_the_index_lists_them_in_course_order(tmp_path):
    for name, title, ran in (("01_first", "First", "2026-11-20T10:00:00+00:00"),
                             ("02_second", "02 · Second", "2026-11-20T09:00:00+00:00")):
        execute([new_markdown_cell(f"# {title}")], tmp_path / f"{name}.ipynb",
                papermill={"start_time": ran})  # fmt: skip
    posts, pages = blog.render(tmp_path, tmp_path / "blog/_posts", tmp_path / "site",
                               theme="fastpages")  # fmt: skip
    first, second = (split_post(post)[0] for post in posts)
    assert first["date"] == "2026-11-20 10:00:00 +0000"  # when each ran, 02 before 01
    assert second["date"] == "2026-11-20 09:00:00 +0000"
    assert (first["title"], second["title"]) == ("01 · First", "02 · Second")
    assert first["toc"] is True and first["comments"] is True and first["layout"] == "post"
    index = (tmp_path / "blog/index.md").read_text(encoding="utf-8")
    assert index.index("01 · First") < index.index("02 · Second")
    config = yaml.safe_load((tmp_path / "blog/_config.yml").read_text(encoding="utf-8"))
    assert "theme" not in config and not (tmp_path / "blog/assets/main.scss").exists()
    assert all(page.parent == tmp_path / "site" for page in pages)
    posts, _ = blog.render(tmp_path, tmp_path / "blog/_posts", tmp_path / "site",
                           theme="minimal-mistakes")  # fmt: skip
    assert split_post(posts[0])[0]["layout"] == "single"
    config = yaml.safe_load((tmp_path / "blog/_config.yml").read_text(encoding="utf-8"))
    assert config["theme"] == "minimal-mistakes-jekyll"


def test_without_a_repository_the_post_says_so_without_a_link(tmp_path):
    execute([new_markdown_cell("# 01 · Alone\n\nText.")], tmp_path / "01_alone.ipynb",
            papermill={"start_time": RAN})  # fmt: skip
    (post,), _ = blog.render(tmp_path, tmp_path / "blog/_posts", tmp_path / "site", repo_url="")
    body = split_post(post)[1]
    assert "the course's repository (this edition was published without its address)" in body
    assert "[the course's repository]" not in body


def test_a_full_disk_is_named_before_anything_is_written_or_while_writing(tmp_path, monkeypatch):
    execute([new_markdown_cell("# 01 · Alone\n\nText.")], tmp_path / "01_alone.ipynb",
            papermill={"start_time": RAN})  # fmt: skip
    posts, site = tmp_path / "blog/_posts", tmp_path / "site"
    with monkeypatch.context() as patch:
        patch.setattr(blog, "free_bytes", lambda path: 1000)
        patch.setattr(files, "free_bytes", lambda path: 1000)
        with pytest.raises(blog.BlogError, match=r"the disk holding .* is full \(1000 bytes "
                                                 r"free\), and they need about \d+ bytes"):
            blog.render(tmp_path, posts, site, repo_url=REPO_URL)
    assert not posts.exists() and not site.exists()

    (post,), _ = blog.render(tmp_path, posts, site, repo_url=REPO_URL)
    before = post.read_bytes()
    written = []

    def full_after_one(self, data):
        if written:
            raise OSError(28, "No space left on device")
        written.append(self)
        return original(self, data)
    original = Path.write_bytes
    monkeypatch.setattr(Path, "write_bytes", full_after_one)
    with pytest.raises(blog.BlogError, match=r"Cannot write .*: the disk holding .* is full"):
        blog.render(tmp_path, posts, site, repo_url=REPO_URL)
    monkeypatch.undo()
    everything = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert not [path for path in everything if ".tmp-" in path.name]
    assert post.read_bytes() == before  # whole: the old post, or the same post rewritten


def test_every_image_link_resolves_and_has_alt_text(rendered):
    posts_dir = rendered / "blog/_posts"
    images = []
    for post in posts_dir.glob("*.md"):
        _, body = split_post(post)
        images += re.findall(r"!\[([^\]]*)\]\(([^)\s]+)\)", body)
    # plt.show() after set_title, then plt.plot under the "The figures" heading
    assert [alt for alt, _ in images] == ["a red zigzag", "The figures"]
    for _, link in images:
        assert not link.startswith(("/", "http:", "https:", "data:")), link
        target = (posts_dir / link).resolve()
        assert target.is_file(), link
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert target.parent == rendered / "blog/assets/images/01-test-post"


def test_alt_text_says_what_the_figure_shows():
    described = {"plot_bars": ("Bars of images/s per pipeline", True),
                 "plot_sets": ("One panel per result", True)}
    alt = alt_text.figure_alt({}, "plot_sets(results, plot_bars)\nplt.show()", "Results", described)
    assert alt == "Bars of images/s per pipeline"  # the function passed, drawing each panel
    assert alt_text.figure_alt({}, "# alt: two curves\nplot_sets(r)", "Results", described) == (
        "two curves"
    )
    assert alt_text.figure_alt({}, "plot_sets(r)", "Results", described) == "One panel per result"
    assert alt_text.package_docstrings()["plot_training_curves"][0].startswith("Loss and validation")


def test_posts_open_with_the_series_and_link_out(rendered):
    body = post_body(rendered, "01-test-post")
    original, part = SERIES["original"], SERIES["original"]["parts"]["I"]
    opening = body.strip().removeprefix("{% raw %}\n").split("\n\n")[0]
    assert opening.startswith("> This post remakes [part I") and part["url"] in opening
    assert original["index"] in opening and SERIES["dataset"]["url"] in opening
    assert "[02](02-second.html) " in body and "[01](" not in body  # the numbering, not itself
    for slug in ("01-test-post", "02-second"):
        assert len(re.findall(r"\]\(https?://", post_body(rendered, slug))) >= 3, slug
    second = post_body(rendered, "02-second")
    assert "This post remakes [part III" in second and "[notebook 01](01-test-post.html)" in second
    for slug in ("01-test-post", "02-second"):
        assert f"[the course's repository]({REPO_URL})" in post_body(rendered, slug)
    # "part III of the original series": the part links to the part, the series to its index
    assert re.search(r"\[part III\]\(\S+part3\.html\) of the \[original series\]\("
                     + re.escape(SERIES["original"]["index"]) + r"\)", second)


def test_prose_links_first_mentions_and_every_notebook(rendered):
    body = post_body(rendered, "01-test-post")
    docs = {entry["url"] for entry in SERIES["links"]}
    lightning = "https://lightning.ai/docs/pytorch/stable/"
    assert lightning in docs
    assert body.count(f"]({lightning})") == 1 and "[PyTorch Lightning](" in body
    assert "[Kornia](https://kornia.readthedocs.io/en/latest/)" in body
    assert "[`smp.Unet`](https://smp.readthedocs.io/en/latest/)" in body
    assert "[Lovász hinge](https://arxiv.org/abs/1705.08790)" in body
    assert "[original\nseries](" in body or "[original series](" in body
    assert "[notebook 02](02-second.html)" in body  # "notebook\n02" across a line break
    assert (
        "notebooks 01 and [02](02-second.html) (Kornia)" in body and "this is notebook 01." in body
    )
    assert (
        "Lightning(notebook=02)" in body and "## PyTorch Lightning in a heading stays plain" in body
    )


def test_posts_read_clean(rendered):
    body = post_body(rendered, "01-test-post")
    outputs = "\n".join(line for line in body.splitlines() if line.startswith("    "))
    assert "\x1b" not in body and not re.search(r"\[[0-9;]*m", outputs)
    assert "    red plain\n" in body
    assert str(paths.REPO_ROOT) not in body and "repo file: data/x.npy" in body
    assert "Warning" not in outputs and "a library warning" not in outputs
    assert "    real message on stderr\n" in body and "    after the warning\n" in body
    assert "loading 2/2" in outputs and "loading 1/2" not in outputs and "0/?" not in outputs
    assert "Line2D" not in body and "secret set-up" not in body
    assert "step 3/3" in body and "step 1/3" not in body
    assert body.lstrip().startswith("{% raw %}") and "{{ not liquid }}" in body
    assert "# 01 · A test post" not in body and "Intro paragraph" in body
    assert "```python" in body
    assert 'Parameters injected for this run:\n\n\n```python\nprofile = "gpu"' in body


def test_outputs_are_shortened_whole_and_unstyled(rendered):
    body = post_body(rendered, "01-test-post")
    outputs = body.split("pd.DataFrame(")[-1]
    assert "<style" not in outputs and "styled output" in outputs
    # 62 lines (the progress line, the Liquid line, 60 epochs): 20 first, 10 last
    assert "    epoch 17\n    … 32 lines omitted …\n    epoch 50\n" in body
    assert "epoch 18" not in body
    assert "… 15 rows omitted …" in body and "<th>14</th>" not in body and "<th>29</th>" in body
    assert body.count(f"<td>{LONG_TEXT}</td>") == 15  # every row shown, whole
    page = (rendered / "site/01-test-post.html").read_text(encoding="utf-8")
    assert "<pre>styled output</pre>" in page and "<style>pre { color: red }" not in page
    assert 'data-mime-type="application/vnd.jupyter.stderr"' not in page  # plain, not pink


def test_tables_and_printed_output_reach_the_post_whole(rendered):
    """Layout is the theme's stylesheet's (the browser tests measure that it fits): every
    table reaches the post whole, in a box the stylesheet styles, and printed lines as they
    were printed."""
    body = post_body(rendered, "02-second")
    tables = re.findall(r'<div class="output-html">\s*<div>\s*(<table.*?</table>)', body, re.DOTALL)
    assert len(tables) == 2  # the wide table and the one with grouped headers, not split
    for name in ("albumentations_w4", "bound (batches on device)", "GPU util %", "972-1.05e+03"):
        assert name in tables[0], name
    assert "start number 3" in tables[1] and 'colspan="2"' in tables[1]
    assert f"    {VERDICT}\n" in body  # one line: the stylesheet wraps it
    # the printed table's rows whole, wider than the column: the stylesheet wraps them
    assert re.search(r"^    kornia_png_sequential .{80,}$", body, re.MULTILINE)


def test_a_table_pandas_cut_is_named(tmp_path, capsys):
    execute(
        [new_markdown_cell("# Cut"),
         new_code_cell(f'import pandas as pd\npd.DataFrame({{"text": ["{LONG_TEXT}"]}})')],
        tmp_path / "04_cut.ipynb",
    )  # fmt: skip
    blog.render(tmp_path, tmp_path / "_posts", tmp_path / "site")
    assert re.search(
        r"warning: \S*04_cut\.ipynb cell 1: pandas cut this table", capsys.readouterr().err
    )


def test_a_notebook_with_an_error_stops_the_render(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    execute(
        [new_markdown_cell("# Broken"), new_code_cell("1 / 0")],
        notebooks / "03_broken.ipynb",
        allow_errors=True,
    )
    with pytest.raises(blog.BlogError, match=r"03_broken\.ipynb: cell 1 .*ZeroDivisionError"):
        blog.render(notebooks, tmp_path / "_posts", tmp_path / "site")
    assert not (tmp_path / "_posts").exists() and not (tmp_path / "site").exists()


def test_a_notebook_cut_short_is_named_by_make_blog(tmp_path, capsys):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    execute([new_markdown_cell("# 03 · Cut")], notebooks / "03_cut.ipynb")
    whole = (notebooks / "03_cut.ipynb").read_bytes()
    (notebooks / "03_cut.ipynb").write_bytes(whole[:len(whole) // 2])
    assert blog.main(["--notebooks", str(notebooks), "--posts", str(tmp_path / "_posts"),
                      "--site", str(tmp_path / "site")]) == 1
    err = capsys.readouterr().err
    assert f"{notebooks / '03_cut.ipynb'} cannot be read as a notebook (NotJSONError)" in err
    assert err.count("\n") == 2 and "Traceback" not in err  # "cannot publish:" and the notebook
    assert not (tmp_path / "_posts").exists()


def test_figures_lost_to_a_non_inline_backend_stop_the_render(tmp_path):
    execute(
        [
            new_markdown_cell("# Agg"),
            new_code_cell("import matplotlib.pyplot as plt\nplt.plot([0, 1])\nplt.show()"),
        ],
        tmp_path / "05_agg.ipynb",
        mpl_backend="Agg",  # what papermill's kernel inherits from `export MPLBACKEND=Agg`
    )
    with pytest.raises(blog.BlogError, match=r"05_agg\.ipynb: cell 1 calls plt.show\(\)"):
        blog.render(tmp_path, tmp_path / "_posts", tmp_path / "site")


def test_unexecuted_notebook_and_bad_metadata_are_named(tmp_path, capsys):
    nb = new_notebook(cells=[new_code_cell("print(1)")])
    nb.metadata.blog = {"description": "d", "categories": [], "date": "23/11/2026"}
    nbformat.write(nb, tmp_path / "04_raw.ipynb")
    assert blog.main(["--notebooks", str(tmp_path), "--posts", str(tmp_path / "p")]) == 1
    err = capsys.readouterr().err
    assert "04_raw.ipynb" in err and "not executed" in err
    assert '"categories"' in err and '"date"' in err


# -- local paths -------------------------------------------------------------------------


ALICE = "/home/alice/course"


def test_paths_are_rewritten_from_where_the_notebook_ran(tmp_path, monkeypatch):
    """A notebook that ran under /home/alice/course, rendered here with another HOME."""
    execute(
        [new_markdown_cell("# Alice's run"),
         new_code_cell(f'print("data: {ALICE}/data/synthetic-60")\n'
                       'print("cache: /home/alice/.cache/torch/hub")\n'
                       'print("lib: /opt/conda/lib/python3.12/site-packages/torch/x.py")\n'
                       'print("scratch: /tmp/tmpab12/broken")')],
        tmp_path / "06_alice.ipynb",
        papermill={"start_time": RAN, "input_path": f"{ALICE}/notebooks/06_alice.ipynb",
                   "output_path": f"{ALICE}/build/partial/06_alice.ipynb"},
    )  # fmt: skip
    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    posts, pages = blog.render(tmp_path, tmp_path / "_posts", tmp_path / "site")
    for written in posts + pages:
        text = written.read_text(encoding="utf-8")
        assert "/home/alice" not in text and "/tmp/" not in text and "/opt/conda" not in text
    body = posts[0].read_text(encoding="utf-8")
    assert "data: data/synthetic-60" in body and "cache: ~/.cache/torch/hub" in body
    assert "lib: <site-packages>/torch/x.py" in body and "scratch: <tmp>/tmpab12/broken" in body


def test_a_local_path_left_fails_the_render_naming_post_and_line(tmp_path):
    execute(
        [new_markdown_cell("# Leak"), new_code_cell('print("ok")\nprint("/mnt/shared/a/w.pt")')],
        tmp_path / "07_leak.ipynb",
    )  # fmt: skip
    with pytest.raises(blog.BlogError) as error:
        blog.render(tmp_path, tmp_path / "_posts", tmp_path / "site")
    message = str(error.value)
    assert re.search(r"_posts/\d{4}-\d\d-\d\d-07-leak\.md:\d+: /mnt/shared/a/w\.pt", message)
    assert re.search(r"site/07-leak\.html:\d+: /mnt/shared", message)
    assert not (tmp_path / "_posts").exists() and not (tmp_path / "site").exists()


def test_path_rewriting_respects_component_boundaries():
    repl = {"/srv/ana/repo": "", "/srv/ana": "<srv>"}
    text = (
        "/srv/ana/repo/data /srv/ana/repo. /srv/ana/repository /srv/anabel /srv/ana "
        "https://x.org/home/y"
    )
    assert local_paths.replace_local_paths(text, repl) == (
        "data <srv>/repo. <srv>/repository /srv/anabel <srv> https://x.org/home/y"
    )
    assert local_paths.replace_local_paths("<td>/tmp/x</td>", {}, markup=True) == "<td>&lt;tmp&gt;/x</td>"
    assert local_paths.find_local_paths("ok\nsee /root/x and /rootfs\n") == [(2, "/root/x")]


def test_only_warnings_leave_stderr():
    text = (
        "/x/lightning.py:12: PossibleUserWarning: few workers\n"
        "  warnings.warn(msg)\n"
        "GPU available: False\n"
        "WARNING:root:noisy\n"
        "real line\n"
    )
    assert clean.drop_warnings(text) == "GPU available: False\nreal line\n"


# -- a real Jekyll -----------------------------------------------------------------------


def jekyll_executable() -> str:
    exe = shutil.which("jekyll")
    if exe:
        return exe
    if os.environ.get("CI"):
        pytest.fail("jekyll is missing in CI: apt-get install -y jekyll (make browser does)")
    pytest.skip(
        "jekyll not installed (apt-get install -y jekyll, or make browser); CI always runs this"
    )


def jekyll_build(site_source: Path) -> Path:
    """Build ``site_source``, the folder the renderer wrote (``_posts``, ``_config.yml``,
    ``index.md``, ``assets``), as it is, with Debian's jekyll and minima (Debian's
    jekyll-theme-minima, ruby-jekyll-seo-tag, ruby-jekyll-feed: make browser installs them)."""
    config = yaml.safe_load((site_source / "_config.yml").read_text(encoding="utf-8"))
    assert config["theme"] == "minima" and (site_source / "index.md").is_file()
    destination = site_source.parent / "_site"
    result = subprocess.run(
        [jekyll_executable(), "build", "--source", str(site_source), "--destination",
         str(destination)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    if result.returncode and "minima theme could not be found" in output:
        message = "the minima theme is missing: apt-get install -y jekyll-theme-minima " \
                  "ruby-jekyll-seo-tag ruby-jekyll-feed (make browser does)"  # fmt: skip
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    assert result.returncode == 0, output
    assert "does not exist" not in output, output  # a layout the theme lacks
    return destination


def check_jekyll_site(posts: list[Path], built: Path) -> None:
    """Every post is in ``built`` at its permalink in minima's post layout, with its title
    and date, and its relative links resolve; the home page lists them in course order."""
    for post in posts:
        meta, _ = split_post(post)
        page = built / meta["permalink"].lstrip("/")
        assert page.is_file(), f"{post.name} is not in _site (dated after today?)"
        text = page.read_text(encoding="utf-8")
        assert re.search(r'<h1 class="post-title[^"]*"[^>]*>\s*' + re.escape(html_text(meta["title"]))
                         + r"\s*</h1>", text), f"{page.name}: no title in minima's layout"
        assert f'datetime="{meta["date"][:10]}T{meta["date"][11:19]}' in text, page.name
        for link in re.findall(r'(?:href|src)="([^"#:]+)"', text):
            if link.startswith("/"):  # the theme's own: the stylesheet, the feed, home
                continue
            assert (page.parent / link).resolve().is_file(), f"{page.name}: {link}"
    home = (built / "index.html").read_text(encoding="utf-8")
    listed = re.findall(r'class="post-link" href="[^"]*/posts/([^"/]+)\.html"', home)
    assert listed == sorted(listed) and len(listed) == len(posts), listed
    assert re.search(r"pre[^{}]*\{[^}]*white-space: *pre-wrap",
                     (built / "assets/main.css").read_text(encoding="utf-8"))


def html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def test_jekyll_builds_every_post(rendered):
    built = jekyll_build(rendered / "blog")
    posts = sorted((rendered / "blog/_posts").glob("*.md"))
    check_jekyll_site(posts, built)
    page = (built / "posts/01-test-post.html").read_text(encoding="utf-8")
    assert '<a href="02-second.html">notebook 02</a>' in page and "{{ not liquid }}" in page
    assert 'alt="a red zigzag"' in page


# -- a real browser ---------------------------------------------------------------------


def chromium_executable() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe:
        return exe
    if os.environ.get("CI"):
        pytest.fail("chromium is missing in CI: apt-get install -y chromium")
    pytest.skip("chromium not installed (apt-get install -y chromium); CI always runs this")


LOCAL_HTTP = "http://127.0.0.1:"


@contextlib.contextmanager
def serve(folder: Path):
    """``folder`` over HTTP on a free local port (a Jekyll site links its CSS from ``/``)."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{LOCAL_HTTP}{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class DevTools:
    """Headless Chromium driven over the DevTools protocol, recording what a console shows."""

    def __init__(self, exe: str, workdir: Path):
        profile = workdir / "chromium-profile"
        profile.mkdir()
        self.process = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", "--remote-debugging-port=0",
             "--window-size=1280,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert self.process.poll() is None, "chromium exited at start"
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        targets = json.load(opener.open(f"http://127.0.0.1:{port}/json/list", timeout=10))
        page = next(t for t in targets if t["type"] == "page")
        self.ws = websocket.create_connection(
            page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True,
            http_no_proxy=["127.0.0.1"],
        )  # fmt: skip
        self.next_id, self.events = 0, []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")

    def _receive(self) -> dict:
        message = json.loads(self.ws.recv())
        if "method" in message:
            self.events.append(message)
        return message

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = self._receive()
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return message["result"]

    def open(self, url: str) -> list[str]:
        """Load ``url``; return every console error, exception and non-local request."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        while not any(e["method"] == "Page.loadEventFired" for e in self.events):
            self._receive()
        self.call("Runtime.evaluate", expression="new Promise(r => setTimeout(r, 300))",
                  awaitPromise=True)  # fmt: skip
        problems = []
        for event in self.events:
            method, params = event["method"], event["params"]
            if method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                problems.append(details.get("exception", {}).get("description", details["text"]))
            elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                problems.append(f"console.{params['type']}: {params['args']}")
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                problems.append(f"{params['entry']['text']} {params['entry'].get('url', '')}")
            elif method == "Network.requestWillBeSent":
                if not params["request"]["url"].startswith(("file:", "data:", LOCAL_HTTP)):
                    problems.append(f"external request {params['request']['url']}")
            elif method == "Network.loadingFailed":
                problems.append(f"failed to load: {params['errorText']}")
        return problems

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"][
            "value"
        ]

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(
            base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        )
        return path

    def close(self):
        self.ws.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def browser(tmp_path):
    devtools = DevTools(chromium_executable(), tmp_path)
    yield devtools
    devtools.close()


def test_site_opens_in_a_browser_without_console_errors(browser, rendered, tmp_path):
    site = rendered / "site"
    assert browser.open((site / "index.html").as_uri()) == []
    assert browser.evaluate("document.querySelectorAll('li a').length") == 2
    listed = browser.evaluate("document.querySelector('ol').innerText")
    assert BLOG_META["description"] in listed and "testing, jekyll" in listed
    assert browser.evaluate("document.querySelector('li a').textContent") == TITLE
    index_shot = browser.screenshot(tmp_path / "index.png")

    assert browser.open((site / "01-test-post.html").as_uri()) == []
    assert browser.evaluate("document.title") == TITLE
    outputs = browser.evaluate(
        "Array.from(document.querySelectorAll('.jp-OutputArea-output'), e => e.innerText).join()"
    )
    assert "red plain" in outputs and "a library warning" not in outputs
    images = browser.evaluate(
        "Array.from(document.images).map(i => i.complete && i.naturalWidth > 0 && i.alt)"
    )
    assert images == ["a red zigzag", "The figures"]
    # the output's <style> is gone: its rule would have turned every <pre> red
    assert (
        browser.evaluate("getComputedStyle(document.querySelector('pre')).color")
        != "rgb(255, 0, 0)"
    )
    links = browser.evaluate(
        "Array.from(document.querySelectorAll('.jp-RenderedMarkdown a[href=\"02-second.html\"]'),"
        " a => a.textContent)"
    )
    assert "notebook 02" in links
    assert browser.evaluate("document.querySelector('nav.site-nav a').href").endswith("/index.html")
    page_shot = browser.screenshot(tmp_path / "page.png")
    for shot in (index_shot, page_shot):
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


# -- the theme's column -------------------------------------------------------------------

THEME_WIDTH = 1280  # a laptop's window: minima's 740 px column in the middle
# What does not fit the column (a post's .post-content, a site page's main): the page
# scrolling sideways, tables wider than the column, an output (a table's box) or a code block
# that scrolls sideways, figures shown wider than the column or drawn wider than twice it.
FITS = """((selector) => {
  const root = document.documentElement, column = document.querySelector(selector);
  const wide = (e) => e.getBoundingClientRect().width > column.clientWidth + 1;
  return {page: [root.scrollWidth, root.clientWidth],
          tables: Array.from(column.querySelectorAll('table'), t => t.offsetWidth)
                       .filter(w => w > column.clientWidth + 1),
          column: column.clientWidth,
          pre: column.querySelectorAll('pre').length,
          outputs: Array.from(column.querySelectorAll('pre'))
                        .filter(p => p.scrollWidth > p.clientWidth + 1 || wide(p))
                        .map(p => p.innerText.slice(0, 80)),
          boxes: Array.from(column.querySelectorAll('.output-html, .jp-OutputArea-output'))
                      .filter(b => b.scrollWidth > b.clientWidth + 1)
                      .map(b => b.innerText.slice(0, 80)),
          images: Array.from(column.querySelectorAll('img')).filter(wide).length,
          drawn: Array.from(column.querySelectorAll('img'), i => i.naturalWidth)
                      .filter(w => w > 2 * 740)};
})"""


def check_fits(browser, url: str, shot: Path, width: int = 0, column: str = ".post-content"):
    """Open ``url`` in a window ``width`` px wide (the theme's by default); screenshot it;
    what does not fit its ``column``."""
    browser.call("Emulation.setDeviceMetricsOverride", width=width or THEME_WIDTH, height=1000,
                 deviceScaleFactor=1, mobile=False)  # fmt: skip
    assert [p for p in browser.open(url) if "/favicon.ico" not in p] == []
    if column == ".post-content":
        assert browser.evaluate("getComputedStyle(document.body).fontFamily").count("Helvetica")
    fits = browser.evaluate(f"{FITS}({json.dumps(column)})")
    browser.screenshot(shot)
    return fits


def assert_fits(fits: dict, name: str, column_px: int = 740, drawn: bool = True) -> None:
    width, client = fits["page"]
    assert width == client, f"{name}: the page scrolls sideways ({width} > {client} px)"
    assert not fits["tables"], f"{name}: tables wider than the column: {fits['tables']}"
    assert not fits["boxes"], f"{name}: outputs that scroll sideways: {fits['boxes']}"
    assert fits["column"] <= column_px and fits["pre"], f"{name}: not the column: {fits}"
    assert not fits["outputs"], f"{name}: code hidden behind sideways scrolling: {fits['outputs']}"
    assert not fits["images"], f"{name}: a figure wider than the column"
    assert not (drawn and fits["drawn"]), f"{name}: figures drawn over twice the column: {fits}"


def test_a_post_fits_the_theme_column(browser, rendered, tmp_path):
    built = rendered / "_site"
    if not built.exists():
        built = jekyll_build(rendered / "blog")
    shot = tmp_path / "02-second.png"
    with serve(built) as site:
        fits = check_fits(browser, f"{site}/posts/02-second.html", shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    assert_fits(fits, "02-second")
    page = (rendered / "site/02-second.html").as_uri()
    assert_fits(check_fits(browser, page, shot, column="main"), "site 02-second", THEME_WIDTH)


PUBLISHED = paths.REPO_ROOT / "published"


@pytest.mark.skipif(not list(PUBLISHED.glob("*.ipynb")), reason="no published notebooks")
def test_published_posts_fit_the_theme_column(browser, tmp_path, monkeypatch):
    """The published edition, rendered from another HOME, built with minima: every post at
    the theme's width, and every page of the offline site in the same window, without
    sideways scrolling (screenshots in $BLOG_SCREENSHOTS if set)."""
    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    posts, pages = blog.render(PUBLISHED, tmp_path / "blog/_posts", tmp_path / "site",
                               repo_url=REPO_URL)  # fmt: skip
    built = jekyll_build(tmp_path / "blog")
    check_jekyll_site(posts, built)
    shots = Path(os.environ.get("BLOG_SCREENSHOTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    problems = []
    with serve(built) as site:
        for post in posts:
            meta, _ = split_post(post)
            fits = check_fits(browser, site + meta["permalink"], shots / f"{post.stem}.png")
            try:
                # drawn=False: the edition's 08 still draws 1,635 px (drawn before 9d6ddb9)
                assert_fits(fits, post.stem, drawn=False)
            except AssertionError as error:
                problems.append(str(error))
    for page in pages:
        if page.name == "index.html":
            continue
        fits = check_fits(browser, page.as_uri(), shots / f"site-{page.stem}.png", column="main")
        try:
            assert_fits(fits, f"site {page.stem}", THEME_WIDTH, drawn=False)
        except AssertionError as error:
            problems.append(str(error))
    assert not problems, "\n".join(problems)
