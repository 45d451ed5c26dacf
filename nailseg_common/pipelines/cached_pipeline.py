"""Batches from the decode-once cache (:mod:`~nailseg_common.data.decoded`): a batch is one
gather from contiguous uint8 arrays, served by :class:`CachedNailDataModule`; the augmentation
runs in the training step (``LitNailSegmentation(gpu_augmentation=KorniaAugmentation())``)."""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler

from nailseg_common.data.decoded import ensure_cache, load_cache
from nailseg_common.data.preparation import SPLITS
from nailseg_common.setup.paths import DataLocation
from nailseg_common.setup.profiles import Profile


class BatchSlices(torch.utils.data.Dataset):
    """Whole batches from contiguous uint8 tensors: ``dataset[list_of_indices]`` is one batch."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor):
        if images.dtype != torch.uint8 or images.shape[0] != labels.shape[0]:
            raise ValueError(f"Expected uint8 images and labels of the same length, got {images.dtype} "
                             f"{tuple(images.shape)} and {tuple(labels.shape)}.")
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return self.images.shape[0]

    def __getitem__(self, indices) -> dict[str, torch.Tensor]:
        index = torch.as_tensor(indices, dtype=torch.long, device=self.images.device)
        return {"image": self.images.index_select(0, index), "label": self.labels.index_select(0, index)}


class CachedNailDataModule(pl.LightningDataModule):
    """Batches of the batch contract (uint8) straight from the decode-once cache, unaugmented.

    ``num_workers`` defaults to at most 2 of the profile's (a gather is a memory copy);
    ``pin_memory`` defaults to on when the profile trains on a GPU, so that Lightning's
    ``non_blocking`` copy overlaps the GPU's work.
    """

    def __init__(self, location: DataLocation, profile: Profile, num_workers: int | None = None,
                 pin_memory: bool | None = None, seed: int = 0):
        super().__init__()
        self.location, self.profile, self.seed = location, profile, seed
        self.num_workers = min(profile.num_workers, 2) if num_workers is None else num_workers
        self.pin_memory = profile.device.type == "cuda" if pin_memory is None else pin_memory
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
        self.setup()
        dataset = self.data[split]
        order = (RandomSampler(dataset, generator=torch.Generator().manual_seed(self.seed))
                 if shuffle else SequentialSampler(dataset))
        batches = BatchSampler(order, self.profile.batch_size,
                               drop_last=shuffle and len(dataset) >= self.profile.batch_size)
        return DataLoader(dataset, sampler=batches, batch_size=None, num_workers=self.num_workers,
                          pin_memory=self.pin_memory, persistent_workers=self.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("valid", shuffle=False)
