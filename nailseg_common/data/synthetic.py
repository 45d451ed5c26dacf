"""The synthetic set on disk (generated once, in the real dataset's layout), and your photos
or a synthetic stand-in of another style when you have none (notebook 06).

Images are JPEG photos as a phone writes them, ``Images/<type>/<index>.jpg``, every one of
``photo_side`` pixels on its long side (a profile setting); masks ``Masks/<type>/<index>.png``
(0/255), as the photo is shown. They are drawn by :mod:`nailseg_common.data.scenes` (its styles
and types are named here too) and stored as users' photos come (:func:`jpeg_kind`): some
progressive, some grayscale or CMYK, a third stored on their side with an EXIF orientation
that turns them upright. A ``manifest.json`` marks a set complete.
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image

from nailseg_common.core.files import MANIFEST, folder_lock, staged_folder
from nailseg_common.data.scenes import (
    GENERATOR_VERSION,
    MAX_SIDE,
    STYLES,
    TYPE_DESCRIPTIONS,
    TYPES,
    look_of,
    synthetic_sample,
)
from nailseg_common.setup.environment import usable_cores
from nailseg_common.setup.paths import data_dir, data_location, shown
from nailseg_common.setup.profiles import select_profile
from nailseg_common.setup.progress import progress as progress_bar

__all__ = ["GENERATOR_VERSION", "STANDIN_MAX_IMAGES", "STYLES", "TYPES", "TYPE_DESCRIPTIONS",
           "ensure_synthetic_dataset", "generate_synthetic_dataset", "generation_processes",
           "is_complete", "jpeg_kind", "photos_or_standin", "synthetic_sample"]


def _manifest(num_images: int, seed: int, style: str, photo_side: int) -> dict:
    return {"generator": "nailseg_common.data.synthetic", "version": GENERATOR_VERSION,
            "style": style, "seed": seed, "num_images": num_images, "photo_side": photo_side}


def is_complete(root: str | Path, num_images: int, seed: int = 0, style: str = "course",
                photo_side: int = MAX_SIDE) -> bool:
    """True when ``root`` holds a finished set of ``num_images`` photos of ``style`` from
    ``seed`` at ``photo_side``."""
    try:
        found = json.loads((Path(root) / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return found == _manifest(num_images, seed, style, photo_side)


JPEG_QUALITY = 90
EXIF_ORIENTATION = 0x0112
ON_ITS_SIDE = 6  # EXIF: turn 90° clockwise to show


class JpegKind(NamedTuple):
    """How photo ``index`` is stored: its colour mode, progressive or not, on its side or not."""

    mode: str  # "RGB", "L" (grayscale) or "CMYK"
    progressive: bool
    on_its_side: bool


def jpeg_kind(index: int) -> JpegKind:
    """Photo ``index``'s storage: one in twenty grayscale, one in twenty CMYK, one in five
    progressive, one in three stored on its side (EXIF orientation 6), as phones and
    editors write them."""
    mode = "L" if index % 20 == 7 else "CMYK" if index % 20 == 13 else "RGB"
    return JpegKind(mode, index % 5 == 2, index % 3 == 1)


def _write_sample(staging: Path, seed: int, style: str, photo_side: int, index: int) -> None:
    kind, image, mask = synthetic_sample(seed, index, style=style, long_side=photo_side)
    stored = jpeg_kind(index)
    photo, exif = Image.fromarray(image).convert(stored.mode), Image.Exif()
    if stored.on_its_side and image.shape[0] != image.shape[1]:  # a viewer turns it upright
        # (a square photo stays upright: on its side it would look like a mask drawn unturned)
        photo = photo.transpose(Image.Transpose.ROTATE_90)
        exif[EXIF_ORIENTATION] = ON_ITS_SIDE
    photo.save(staging / "Images" / f"{kind}/{index:05d}.jpg", quality=JPEG_QUALITY,
               progressive=stored.progressive, exif=exif)
    Image.fromarray(mask * np.uint8(255)).save(staging / "Masks" / f"{kind}/{index:05d}.png",
                                               compress_level=1)


# A spawned process imports the data layer (torch with it, not Lightning) before it draws:
# about 3.5 s on a 2-core CPU, where one process draws about 10 images a second. Below this
# many images per process, starting processes saves little or nothing.
IMAGES_PER_PROCESS = 100


def generation_processes(num_images: int) -> int:
    """Processes that draw ``num_images`` samples (each is independent): one per
    ``IMAGES_PER_PROCESS`` images, at most the cores this process may use, at least one."""
    return max(1, min(usable_cores(), num_images // IMAGES_PER_PROCESS))


def _generate(root: Path, num_images: int, seed: int, style: str, photo_side: int,
              progress: bool) -> None:
    look = look_of(style)
    processes = generation_processes(num_images)
    with staged_folder(root) as staging:
        for kind in look.types:
            (staging / "Images" / str(kind)).mkdir(parents=True)
            (staging / "Masks" / str(kind)).mkdir(parents=True)
        write = functools.partial(_write_sample, staging, seed, style, photo_side)
        description = f"Generating synthetic nails ({style}, {processes} process{'es' if processes > 1 else ''})"
        if processes == 1:
            for index in progress_bar(range(num_images), description, enabled=progress):
                write(index)
        else:  # spawned workers: no state inherited from a kernel that may hold CUDA or threads
            with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
                done = pool.map(write, range(num_images), chunksize=4)
                for _ in progress_bar(done, description, total=num_images, enabled=progress):
                    pass
        manifest = _manifest(num_images, seed, style, photo_side)
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def _check_side(photo_side: int) -> None:
    if isinstance(photo_side, bool) or not isinstance(photo_side, int) or photo_side < 64:
        raise ValueError(f"photo_side must be a whole number of pixels >= 64, got {photo_side!r}")


def generate_synthetic_dataset(root: str | Path, num_images: int, seed: int = 0,
                               progress: bool = True, style: str = "course",
                               photo_side: int = MAX_SIDE) -> Path:
    """Write ``num_images`` synthetic photos (``photo_side`` pixels on their long side) and
    masks of ``style`` under ``root``, replacing it.

    ``style="course"`` (default) is the four-type training set, ``style="wide"`` the
    shipped model's wider pretraining set; ``style="photo"`` a
    stand-in for one's own phone photos and ``style="salon"`` a style held out from
    training (both type 1 only), see the module's docstring.
    The set is built in a temporary sibling folder and renamed into place, with a
    ``manifest.json`` (generator, version, style, seed, count) that marks it complete.
    """
    if num_images < 1:
        raise ValueError(f"num_images must be at least 1, got {num_images}")
    look_of(style)
    _check_side(photo_side)
    root = Path(root)
    with folder_lock(root):
        _generate(root, num_images, seed, style, photo_side, progress)
    return root


def ensure_synthetic_dataset(root: str | Path, num_images: int, seed: int = 0,
                             progress: bool = True, style: str = "course",
                             photo_side: int = MAX_SIDE) -> Path:
    """Generate the set under ``root`` unless a complete one of this style, seed, count and
    photo side is there."""
    root = Path(root)
    if is_complete(root, num_images, seed, style, photo_side):
        return root
    if num_images < 1:
        raise ValueError(f"num_images must be at least 1, got {num_images}")
    look_of(style)
    _check_side(photo_side)
    with folder_lock(root):
        if not is_complete(root, num_images, seed, style, photo_side):  # another process may have just made it
            _generate(root, num_images, seed, style, photo_side, progress)
    return root


STANDIN_MAX_IMAGES = 60  # a user's own set is a few dozen photos


def photos_or_standin(profile: str = "", data_root: str | os.PathLike = "",
                      num_images: int | None = None) -> Path:
    """The folder of your photos (``data_root`` or ``NAILSEG_DATA_ROOT``), or else a stand-in:
    synthetic photos of another style than the training set (one hand close up, warm indoor
    light, plain surfaces out of focus, other polish), all of one type, ``num_images`` of them
    (``None``: half the profile's synthetic set, at most :data:`STANDIN_MAX_IMAGES`). Says which."""
    location = data_location(0, data_root)
    if not location.synthetic:
        print(f"your photos: {shown(location.raw)}")
        return location.raw
    chosen = select_profile(profile)
    count = num_images or min(chosen.num_images // 2, STANDIN_MAX_IMAGES)
    photos = ensure_synthetic_dataset(data_dir() / f"standin-{count}", count, style="photo",
                                      photo_side=chosen.photo_side)
    print(f"no data_root: a synthetic stand-in of another style, {count} images ({shown(photos)}); "
          "bring your own photos with data_root=...")
    return photos
