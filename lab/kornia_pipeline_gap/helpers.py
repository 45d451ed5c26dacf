"""Notebook 07's recipe and its compiled model, copied from ``tools/time_to_accuracy_seeds.py``,
and the sweep's batches on the GPU, copied from ``lab/time_to_accuracy_recipes``,
so that this folder imports no other lab folder and nothing from ``tools/``."""

from __future__ import annotations

import math

import pytorch_lightning as pl
import torch

from nailseg_common.data.preparation import ensure_prepared
from nailseg_common.measure.benchmark import training_datamodule
from nailseg_common.setup.paths import DataLocation
from nailseg_common.setup.profiles import Profile, select_profile
from nailseg_common.training.fast_training import (
    FastNailSegmentation,
    faster_recipe,
    recipe_model,
    warm_up,
)


def recipe_of(profile_name: str) -> tuple[Profile, DataLocation, Profile]:
    """The profile, its prepared data and 07's faster recipe of it."""
    cfg = select_profile(profile_name)
    data = ensure_prepared(cfg, None, progress=False)
    return cfg, data, faster_recipe(cfg, data)


def warmed_up_model(cfg: Profile, fast: Profile, data: DataLocation,
                    seed: int) -> tuple[FastNailSegmentation, float]:
    """07's model from the weights of ``seed``, compiled and autotuned by ``warm_up`` on the
    batches of ``seed``, and the seconds that took."""
    pl.seed_everything(seed, workers=True, verbose=False)
    model = recipe_model(fast)
    return model, warm_up(model, training_datamodule(data, fast, seed), fast)


class GpuBatches:
    """Batches drawn from uint8 tensors on the GPU; random crops of ``crop`` px if given."""

    def __init__(self, images, labels, batch, shuffle, seed=0, crop=None, crop_until=None):
        self.images, self.labels, self.batch, self.shuffle = images, labels, batch, shuffle
        self.crop, self.crop_until = crop, crop_until
        self.generator = torch.Generator(images.device).manual_seed(seed)
        self.steps_done = 0

    def __len__(self):
        n = self.images.shape[0]
        return n // self.batch if self.shuffle else math.ceil(n / self.batch)

    def __iter__(self):
        n = self.images.shape[0]
        order = (torch.randperm(n, device=self.images.device, generator=self.generator)
                 if self.shuffle else torch.arange(n, device=self.images.device))
        for i in range(len(self)):
            index = order[i * self.batch:(i + 1) * self.batch]
            image, label = self.images[index], self.labels[index]
            cropping = self.crop and (self.crop_until is None or self.steps_done < self.crop_until)
            if self.shuffle and cropping:
                image, label = self.random_crop(image, label)
            self.steps_done += self.shuffle
            yield {"image": image, "label": label}

    def random_crop(self, image, label):
        b, _, h, w = image.shape
        c = self.crop
        oy = torch.randint(0, h - c + 1, (b,), device=image.device, generator=self.generator)
        ox = torch.randint(0, w - c + 1, (b,), device=image.device, generator=self.generator)
        r = torch.arange(c, device=image.device)
        ys = (oy[:, None] + r)[:, None, :, None]
        xs = (ox[:, None] + r)[:, None, None, :]
        bi = torch.arange(b, device=image.device)[:, None, None, None]
        return (image[bi, torch.arange(3, device=image.device)[None, :, None, None], ys, xs],
                label[bi, torch.zeros(1, 1, 1, 1, dtype=torch.long, device=image.device), ys, xs])
