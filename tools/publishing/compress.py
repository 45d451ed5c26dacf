"""Lighter figures for the published edition: the JPEG outputs of executed notebooks
re-encoded at a lower quality, in place, each only where that makes it smaller (same pixels
wide and high, same text and code).

    python -m tools.publishing.compress published/0*.ipynb --quality 75

Notebooks embed their figures as JPEG at ``nailseg_common.setup.course.FIGURE_QUALITY`` (sharp on
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


def recompress(jpeg: bytes, quality: int) -> bytes:
    """``jpeg`` encoded again at ``quality``, or as it was when that is not smaller."""
    out = io.BytesIO()
    Image.open(io.BytesIO(jpeg)).save(out, "JPEG", quality=quality, optimize=True)
    return out.getvalue() if out.tell() < len(jpeg) else jpeg


def compress_notebook(path: Path, quality: int) -> tuple[int, int]:
    """Re-encode every ``image/jpeg`` output of the notebook at ``path``; its bytes before
    and after."""
    before = path.stat().st_size
    notebook = nbformat.read(path, as_version=4)
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
