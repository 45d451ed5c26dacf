# ---
# jupyter:
#   blog:
#     categories:
#     - pytorch-lightning
#     - albumentations
#     - segmentation
#     - data-pipelines
#     date: '2026-11-23'
#     description: 'Nail segmentation with PyTorch Lightning 2 and segmentation-models-pytorch:
#       the Dataset, DataModule, LightningModule and Trainer in full, the augmentation
#       policy in Albumentations, and how long each step waits for CPU-side data.'
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: blog
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · A Lightning baseline with Albumentations
#
# This notebook writes and trains the reference model of the course: a U-Net that segments
# nails, written with PyTorch Lightning 2 and fed by a classic input pipeline, where
# DataLoader workers read PNG files and augment them with Albumentations on the CPU. Every
# piece is written out here, in full: the augmentation, the `Dataset`, the
# `LightningDataModule`, the `LightningModule` and the `Trainer`. Notebooks 03 (Kornia) and
# 04 (DALI) reuse the model and the Trainer unchanged and replace only the input pipeline.
#
# ## What you'll learn
# - the course's augmentation policy, written down once as a table, in Albumentations 2
# - a mistake of the original series (`Compose([...], p=0.5)`), measured, and its fix
# - the three Lightning pieces: a `LightningDataModule`, a `LightningModule` and the `Trainer`
# - a loss of three terms (symmetric Lovász hinge, cross-entropy, soft Dice) and the metrics
#   to report: hard Dice and IoU per image, averaged
# - reading the curves from the CSV log and judging a model by its predictions
# - measuring the training speed against its bound (the same step with the data already on
#   the device), and why a wait share cannot see a slow input pipeline
#
# > **CPU or GPU?** The notebook runs everywhere. Without a GPU it picks the `cpu` profile
# > (96 px, about ten minutes on a laptop); CI runs the tiny `smoke` profile. On a GPU the
# > `gpu` profile trains the full model at 384 px with bf16 mixed precision. Every cell that
# > follows is the code that runs: change one and re-run what comes after it.
#
# Every knob below is a parameter (papermill `-p name value`); `None` keeps the profile's
# value, and the cell after it prints what was chosen.

# %% tags=["parameters"]
profile = ""            # smoke, cpu or gpu; empty: $NAILSEG_PROFILE, else chosen from the hardware
data_root = ""          # your own photos (Images/<type>/, Masks/<type>/); empty: the synthetic set
num_images = None       # size of the synthetic set (ignored with data_root)
image_size = None       # side of the square images the model sees
batch_size = None
max_steps = None        # optimizer steps of the training (its length, whatever the data's size)
encoder = None          # smp encoder name, e.g. resnet18, resnet34
lr = None               # peak learning rate of AdamW's cosine schedule
num_workers = None      # DataLoader worker processes for Albumentations
precision = None        # Lightning precision, e.g. 32-true, bf16-mixed
accelerator = None      # cpu or gpu
max_train_batches = None  # cap per epoch (0: the whole set)
max_valid_batches = None

# %%
from nailseg_common.environment import environment_report
from nailseg_common.preparation import ensure_prepared, fit_batch_to_split
from nailseg_common.profiles import select_profile

cfg = select_profile(profile, num_images=num_images, image_size=image_size, batch_size=batch_size,
                     max_steps=max_steps, encoder=encoder, lr=lr, num_workers=num_workers,
                     precision=precision, accelerator=accelerator,
                     max_train_batches=max_train_batches, max_valid_batches=max_valid_batches)
print(environment_report(cfg))
data = ensure_prepared(cfg, data_root)
cfg = fit_batch_to_split(cfg, data)
print("data:", data.raw)

# %% [markdown]
# ## The augmentation policy
#
# The policy is written down once, in `nailseg_common.policy`, and every pipeline of the
# course builds it from there: Albumentations here, Kornia in notebook 03, DALI in notebook
# 04. Images are always resized to the profile's size first; geometric ops move image and
# mask together, photometric ops touch only the image.

# %%
from nailseg_common.policy import policy_table

policy_table()

# %% [markdown]
# In Albumentations 2 the table becomes a list of transforms. Each reads its numbers from
# `POLICY`; masks are resampled with nearest neighbour so they stay binary, and areas the
# affine moves in from outside the frame are 0 in image and mask. The training transform is
# the resize followed by the policy; validation only resizes. (Cells that start with
# `#| export` are also written into the `nailseg_common` package by `make export`, so later
# notebooks import exactly this code.)

