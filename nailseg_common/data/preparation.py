"""From a folder of photos and masks to the files every notebook trains on.

:func:`ensure_prepared` is the one call a notebook makes: it generates the synthetic set
when no real dataset is given, finds the image/mask pairs (PNG or JPEG, matched by file
name without extension), validates them, splits them into train and valid stratified by
type with a seed, writes every mask as the course reads it (:func:`label_of`: a 0/255 PNG,
upright, at its photo's size, which every pipeline reads as it is) and writes
``csv_file/train.csv`` and ``csv_file/valid.csv``. The photos stay where they are, as they are:
every pipeline decodes them every epoch (decoding them once ahead of time is
:mod:`~nailseg_common.data.decoded`, a choice a notebook makes and measures). Everything is written to a temporary
folder and renamed into place, so nothing is ever half-written, and a re-run produces
byte-identical files. A second call with unchanged inputs returns at once, after a cheap
check of every prepared file against ``prepared.json`` (:mod:`~nailseg_common.core.files`):
a deleted, truncated or replaced file makes it rebuild the folder, with a warning.

What is found is said, and what is doubtful refused: ``Images`` and ``Masks`` are found in
any letter case (``images/``, ``IMAGES/``; two of them is an error), their sub-folders are
types (a warning names them unless they are numbers), files directly in them (the flat
layout) are one type, :data:`FLAT_TYPE`, and both at once is an error; every file is turned
as its EXIF orientation says (:mod:`~nailseg_common.data.images`), and a pair whose tags differ
is named in a warning; folders named like a split (``train``, ``val``...) are refused,
names match whatever their Unicode normalisation (NFC or NFD), and names that are not
UTF-8 are refused; masks with no nail pixel are kept as photos without nails but named
in a warning, unless they are most of the set, which is refused; masks with void pixels
are named in a warning, and masks far more nail than the set's are refused (inverted).
A type folder named ``None`` or ``NA`` stays that text in the CSVs and in :func:`read_split`.

Every error, the data folder's too (read-only, a file, a full disk), is a
:class:`~nailseg_common.core.errors.DataError` naming the file or folder and the fix; the
command ``nailseg-prepare`` (``make data``; :mod:`nailseg_common.commands.prepare`) prints
it alone, as ``error: ...``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import numbers
import os
import re
import unicodedata
import warnings
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from PIL import Image

from nailseg_common.core.errors import DataError
from nailseg_common.core.files import (
    content_digest,
    file_record,
    file_records,
    folder_lock,
    staged_folder,
    stale_staging,
    verify_records,
)
from nailseg_common.data.images import VOID, exif_orientation, read_mask, read_rgb
from nailseg_common.data.split import split_pairs
from nailseg_common.data.split import type_order as _type_order
from nailseg_common.data.synthetic import ensure_synthetic_dataset
from nailseg_common.setup.environment import usable_cores
from nailseg_common.setup.paths import DataLocation, data_location, shown, unwritable
from nailseg_common.setup.profiles import Profile
from nailseg_common.setup.progress import progress as progress_bar

PREPARATION_VERSION = 5
"""Bumped when the same inputs would be prepared differently (3: EXIF orientation applied;
4: the mask rule of :mod:`~nailseg_common.data.images` reads labels, palettes and cut-outs;
5: labels as PNG beside the photos as they are, no npy)."""
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
COLUMNS = ["image", "mask", "type", "label"]
SPLITS = ("train", "valid")
MANIFEST_NAME = "prepared.json"
MAX_LISTED = 20
SPLIT_WORDS = {"train", "training", "val", "valid", "validation", "test", "testing", "eval",
               "evaluation", "dev"}
FLAT_TYPE = "1"
"""The type of every pair in the flat layout (files directly in Images/ and Masks/)."""
MAX_EMPTY_SHARE = 0.5
"""More masks without any nail pixel than this share of the set is refused."""
MAX_NAIL_SHARE = 0.5
NAIL_SHARE_FACTOR = 3
OUTLIER_BORDER = 0.5
"""A mask more than :data:`MAX_NAIL_SHARE` nail, over :data:`NAIL_SHARE_FACTOR` times the set's
median nail share and nail along more than :data:`OUTLIER_BORDER` of its border is refused: an
inverted mask, far outside the set's own. A fingertip filling the frame is mostly nail too, but
its border is mostly finger and background, and passes."""
INVERTED_BORDER = 0.9
"""A mask more than :data:`MAX_NAIL_SHARE` nail whose border is at least this share nail looks
inverted (nails lie inside a photo; the background runs along its edges); a set with more than
:data:`MAX_EMPTY_SHARE` of such masks is refused as inverted. Large nails of close-ups leave
background along part of the border, and pass."""
STOPPED = ("nothing half-written was kept (the prepared folder is as it "
           "was); run the same command again to finish.")
"""What a stop (Ctrl-C, SIGTERM) of preparation leaves: the end of its one line."""
LAYOUT_HELP = ("Put the real dataset there as Images/<type>/<name>.png|.jpg with masks of the "
               "same names in Masks/<type>/ (types 1..4), or all files directly in Images/ "
               "and Masks/ (one type), or leave data_root and "
               "NAILSEG_DATA_ROOT empty to use the synthetic set: `make data`, or "
               "nailseg_common.data.synthetic.generate_synthetic_dataset(root, 400).")


@dataclass(frozen=True)
class Pair:
    """One image and its mask; ``type`` is the sub-folder name (:data:`FLAT_TYPE` in the flat
    layout), ``name`` the shared stem (both in Unicode NFC)."""

    image: Path
    mask: Path
    type: str
    name: str


def _listing(paths: list[str]) -> str:
    shown = "\n  ".join(paths[:MAX_LISTED])
    more = f"\n  ... and {len(paths) - MAX_LISTED} more" if len(paths) > MAX_LISTED else ""
    return f"\n  {shown}{more}"


def _shown(path: Path) -> str:
    """``path`` as printable text, whatever bytes its name has (``\\x82`` for a byte that is
    not UTF-8)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _is_utf8(path: Path) -> bool:
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:  # a byte that is not UTF-8, kept by Python as a surrogate
        return False
    return True


