"""Reading dataset images and masks, whatever format a real set comes in.

Images become ``HxWx3 uint8`` RGB (RGBA loses its alpha, grayscale is repeated).
Masks become ``HxW uint8`` in {0, 1}: a pixel is nail when its brightest colour channel
is at least :data:`MASK_THRESHOLD` (of 255). That one rule handles 0/255 masks,
antialiased edges, 3-channel and lossy JPEG masks; masks whose values are only 0 and 1
are taken as they are. Problems raise :class:`DataError` naming the file and the fix.
"""

from __future__ import annotations

import os

import numpy as np
from PIL import Image, UnidentifiedImageError

MASK_THRESHOLD = 128
"""A mask pixel is nail when its brightest channel is >= this value (0..255 scale)."""


class DataError(ValueError):
    """A dataset file or folder the course cannot use; the message says which and how to fix it."""


def _open(path: str | os.PathLike, what: str) -> Image.Image:
    """Open and decode ``path`` fully, turning every failure into a :class:`DataError`."""
    try:
        image = Image.open(path)
        image.load()
    except FileNotFoundError:
        raise DataError(f"{what} {os.fspath(path)!r} does not exist: check the path "
                        "(and that image and mask share the same file name).") from None
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
    """Pixel values of a 16-bit or 32-bit single-channel image scaled to 0..255."""
    values = np.asarray(image, dtype=np.float64)
    top = 65535.0 if values.max(initial=0) > 255 else 255.0
    return np.clip(np.rint(values * (255.0 / top)), 0, 255).astype(np.uint8)


def read_rgb(path: str | os.PathLike) -> np.ndarray:
    """The image at ``path`` as ``HxWx3 uint8`` RGB (alpha dropped, gray repeated)."""
    image = _open(path, "Image")
    if image.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        gray = _to_8bit(image)
        return np.ascontiguousarray(np.repeat(gray[:, :, None], 3, axis=2))
    if image.mode != "RGB":
        image = image.convert("RGB")
    return np.asarray(image, dtype=np.uint8).copy()


def read_binary_mask(path: str | os.PathLike) -> np.ndarray:
    """The mask at ``path`` as ``HxW uint8`` in {0, 1} (see :data:`MASK_THRESHOLD`)."""
    image = _open(path, "Mask")
    if image.mode == "1":
        return np.asarray(image, dtype=np.uint8).copy()
    if image.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        values = _to_8bit(image)
    else:
        if image.mode in ("P", "PA", "CMYK", "YCbCr", "LAB", "HSV"):
            image = image.convert("RGBA" if "A" in image.mode or "transparency" in image.info
                                  else "RGB")
        values = np.asarray(image)
        if values.ndim == 3:
            colour = values[:, :, :3] if values.shape[2] >= 3 else values[:, :, :1]
            values = colour.max(axis=2)
    if values.max(initial=0) <= 1:  # a 0/1 mask
        return values.astype(np.uint8)
    return (values >= MASK_THRESHOLD).astype(np.uint8)