# %%
#| export augmentation
import albumentations as A
import cv2
import numpy as np

from nailseg_common.policy import POLICY


def resize(image_size: int) -> A.Resize:
    """Resize image (bilinear) and mask (nearest) to ``image_size × image_size``."""
    return A.Resize(image_size, image_size, interpolation=cv2.INTER_LINEAR,
                    mask_interpolation=cv2.INTER_NEAREST)


def policy_transforms() -> list[A.BasicTransform]:
    """The policy ops, in table order, as Albumentations transforms."""
    ops = POLICY
    affine = ops["affine"].params
    shift = affine["translate"]
    brightness = ops["brightness_contrast"].params
    blur = ops["gaussian_blur"].params
    return [
        A.HorizontalFlip(p=ops["horizontal_flip"].probability),
        A.VerticalFlip(p=ops["vertical_flip"].probability),
        A.Affine(scale=affine["scale"], translate_percent=(-shift, shift),
                 rotate=(-affine["rotate_deg"], affine["rotate_deg"]),
                 interpolation=cv2.INTER_LINEAR, mask_interpolation=cv2.INTER_NEAREST,
                 border_mode=cv2.BORDER_CONSTANT, fill=0, fill_mask=0,
                 p=ops["affine"].probability),
        A.RandomBrightnessContrast(brightness_limit=brightness["brightness"],
                                   contrast_limit=brightness["contrast"],
                                   p=ops["brightness_contrast"].probability),
        # std_range is a fraction of the maximum value (255 for uint8), as in the table.
        A.GaussNoise(std_range=ops["gaussian_noise"].params["std"],
                     p=ops["gaussian_noise"].probability),
        A.GaussianBlur(blur_limit=(blur["kernel"], blur["kernel"]), sigma_limit=blur["sigma"],
                       p=ops["gaussian_blur"].probability),
    ]


def train_transform(image_size: int, seed: int | None = None) -> A.Compose:
    """Resize, then the whole policy: the training transform."""
    return A.Compose([resize(image_size), *policy_transforms()], seed=seed)


def valid_transform(image_size: int) -> A.Compose:
    """Resize only: the validation transform."""
    return A.Compose([resize(image_size)])


# %% [markdown]
# ### A mistake of the original series: `Compose([...], p=0.5)`
#
# The original posts wrote the training transform as `A.Compose([...], p=0.5)`. The `p` of
# a `Compose` is the probability that the *whole list* runs. When its coin says no,
# Albumentations 1.x ran only the "always apply" transforms, so about half of the training
# samples got no augmentation and no `Normalize`, while every validation sample was
# normalised. Albumentations 2 is stricter still: a skipped `Compose` returns the input
# untouched, not even resized. Let's count over a few hundred draws of the same image what
# each version does. The fix is to leave `Compose` at `p=1` and give each transform its own
# probability, as `train_transform` does.

# %%
from nailseg_common.images import read_binary_mask, read_rgb
from nailseg_common.preparation import read_split

train_frame = read_split(data, "train")
image = read_rgb(train_frame["image"].iloc[0])
mask = read_binary_mask(train_frame["mask"].iloc[0])
draws = 400
original = A.Compose([resize(cfg.image_size), *policy_transforms(), A.Normalize()], p=0.5, seed=0)
fixed = A.Compose([resize(cfg.image_size), *policy_transforms(), A.Normalize()], seed=0)
for name, transform in (("original, Compose(p=0.5)", original), ("fixed, Compose(p=1)", fixed)):
    outputs = [transform(image=image, mask=mask)["image"] for _ in range(draws)]
    normalised = sum(out.dtype == np.float32 for out in outputs)
    resized = sum(out.shape[:2] == (cfg.image_size, cfg.image_size) for out in outputs)
    print(f"{name:26s}: {normalised / draws:6.1%} normalised, {resized / draws:6.1%} resized "
          f"to {cfg.image_size} px, of {draws} draws")

# %% [markdown]
# With `p=0.5` roughly half the draws come back as the raw photo: a different size, uint8
# instead of normalised floats. In 1.x those samples trained on unnormalised pixels; in 2.x
# the DataLoader cannot even stack them into a batch. The course normalises on the device
# instead (see the LightningModule below), so the CPU side never needs `Normalize`.
#
# A gallery says more than the table: each row is one training image, first resized only,
# then three random draws of the policy. The yellow outline is the mask; it must hug the
# nails after every flip and warp.

