"""Decoding once, ahead of time: every photo of both splits decoded, turned upright and resized
to one training side, kept as two uint8 arrays a split (``cache_<side>/``).

The course's pipelines decode the photos every epoch; this cache is the variant that does the
decoding once, before training, as the series' ``.npy`` files did. It buys batches that are
one memory gather, and costs a preparation pass, disk (3·side² + side² bytes a photo), and the
side it fixes: another ``image_size`` is another cache. The resize is notebook 02's (bilinear
photos, masks nearest on the photo's pixel grid), so cached batches are what 02's validation
sees. :func:`cache_cost` says what a cache took to build and keeps on disk (printed, in a line).
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import cv2
import numpy as np
import torch

from nailseg_common.core.files import build_once
from nailseg_common.data.images import read_rgb
from nailseg_common.data.preparation import SPLITS, read_label, read_split
from nailseg_common.setup.environment import usable_cores
from nailseg_common.setup.paths import DataLocation

CACHE_FORMAT = 4  # 4: decoded from the photos as they are (no npy in between)


def cache_dir(location: DataLocation, image_size: int) -> Path:
    """Where the cache for ``image_size`` lives."""
    return location.prepared / f"cache_{image_size}"


def resized_label(label_file: str, image_size: int) -> np.ndarray:
    """A prepared label resized to ``image_size²`` (nearest, on the pixel grid): ``SxS``."""
    size = (image_size, image_size)
    return cv2.resize(read_label(label_file), size, interpolation=cv2.INTER_NEAREST_EXACT)


def resized_pair(image_file: str, label_file: str, image_size: int) -> tuple[np.ndarray, np.ndarray]:
    """One photo (decoded, upright) and its label resized to ``image_size²``: ``3xSxS``, ``SxS``."""
    size = (image_size, image_size)
    image = cv2.resize(read_rgb(image_file), size, interpolation=cv2.INTER_LINEAR)
    return image.transpose(2, 0, 1), resized_label(label_file, image_size)


def _write_split(location: DataLocation, split: str, image_size: int, folder: Path) -> None:
    """Decode and resize every pair of ``split`` into two uint8 arrays in ``folder``."""
    frame = read_split(location, split)
    shape = (len(frame), image_size, image_size)
    images = np.lib.format.open_memmap(folder / f"{split}_images.npy", mode="w+",
                                       dtype=np.uint8, shape=(shape[0], 3, *shape[1:]))
    labels = np.lib.format.open_memmap(folder / f"{split}_labels.npy", mode="w+",
                                       dtype=np.uint8, shape=(shape[0], 1, *shape[1:]))

    def write(i: int) -> None:  # decoding and resizing release the GIL
        images[i], labels[i, 0] = resized_pair(frame["image"][i], frame["label"][i], image_size)

    with ThreadPoolExecutor(usable_cores()) as pool:
        list(pool.map(write, range(len(frame))))
    images.flush()
    labels.flush()


def _manifest(location: DataLocation, image_size: int) -> dict:
    sources = {split: [os.path.relpath(p, location.raw) for p in read_split(location, split)["image"]]
               for split in SPLITS}
    return {"format": CACHE_FORMAT, "image_size": image_size, "sources": sources}


FILES = [f"{split}_{kind}.npy" for split in SPLITS for kind in ("images", "labels")]


BUILT = "built.json"  # how long the build took, on how many cores


def ensure_cache(location: DataLocation, image_size: int) -> Path:
    """Build the uint8 cache of both splits once; later calls check it and return its folder."""

    def write(folder: Path) -> None:
        began = time.perf_counter()
        for split in SPLITS:
            _write_split(location, split, image_size, folder)
        built = {"seconds": time.perf_counter() - began, "cores": usable_cores()}
        (folder / BUILT).write_text(json.dumps(built) + "\n")

    return build_once(cache_dir(location, image_size), _manifest(location, image_size), write, FILES)


class CacheCost(NamedTuple):
    """What decoding ahead of time cost: seconds its build took (decoding and resizing every
    photo, on ``build_cores`` cores) and megabytes on disk, beside the photos' own."""

    build_seconds: float
    build_cores: int
    cache_mb: float
    photos_mb: float

    def __str__(self) -> str:
        return (f"the cache: {self.cache_mb:.0f} MB on disk beside {self.photos_mb:.0f} MB of photos, "
                f"built in {self.build_seconds:.1f} s on {self.build_cores} cores")


def cache_cost(location: DataLocation, image_size: int) -> CacheCost:
    """The cache's cost (built if needed): its build's time, as recorded then, and its size."""
    folder = ensure_cache(location, image_size)
    built = json.loads((folder / BUILT).read_text())
    photos = sum(Path(p).stat().st_size for split in SPLITS for p in read_split(location, split)["image"])
    cache = sum((folder / name).stat().st_size for name in FILES)
    return CacheCost(built["seconds"], built["cores"], cache / 1e6, photos / 1e6)


def load_cache(location: DataLocation, image_size: int, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The cached ``(images, labels)`` of one split as uint8 tensors in memory (built if needed)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}.")
    folder = ensure_cache(location, image_size)
    return tuple(torch.from_numpy(np.load(folder / f"{split}_{kind}.npy")) for kind in ("images", "labels"))
