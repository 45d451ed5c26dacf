"""The executed notebooks made ready for ``published/``, in place: their JPEG outputs
re-encoded at a lower quality, each only where that makes it smaller (same pixels wide and
high), and the local folders their outputs and papermill paths name rewritten as the blog
shows them (:func:`relative_paths`); code is left as it is.

    python -m tools.publishing.compress published/0*.ipynb --quality 75

Notebooks embed their figures as JPEG at ``nailseg_common.course.FIGURE_QUALITY`` (sharp on
screen); the published edition trades some of that for its size cap
(``tests/test_published.py``).
"""

from __future__ import annotations

import argparse
import base64
import io
from pathlib import Path

import nbformat
from PIL import Image

from tools.publishing import local_paths


def recompress(jpeg: bytes, quality: int) -> bytes:
    """``jpeg`` encoded again at ``quality``, or as it was when that is not smaller."""
    out = io.BytesIO()
    Image.open(io.BytesIO(jpeg)).save(out, "JPEG", quality=quality, optimize=True)
    return out.getvalue() if out.tell() < len(jpeg) else jpeg


def relative_paths(notebook: nbformat.NotebookNode) -> None:
    """Rewrite, in place, the local paths in ``notebook``'s outputs and papermill paths: the
    repository it ran in (``local_paths.run_roots``) becomes relative, a home ``~``, site-packages
    ``<site-packages>`` and ``/tmp`` ``<tmp>`` (``local_paths.replace_local_paths``)."""
    roots = local_paths.run_roots(notebook)
    papermill = notebook.metadata.get("papermill", {})
    for key in [key for key in papermill if key.endswith("_path")]:
        papermill[key] = local_paths.replace_local_paths(str(papermill[key]), roots)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = local_paths.replace_local_paths(output["text"], roots)
            data = output.get("data", {})
            for mime in local_paths.TEXT_MIME_TYPES:
                if mime in data:
                    data[mime] = local_paths.replace_local_paths(data[mime], roots, mime == "text/html")


def compress_notebook(path: Path, quality: int) -> tuple[int, int]:
    """Re-encode every ``image/jpeg`` output of the notebook at ``path`` and rewrite its
    :func:`relative_paths`; its bytes before and after."""
    before = path.stat().st_size
    notebook = nbformat.read(path, as_version=4)
    relative_paths(notebook)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/jpeg" in data:
                jpeg = recompress(base64.b64decode(data["image/jpeg"]), quality)
                data["image/jpeg"] = base64.b64encode(jpeg).decode("ascii")
    partial = path.with_suffix(".ipynb.partial")
    nbformat.write(notebook, partial)
    partial.replace(path)
    return before, path.stat().st_size


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.publishing.compress",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--quality", type=int, default=75)
    args = parser.parse_args(argv)
    for path in args.notebooks:
        before, after = compress_notebook(path, args.quality)
        print(f"{path}: {before} -> {after} bytes")


if __name__ == "__main__":
    main()
