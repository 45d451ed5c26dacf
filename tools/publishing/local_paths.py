"""Local paths in published outputs: rewritten as a reader should see them, and found when left."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

import nbformat

from nailseg_common.setup import paths

# These regular expressions are about paths, not layout: a render that still shows an
# absolute local path fails (``find_local_paths``), so that none reaches a reader.
TEXT_MIME_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex")
_BEFORE = r"(?<![\w.~:/-])"  # a path starts here: not inside a word, a URL or another path
_AFTER = r"(?![\w.-])"
# Paths no reader should see: a post or page holding one fails the render.
LOCAL_PATH_RE = re.compile(
    _BEFORE + r"(?:/root|/home/[\w.-]+|/Users/[\w.-]+|/work|/workspace|/tmp|/mnt"
    r"|/scratch|/private|/var/folders)" + _AFTER
)
# A repository the notebook ran in shows as the parent of one of the course's folders.
RUN_ROOT_RE = re.compile(
    _BEFORE + r"((?:/[\w.+@-]+)+?)/(?:data|runs|notebooks|results|build|nailseg_common)/"
)
GENERIC_PATHS = (  # after the known prefixes: what any machine's paths become
    (re.compile(_BEFORE + r"(?:/[^\s/'\"<>()]+)+/(?:site|dist)-packages" + _AFTER),
     "<site-packages>"),
    (re.compile(_BEFORE + r"(?:/root|/home/[\w.-]+|/Users/[\w.-]+)" + _AFTER), "~"),
    (re.compile(_BEFORE + r"(?:/private)?/tmp" + _AFTER), "<tmp>"),
)  # fmt: skip
DATA_URI_RE = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+")
PATH_REST_RE = re.compile(r"[^\s'\"<>)\]]*")


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
    return re.compile(_BEFORE + re.escape(prefix) + r"(?![\w.-])(/?)")


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
    text = DATA_URI_RE.sub("data:", text)
    patterns = [LOCAL_PATH_RE] + [_prefix_pattern(p) for p in prefixes if p]
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern in patterns:
            for match in pattern.finditer(line):
                found.append((number, PATH_REST_RE.match(line, match.start()).group()))
    return sorted(set(found))