def _key(name: str) -> str:
    """``name`` in Unicode NFC, so that a name copied from macOS (NFD) matches its partner."""
    return unicodedata.normalize("NFC", name)


def _entries(folder: Path, raw: Path) -> list[Path]:
    """The visible entries of ``folder``, sorted; broken links raise (unreadable folders
    raise ``PermissionError``, which :func:`find_pairs` names)."""
    entries = sorted(e for e in folder.iterdir() if not e.name.startswith("."))
    garbled = [_shown(e.relative_to(raw)) for e in entries if not _is_utf8(e)]
    if garbled:
        raise DataError(f"{len(garbled)} name(s) in {_shown(raw)} are not UTF-8 (as unzip writes "
                        "the names of a zip made on Windows): rename them, e.g. convmv -f cp437 "
                        f"-t utf-8 -r --notest {_shown(raw)}, or unzip the archive again with "
                        "its code page (unzip -O cp437 ...):" + _listing(garbled))
    broken = [f"{e.relative_to(raw)} -> {os.readlink(e)}" for e in entries
              if e.is_symlink() and not e.exists()]
    if broken:
        raise DataError(f"{len(broken)} broken symbolic link(s) in {raw} (their target is gone): "
                        "restore the targets, or delete the links:" + _listing(broken))
    return entries


def _layout_folder(raw: Path, name: str) -> Path | None:
    """The folder of ``raw`` called ``name`` in any letter case; two candidates raise."""
    found = [e for e in _entries(raw, raw) if e.name.casefold() == name.casefold() and e.is_dir()]
    if len(found) > 1:
        raise DataError(f"Data root {raw} has {len(found)} folders named {name}: "
                        f"{' and '.join(e.name for e in found)}. Merge them into one {name} folder.")
    return found[0] if found else None


