"""Files the course writes and trusts. A results file or a generated folder is written under
a temporary name and renamed into place (:func:`staged_file`, :func:`staged_folder`), under
a lock when processes share ``data/``, so a run never finds half of one; a cheap record (size
and a digest of the ends) notices a file deleted, cut or replaced; and :func:`build_once`
rebuilds a folder (notebook 03's uint8 cache) only when its sources change or a file is
damaged.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import re
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from filelock import FileLock

from nailseg_common.core.errors import DataError


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (it may be another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


STAGED = re.compile(r"\.(.+)\.(tmp|old)-(\d+)")
"""The name of a staged file or folder: ``.<name>.tmp-<pid>`` or ``.<name>.old-<pid>``."""


def _left_behind(entry: Path, name: str | None = None) -> bool:
    """``entry`` is a staged file or folder (of ``name``, when given) that a killed run left:
    its process is dead, or is this one (then not in use once the lock is held)."""
    match = STAGED.fullmatch(entry.name)
    if match is None or name not in (None, match[1]):
        return False
    return int(match[3]) == os.getpid() or not _alive(int(match[3]))


def stale_staging(target: Path) -> list[Path]:
    """``target``'s staged files and folders (``.<name>.tmp-<pid>``, ``.old-<pid>``) left by
    runs that were killed."""
    if not target.parent.is_dir():
        return []
    return [entry for entry in target.parent.iterdir() if _left_behind(entry, target.name)]


def discard(path: Path) -> None:
    """Delete ``path``, a file or a folder, if it is there."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def remove_stale_staging(folder: Path) -> None:
    """Delete what runs killed while writing into ``folder`` (its sub-folders too) left."""
    for entry in [entry for entry in folder.rglob(".*") if _left_behind(entry)]:
        discard(entry)


@contextlib.contextmanager
def folder_lock(target: Path) -> Iterator[None]:
    """Hold an exclusive lock for building ``target`` (``filelock``'s, on a hidden ``.lock``
    file beside it), and clear the staging folders that runs killed while building it left
    behind."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(target.parent / f".{target.name}.lock"):
        for folder in stale_staging(target):
            discard(folder)
        yield


FULL_BELOW = 1 << 20
"""A write that fails without saying why, on a disk with less than this free, failed for want
of space (numpy's ``OSError`` without an errno, ``torch.save``'s ``RuntimeError``)."""


def free_bytes(path: str | os.PathLike) -> int:
    """Bytes free on the disk holding ``path`` (its nearest existing folder); 0 when unknown."""
    path = Path(path)
    for folder in (path, *path.parents):
        with contextlib.suppress(OSError):
            return shutil.disk_usage(folder).free
    return 0


def as_disk_full(error: BaseException, folder: str | os.PathLike) -> BaseException:
    """``error`` as an ``OSError`` of errno ``ENOSPC`` (naming ``folder``) when it is a write
    failure that gives no errno and ``folder``'s disk has less than :data:`FULL_BELOW` free;
    else ``error`` itself."""
    if (isinstance(error, (OSError, RuntimeError)) and getattr(error, "errno", None) is None
            and free_bytes(folder) < FULL_BELOW):
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(folder))
    return error


def is_disk_full(error: BaseException) -> bool:
    """``error`` says the disk (or the user's quota) is full."""
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)


def disk_full(folder: str | os.PathLike) -> str:
    """``the disk holding FOLDER is full (N bytes free)``: the words of every full-disk error."""
    return f"the disk holding {folder} is full ({free_bytes(folder)} bytes free)"


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
    except BaseException as error:
        full = as_disk_full(error, staging)  # before the staged files free their space
        shutil.rmtree(staging, ignore_errors=True)
        if full is not error:
            raise full from error
        raise
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def staged_file(target: Path) -> Iterator[Path]:
    """Yield a temporary hidden sibling name of ``target`` to write; on success the file
    written there replaces ``target``, so a reader never finds half a file. On an exception
    the temporary file is deleted and ``target`` is left as it was."""
    staging = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        yield staging
        os.replace(staging, target)
    except (OSError, RuntimeError) as error:
        full = as_disk_full(error, target.parent)
        if full is not error:
            raise full from error
        raise
    finally:
        staging.unlink(missing_ok=True)


