"""A folder built once and rebuilt only when its sources change or a file is damaged.

Notebook 03's uint8 cache uses it: ``build_once(target, manifest, write, files)`` returns
``target`` when its ``manifest.json`` says it was made from the same ``manifest`` and every
file in ``files`` still has the size and digest it was written with; otherwise it calls
``write(folder)`` on an empty temporary folder under a lock (several notebooks or test
sessions may share ``data/``), records the files' sizes and digests, and renames the folder
into place, so an interrupted build never leaves a half-written cache behind.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

from nailseg_common.atomic import folder_lock, staged_folder
from nailseg_common.integrity import file_records, verify_records

MANIFEST = "manifest.json"


def is_current(folder: Path, manifest: dict) -> bool:
    """``folder`` was made from ``manifest``, and every file is as it was written."""
    try:
        written = json.loads((Path(folder) / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    files = written.pop("files", None)
    return written == manifest and isinstance(files, dict) and not verify_records(folder, files)


def build_once(target: Path, manifest: dict, write: Callable[[Path], None],
               files: Iterable[str]) -> Path:
    """``target``, built by ``write(folder)`` unless it is current (see :func:`is_current`)."""
    target = Path(target)
    if is_current(target, manifest):
        return target
    with folder_lock(target):
        if is_current(target, manifest):  # another process built it while we waited
            return target
        with staged_folder(target) as staging:
            write(staging)
            records = file_records(staging, tuple(files))
            (staging / MANIFEST).write_text(json.dumps({**manifest, "files": records}))
    return target