def _type_folders(folder: Path, raw: Path) -> dict[str, Path] | None:
    """Sub-folders of ``Images`` or ``Masks`` by name, or ``None`` when it holds files
    directly (the flat layout); files and sub-folders together are an error."""
    entries = _entries(folder, raw)
    folders = {_key(e.name): e for e in entries if e.is_dir()}
    files = [str(e.relative_to(raw)) for e in entries if not e.is_dir()]
    if folders and files:
        subfolders = [str(e.relative_to(raw)) for e in folders.values()]
        raise DataError(
            f"{folder} holds both files and sub-folders: use one layout, either all files "
            f"directly in {folder.name}/ (taken as one type) or all in type sub-folders "
            f"({folder.name}/1 .. {folder.name}/4). Move the files into a sub-folder, or the "
            f"sub-folders' files up.\n{len(files)} file(s):" + _listing(files)
            + f"\n{len(subfolders)} sub-folder(s):" + _listing(subfolders))
    return None if files else folders


def _check_types(types: list[str], raw: Path) -> None:
    """Refuse type folders named like a split; say what other non-numeric ones are taken for."""
    splits = [t for t in types if SPLIT_WORDS & set(re.split(r"[^a-z]+", t.lower()))]
    if splits:
        raise DataError(
            f"Images/{', Images/'.join(splits)} in {raw} look like a train/validation split, "
            "not nail types: the course makes its own split, so your validation photos would "
            "be trained on. Put all pairs into type folders (Images/1..4 and Masks/1..4, or "
            "only Images/1 and Masks/1 without types), and keep photos you hold out elsewhere.")
    named = [t for t in types if not t.isdigit()]
    if named:
        warnings.warn(f"Sub-folders Images/{', Images/'.join(named)} of {raw} are taken as nail "
                      "types (numbered 1..4 in the real set): each is split into train and "
                      "valid on its own.", stacklevel=3)


def _files_by_stem(folder: Path, raw: Path) -> dict[str, Path]:
    files: dict[str, Path] = {}
    for entry in _entries(folder, raw):
        if entry.is_dir():
            raise DataError(f"Folder {entry.relative_to(raw)} inside a type folder: the course "
                            f"reads only the files directly in {folder.relative_to(raw)}. Move "
                            "its files up (their masks likewise), or move it out of the dataset.")
        if entry.suffix.lower() not in IMAGE_SUFFIXES:
            raise DataError(f"Unsupported file {entry}: the course reads PNG and JPEG only. "
                            "Convert it to PNG, or move it out of the dataset folder.")
        stem = _key(entry.stem)
        if stem in files:
            raise DataError(f"Two files named {stem!r} in {folder.relative_to(raw)}: "
                            f"{files[stem].name} and {entry.name}. Keep one of them.")
        files[stem] = entry
    return files


def find_pairs(raw: str | os.PathLike) -> list[Pair]:
    """All image/mask pairs under ``raw``, sorted: ``Images/<type>/`` and ``Masks/<type>/``,
    or the flat layout, files directly in ``Images/`` and ``Masks/``, taken as the one type
    :data:`FLAT_TYPE`. ``Images`` and ``Masks`` are found in any letter case.

    Raises :class:`DataError` for a missing or empty root (a file or a zip archive named as
    the root), names that are not UTF-8, two folders differing only in
    case (``images`` and ``Images``), files and sub-folders mixed in ``Images`` or ``Masks``
    (or one flat, the other not), unsupported files, broken links, type folders named like
    a split, folders inside type folders, folders that cannot be listed or entered, and
    images without a mask or masks without an image (all of them listed).
    """
    raw = Path(raw)
    try:
        return _find_pairs(raw)
    except PermissionError as error:  # a folder without read (list) or execute (enter) rights
        raise DataError(f"Cannot read {_shown(Path(error.filename or raw))}: permission denied. "
                        f"Give your user read access to the dataset (chmod -R u+rX "
                        f"{_shown(raw)}).") from None