def write_bytes_checked(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` and check, by the file's size on disk, that all of it landed:
    an ``OSError`` when less did (an encoder or file system that drops a short write)."""
    path.write_bytes(data)
    landed = path.stat().st_size
    if landed != len(data):
        raise OSError(f"{landed} of {len(data)} bytes landed")


def write_whole(path: Path, write: Callable[[BinaryIO], None], fixes: tuple[str, str]) -> None:
    """A file that lands at ``path`` whole or not at all: ``write(buffer)`` renders it in
    memory, :func:`write_bytes_checked` writes it under a temporary name, checked complete,
    and :func:`staged_file` renames it into place (folders made). A failed write is a
    DataError naming ``path``: a full disk as such, ending with ``fixes[0]``; any other
    failure with its reason, ending with ``fixes[1]``."""
    buffer = io.BytesIO()
    try:
        write(buffer)
        path.parent.mkdir(parents=True, exist_ok=True)
        with staged_file(path) as staging:
            write_bytes_checked(staging, buffer.getvalue())
    except OSError as error:
        if is_disk_full(error):
            raise DataError(f"Cannot write {path}: {disk_full(path.parent)}: {fixes[0]}") from None
        raise DataError(f"Cannot write {path} ({error.strerror or error}): {fixes[1]}") from None


def copy_keeping_paths(files: Iterable[str | os.PathLike], root: Path, folder: Path) -> Path:
    """Copy ``files`` (all under ``root``) into ``folder``, emptied first, each at its path
    relative to ``root``; returns ``folder``."""
    shutil.rmtree(folder, ignore_errors=True)
    for file in files:
        copy = folder / Path(file).relative_to(root)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, copy)
    return folder


def write_json(path: str | os.PathLike, data: dict, default: Callable | None = None) -> Path:
    """Write ``data`` as indented JSON to ``path`` (folders created) through
    :func:`staged_file`; the resolved path. ``default`` goes to ``json.dumps`` (``str``:
    values JSON has no type for, as text)."""
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    with staged_file(path) as staging:
        staging.write_text(json.dumps(data, indent=2, default=default) + "\n")
    return path


SAMPLE = 4096


def file_record(path: str | os.PathLike) -> dict:
    """``{"size": bytes, "digest": hex}`` of the file at ``path``: its size and a digest of
    its first and last :data:`SAMPLE` bytes, a constant cost per file. A change in the middle
    that keeps the size goes unnoticed."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        digest = hashlib.blake2b(handle.read(SAMPLE), digest_size=16)
        if size > SAMPLE:
            handle.seek(max(SAMPLE, size - SAMPLE))
            digest.update(handle.read(SAMPLE))
    return {"size": size, "digest": digest.hexdigest()}


def content_digest(path: str | os.PathLike) -> str:
    """A digest of the whole file at ``path`` (hex): a change anywhere in it shows."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, lambda: hashlib.blake2b(digest_size=16)).hexdigest()


def file_records(folder: str | os.PathLike, names: Iterable[str]) -> dict[str, dict]:
    """The record of each file ``folder/name`` (``name``: a relative POSIX path), by name."""
    return {name: file_record(Path(folder, name)) for name in names}


def verify_records(folder: str | os.PathLike, records: dict[str, dict]) -> list[str]:
    """What no longer matches ``records`` under ``folder``, one line per file (empty: all well)."""
    problems = []
    for name, expected in records.items():
        try:
            found = file_record(Path(folder, name))
        except FileNotFoundError:
            problems.append(f"{name} is missing")
        except OSError as error:
            problems.append(f"{name} cannot be read ({error.strerror or error})")
        else:
            if found["size"] != expected.get("size"):
                problems.append(f"{name} has {found['size']} bytes, expected {expected.get('size')}")
            elif found["digest"] != expected.get("digest"):
                problems.append(f"{name} has other content than when it was written")
    return problems


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
