"""A pre-resized uint8 cache of the dataset and a DataModule that serves whole batches from it.

With augmentation on the GPU (:mod:`nailseg_common.gpu_augmentation`) the CPU is left
with decoding and resizing, and at H100 speed even that is too slow for 16 cores. Both
are the same every epoch, so they are done once: :func:`ensure_cache` resizes every
image and mask with the baseline's validation transform (bilinear image, nearest mask)
and stores them as two contiguous arrays per split, ``N×3×S×S`` and ``N×1×S×S`` uint8,
under ``location.prepared / f"cache_{S}"``. At 384 px the 1200 synthetic images take
about 0.5 GB.

:class:`CachedNailDataModule` then builds a training batch with one gather
(``index_select``) from that array: no per-item ``__getitem__``, no collate, uint8 on
the wire (four times less than float32), pinned memory so that Lightning's
``non_blocking`` copy really is asynchronous.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler

from .atomic import folder_lock, staged_folder
from .augmentation import valid_transform
from .paths import DataLocation
from .preparation import read_split
from .profiles import Profile

SPLITS = ("train", "valid")
CACHE_FORMAT = 1


def cache_dir(location: DataLocation, image_size: int) -> Path:
    """Where the cache for ``image_size`` lives."""
    return location.prepared / f"cache_{image_size}"


def _sources(location: DataLocation) -> dict[str, list[str]]:
    """Per split, the npy files the cache is made from (relative to ``location.prepared``)."""
    return {split: [os.path.relpath(p, location.prepared) for p in read_split(location, split)["npy_image"]]
            for split in SPLITS}


def _manifest(location: DataLocation, image_size: int) -> dict:
    return {"format": CACHE_FORMAT, "image_size": image_size, "sources": _sources(location)}


def _is_current(folder: Path, manifest: dict) -> bool:
    try:
        return json.loads((folder / "manifest.json").read_text()) == manifest
    except (OSError, ValueError):
        return False


def ensure_cache(location: DataLocation, image_size: int) -> Path:
    """Build the uint8 cache of both splits once; later calls only check it and return its folder.

    The cache is rebuilt when the split changes (its manifest lists the source files).
    It is written to a temporary folder and renamed into place, under a lock, so an
    interrupted or concurrent build never leaves a half-written cache.
    """
    target = cache_dir(location, image_size)
    manifest = _manifest(location, image_size)
    if _is_current(target, manifest):
        return target
    with folder_lock(target):
        if _is_current(target, manifest):
            return target
        transform = valid_transform(image_size)
        with staged_folder(target) as staging:
            for split in SPLITS:
                frame = read_split(location, split)
                n = len(frame)
                images = np.lib.format.open_memmap(staging / f"{split}_images.npy", mode="w+",
                                                   dtype=np.uint8, shape=(n, 3, image_size, image_size))
                labels = np.lib.format.open_memmap(staging / f"{split}_labels.npy", mode="w+",
                                                   dtype=np.uint8, shape=(n, 1, image_size, image_size))
                for i, (image_file, mask_file) in enumerate(zip(frame["npy_image"], frame["npy_mask"])):
                    image, mask = np.load(image_file), np.load(mask_file)
                    if image.ndim != 3 or image.shape[2] != 3 or mask.shape[:2] != image.shape[:2]:
                        raise ValueError(f"{image_file}: expected H×W×3 image with an H×W×1 mask, got "
                                         f"{image.shape} and {mask.shape}; re-run ensure_prepared().")
                    out = transform(image=image, mask=mask.reshape(mask.shape[:2]))
                    images[i] = out["image"].transpose(2, 0, 1)
                    labels[i, 0] = out["mask"]
                images.flush()
                labels.flush()
                del images, labels
            (staging / "manifest.json").write_text(json.dumps(manifest))
    return target


def load_cache(location: DataLocation, image_size: int, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The cached ``(images, labels)`` of one split as uint8 tensors in memory (built if needed)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}.")
    folder = ensure_cache(location, image_size)
    return tuple(torch.from_numpy(np.load(folder / f"{split}_{kind}.npy")) for kind in ("images", "labels"))


class BatchSlices(torch.utils.data.Dataset):
    """Whole batches from contiguous uint8 tensors: ``dataset[list_of_indices]`` is one batch.

    Used with a ``BatchSampler`` as the DataLoader's sampler and ``batch_size=None``, so
    a batch costs one gather per tensor instead of B ``__getitem__`` calls and a collate.
    """

    def __init__(self, images: torch.Tensor, labels: torch.Tensor):
        if images.dtype != torch.uint8 or images.shape[0] != labels.shape[0]:
            raise ValueError(f"Expected uint8 images and labels of the same length, got {images.dtype} "
                             f"{tuple(images.shape)} and {tuple(labels.shape)}.")
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return self.images.shape[0]

    def __getitem__(self, indices) -> dict[str, torch.Tensor]:
        index = torch.as_tensor(indices, dtype=torch.long)
        return {"image": self.images.index_select(0, index), "label": self.labels.index_select(0, index)}


class CachedNailDataModule(pl.LightningDataModule):
    """Batches of the batch contract (uint8) straight from the pre-resized cache.

    Training batches are NOT augmented here: pair this DataModule with
    ``LitNailSegmentation(gpu_augmentation=KorniaAugmentation())``. Validation batches
    are the baseline's (resize only, same transform, same pixels). ``num_workers``
    defaults to at most 2 of the profile's workers: a gather is a memory copy, so two
    processes keep ahead of any GPU. ``pin_memory`` defaults to on when training on a GPU.
    """

    def __init__(self, location: DataLocation, profile: Profile, num_workers: int | None = None,
                 pin_memory: bool | None = None, seed: int = 0):
        super().__init__()
        self.location, self.profile, self.seed = location, profile, seed
        self.num_workers = min(profile.num_workers, 2) if num_workers is None else num_workers
        self.pin_memory = (profile.accelerator == "gpu" and torch.cuda.is_available()
                           if pin_memory is None else pin_memory)
        self.data: dict[str, BatchSlices] = {}

    def prepare_data(self) -> None:
        ensure_cache(self.location, self.profile.image_size)

    def setup(self, stage: str | None = None) -> None:
        for split in SPLITS:
            if split not in self.data:
                images, labels = load_cache(self.location, self.profile.image_size, split)
                if self.num_workers > 0:  # workers started with spawn get handles, not copies
                    images, labels = images.share_memory_(), labels.share_memory_()
                self.data[split] = BatchSlices(images, labels)

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        if split not in self.data:
            self.setup()
        dataset = self.data[split]
        if shuffle:
            generator = torch.Generator().manual_seed(self.seed)
            order = RandomSampler(dataset, generator=generator)
        else:
            order = SequentialSampler(dataset)
        batches = BatchSampler(order, self.profile.batch_size,
                               drop_last=shuffle and len(dataset) >= self.profile.batch_size)
        return DataLoader(dataset, sampler=batches, batch_size=None, num_workers=self.num_workers,
                          pin_memory=self.pin_memory, persistent_workers=self.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("valid", shuffle=False)
