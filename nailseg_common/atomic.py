"""Files and folders that appear complete or not at all.

A results file, or a generated or prepared folder, is written under a temporary sibling
name and renamed into place at the end, so an interrupted run never leaves a half-written
file or folder that a later run could take as complete. A lock file serialises processes
that build the same folder at the same time (several notebooks or test sessions sharing
``data/``); whoever holds it first deletes the temporary folders that killed runs left
behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no locking, the rename still keeps folders whole
    fcntl = None


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (it may be another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def stale_staging(target: Path) -> list[Path]:
    """``target``'s staging folders (``.<name>.tmp-<pid>``, ``.old-<pid>``) left by runs that
    were killed: their process is dead, or is this one (then not in use once the lock is held).
    Empty where there is no locking (Windows)."""
    if fcntl is None or not target.parent.is_dir():
        return []
    pattern = re.compile(rf"\.{re.escape(target.name)}\.(tmp|old)-(\d+)")
    matches = [(entry, pattern.fullmatch(entry.name)) for entry in target.parent.iterdir()]
    return [entry for entry, match in matches
            if match and (int(match[2]) == os.getpid() or not _alive(int(match[2])))]


@contextlib.contextmanager
def folder_lock(target: Path) -> Iterator[None]:
    """Hold an exclusive lock for building ``target`` (a hidden ``.lock`` file beside it),
    and clear the staging folders that runs killed while building it left behind."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
            for folder in stale_staging(target):
                shutil.rmtree(folder, ignore_errors=True)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def staged_folder(target: Path) -> Iterator[Path]:
    """Yield an empty temporary sibling of ``target``; on success it replaces ``target``.

    On an exception the temporary folder is deleted and ``target`` is left as it was.
    """
    staging = target.parent / f".{target.name}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)


def write_json(path: str | os.PathLike, data: dict, default: Callable | None = None) -> Path:
    """Write ``data`` as indented JSON to ``path`` (folders created) under a temporary sibling
    name, then rename it into place, so a reader never finds half a file; the resolved path.
    ``default`` goes to ``json.dumps`` (``str``: values JSON has no type for, as text)."""
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    staging.write_text(json.dumps(data, indent=2, default=default) + "\n")
    os.replace(staging, path)
    return path