# %%
#| export augmentation
def augment_pairs(transform: A.Compose, images, masks) -> tuple[np.ndarray, np.ndarray]:
    """``transform`` on each HxWx3 uint8 image and HxW mask: (N×S×S×3 floats in [0, 1], N×S×S)."""
    pairs = [transform(image=image, mask=mask) for image, mask in zip(images, masks, strict=True)]
    return np.stack([p["image"] for p in pairs]) / 255.0, np.stack([p["mask"] for p in pairs])


def gallery_panels(images: list[np.ndarray], masks: list[np.ndarray], image_size: int,
                   draws: int = 3, seed: int = 0) -> dict:
    """Each image resized, then ``draws`` random passes of the training transform:
    ``{name: (N×S×S×3 float images in [0, 1], N×S×S masks)}`` for the gallery plot."""
    panels = {"resized": augment_pairs(valid_transform(image_size), images, masks)}
    augment = train_transform(image_size, seed=seed)
    for draw in range(1, draws + 1):
        panels[f"augmented #{draw}"] = augment_pairs(augment, images, masks)
    return panels


# %%
import matplotlib.pyplot as plt

from nailseg_common.plots import plot_augmentation_gallery

examples = train_frame.groupby("type").head(1).head(4)
panels = gallery_panels([read_rgb(p) for p in examples["image"]],
                        [read_binary_mask(p) for p in examples["mask"]], cfg.image_size)
plot_augmentation_gallery(panels)
plt.show()

# %% [markdown]
# ## The `Dataset`
#
# A `Dataset` maps an index to one sample. `NailDataset` reads the pair of files listed in
# the split (notebook 01 wrote `csv_file/train.csv` and `valid.csv`), checks that image and
# mask agree in size, applies the transform and returns the course's **batch contract**: a
# dict with a `uint8` image `3×H×W` and a `uint8` label `1×H×W` in {0, 1}. Staying in
# `uint8` on the CPU makes each batch four times smaller to copy than float32; conversion
# and normalisation happen on the device.
#
# One subtlety: an Albumentations 2 `Compose` owns its random generator. DataLoader workers
# are forked copies of the main process, so without `seed_worker_transform` every worker
# would draw the same augmentations in lockstep.

# %%
#| export datasets
import numpy as np
import pandas as pd
import torch
from torch.utils.data import Dataset, get_worker_info


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
    """Give each DataLoader worker its own Albumentations random stream (PyTorch seeds each
    worker differently, every epoch)."""
    info = get_worker_info()
    transform = getattr(info.dataset, "transform", None)
    if transform is not None and hasattr(transform, "set_random_seed"):
        transform.set_random_seed(info.seed % 2**32)


# %% [markdown]
# ## Why CPU augmentation becomes the bottleneck
#
# Every training image goes through Python on a CPU worker: decode the PNG, resize it, then
# flip, warp, re-light, add noise and blur it, one image at a time. A DataLoader spreads that
# over `num_workers` processes, but the cost per image is fixed by the CPU, while the
# training step gets faster with every GPU generation. Let's measure the CPU side alone: how
# long one core needs to produce one training image.

# %%
import time

train_set = NailDataset(train_frame, train_transform(cfg.image_size, seed=0))
count = min(32, len(train_set))
start = time.perf_counter()
for index in range(count):
    train_set[index]
per_image = (time.perf_counter() - start) / count
print(f"one CPU core: {1e3 * per_image:.1f} ms per image (read + resize + augment) "
      f"= {1 / per_image:.0f} images/s")
print(f"a batch of {cfg.batch_size} on {max(cfg.num_workers, 1)} worker(s): "
      f"about {1e3 * per_image * cfg.batch_size / max(cfg.num_workers, 1):.0f} ms")

# %% [markdown]
# Keep that number in mind: on a modern GPU a training step of this U-Net takes a few tens
# of milliseconds, so a handful of CPU workers can hardly keep up. At the end of the
# notebook we measure how long each training step actually waited for its batch.
#
# ## 1. The `LightningDataModule`
#
# The DataModule owns the data: it builds the two datasets from the prepared split and the
# DataLoaders around them. Training shuffles and drops the last incomplete batch (every step
# sees a full batch); validation keeps every image once. Pinned memory makes the copy to the
# GPU asynchronous; persistent workers are not restarted every epoch. `augment=False` trains
# on resized images only.

# %%
#| export datasets
import pytorch_lightning as pl
from torch.utils.data import DataLoader

