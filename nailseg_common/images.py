"""Reading dataset images and masks, whatever format a real set comes in.

Every file is first turned as its own EXIF Orientation tag says (phone photos carry one),
so it is read the way a photo viewer shows it: an image and its mask line up when they
are drawn to match on screen, whether both, one or neither of them has the tag.

Images become ``HxWx3 uint8`` RGB (RGBA loses its alpha, grayscale is repeated).
16-bit grayscale is scaled by the bit depth its data uses: the smallest of 8, 10, 12, 14
or 16 bits that holds its brightest pixel (so 12-bit data, at most 4095, is not read
nearly black).

Masks become ``HxW uint8`` in {0, 1}. One value per pixel is taken first:

- colour masks use their brightest channel;
- with an alpha channel, a mask whose colour is the same everywhere (white or black
  under transparency) is its alpha channel; otherwise pixels more than half transparent
  are background.

Then the values must fit one of these encodings, else :class:`DataError`:

- 0/255 (antialiased, lossy or coloured too): nail when >= :data:`MASK_THRESHOLD`;
  this applies as soon as the brightest value reaches the threshold;
- 0/1: taken as they are. Saved as JPEG, whole 8x8 blocks come back at 2 (or 0), so a
  JPEG mask whose values are all <= :data:`JPEG_01_MAX` is a 0/1 mask, nail when >= 1;
- anything else below the threshold (a class mask 0/1/2 in a PNG, or a JPEG one that
  reaches 3, a dim export) is refused: it would change meaning.

A mask that comes out nail everywhere is refused (an inverted mask, or a nail drawn in a
channel the rule does not read). A mask with no nail pixel is returned: a photo without
nails is valid, and :mod:`~nailseg_common.preparation` reports such masks. Problems raise
:class:`DataError` naming the file and the fix.
"""

from __future__ import annotations

import os

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

MASK_THRESHOLD = 128
"""A mask pixel is nail when its value is >= this (0..255 scale), for 0/255 masks."""

JPEG_01_MAX = 2
"""A JPEG mask whose values are all <= this is a 0/1 mask (JPEG's DC steps make 1s into 2s)."""

BIT_DEPTHS = (8, 10, 12, 14, 16)
DEEP_MODES = ("I", "I;16", "I;16B", "I;16L", "F")
LOSSY_FORMATS = ("JPEG", "MPO")
MAX_LEVELS = 8


class DataError(ValueError):
    """A dataset file or folder the course cannot use; the message says which and how to fix it."""


def _open(path: str | os.PathLike, what: str) -> Image.Image:
    """Open and decode ``path`` fully, turned as its EXIF orientation says (see the module doc);
    every failure becomes a :class:`DataError`."""
    try:
        image = Image.open(path)
        image.load()
        ImageOps.exif_transpose(image, in_place=True)  # in place: keeps ``format``
    except FileNotFoundError:
        raise DataError(f"{what} {os.fspath(path)!r} does not exist: check the path "
                        "(and that image and mask share the same file name).") from None
    except PermissionError:
        raise DataError(f"Cannot read {what.lower()} {os.fspath(path)!r}: permission denied. "
                        "Give your user read access (chmod u+r), or copy the dataset to a "
                        "folder you own.") from None
    except UnidentifiedImageError:
        reason = "not a recognised image format"
    except (OSError, SyntaxError, ValueError) as error:
        reason = str(error) or type(error).__name__
    else:
        return image
    raise DataError(f"Cannot read {what.lower()} {os.fspath(path)!r} ({reason}): the file is "
                    "corrupt or not a PNG/JPEG. Re-export it, or delete it together with its "
                    "image/mask partner.")


def _to_8bit(image: Image.Image) -> np.ndarray:
    """A 16-bit or 32-bit single-channel image scaled to 0..255 by the bit depth it uses."""
    values = np.asarray(image, dtype=np.float64)
    peak = values.max(initial=0)
    bits = next((b for b in BIT_DEPTHS if peak < 2 ** b), None)
    top = 2.0 ** bits - 1 if bits else peak
    return np.clip(np.rint(values * (255.0 / top)), 0, 255).astype(np.uint8)


def read_rgb(path: str | os.PathLike) -> np.ndarray:
    """The image at ``path`` as ``HxWx3 uint8`` RGB (alpha dropped, gray repeated)."""
    image = _open(path, "Image")
    if image.mode in DEEP_MODES:
        gray = _to_8bit(image)
        return np.ascontiguousarray(np.repeat(gray[:, :, None], 3, axis=2))
    if image.mode != "RGB":
        image = image.convert("RGB")
    return np.asarray(image, dtype=np.uint8).copy()


def _mask_values(image: Image.Image) -> np.ndarray:
    """One ``uint8`` value per pixel: brightest colour channel, or alpha (see the module doc)."""
    if image.mode in DEEP_MODES:
        return _to_8bit(image)
    if image.mode not in ("L", "LA", "RGB", "RGBA"):
        image = image.convert("RGBA" if "A" in image.mode or "transparency" in image.info
                              else "RGB")
    pixels = np.asarray(image)
    if pixels.ndim == 2:
        return pixels
    if "A" not in image.getbands():
        return pixels.max(axis=2)
    colour, alpha = pixels[:, :, :-1].max(axis=2), pixels[:, :, -1]
    if colour.min() == colour.max() and alpha.min() != alpha.max():
        return alpha  # the nail is drawn in the alpha channel only
    return np.where(alpha >= MASK_THRESHOLD, colour, 0).astype(np.uint8)


def _levels(values: np.ndarray) -> str:
    levels = np.unique(values).tolist()
    if len(levels) <= MAX_LEVELS:
        return ", ".join(map(str, levels))
    return f"{', '.join(map(str, levels[:3]))}, ..., {levels[-1]} ({len(levels)} levels)"


def _binarise(values: np.ndarray, lossy: bool, path: str | os.PathLike) -> np.ndarray:
    """``values`` as {0, 1} by the documented encodings, or :class:`DataError`."""
    peak = int(values.max(initial=0))
    if peak <= 1:
        return values.astype(np.uint8)
    if peak >= MASK_THRESHOLD:
        return (values >= MASK_THRESHOLD).astype(np.uint8)
    if lossy and peak <= JPEG_01_MAX:
        return (values >= 1).astype(np.uint8)
    raise DataError(f"Mask {os.fspath(path)!r} has values {_levels(values)}: neither a 0/255 "
                    "nor a 0/1 mask (a class mask with several labels, or a dim export?), and "
                    "reading it would change its meaning. Save it with nail pixels 255 (or 1) "
                    "and everything else 0.")


def read_binary_mask(path: str | os.PathLike) -> np.ndarray:
    """The mask at ``path`` as ``HxW uint8`` in {0, 1}, by the rule in the module doc."""
    image = _open(path, "Mask")
    if image.mode == "1":
        mask = np.asarray(image, dtype=np.uint8).copy()
    else:
        mask = _binarise(_mask_values(image), image.format in LOSSY_FORMATS, path)
    if mask.size and mask.all():
        raise DataError(f"Mask {os.fspath(path)!r} is nail everywhere ({mask.shape[1]}x"
                        f"{mask.shape[0]} pixels): an inverted mask, or a nail drawn in a channel "
                        "the course does not read. Save it with nail pixels white (255) on black, "
                        "or remove the pair.")
    return mask
