"""Blog posts and site: rendered from small notebooks executed here, read as a reader would."""

import base64
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
import websocket
import yaml
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from nailseg_common import paths
from tools.publishing import blog

TITLE = "01 · A test post: figures & paths"  # from the first heading, not the metadata
BLOG_META = {
    "description": "Checks the renderer end to end.",
    "categories": ["testing", "jekyll"],
    "date": "2026-11-23",
}

GOOD_CELLS = [
    new_markdown_cell(f"# {TITLE}\n\nIntro paragraph with math $x^2$."),
    new_code_cell('profile = ""', metadata={"tags": ["parameters"]}),
    new_code_cell(
        "import sys, warnings\n"
        "from pathlib import Path\n"
        "import matplotlib.pyplot as plt\n"
        "from nailseg_common import paths\n"
        'print("\\x1b[1;31mred\\x1b[0m plain")\n'
        'print("repo file:", paths.REPO_ROOT / "data" / "x.npy")\n'
        'print("home file:", Path.home() / "nails")'
    ),
    new_code_cell(
        'warnings.warn("a library warning a reader should not see", UserWarning)\n'
        'print("real message on stderr", file=sys.stderr)\n'
        'print("after the warning")'
    ),
    new_code_cell(
        "fig, ax = plt.subplots(figsize=(3, 2))\n"
        'ax.plot([0, 1, 2], [2, 0, 1], color="tab:red")\n'
        'ax.set_title("a figure")\n'
        "plt.show()"
    ),
    new_code_cell("plt.plot([0, 1])"),
    new_code_cell('print("secret set-up")', metadata={"tags": ["remove-cell"]}),
    new_code_cell(
        'for i in range(3):\n    print(f"\\rstep {i + 1}/3", end="")\nprint()\n'
        'print("{{ not liquid }}")'
    ),
    new_markdown_cell("## Summary\n\nIt works."),
]


def execute(cells, path: Path, blog_meta=BLOG_META, allow_errors=False, mpl_backend="") -> Path:
    """Write and execute a notebook the way papermill leaves it.

    The kernel gets ``MPLBACKEND=mpl_backend``; "" lets ipykernel pick its inline backend.
    """
    nb = new_notebook(cells=cells)
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata.blog = blog_meta
    env = {**os.environ, "MPLBACKEND": mpl_backend}
    NotebookClient(nb, kernel_name="python3", timeout=60, allow_errors=allow_errors).execute(
        cwd=str(path.parent), env=env
    )
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    root = tmp_path_factory.mktemp("blog")
    notebooks = root / "notebooks"
    notebooks.mkdir()
    execute(GOOD_CELLS, notebooks / "01_test_post.ipynb")
    second = {**BLOG_META, "date": "2026-11-24"}
    execute(
        [new_markdown_cell("# Second post\n\nMore."), new_code_cell('print("second")')],
        notebooks / "02_second.ipynb",
        blog_meta=second,
    )
    args = ["--notebooks", notebooks, "--posts", root / "blog/_posts", "--site", root / "site"]
    assert blog.main([str(a) for a in args]) == 0
    return root


def split_post(post: Path):
    text = post.read_text(encoding="utf-8")
    assert text.startswith("---\n"), f"{post.name}: no front matter"
    _, header, body = text.split("---\n", 2)
    return yaml.safe_load(header), body


def test_posts_have_valid_front_matter(rendered):
    posts = sorted((rendered / "blog/_posts").glob("*.md"))
    assert [p.name for p in posts] == ["2026-11-23-01-test-post.md", "2026-11-24-02-second.md"]
    meta, _ = split_post(posts[0])
    assert meta == {
        "layout": "post",
        "title": TITLE,
        "description": BLOG_META["description"],
        "toc": True,
        "categories": ["testing", "jekyll"],
        "date": dt.date(2026, 11, 23),
        "permalink": "/posts/01-test-post.html",
    }
    second, _ = split_post(posts[1])
    assert second["title"] == "Second post" and second["date"] == dt.date(2026, 11, 24)