from nailseg_common.images import read_binary_mask, read_rgb
from nailseg_common.paths import DataLocation
from nailseg_common.preparation import read_split
from nailseg_common.profiles import Profile


class NailDataModule(pl.LightningDataModule):
    """Train/valid loaders over the prepared split, Albumentations on CPU workers."""

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
            pin_memory=self.profile.device.type == "cuda",
            worker_init_fn=seed_worker_transform if workers > 0 else None,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.valid_set, train=False)


# %%
datamodule = NailDataModule(data, cfg)
datamodule.setup("fit")
print(f"{len(datamodule.train_set)} training and {len(datamodule.valid_set)} validation images")
batch = next(iter(datamodule.train_dataloader()))
for key, value in batch.items():
    print(f"{key:6} {tuple(value.shape)} {value.dtype}  values {value.min().item()}..{value.max().item()}")

# %% [markdown]
# ## 2. The `LightningModule`
#
# The LightningModule owns the model and the maths. The model is an `smp.Unet` with the
# profile's encoder and one output channel of logits. It starts from random weights, so
# nothing downloads; `encoder_weights="imagenet"` would fetch pretrained weights once.

# %%
#| export models
import segmentation_models_pytorch as smp
import torch
from torch import nn


def create_model(encoder: str = "resnet34", encoder_weights: str | None = None) -> nn.Module:
    """An ``smp.Unet`` with one output channel (logits); ``encoder_weights=None`` starts from
    random weights (nothing downloads), ``"imagenet"`` downloads pretrained ones once."""
    try:
        return smp.Unet(encoder_name=encoder, encoder_weights=encoder_weights, in_channels=3,
                        classes=1, activation=None)
    except OSError as error:  # DNS, connection and "not in the local cache" errors
        raise RuntimeError(
            f"Could not download the {encoder_weights!r} weights of encoder {encoder!r}: this "
            f"machine looks offline ({type(error).__name__}). Use encoder_weights=None (random "
            "initialisation, the course default), or download the weights once on a connected "
            "machine so they are in the Hugging Face cache."
        ) from error


def to_unit_float(image: torch.Tensor) -> torch.Tensor:
    """uint8 0..255 -> float32 0..1; float images pass through as float32."""
    return image.float() / 255.0 if image.dtype == torch.uint8 else image.float()


# %% [markdown]
# **The loss** has three terms. `symmetric_lovasz` (from `nailseg_common.losses`) is the
# Lovász hinge, a convex surrogate of 1 − IoU, averaged over the nail and the background
# class and computed per image: the original series' loss. On its own it learns slowly from
# random weights and only asks for a margin (a background logit of −1 already satisfies it,
# at a probability of 0.27). Binary cross-entropy gets training going, and a soft-Dice term
# pushes the probabilities towards 0 and 1.
#
# **The metrics** are the numbers people compare: the Dice and the IoU of the prediction
# thresholded at probability 0.5, per image, averaged over all validation images of the
# epoch (`val_dice`, `val_iou`). The soft Dice on probabilities is logged too
# (`val_soft_dice`), as the training signal it is, not as a score.

# %%
#| export models
import torch.nn.functional as F

from nailseg_common.losses import soft_dice_loss, symmetric_lovasz


def segmentation_loss(logits: torch.Tensor, targets: torch.Tensor, bce_weight: float = 1.0,
                      dice_weight: float = 1.0) -> torch.Tensor:
    """``symmetric_lovasz + bce_weight · BCE + dice_weight · soft_dice_loss``, in float32;
    ``bce_weight=dice_weight=0`` trains on the Lovász hinge alone."""
    loss = symmetric_lovasz(logits, targets)
    if bce_weight:
        loss = loss + bce_weight * F.binary_cross_entropy_with_logits(logits.float(), targets.float())
    if dice_weight:
        loss = loss + dice_weight * soft_dice_loss(logits, targets)
    return loss


# %% [markdown]
# The module itself, in the order Lightning calls it:
#
# - `on_after_batch_transfer` runs once the batch is on the device: `uint8` → float in
#   [0, 1], and, for training batches only, an optional `gpu_augmentation` module. That hook
#   is where notebook 03 plugs in Kornia.
# - `forward` normalises with the ImageNet statistics and runs the U-Net (channels-last
#   memory on CUDA, where bf16 convolutions run faster with it).
# - `training_step` and `validation_step` compute the loss and, for validation, per-image
#   scores that `MeanMetric`s sum on the device: no host synchronisation until the epoch ends.
# - `configure_optimizers`: AdamW with a cosine learning-rate schedule stepped every batch,
#   over the profile's `max_steps` optimizer steps. Training length is counted in steps,
#   not epochs, so 40 photos train as long as 960 synthetic images.

