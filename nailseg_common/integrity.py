"""Cheap records of written files, to notice later that one was deleted, cut or replaced.

A record is a file's size and a digest of its first and last :data:`SAMPLE` bytes: the
cost per file is constant whatever its size, and the record changes when a file is
deleted, truncated, extended or replaced by another array (an ``.npy`` header, with its
shape and dtype, is in the first bytes). A change in the middle of a file that keeps
its size goes unnoticed: that is the price of being cheap enough to check on every run.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

SAMPLE = 4096


def file_record(path: str | os.PathLike) -> dict:
    """``{"size": bytes, "digest": hex}`` of the file at ``path``."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        digest = hashlib.blake2b(handle.read(SAMPLE), digest_size=16)
        if size > SAMPLE:
            handle.seek(max(SAMPLE, size - SAMPLE))
            digest.update(handle.read(SAMPLE))
    return {"size": size, "digest": digest.hexdigest()}


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
