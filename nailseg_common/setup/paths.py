"""Where the course keeps its data, decided in one place.

``NAILSEG_DATA_ROOT`` points at a dataset in the real layout (``Images/1..4`` and
``Masks/1..4``, or flat: files directly in ``Images/`` and ``Masks/``); without it the
course uses a synthetic set it generates under ``NAILSEG_DATA_DIR`` (default: the
repository's ``data/`` folder). A real dataset's prepared files go to
``prepared/<folder name>-<8 hex digits of its full path>``, so ``/a/nails`` and
``/b/nails`` never share (and overwrite) one prepared folder. :func:`unwritable` says
what to do when the data folder cannot be written (read-only, a file, a full disk);
:func:`shown` is a path as the course prints it, without this machine's folders.
"""

from __future__ import annotations

import errno
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from nailseg_common.core.files import disk_full, is_disk_full

REPO_ROOT = Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """The folder that holds generated and prepared data."""
    return Path(os.environ.get("NAILSEG_DATA_DIR", REPO_ROOT / "data")).resolve()


@dataclass(frozen=True)
class DataLocation:
    """The raw dataset (``Images``/``Masks``) and the folder its prepared files go to."""

    raw: Path
    prepared: Path
    synthetic: bool

    @property
    def train_csv(self) -> Path:
        return self.prepared / "csv_file" / "train.csv"

    @property
    def valid_csv(self) -> Path:
        return self.prepared / "csv_file" / "valid.csv"

    @property
    def npy_dir(self) -> Path:
        return self.prepared / "npy"


def data_location(num_synthetic_images: int, data_root: str | os.PathLike | None = None) -> DataLocation:
    """Resolve the dataset to use.

    ``data_root`` (a notebook parameter) wins, then ``NAILSEG_DATA_ROOT``; both mean a
    real dataset. Otherwise a synthetic set of ``num_synthetic_images`` images.
    """
    root = data_root or os.environ.get("NAILSEG_DATA_ROOT")
    if root:
        raw = Path(root).expanduser().resolve()
        key = hashlib.sha256(os.fsencode(raw)).hexdigest()[:8]  # any name, UTF-8 or not
        return DataLocation(raw=raw, prepared=data_dir() / "prepared" / f"{raw.name}-{key}",
                            synthetic=False)
    name = f"synthetic-{num_synthetic_images}"
    return DataLocation(raw=data_dir() / name, prepared=data_dir() / "prepared" / name, synthetic=True)


def runs_dir() -> Path:
    """Where training logs and checkpoints go (``NAILSEG_RUNS_DIR``, default ``runs/``)."""
    return Path(os.environ.get("NAILSEG_RUNS_DIR", REPO_ROOT / "runs")).resolve()


def shown(path: str | os.PathLike) -> str:
    """``path`` as the course prints it: relative to the repository, or under ``<data-dir>``
    or ``<runs-dir>`` when ``NAILSEG_DATA_DIR`` or ``NAILSEG_RUNS_DIR`` put those elsewhere,
    or under ``~``; any other path as it is."""
    path = Path(path).expanduser().resolve()
    for root, name in ((REPO_ROOT, ""), (data_dir(), "<data-dir>"), (runs_dir(), "<runs-dir>"),
                       (Path.home(), "~")):
        if path.is_relative_to(root):
            return str(Path(name, path.relative_to(root)))
    return str(path)


def unwritable(error: OSError, folder: Path) -> str:
    """What went wrong, and what to do, when writing ``folder`` (in the data folder) failed."""
    where = Path(os.fsdecode(error.filename)) if error.filename else folder
    elsewhere = (f"or set NAILSEG_DATA_DIR to a folder you can write (it is {data_dir()}), "
                 "then run again: nothing half-written was kept")
    if is_disk_full(error):
        return f"Cannot write to {folder}: {disk_full(folder)}: free some space, {elsewhere}."
    if error.errno in (errno.ENOTDIR, errno.EEXIST):
        blocker = next((p for p in (where, *where.parents) if p.exists() and not p.is_dir()), where)
        return (f"{blocker} is a file, but the course needs a folder there: move the file away, "
                f"{elsewhere}.")
    if error.errno == errno.EROFS:
        return f"Cannot write to {where}: the file system is read-only. Copy the data {elsewhere}."
    if isinstance(error, PermissionError):
        return (f"Cannot write to {where}: permission denied (a read-only folder, or one without "
                "execute permission). Give your user access (chmod u+rwx on that folder), "
                f"{elsewhere}.")
    return (f"Cannot write to {where} ({error.strerror or error}): "
            f"{elsewhere.removeprefix('or ')}.")
