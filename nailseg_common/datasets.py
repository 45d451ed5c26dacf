"""The CPU input pipeline: PNG files -> Albumentations on DataLoader workers -> uint8 batches.

Each item is a dict in the course's batch contract: ``image`` ``3×H×W`` uint8 and
``label`` ``1×H×W`` uint8 in {0, 1}. Conversion to float and normalisation happen on
the device, inside :class:`~nailseg_common.models.LitNailSegmentation`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from .augmentation import train_transform, valid_transform
from .images import read_binary_mask, read_rgb
from .paths import DataLocation
from .preparation import read_split
from .profiles import Profile


class NailDataset(Dataset):
    """Image/mask pairs listed in ``frame`` (columns ``image`` and ``mask``: absolute paths)."""

    def __init__(self, frame: pd.DataFrame, transform=None):
        missing = {"image", "mask"} - set(frame.columns)
        if missing:
            raise ValueError(f"The split frame lacks columns {sorted(missing)}: use "
                             "preparation.read_split(location, 'train'|'valid').")
        self.images = frame["image"].astype(str).tolist()
        self.masks = frame["mask"].astype(str).tolist()
        self.transform = transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        image = read_rgb(self.images[index])
        mask = read_binary_mask(self.masks[index])
        if image.shape[:2] != mask.shape:
            raise ValueError(f"Image {self.images[index]!r} is {image.shape[:2]} but its mask "
                             f"is {mask.shape}: re-export the mask at the image's size.")
        if self.transform is not None:
            out = self.transform(image=image, mask=mask)
            image, mask = out["image"], out["mask"]
        return {"image": torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))),
                "label": torch.from_numpy(np.ascontiguousarray(mask[None]))}


def seed_worker_transform(worker_id: int) -> None:
    """Give each DataLoader worker its own Albumentations random stream.

    An Albumentations 2.x ``Compose`` owns its generator; forked workers would all copy
    the same state and augment in lockstep (and, without persistent workers, repeat the
    same augmentations every epoch). PyTorch seeds each worker differently per epoch.
    """
    info = get_worker_info()
    transform = getattr(info.dataset, "transform", None)
    if transform is not None and hasattr(transform, "set_random_seed"):
        transform.set_random_seed(info.seed % 2**32)


class NailDataModule(pl.LightningDataModule):
    """Train/valid loaders over the prepared split, Albumentations on CPU workers.

    ``augment=False`` trains on resized images only (the same transform as validation).
    """

    def __init__(self, location: DataLocation, profile: Profile, augment: bool = True):
        super().__init__()
        self.location = location
        self.profile = profile
        self.augment = augment
        self.train_set: NailDataset | None = None
        self.valid_set: NailDataset | None = None

    def setup(self, stage: str | None = None) -> None:
        size = self.profile.image_size
        if self.train_set is None:
            self.train_set = NailDataset(
                read_split(self.location, "train"),
                train_transform(size) if self.augment else valid_transform(size))
            self.valid_set = NailDataset(read_split(self.location, "valid"), valid_transform(size))

    def _loader(self, dataset: NailDataset, train: bool) -> DataLoader:
        workers = self.profile.num_workers
        return DataLoader(
            dataset, batch_size=self.profile.batch_size, shuffle=train, drop_last=train,
            num_workers=workers, persistent_workers=workers > 0,
            pin_memory=self.profile.accelerator == "gpu" and torch.cuda.is_available(),
            worker_init_fn=seed_worker_transform if workers > 0 else None,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.valid_set, train=False)