# %%
#| export models
import pytorch_lightning as pl
from torchmetrics import MeanMetric

from nailseg_common.metrics import per_image_dice, per_image_iou, per_image_soft_dice

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class LitNailSegmentation(pl.LightningModule):
    """U-Net training with :func:`segmentation_loss`, AdamW and a per-step cosine schedule.

    ``gpu_augmentation(image, label) -> (image, label)`` runs on training batches on the
    device; keep it stateless so checkpoints load with or without it.
    """

    def __init__(self, encoder: str = "resnet34", lr: float = 1e-3, max_steps: int = 1,
                 gpu_augmentation: nn.Module | None = None, encoder_weights: str | None = None,
                 channels_last: bool | None = None, weight_decay: float = 1e-4,
                 bce_weight: float = 1.0, dice_weight: float = 1.0):
        super().__init__()
        self.save_hyperparameters(ignore=["gpu_augmentation"])
        self.model = create_model(encoder, encoder_weights)
        self.gpu_augmentation = gpu_augmentation
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)
        self.val_dice = MeanMetric(nan_strategy="disable")
        self.val_iou = MeanMetric(nan_strategy="disable")
        self.val_soft_dice = MeanMetric(nan_strategy="disable")

    @property
    def uses_channels_last(self) -> bool:
        if self.hparams.channels_last is None:
            return self.device.type == "cuda"
        return self.hparams.channels_last

    def on_fit_start(self) -> None:
        if self.uses_channels_last:
            self.model.to(memory_format=torch.channels_last)

    def on_after_batch_transfer(self, batch: dict, dataloader_idx: int) -> dict:
        image, label = to_unit_float(batch["image"]), batch["label"].float()
        if self.gpu_augmentation is not None and self.trainer.training:
            image, label = self.gpu_augmentation(image, label)
        return {"image": image, "label": label}

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        """Logits ``B×1×H×W`` for an image batch (uint8, or float in [0, 1])."""
        image = (to_unit_float(image) - self.mean) / self.std
        if self.uses_channels_last:
            image = image.contiguous(memory_format=torch.channels_last)
        return self.model(image)

    def _loss(self, logits: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        return segmentation_loss(logits, label, self.hparams.bce_weight, self.hparams.dice_weight)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        loss = self._loss(self(batch["image"]), batch["label"])
        self.log("train_loss", loss, on_step=False, on_epoch=True,
                 batch_size=batch["image"].shape[0])
        return loss

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        logits, label = self(batch["image"]), batch["label"]
        self.val_dice.update(per_image_dice(logits, label))
        self.val_iou.update(per_image_iou(logits, label))
        self.val_soft_dice.update(per_image_soft_dice(logits, label))
        self.log("val_loss", self._loss(logits, label), on_step=False, on_epoch=True,
                 batch_size=label.shape[0])
        for name in ("val_dice", "val_iou", "val_soft_dice"):
            self.log(name, getattr(self, name), on_step=False, on_epoch=True,
                     prog_bar=name != "val_soft_dice")

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr,
                                      weight_decay=self.hparams.weight_decay)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=max(1, self.hparams.max_steps))
        return {"optimizer": optimizer,
                "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


# %%
model = LitNailSegmentation(encoder=cfg.encoder, lr=cfg.lr, max_steps=cfg.max_steps)
print(f"U-Net with a {cfg.encoder} encoder: "
      f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters")

# %% [markdown]
# ## 3. The `Trainer`
#
# `make_trainer` configures the Trainer from the profile: accelerator, precision
# (`bf16-mixed` on the GPU), the step budget, a CSV logger under `runs/<profile>/<run name>/`, a
# checkpoint of the best validation Dice plus `last.ckpt`, and an `EpochClock` that logs each
# epoch's wall time (`epoch_s`, validation included), so later notebooks can compare
# pipelines from the logs. `read_metrics` turns a run's CSV log into one row per epoch.
#
# `TrainingSpeed` is a small callback that times the training part of every epoch;
# `bound_images_per_second` runs the same step on batches already on the device. The last
# section of the notebook uses both.

# %%
#| export training
import dataclasses
import time

import pandas as pd
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback, ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger

from nailseg_common.paths import runs_dir
from nailseg_common.profiles import Profile
from nailseg_common.progress_lines import ProgressLines, quiet_lightning


class EpochClock(Callback):
    """Logs ``epoch_s``: the wall time of each training epoch, its validation included."""

    def on_train_start(self, trainer, pl_module) -> None:  # also a run resumed mid-epoch
        self._start = time.perf_counter()

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._start = time.perf_counter()

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        pl_module.log("epoch_s", time.perf_counter() - self._start, on_epoch=True)


def make_trainer(profile: Profile, run_name: str, **overrides) -> pl.Trainer:
    """A ``pl.Trainer`` for ``profile``, logging under ``runs_dir()/profile.name/run_name``.

    ``overrides`` go to ``pl.Trainer``; ``callbacks`` are added to the course's own.
    """
    quiet_lightning()
    if profile.accelerator == "gpu":
        torch.set_float32_matmul_precision("high")  # TF32 for the float32 parts
    callbacks = [EpochClock(), *overrides.pop("callbacks", [])]
    if overrides.pop("enable_progress_bar", True):
        callbacks.append(ProgressLines())
    if overrides.get("enable_checkpointing", True):
        callbacks.insert(0, ModelCheckpoint(monitor="val_dice", mode="max", save_last=True,
                                            filename="best-{epoch}-{val_dice:.3f}"))
    logger = CSVLogger(runs_dir() / profile.name, name=run_name)
    logger.log_hyperparams({"profile": dataclasses.asdict(profile)})
    options = {
        "accelerator": profile.accelerator, "devices": 1, "precision": profile.precision,
        "max_steps": profile.max_steps, "max_epochs": -1,
        "limit_train_batches": profile.max_train_batches or 1.0,
        "limit_val_batches": profile.max_valid_batches or 1.0,
        "default_root_dir": runs_dir() / profile.name / run_name, "logger": logger,
        "log_every_n_steps": 1,  # only epoch metrics are logged; avoids the "few batches" hint
        "num_sanity_val_steps": 0, "enable_model_summary": False, "enable_progress_bar": False,
        "benchmark": profile.accelerator == "gpu",  # fixed input size: let cuDNN pick kernels
    }
    options.update(overrides)
    return pl.Trainer(callbacks=callbacks, **options)


def read_metrics(trainer_or_csv: pl.Trainer | str) -> pd.DataFrame:
    """Per-epoch metrics (index ``epoch``) from a trainer's CSV log or a ``metrics.csv`` path."""
    if isinstance(trainer_or_csv, pl.Trainer):
        logger = trainer_or_csv.logger
        if not isinstance(logger, CSVLogger):
            raise TypeError("read_metrics needs a trainer from make_trainer (a CSVLogger); "
                            f"this one logs with {type(logger).__name__}.")
        logger.save()
        trainer_or_csv = logger.experiment.metrics_file_path
    frame = pd.read_csv(trainer_or_csv)
    return frame.groupby("epoch").max().drop(columns="step", errors="ignore")


def steady_epoch_seconds(metrics: pd.DataFrame) -> float:
    """Median wall time per epoch of a run's metrics, without the first epoch (starting
    workers, warming caches) when there are several."""
    seconds = metrics["epoch_s"].dropna()
    return float((seconds.iloc[1:] if len(seconds) > 1 else seconds).median())


def latest_run_metrics(profile: Profile, run_name: str) -> tuple[pd.DataFrame, str] | None:
    """The per-epoch metrics of the newest finished ``run_name`` run in ``profile``, with the
    path of its log; ``None`` when there is none (the notebook that makes it was not run)."""
    logs = sorted((runs_dir() / profile.name / run_name).glob("version_*/metrics.csv"),
                  key=lambda path: path.stat().st_mtime)
    for path in reversed(logs):
        metrics = read_metrics(str(path))
        if "val_dice" in metrics and metrics["val_dice"].notna().any():
            return metrics, str(path)
    return None


# %%
#| export training
import statistics
import warnings

from torch.utils.data import DataLoader, Dataset

from nailseg_common.clock import synchronized_now


class TrainingSpeed(Callback):
    """Training images/s of each epoch: the clock (synchronised) reads at the start of the
    epoch and after its last training step, so validation is excluded."""

    def __init__(self) -> None:
        self.epochs: list[dict] = []
        self._start: float | None = None

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._start, self._images = synchronized_now(pl_module.device), 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._images += len(batch["image"]) * trainer.world_size
        last = batch_idx + 1 >= trainer.num_training_batches
        if last or 0 < trainer.max_steps <= trainer.global_step:
            self._stop(pl_module)

    def on_validation_start(self, trainer, pl_module) -> None:
        self._stop(pl_module)  # only if the epoch's window is still open

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self._stop(pl_module)

    def _stop(self, pl_module) -> None:
        if self._start is not None and self._images:
            seconds = synchronized_now(pl_module.device) - self._start
            self.epochs.append({"images": self._images, "seconds": seconds,
                                "img_s": self._images / seconds})
        self._start = None

    def images_per_second(self) -> float:
        """Median training images/s over the epochs, the first excluded when there are several."""
        if not self.epochs:
            raise ValueError("TrainingSpeed timed no epoch: pass it in the trainer's callbacks.")
        speeds = [epoch["img_s"] for epoch in self.epochs]
        return statistics.median(speeds[1:] if len(speeds) > 1 else speeds)


class _Repeat(Dataset):
    def __init__(self, batches: list[dict], length: int):
        self.batches, self.length = batches, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict:
        return self.batches[index % len(self.batches)]


def bound_images_per_second(profile: Profile, make_model, batches: list[dict], steps: int) -> float:
    """Training images/s of a fresh ``make_model()`` when ``batches`` (already on the device)
    come for free: the same step as in ``fit``, ``steps`` steps in about five epochs."""
    per_epoch = max(1, steps // 5)
    speed = TrainingSpeed()
    trainer = make_trainer(dataclasses.replace(profile, max_steps=steps), "bound",
                           callbacks=[speed], enable_checkpointing=False,
                           enable_progress_bar=False, limit_train_batches=per_epoch,
                           limit_val_batches=0)
    loader = DataLoader(_Repeat(batches, per_epoch), batch_size=None, shuffle=False)
    with warnings.catch_warnings():  # no validation here, on purpose
        warnings.filterwarnings("ignore", "You defined a `validation_step` but have no")
        trainer.fit(make_model(), train_dataloaders=loader)
    return speed.images_per_second()


# %%
speed = TrainingSpeed()
trainer = make_trainer(cfg, "02_lightning_baseline", callbacks=[speed])

# %% [markdown]
# ## Training
#
# `trainer.fit` runs the steps and prints about ten lines on the way (`ProgressLines`: step,
# epoch, seconds, training loss and the last validation Dice and IoU).

# %%
start = time.perf_counter()
trainer.fit(model, datamodule=datamodule)
print(f"trained {trainer.current_epoch} epoch(s), {trainer.global_step} steps "
      f"in {time.perf_counter() - start:.0f} s")

# %% [markdown]
# ## Loss and score curves
#
# The loss falls (a model that knows nothing scores a Lovász hinge near 1, a cross-entropy
# of about 0.7 and a soft-Dice loss near 1, so about 2.7 in all) and the hard Dice and IoU
# rise from 0 as the model finds the nails. With the `smoke` profile you see a single epoch,
# so expect a single point near the start.

# %%
from nailseg_common.plots import plot_training_curves

metrics = read_metrics(trainer)
plot_training_curves({"this run": metrics})
plt.show()
metrics.round(3)

# %% [markdown]
# ## Validation Dice and IoU of the best checkpoint
#
# The checkpoint callback kept the weights of the epoch with the best validation Dice.
# `trainer.validate(ckpt_path="best")` loads them and runs the whole validation set.

# %%
scores = trainer.validate(model, datamodule=datamodule, ckpt_path="best", verbose=False)[0]
print(f"validation Dice {scores['val_dice']:.3f}, IoU {scores['val_iou']:.3f} "
      f"(hard, threshold 0.5, mean over images; soft Dice {scores['val_soft_dice']:.3f})")

# %% [markdown]
# ## Predictions over the ground truth
#
# Numbers hide where a model fails. Here are validation images with the ground truth
# outlined in yellow and the prediction (probability above 0.5) in cyan, and below them the
# predicted probability; each title is that image's IoU.

# %%
from nailseg_common.plots import plot_predictions

batch = next(iter(datamodule.val_dataloader()))
model.eval()
with torch.no_grad():
    logits = model(batch["image"].to(model.device)).float().cpu()
plot_predictions(batch["image"].permute(0, 2, 3, 1).numpy() / 255, batch["label"][:, 0].numpy(),
                 torch.sigmoid(logits)[:, 0].numpy(), scores=per_image_iou(logits, batch["label"]))
plt.show()

# %% [markdown]
# ## How fast could this training be? The ratio to the bound
#
# `TrainingSpeed` timed the training part of every epoch (the GPU synchronised only at
# the two ends of the window, validation left out). Its median is this pipeline's training
# speed. What is it worth? Compare it with the **bound**: the same training step on a few
# batches that are already on the device, so the input pipeline costs nothing. The ratio
# `speed / bound` says how much of the model's speed the pipeline delivers: 1.0 means the
# data is free, 0.5 means half of the GPU's time is lost to the input.
#
# Why not time how long each step *waits* for its batch? Because the DataLoader prefetches:
# while the GPU runs one step, the workers prepare the next few batches. When the workers
# are too slow, every step still gets a ready batch most of the time; the steps simply
# come less often, and the wait per step stays small. A wait share reads about the same for
# a pipeline that caps the GPU at two thirds of its speed and for one that keeps up with
# it; the ratio to the bound tells them apart. `bound_images_per_second` runs a fresh
# model for a few hundred steps at most on a GPU (a few on a CPU).

# %%
import itertools

from nailseg_common.benchmark import load_results

bound_batches = [{key: value.to(cfg.device) for key, value in batch.items()}
                 for batch in itertools.islice(datamodule.train_dataloader(), 4)]
bound = bound_images_per_second(
    cfg, lambda: LitNailSegmentation(encoder=cfg.encoder, lr=cfg.lr, max_steps=cfg.max_steps),
    bound_batches, steps=200 if cfg.device.type == "cuda" else 4)
print(f"training {speed.images_per_second():.0f} images/s (median of {len(speed.epochs)} "
      f"epoch(s)), bound {bound:.0f} images/s: ratio {speed.images_per_second() / bound:.2f}")
reference = load_results()
for name in ("albumentations_w15", "dali"):
    run = reference["pipelines"][name]
    print(f"committed H100 benchmark, {name}: ratio {run['train_ratio_to_bound']:.2f} "
          f"({run['train']['img_s_min']:.0f}..{run['train']['img_s_max']:.0f} images/s over "
          f"{len(run['train']['repeats'])} repeats, bound {reference['bound']['img_s']:.0f})")

# %% [markdown]
# On a CPU the model itself is slow, so the workers keep up and the ratio is near 1 (unless
# workers and model fight over the same few cores). On a GPU the step shrinks while the CPU
# cost per image stays: the committed benchmark above shows Albumentations on 15 workers
# well below the bound and DALI close to it. Notebooks 03 and 04 close that gap by moving
# augmentation, and then reading and resizing too, onto the GPU, and measure it with the
# same two functions; notebook 05 repeats the measurement with windows and spread.
#
# ## Summary
#
# - The reference pipeline reads PNGs and augments them with Albumentations on CPU workers,
#   yielding compact `uint8` batches; the LightningModule converts and normalises on the device.
# - The augmentation policy lives in one table (`policy.POLICY`); the Albumentations,
#   Kornia and DALI builders all read it. A `Compose` keeps `p=1`: its `p` gates the whole
#   list, which silently left half of the original series' samples raw.
# - Lightning splits the work into a DataModule (data), a LightningModule (model, loss,
#   optimiser, metrics) and a Trainer (loops, precision, logging, checkpoints).
# - The loss is Lovász hinge + cross-entropy + soft Dice; the scores to report are the hard
#   Dice and IoU at threshold 0.5, per image, averaged over the validation set.
# - The ratio of the training speed to the bound (the same step on batches already on the
#   device) is the course's one instrument: a wait share cannot see a CPU-bound pipeline.
#
# ## Exercises
#
# 1. Train with `NailDataModule(data, cfg, augment=False)` and compare the validation Dice
#    and the curves: how much does the policy help on this dataset?
# 2. Re-run with `num_workers=0` and with as many workers as your machine has cores. How
#    does the ratio to the bound change?
# 3. Resume training for 100 more steps from `last.ckpt`
#    (`trainer.fit(model, datamodule=datamodule, ckpt_path=...)` with a trainer made for
#    `max_steps + 100` steps). Does `trainer.global_step` continue where it stopped?
# 4. Train with `LitNailSegmentation(..., bce_weight=0, dice_weight=0)` (the Lovász hinge
#    alone). Compare the hard Dice and the soft Dice with the default: why does the soft Dice
#    suffer most?
# 5. Set `encoder_weights="imagenet"` on a machine with internet access: how much faster
#    does a pretrained encoder converge?
