"""Your photos, or a synthetic stand-in of another style when you have none (notebook 06)."""

from __future__ import annotations

import os
from pathlib import Path

from .paths import data_dir, data_location
from .profiles import select_profile
from .synthetic import ensure_synthetic_dataset

STANDIN_MAX_IMAGES = 60  # a user's own set is a few dozen photos


def photos_or_standin(profile: str = "", data_root: str | os.PathLike = "",
                      num_images: int | None = None) -> Path:
    """The folder of your photos (``data_root`` or ``NAILSEG_DATA_ROOT``), or else a stand-in:
    synthetic photos of another style than the training set (one hand close up, warm indoor
    light, plain surfaces out of focus, other polish), all of one type, ``num_images`` of them
    (``None``: half the profile's synthetic set, at most :data:`STANDIN_MAX_IMAGES`). Says which."""
    location = data_location(0, data_root)
    if not location.synthetic:
        print(f"your photos: {location.raw}")
        return location.raw
    count = num_images or min(select_profile(profile).num_images // 2, STANDIN_MAX_IMAGES)
    photos = ensure_synthetic_dataset(data_dir() / f"standin-{count}", count, style="photo")
    print(f"no data_root: a synthetic stand-in of another style, {count} images ({photos}); "
          "bring your own photos with data_root=...")
    return photos