def test_every_image_link_resolves(rendered):
    posts_dir = rendered / "blog/_posts"
    links = []
    for post in posts_dir.glob("*.md"):
        _, body = split_post(post)
        links += re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", body)
        links += re.findall(r'<img[^>]*\ssrc="([^"]+)"', body)
    assert len(links) == 2, links  # two figures: subplots + plt.show(), and plt.plot
    for link in links:
        assert not link.startswith(("/", "http:", "https:", "data:")), link
        target = (posts_dir / link).resolve()
        assert target.is_file(), link
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert target.parent == rendered / "blog/assets/images/01-test-post"


def test_posts_read_clean(rendered):
    _, body = split_post(rendered / "blog/_posts/2026-11-23-01-test-post.md")
    outputs = "\n".join(line for line in body.splitlines() if line.startswith("    "))
    assert "\x1b" not in body and not re.search(r"\[[0-9;]*m", outputs)
    assert "    red plain\n" in body
    assert str(paths.REPO_ROOT) not in body and str(Path.home()) not in body
    assert "repo file: data/x.npy" in body and "home file: ~/nails" in body
    assert "Warning" not in outputs and "a library warning" not in outputs
    assert "    real message on stderr\n" in body and "    after the warning\n" in body
    assert "Line2D" not in body and "secret set-up" not in body
    assert "step 3/3" in body and "step 1/3" not in body
    assert body.lstrip().startswith("{% raw %}") and "{{ not liquid }}" in body
    assert "# 01 · A test post" not in body and "Intro paragraph" in body
    assert "```python" in body


def test_a_notebook_with_an_error_stops_the_render(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    execute([new_markdown_cell("# Broken"), new_code_cell("1 / 0")], notebooks / "03_broken.ipynb", allow_errors=True)
    with pytest.raises(blog.BlogError, match=r"03_broken\.ipynb: cell 1 .*ZeroDivisionError"):
        blog.render(notebooks, tmp_path / "_posts", tmp_path / "site")
    assert not (tmp_path / "_posts").exists() and not (tmp_path / "site").exists()


def test_figures_lost_to_a_non_inline_backend_stop_the_render(tmp_path):
    execute(
        [new_markdown_cell("# Agg"),
         new_code_cell("import matplotlib.pyplot as plt\nplt.plot([0, 1])\nplt.show()")],
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


def test_path_rewriting_respects_component_boundaries():
    repl = {"/home/ana/repo": "", "/home/ana": "~"}
    text = "/home/ana/repo/data /home/ana/repo. /home/ana/repository /home/anabel /home/ana"
    assert blog.replace_local_paths(text, repl) == "data ~/repo. ~/repository /home/anabel ~"


def test_only_warnings_leave_stderr():
    text = (
        "/x/lightning.py:12: PossibleUserWarning: few workers\n"
        "  warnings.warn(msg)\n"
        "GPU available: False\n"
        "WARNING:root:noisy\n"
        "real line\n"
    )
    assert blog.drop_warnings(text) == "GPU available: False\nreal line\n"


# -- a real browser ---------------------------------------------------------------------


def chromium_executable() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe:
        return exe
    if os.environ.get("CI"):
        pytest.fail("chromium is missing in CI: apt-get install -y chromium")
    pytest.skip("chromium not installed (apt-get install -y chromium); CI always runs this")


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
                if not params["request"]["url"].startswith(("file:", "data:")):
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
    index_shot = browser.screenshot(tmp_path / "index.png")

    assert browser.open((site / "01-test-post.html").as_uri()) == []
    assert browser.evaluate("document.title") == TITLE
    outputs = browser.evaluate(
        "Array.from(document.querySelectorAll('.jp-OutputArea-output'), e => e.innerText).join()"
    )
    assert "red plain" in outputs and "a library warning" not in outputs
    images = browser.evaluate(
        "Array.from(document.images).map(i => i.complete && i.naturalWidth > 0)"
    )
    assert images == [True, True]
    assert browser.evaluate("document.querySelector('nav.site-nav a').href").endswith("/index.html")
    page_shot = browser.screenshot(tmp_path / "page.png")
    for shot in (index_shot, page_shot):
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