def _find_pairs(raw: Path) -> list[Pair]:
    if not _is_utf8(raw):
        raise DataError(f"Data root {_shown(raw)} has a name that is not UTF-8: rename it "
                        "(e.g. with convmv -f cp437 -t utf-8 --notest).")
    if raw.is_file() and (zipfile.is_zipfile(raw) or raw.suffix.lower() == ".zip"):
        raise DataError(f"Data root {raw} is a zip archive: unzip it first (unzip {raw} -d "
                        f"{raw.with_suffix('')}), then use the folder that holds Images/ and "
                        "Masks/ as the data root.")
    if raw.is_file():
        raise DataError(f"Data root {raw} is a file, not a folder. {LAYOUT_HELP}")
    if not raw.is_dir():
        raise DataError(f"Data root {raw} does not exist. {LAYOUT_HELP}")
    images_dir, masks_dir = _layout_folder(raw, "Images"), _layout_folder(raw, "Masks")
    missing = [name for name, d in (("Images", images_dir), ("Masks", masks_dir)) if d is None]
    if missing:
        raise DataError(f"Data root {raw} has no {' and no '.join(missing)} folder. {LAYOUT_HELP}")
    image_types, mask_types = _type_folders(images_dir, raw), _type_folders(masks_dir, raw)
    if image_types is None or mask_types is None:
        if image_types or mask_types:
            flat, typed = (images_dir, masks_dir) if image_types is None else (masks_dir, images_dir)
            raise DataError(f"{flat} holds its files directly but {typed} has sub-folders: lay "
                            "out images and masks alike, either both flat or both in the same "
                            "type sub-folders.")
        image_types, mask_types = {FLAT_TYPE: images_dir}, {FLAT_TYPE: masks_dir}
    else:
        _check_types(sorted(set(image_types) | set(mask_types), key=_type_order), raw)
    pairs, lonely_images, lonely_masks = [], [], []
    for kind in sorted(set(image_types) | set(mask_types), key=_type_order):
        images = _files_by_stem(image_types[kind], raw) if kind in image_types else {}
        masks = _files_by_stem(mask_types[kind], raw) if kind in mask_types else {}
        lonely_images += [str(images[s].relative_to(raw)) for s in sorted(set(images) - set(masks))]
        lonely_masks += [str(masks[s].relative_to(raw)) for s in sorted(set(masks) - set(images))]
        pairs += [Pair(images[s], masks[s], kind, s) for s in sorted(set(images) & set(masks))]
    problems = []
    if lonely_images:
        problems.append(f"{len(lonely_images)} image(s) without a mask of the same name:"
                        + _listing(lonely_images))
    if lonely_masks:
        problems.append(f"{len(lonely_masks)} mask(s) without an image of the same name:"
                        + _listing(lonely_masks))
    if problems:
        raise DataError(f"Unmatched files in {raw}: add the missing partner (an image needs a "
                        "mask of the same name, .png or .jpg, in the matching Masks folder) or "
                        "remove the file.\n" + "\n".join(problems))
    if not pairs:
        raise DataError(f"No images found under {raw}. {LAYOUT_HELP}")
    return pairs


def _fingerprint(pairs: list[Pair], raw: Path) -> str:
    """Identity of the inputs: relative paths, sizes, modification times and contents: a
    digest of each mask whole (small files, and a mask redrawn keeps size and time as often as
    not) and of each photo's ends (:func:`~nailseg_common.core.files.file_record`: another
    photo differs in its header and its last bytes)."""
    digest = hashlib.sha256()
    for pair in pairs:
        for path, content in ((pair.image, file_record(pair.image)["digest"]),
                              (pair.mask, content_digest(pair.mask))):
            stat = path.stat()
            digest.update(f"{path.relative_to(raw).as_posix()}|{stat.st_size}|{stat.st_mtime_ns}"
                          f"|{content}\n".encode())
    return digest.hexdigest()


def _settings(pairs: list[Pair], raw: Path, seed: int, valid_fraction: float) -> dict:
    return {"version": PREPARATION_VERSION, "raw": str(raw.resolve()), "seed": seed,
            "valid_fraction": valid_fraction, "fingerprint": _fingerprint(pairs, raw)}


