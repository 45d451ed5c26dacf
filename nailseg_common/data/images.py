"""Reading dataset images and masks, whatever format a real set comes in.

Every file is first turned as its own EXIF Orientation tag says (phone photos carry one),
so it is read the way a photo viewer shows it; :func:`exif_orientation` gives the tag, so
that :mod:`~nailseg_common.data.preparation` can say when only one file of a pair has one.
Whether a file is lossy is judged by its content (``Image.format``, and for WebP its
``VP8``/``VP8L`` chunk), never by its extension. A photo larger than Pillow reads safely
(:data:`PIL.Image.MAX_IMAGE_PIXELS`, twice it refused) is named, with how to downscale it,
and so is a damaged EXIF block, in one warning instead of Pillow's own, which name no file.

Images become ``HxWx3 uint8`` RGB (RGBA loses its alpha, grayscale is repeated).
16-bit grayscale is scaled by the bit depth its data uses: the smallest of 8, 10, 12, 14
or 16 bits that holds its brightest pixel (so 12-bit data, at most 4095, is not read
nearly black).

Masks become ``HxW uint8`` in {0, 1} (the rule, also the table "How a mask is read" in
``docs/your_own_photos.md``):

1. One value per pixel: gray as it is; colour masks their brightest channel; palette masks
   their gray when every colour used is gray, else their palette index (a label:
   VOC's (64, 0, 0) is index 8, not a dark pixel); bilevel files as they are.
2. With transparency (not fully opaque): transparent pixels (alpha < 128) are background;
   the opaque ones are nail (an RGBA cut-out: the photo where the nail is), unless they
   are themselves two levels (a mask on a partly transparent canvas), then step 3 reads
   them.
3. Lossless values: two levels, any pair (0/1, 0/255, 0/100): the higher is nail. Labels
   ``{0, k, 255}`` with ``k`` < 128 and fewer 255s than ``k`` pixels: ``k`` is nail, 255
   the void (VOC's ring, or a stray pixel), read as background and counted in
   :attr:`MaskReading.void_pixels`. More levels are antialiased or feathered edges: nail
   from the middle of the darkest and brightest level up (128 for 0/255), unless a value
   far from both (by over 1/16 of the range) forms a region (a pixel equal to its four
   neighbours): a class mask 0/1/2 is refused, as is ``{0, k, 255}`` with more 255s than
   ``k`` pixels and a region of ``k``.
4. Lossy values (JPEG, lossy WebP): 0/255-like (brightest >= 128): nail from the middle up;
   a JPEG 0/1 mask (whole 8x8 blocks come back at 2) is nail >= 1; a lossy WebP 0/1
   mask has lost its nail to the compression and is refused, as is anything in between.

Refused, naming the file and the fix (:class:`DataError`): a mask that looks like a photo
(see :data:`PHOTO_SHARE`), one that is nail everywhere, and any values the rule above does
not cover. A mask with no nail pixel is returned: a photo without nails is valid, and
preparation reports it.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from nailseg_common.core.errors import DataError

MASK_THRESHOLD = 128
"""Alpha >= this is opaque; a 0/255 mask is nail >= this (the middle of its two levels)."""

JPEG_01_MAX = 2
"""A JPEG mask whose values are all <= this is a 0/1 mask (JPEG's DC steps make 1s into 2s)."""

VOID = 255
"""The void label of label masks (the VOC convention), read as background."""

PHOTO_LEVELS = 32
PHOTO_SHARE = 0.1
"""A mask with over :data:`PHOTO_LEVELS` levels and over this share of its pixels far (by
over 1/16 of its range) from both its darkest and its brightest level looks like a photo."""

BIT_DEPTHS = (8, 10, 12, 14, 16)
DEEP_MODES = ("I", "I;16", "I;16B", "I;16L", "F")
LOSSY_FORMATS = ("JPEG", "MPO")
MAX_LEVELS = 8
ORIENTATION = 0x0112
DOWNSCALE_HELP = ("Downscale it to at most 4000 pixels a side (the course resizes photos to a "
                  "few hundred pixels anyway), e.g. with ImageMagick: mogrify -resize "
                  "'4000x4000>' FILE, and its mask alike.")


_WARNINGS = threading.Lock()
"""``warnings.catch_warnings`` changes the whole process: preparation's threads take turns."""
_DAMAGED_EXIF: set[str] = set()
"""The files whose damaged EXIF block was named (once each)."""


class MaskReading(NamedTuple):
    """A mask as ``HxW uint8`` in {0, 1}, and how many void pixels were read as background."""

    mask: np.ndarray
    void_pixels: int


def _name(path: str | os.PathLike) -> str:
    return os.fspath(path) if isinstance(path, (str, os.PathLike)) else repr(path)


@contextlib.contextmanager
def _reading(path: str | os.PathLike, what: str) -> Iterator[None]:
    """Turn every failure to read ``path`` into a :class:`DataError` naming it and the fix."""
    name = _name(path)
    try:
        yield
    except FileNotFoundError:
        raise DataError(f"{what} {name!r} does not exist: check the path "
                        "(and that image and mask share the same file name).") from None
    except PermissionError:
        raise DataError(f"Cannot read {what.lower()} {name!r}: permission denied. "
                        "Give your user read access (chmod u+r), or copy the dataset to a "
                        "folder you own.") from None
    except Image.DecompressionBombError as error:
        pixels = re.search(r"\d+", str(error))
        size = f" ({int(pixels[0]) / 1e6:.0f} megapixels)" if pixels else ""
        raise DataError(f"{what} {name!r} is too large to read safely{size}: Pillow refuses "
                        f"more than {2 * Image.MAX_IMAGE_PIXELS / 1e6:.0f} megapixels. "
                        + DOWNSCALE_HELP.replace("FILE", name)) from None
    except UnidentifiedImageError:
        reason = "not a recognised image format"
    except (OSError, SyntaxError, ValueError) as error:
        reason = str(error) or type(error).__name__
    else:
        return
    raise DataError(f"Cannot read {what.lower()} {name!r} ({reason}): the file is corrupt or "
                    "not a PNG/JPEG. Re-export it, or delete it together with its image/mask "
                    "partner.")


def _open(path: str | os.PathLike, what: str) -> Image.Image:
    """``path`` opened lazily (header only); a photo past Pillow's warning size is named."""
    with _reading(path, what), _exif_checked(path, what):  # a JPEG's header reads its EXIF
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        image = Image.open(path)
    limit = Image.MAX_IMAGE_PIXELS
    if limit and image.width * image.height > limit:
        warnings.warn(f"{what} {_name(path)!r} has {image.width * image.height / 1e6:.0f} "
                      "megapixels: reading it takes a lot of memory and time. "
                      + DOWNSCALE_HELP.replace("FILE", _name(path)))  # once per file
    return image


@contextlib.contextmanager
def _exif_checked(path: str | os.PathLike, what: str) -> Iterator[None]:
    """Run a block that parses the EXIF of ``path`` with Pillow's warnings about a damaged
    block ("Truncated File Read", naming no file) caught, then name the file in one warning,
    once a process (preparation reads each photo twice)."""
    with _WARNINGS, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    damaged = sorted({str(w.message) for w in caught if "PIL" in Path(w.filename).parts})
    with _WARNINGS:
        first = bool(damaged) and _name(path) not in _DAMAGED_EXIF
        if first:
            _DAMAGED_EXIF.add(_name(path))
    if first:
        warnings.warn(f"{what} {_name(path)!r} has a damaged EXIF block ({'; '.join(damaged)}): "
                      "the tags that could be read are used, so it may be turned wrongly; if "
                      "it is, save it again without EXIF (e.g. exiftool -all= FILE).")


def _webp_is_lossy(image: Image.Image) -> bool:
    """Whether a WebP file's image data is lossy (a ``VP8 `` chunk) rather than ``VP8L``."""
    handle = image.fp
    handle.seek(12)  # after RIFF, its size and WEBP
    while len(header := handle.read(8)) == 8:
        chunk, size = header[:4], int.from_bytes(header[4:], "little")
        if chunk in (b"VP8 ", b"VP8L"):
            return chunk == b"VP8 "
        handle.seek(size + size % 2, os.SEEK_CUR)
    return False


def _decode(path: str | os.PathLike, what: str) -> tuple[Image.Image, str | None]:
    """The file decoded and turned as its EXIF orientation says, and the lossy format it
    was saved in (``None``: lossless), judged by its content."""
    image = _open(path, what)
    with _reading(path, what):
        lossy = image.format if image.format in LOSSY_FORMATS else None
        if image.format == "WEBP" and _webp_is_lossy(image):
            lossy = "lossy WebP"
        image.load()
        with _exif_checked(path, what):
            ImageOps.exif_transpose(image, in_place=True)  # in place: keeps ``format``
    return image, lossy


class Header(NamedTuple):
    """What a file's header says: its format (``"JPEG"``, ``"PNG"``...), colour mode
    (``"RGB"``, ``"L"``, ``"CMYK"``...), EXIF orientation (1: as stored) and whether it is
    a progressive JPEG."""

    format: str
    mode: str
    orientation: int
    progressive: bool


def read_header(path: str | os.PathLike, what: str = "Image") -> Header:
    """The :class:`Header` of the file at ``path``, read without decoding its pixels (a
    PNG's eXIf chunk, which the PNG specification puts before them, included)."""
    with _open(path, what) as image, _reading(path, what):
        exif = Image.Exif()
        with _exif_checked(path, what):
            exif.load(image.info.get("exif", b""))
        return Header(image.format or "", image.mode, int(exif.get(ORIENTATION, 1)),
                      bool(image.info.get("progressive")))


def refuse_deep_photos(paths) -> None:
    """Raise a :class:`DataError` naming the photos of ``paths`` with more than 8 bits a
    channel, for decoders that scale them by their full range (DALI), where :func:`read_rgb`
    reads them by the bits their data uses."""
    deep = [os.fspath(p) for p in paths if read_header(p).mode in DEEP_MODES]
    if deep:
        raise DataError(f"{len(deep)} photo(s) have more than 8 bits a channel, which DALI reads "
                        "by their full range (12-bit data comes out nearly black): convert them "
                        "to 8 bits (ImageMagick: mogrify -depth 8 FILE), or train with notebook "
                        "02's or 03's pipeline, which read them by the bits they use: "
                        + ", ".join(deep[:5]) + (" ..." if len(deep) > 5 else ""))


def name_undecodable(files: list[str], decode: Callable[[int], object]) -> None:
    """After a decoder refused a batch: a :class:`DataError` naming the first of ``files``
    that ``decode(index)`` refuses alone (a ``RuntimeError``); returns if none does."""
    for index, file in enumerate(files):
        try:
            decode(index)
        except RuntimeError as error:
            raise DataError(f"Cannot decode photo {file!r} ({error}): re-save it as a JPEG or "
                            "PNG, or remove it with its mask.") from None


def exif_orientation(path: str | os.PathLike, what: str = "Image") -> int:
    """The EXIF Orientation tag of the file at ``path``: 1 (as stored) when it has none,
    from its header (:func:`read_header`)."""
    return read_header(path, what).orientation


def _to_8bit(image: Image.Image) -> np.ndarray:
    """A 16-bit or 32-bit single-channel image scaled to 0..255 by the bit depth it uses."""
    values = np.asarray(image, dtype=np.float64)
    peak = values.max(initial=0)
    bits = next((b for b in BIT_DEPTHS if peak < 2 ** b), None)
    top = 2.0 ** bits - 1 if bits else peak
    return np.clip(np.rint(values * (255.0 / top)), 0, 255).astype(np.uint8)


def read_rgb(path: str | os.PathLike) -> np.ndarray:
    """The image at ``path`` as ``HxWx3 uint8`` RGB (alpha dropped, gray repeated)."""
    image, _ = _decode(path, "Image")
    if image.mode in DEEP_MODES:
        gray = _to_8bit(image)
        return np.ascontiguousarray(np.repeat(gray[:, :, None], 3, axis=2))
    if image.mode != "RGB":
        image = image.convert("RGB")
    return np.asarray(image, dtype=np.uint8).copy()


def _palette_values(image: Image.Image) -> np.ndarray:
    """A palette mask's gray when every colour it uses is gray, else its palette indices."""
    indices = np.asarray(image)
    palette = np.zeros((256, 3), np.uint8)
    colours = np.asarray(image.getpalette("RGB") or [], np.uint8).reshape(-1, 3)[:256]
    palette[:len(colours)] = colours
    used = palette[np.unique(indices)]
    if (used == used[:, :1]).all():
        return palette[indices, 0]
    return indices.astype(np.uint8)


def _mask_values(image: Image.Image) -> np.ndarray:
    """One ``uint8`` value per pixel, by steps 1 and 2 of the rule (see the module doc)."""
    if image.mode in DEEP_MODES:
        return _to_8bit(image)
    if image.mode == "P" and "transparency" not in image.info:
        return _palette_values(image)
    if image.mode not in ("L", "LA", "RGB", "RGBA"):
        image = image.convert("RGBA" if "A" in image.mode or "transparency" in image.info
                              else "RGB")
    pixels = np.asarray(image)
    if pixels.ndim == 2:
        return pixels
    colour = pixels[:, :, :3 if image.mode.startswith("RGB") else 1].max(axis=2)
    opaque = pixels[:, :, -1] >= MASK_THRESHOLD
    if "A" not in image.mode or opaque.all():
        return colour
    levels = np.unique(colour[opaque])
    if len(levels) == 2:  # a two-level mask on a partly transparent canvas
        return np.where(opaque, colour, levels[0]).astype(np.uint8)
    return opaque.astype(np.uint8)  # a cut-out: the alpha says where the nail is


def _levels(values: np.ndarray) -> str:
    levels = np.unique(values).tolist()
    if len(levels) <= MAX_LEVELS:
        return ", ".join(map(str, levels))
    return f"{', '.join(map(str, levels[:3]))}, ..., {levels[-1]} ({len(levels)} levels)"


def _looks_like_a_photo(values: np.ndarray, levels: np.ndarray) -> bool:
    low, high = int(levels[0]), int(levels[-1])
    margin = (high - low) / 16
    far = (values > low + margin) & (values < high - margin)
    return len(levels) > PHOTO_LEVELS and far.mean() > PHOTO_SHARE


def _has_regions_between(values: np.ndarray, low: float, high: float) -> bool:
    """Whether some pixel strictly between ``low`` and ``high`` equals its four neighbours
    (a region of that value, which antialiased edges never make)."""
    centre = values[1:-1, 1:-1]
    same = ((centre == values[:-2, 1:-1]) & (centre == values[2:, 1:-1])
            & (centre == values[1:-1, :-2]) & (centre == values[1:-1, 2:]))
    return bool((same & (centre > low) & (centre < high)).any())


def _binarise(values: np.ndarray, lossy: str | None, name: str) -> MaskReading:
    """``values`` as {0, 1} by steps 3 and 4 of the rule (the module doc), or DataError."""
    levels, counts = np.unique(values, return_counts=True)
    low, high = int(levels[0]), int(levels[-1])
    middle = (low + high + 1) // 2
    if len(levels) == 1:
        return MaskReading(np.full(values.shape, int(high > 0), np.uint8), 0)
    refused = f"Mask {name!r} has values {_levels(values)}: "
    if _looks_like_a_photo(values, levels):
        raise DataError(refused + "it looks like a photo, not a mask (a photo copied into "
                        "Masks/?). Put the pair's mask there: nail 255 (or 1), the rest 0.")
    if lossy and high >= MASK_THRESHOLD:
        return MaskReading((values >= middle).astype(np.uint8), 0)
    if lossy == "JPEG" and high <= JPEG_01_MAX:
        return MaskReading((values >= 1).astype(np.uint8), 0)
    if lossy:
        reason = ("a 0/1 mask saved as lossy WebP, whose compression has turned part of its "
                  "nail into background" if high <= JPEG_01_MAX else
                  "neither a 0/255 nor a 0/1 mask (a class mask with several labels, or a dim "
                  "export?)")
        raise DataError(refused + f"{reason}; saved as {lossy}, it cannot be read safely. "
                        "Save it as PNG (lossless) with nail pixels 255 (or 1) and everything "
                        "else 0.")
    if len(levels) == 2:
        return MaskReading((values == high).astype(np.uint8), 0)
    labels = len(levels) == 3 and low == 0 and high == VOID and levels[1] < MASK_THRESHOLD
    if labels and counts[2] <= counts[1]:
        return MaskReading((values == levels[1]).astype(np.uint8), int(counts[2]))
    margin = 0 if labels else (high - low) / 16
    if _has_regions_between(values, low + margin, high - margin):
        raise DataError(refused + "more levels than a two-level mask, and not an antialiased "
                        "edge (a class mask with several labels, a label mask whose void "
                        f"{VOID} outweighs its nail, or a very blurred edge?): reading it would "
                        "change its meaning. Save it with nail pixels 255 (or 1) and everything "
                        "else 0.")
    return MaskReading((values >= middle).astype(np.uint8), 0)


def read_mask(path: str | os.PathLike) -> MaskReading:
    """The mask at ``path`` by the rule in the module doc, and its void pixel count."""
    image, lossy = _decode(path, "Mask")
    name = _name(path)
    if image.mode == "1":
        reading = MaskReading(np.asarray(image, dtype=np.uint8).copy(), 0)
    else:
        reading = _binarise(_mask_values(image), lossy, name)
    mask = reading.mask
    if mask.size and mask.all():
        raise DataError(f"Mask {name!r} is nail everywhere ({mask.shape[1]}x"
                        f"{mask.shape[0]} pixels): an inverted mask, or a nail drawn in a channel "
                        "the course does not read. Save it with nail pixels white (255) on black, "
                        "or remove the pair.")
    return reading


def read_binary_mask(path: str | os.PathLike) -> np.ndarray:
    """The mask at ``path`` as ``HxW uint8`` in {0, 1}, by the rule in the module doc."""
    return read_mask(path).mask