def _damage(prepared: Path, settings: dict) -> list[str] | None:
    """``[]`` when ``prepared`` holds the result for ``settings`` intact, the damaged files
    when it holds it damaged, ``None`` when it holds nothing for these settings."""
    try:
        found = json.loads((prepared / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return None
    files = found.get("files") if isinstance(found, dict) else None
    if not isinstance(files, dict) or {k: found.get(k) for k in settings} != settings:
        return None
    return verify_records(prepared, files)


TRANSPOSING = (5, 6, 7, 8)
"""EXIF orientations that swap width and height."""


def _ambiguous(turns: tuple[int, int], shape: tuple[int, ...]) -> bool:
    """Whether a pair of these EXIF ``turns`` and this turned ``shape`` may be misaligned:
    the tags differ and the stored files have the same size (so the turn is not what made
    them match; a mask saved at its photo's displayed size is aligned)."""
    stored_differ = (turns[0] in TRANSPOSING) != (turns[1] in TRANSPOSING) and shape[0] != shape[1]
    return turns[0] != turns[1] and not stored_differ


def _orientations(turns: tuple[int, int]) -> str:
    return " and ".join(f"{what} {t if t != 1 else 'none'}" for what, t in zip(("image", "mask"),
                                                                              turns))


class Converted(NamedTuple):
    """One pair checked, its label written: its CSV row, nail share (of all pixels and of the border
    pixels), void pixels, EXIF turns and whether they may leave the pair misaligned."""

    row: dict
    share: float
    border: float
    void_pixels: int
    turns: tuple[int, int]
    exif_doubt: bool


def label_of(pair_type: str, name: str) -> Path:
    """Where a pair's label goes in the prepared folder: ``labels/<type>/<name>.png``."""
    return Path("labels", pair_type, f"{name}.png")


def read_label(path: str | os.PathLike) -> np.ndarray:
    """A label written by preparation (:func:`label_of`) as ``HxW uint8`` in {0, 1}."""
    with Image.open(path) as label:
        return (np.asarray(label) > 127).astype(np.uint8)


def read_pair(image: str | os.PathLike, label: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """A photo (``read_rgb``: HxWx3 uint8, upright) and its label (:func:`read_label`); a pair
    whose sizes differ is an error naming the photo."""
    photo, mask = read_rgb(image), read_label(label)
    if photo.shape[:2] != mask.shape:
        raise ValueError(f"{image!r} is {photo.shape[:2]}, its mask {mask.shape}")
    return photo, mask


def _convert_pair(pair: Pair, raw: Path, staging: Path) -> Converted | str:
    """``pair`` decoded and checked, its label written under ``staging/labels``, or the
    problem that stops it."""
    try:
        image = read_rgb(pair.image)
        mask, void_pixels = read_mask(pair.mask)
        turns = exif_orientation(pair.image), exif_orientation(pair.mask, "Mask")
    except DataError as error:
        return str(error)
    if image.shape[:2] != mask.shape:
        exif = (f" Their EXIF orientations differ ({_orientations(turns)}): each file is "
                "turned as its own tag says." if turns[0] != turns[1] else "")
        return (f"Size mismatch: image {pair.image} is {image.shape[1]}x{image.shape[0]} but "
                f"mask {pair.mask} is {mask.shape[1]}x{mask.shape[0]} (width x height).{exif} "
                "Re-export the mask at the image's size, or remove the pair.")
    label = label_of(pair.type, pair.name)
    (staging / label).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(mask * np.uint8(255)).save(staging / label, compress_level=1)
    row = {"image": pair.image.relative_to(raw).as_posix(),
           "mask": pair.mask.relative_to(raw).as_posix(), "type": pair.type,
           "label": label.as_posix()}
    border = np.concatenate([mask[0], mask[-1], mask[:, 0], mask[:, -1]])
    return Converted(row, float(mask.mean()), float(border.mean()), void_pixels, turns,
                     _ambiguous(turns, mask.shape))


def _convert(pairs: list[Pair], raw: Path, staging: Path,
             progress: bool) -> tuple[list[dict], list[str]]:
    """Decode and check every pair and write its label under ``staging/labels``, one thread
    per core (decoding and writing release the GIL); all problems are gathered, then raised.

    Returns the CSV rows and the masks without any nail pixel (relative paths). Warns
    about pairs whose EXIF orientations differ and masks with void pixels; refuses masks
    whose nail share is far above the set's (:data:`NAIL_SHARE_FACTOR`) with nail along much of
    their border (:data:`OUTLIER_BORDER`), and a set whose
    masks mostly look inverted (:data:`INVERTED_BORDER`).
    """
    rows, problems, empty, void, one_sided, shares, framed = [], [], [], [], [], {}, []
    with ThreadPoolExecutor(usable_cores()) as pool:
        converted = pool.map(lambda pair: _convert_pair(pair, raw, staging), pairs)
        for pair, done in zip(pairs, progress_bar(converted, "Checking pairs", len(pairs),
                                                  enabled=progress)):
            if isinstance(done, str):
                problems.append(done)
                continue
            relative_mask = done.row["mask"]
            if done.exif_doubt:
                one_sided.append(f"{pair.image} and {pair.mask} ({_orientations(done.turns)})")
            shares[relative_mask] = done.share, done.border  # of all pixels, of the border
            if done.share > MAX_NAIL_SHARE and done.border >= INVERTED_BORDER:
                framed.append(f"{relative_mask} ({done.share:.0%} nail)")
            if done.share == 0:
                empty.append(relative_mask)
            if done.void_pixels:
                void.append(f"{relative_mask} ({done.void_pixels} pixel(s))")
            rows.append(done.row)
    if len(empty) > MAX_EMPTY_SHARE * len(pairs):
        problems.append(f"{len(empty)} of {len(pairs)} masks have no nail pixel at all: more "
                        "likely masks whose nail was lost (a 0/1 mask saved as a low-quality "
                        "JPEG, a nail in a channel the course does not read) than photos "
                        "without nails. Re-export them as PNG, nail 255 on 0:" + _listing(empty))
    typical = float(np.median([share for share, _ in shares.values()])) if shares else 0.0
    if len(framed) > MAX_EMPTY_SHARE * len(pairs):
        masks = Path(os.path.commonpath([pair.mask.parent for pair in pairs]))
        files = masks / ("*" if all(pair.mask.parent == masks for pair in pairs) else "*/*")
        problems.append(f"{len(framed)} of {len(pairs)} masks in {masks} are mostly nail "
                        f"({typical:.0%} median) with nail along nearly all of their border, "
                        "where photos show background: the set looks inverted (nail dark on a "
                        "light background). Invert every mask (nail 255 on 0), e.g. with "
                        f"ImageMagick: mogrify -negate {files}.png:" + _listing(framed))
    inverted = [f"{name} ({share:.0%} nail)" for name, (share, border) in shares.items()
                if share > max(MAX_NAIL_SHARE, NAIL_SHARE_FACTOR * typical)
                and border > OUTLIER_BORDER]
    if inverted:
        problems.append(f"{len(inverted)} mask(s) are mostly nail, far from the set's "
                        f"{typical:.0%} (median): inverted masks (nail dark on a light "
                        "background)? Invert them (nail 255 on 0), or remove the pairs:"
                        + _listing(inverted))
    if problems:
        raise DataError(f"{len(problems)} problem(s) in {raw}; nothing was written:\n"
                        + "\n".join(problems[:MAX_LISTED])
                        + (f"\n... and {len(problems) - MAX_LISTED} more" if len(problems)
                           > MAX_LISTED else ""))
    if empty:
        warnings.warn(f"{len(empty)} mask(s) in {raw} have no nail pixel; they are kept as photos "
                      "without nails (if they should show nails, fix them and run again):"
                      + _listing(empty), stacklevel=4)
    if void:
        warnings.warn(f"{len(void)} mask(s) in {raw} are label masks with void pixels ({VOID} "
                      "beside labels 0 and one other, the VOC convention, or a stray pixel), "
                      "read as background (if they should be nail, set them to the nail's "
                      "value and run again):" + _listing(void), stacklevel=4)
    if one_sided:
        warnings.warn(f"The EXIF orientation of {len(one_sided)} pair(s) differs between image "
                      "and mask: each file is turned as its own tag says, as a photo viewer "
                      "shows it. If a mask was drawn on the photo as stored (unturned), they no "
                      "longer line up: save the mask turned like its photo, or both without "
                      "the tag:" + _listing(one_sided), stacklevel=4)
    return rows, empty


def _check_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise DataError(f"seed must be a whole number >= 0 (it seeds the train/valid split and "
                        f"the synthetic set), got {seed!r}: use 0, 1, 2...")


@contextlib.contextmanager
def _writing(folder: Path) -> Iterator[None]:
    """Turn a failure to write ``folder`` (read-only, a file, a full disk) into a
    :class:`DataError` saying what to do; staged folders are already gone by then."""
    try:
        yield
    except OSError as error:
        raise DataError(unwritable(error, folder)) from None


def prepare_dataset(raw: str | os.PathLike, prepared: str | os.PathLike, *, seed: int = 0,
                    valid_fraction: float = 0.2, progress: bool = True,
                    force: bool = False) -> Path:
    """Validate ``raw``, split it and write CSVs and labels to ``prepared``.

    Skipped when ``prepared`` already holds the result for the same inputs and settings,
    every file intact (unless ``force``); rebuilt, with a warning naming the damaged
    files, when one was deleted, truncated or replaced. Returns ``prepared``.
    """
    raw, prepared = Path(raw), Path(prepared)
    _check_seed(seed)
    pairs = find_pairs(raw)
    settings = _settings(pairs, raw, seed, valid_fraction)
    with _writing(prepared):
        return _build(pairs, raw, prepared, settings, force, progress)


def _build(pairs: list[Pair], raw: Path, prepared: Path, settings: dict, force: bool,
           progress: bool) -> Path:
    """Write ``prepared`` from ``pairs``, unless it holds the result for ``settings`` intact."""
    seed, valid_fraction = settings["seed"], settings["valid_fraction"]
    if not force and _damage(prepared, settings) == [] and not stale_staging(prepared):
        return prepared
    with folder_lock(prepared):  # which also deletes stale staging folders
        damage = _damage(prepared, settings)
        if not force and damage == []:
            return prepared
        if damage:
            warnings.warn(f"Prepared folder {prepared} is damaged ({len(damage)} file(s)); "
                          f"rebuilding it from {raw}:" + _listing(damage), stacklevel=4)
        train, valid = split_pairs(pairs, valid_fraction, seed)
        split_of = {pair.image: split for split, members in (("train", train), ("valid", valid))
                    for pair in members}
        with staged_folder(prepared) as staging:
            rows, empty = _convert(pairs, raw, staging, progress)
            (staging / "csv_file").mkdir()
            table = pd.DataFrame(rows, columns=COLUMNS)
            table["split"] = [split_of[raw / image] for image in table["image"]]
            for split in SPLITS:
                part = table[table["split"] == split][COLUMNS]
                part.to_csv(staging / "csv_file" / f"{split}.csv", index=False, lineterminator="\n")
            counts = {split: {str(k): int(v) for k, v in
                              table[table["split"] == split]["type"].value_counts(sort=False).items()}
                      for split in SPLITS}
            files = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*")
                           if p.is_file())
            manifest = {**settings, "counts": counts, "empty_masks": empty,
                        "files": file_records(staging, files)}
            (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
    return prepared


def ensure_prepared(profile: Profile, data_root: str | os.PathLike | None = None, *,
                    seed: int = 0, valid_fraction: float = 0.2,
                    progress: bool = True) -> DataLocation:
    """The prepared dataset for ``profile``: a real set at ``data_root`` (or
    ``NAILSEG_DATA_ROOT``), else the synthetic set of ``profile.num_images`` images,
    generated if needed. Idempotent: a second call with unchanged inputs changes nothing.
    """
    _check_seed(seed)
    location = data_location(profile.num_images, data_root)
    if location.synthetic:
        with _writing(location.raw):
            ensure_synthetic_dataset(location.raw, profile.num_images, seed=seed,
                                     progress=progress, photo_side=profile.photo_side)
    prepare_dataset(location.raw, location.prepared, seed=seed, valid_fraction=valid_fraction,
                    progress=progress)
    return location


def read_split(location: DataLocation, split: str) -> pd.DataFrame:
    """``train`` or ``valid`` as a DataFrame (``image`` and ``mask`` as given, ``label`` the
    mask as every pipeline reads it, ``type``), every path absolute (str)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    csv = location.train_csv if split == "train" else location.valid_csv
    if not csv.is_file():
        raise DataError(f"{csv} does not exist: prepare the data first with "
                        "nailseg_common.data.preparation.ensure_prepared(profile) or `make data`.")
    table = pd.read_csv(csv, dtype=str, keep_default_na=False)  # types "None", "NA" stay text
    for column in ("image", "mask"):
        table[column] = [str(location.raw / p) for p in table[column]]
    table["label"] = [str(location.prepared / p) for p in table["label"]]
    table["type"] = [int(t) if t.isdigit() else t for t in table["type"]]
    return table


def split_paths(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The photo and label paths of a :func:`read_split` frame (``image``, ``label``), as str."""
    if not {"image", "label"} <= set(frame.columns):
        raise ValueError("The frame lacks image/label columns: use preparation.read_split.")
    return frame["image"].astype(str).tolist(), frame["label"].astype(str).tolist()


MIN_STEPS_PER_EPOCH = 4


def fit_batch_to_split(profile: Profile, location: DataLocation) -> Profile:
    """``profile`` with a batch size the training split can fill at least
    :data:`MIN_STEPS_PER_EPOCH` times per epoch, saying so when it had to shrink it.

    A batch larger than the training set would give zero full batches (``drop_last``),
    and one or two steps per epoch make BatchNorm and the schedule see the same few
    batches; the training length itself is ``profile.max_steps``, whatever the batch size.
    """
    train_size = len(read_split(location, "train"))
    batch = min(profile.batch_size, max(1, train_size // MIN_STEPS_PER_EPOCH))
    if batch != profile.batch_size:
        full = train_size // profile.batch_size
        print(f"batch size {profile.batch_size} -> {batch}: {train_size} training images would "
              f"give {full} full batch{'' if full == 1 else 'es'} per epoch")
    return dataclasses.replace(profile, batch_size=batch)


def dataset_table(location: DataLocation) -> pd.DataFrame:
    """Both splits in one table with ``split``, ``height``, ``width`` and ``nail_fraction``
    (share of nail pixels), read from the labels."""
    parts = []
    for split in SPLITS:
        table = read_split(location, split)
        table["split"] = split
        parts.append(table)
    table = pd.concat(parts, ignore_index=True)
    masks = [read_label(path) for path in table["label"]]
    table["height"] = [m.shape[0] for m in masks]
    table["width"] = [m.shape[1] for m in masks]
    table["nail_fraction"] = [float(np.count_nonzero(m)) / m.size for m in masks]
    return table


def summary(location: DataLocation) -> str:
    """Counts per type and split, as text; says when the set is in the flat layout."""
    table = dataset_table(location)
    images = [Path(image) for image in table["image"]]
    counts = table.pivot_table(index="type", columns="split", values="image", aggfunc="count",
                               fill_value=0)
    kind = "synthetic" if location.synthetic else "real"
    empty = int((table["nail_fraction"] == 0).sum())
    kept = f", {empty} of them without any nail pixel (kept)" if empty else ""
    if all(image.parent.parent == location.raw for image in images):
        layout = (f"flat layout: {len(table)} pairs directly in {images[0].parent.name}/ and "
                  f"{Path(table['mask'][0]).parent.name}/, taken as one type ({FLAT_TYPE}); "
                  "by split:")
    else:
        layout = "types (sub-folders of Images/) by split:"
    return (f"{kind} dataset: {shown(location.raw)}\nprepared: {shown(location.prepared)}\n"
            f"{len(table)} pairs{kept}, sizes {table['width'].min()}..{table['width'].max()} x "
            f"{table['height'].min()}..{table['height'].max()} px\n"
            f"{layout}\n{counts.to_string()}")
