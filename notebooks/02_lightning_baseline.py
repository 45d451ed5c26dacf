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
#       policy in Albumentations, the loss and the metrics, and the training speed against
#       its bound.'
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
# DataLoader workers decode the JPEG photos and augment them with Albumentations on the CPU. Every
# piece is written out here, in full: the augmentation policy, the `Dataset`, the
# `LightningDataModule`, the loss and the metrics, the `LightningModule` and the `Trainer`.
# Notebooks 03 (Kornia) and 04 (DALI) reuse the model and the Trainer unchanged and replace
# only the input pipeline.
#
# ## What you'll learn
# - the course's augmentation policy, written down once as a table, in Albumentations 2
# - a mistake of the original series (`Compose([...], p=0.5)`), measured, and its fix
# - the three Lightning pieces: a `LightningDataModule`, a `LightningModule` and the `Trainer`
# - a loss of three terms (symmetric Lovász hinge, cross-entropy, soft Dice) and the metrics
#   to report: hard Dice and IoU per image, averaged
# - reading the curves from the CSV log and judging a model by its predictions
# - the course's accuracy target, from the labels themselves: masks drawn two pixels too large
# - the course's one speed instrument: training images/s against the bound (the same step
#   with the data already on the device), and why a wait share cannot see a slow pipeline
#
# > **CPU or GPU?** The notebook runs everywhere. Without a GPU it picks the `cpu` profile
# > (192 px, a few minutes on a laptop); CI runs the tiny `smoke` profile. On a GPU the
# > `gpu` profile trains the full model at 384 px with bf16 mixed precision (the GPU computes
# > in bfloat16, a 16-bit float with float32's range, and keeps the weights in float32).
# > Every cell that follows is the code that runs: change one and re-run what comes after it.
#
# Every knob below is a parameter: change it in the cell, or pass it to papermill, the tool
# that runs notebooks from the command line, as `-p name value`. `None` keeps the profile's
# value, and `start` prints what was chosen, the environment and where the data is.

# %% tags=["parameters"]
profile = ""            # smoke, cpu or gpu; empty: $NAILSEG_PROFILE, else chosen from the hardware
data_root = ""          # your own photos (Images/<type>/, Masks/<type>/); empty: the synthetic set
num_images = None       # size of the synthetic set (ignored with data_root)
image_size = None       # side of the square images the model sees
batch_size = None
max_steps = None        # optimizer steps of the training (its length, whatever the data's size)
encoder = None          # smp encoder name (ImageNet weights ship for tu-efficientnet_lite0)
lr = None               # peak learning rate of AdamW's cosine schedule
num_workers = None      # DataLoader worker processes for Albumentations
precision = None        # Lightning precision, e.g. 32-true, bf16-mixed
accelerator = None      # cpu or gpu
max_train_batches = None  # cap per epoch (0: the whole set)
max_valid_batches = None
val_every_n_epochs = None  # validate (and checkpoint) every n epochs

# %%
from nailseg_common.course import start

cfg, data = start(globals())

# %% [markdown]
# ## The augmentation policy
#
# The policy is written down once, as a table, and every pipeline of the course builds it
# from there: Albumentations here, Kornia in notebook 03, DALI in notebook 04. Each row is
# one op with its probability and its parameters (pixel values in [0, 1] where a range says
# so; `to_unit_float` brings a pipeline's uint8 images there). Geometric ops move image and
# mask together; photometric ops touch only the image.
# Images are always resized to the profile's size first. `policy_table`, display plumbing
# from `nailseg_common.pipelines.gallery`, shows the table. (Cells that start with
# `#| export` are also written into the `nailseg_common` package by `make export`, so later
# notebooks import exactly this code: this one becomes `nailseg_common.pipelines.policy`.)

# %%
#| export pipelines.policy: the augmentation policy every pipeline draws from
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PolicyOp:
    """One row of the policy table."""

    op: str
    probability: float
    params: dict
    geometric: bool


POLICY: dict[str, PolicyOp] = {op.op: op for op in (
    PolicyOp("horizontal_flip", 0.5, {}, geometric=True),
    PolicyOp("vertical_flip", 0.5, {}, geometric=True),
    PolicyOp("affine", 0.5, {"scale": (0.85, 1.15), "translate": 0.0625, "rotate_deg": 20.0},
             geometric=True),
    PolicyOp("brightness_contrast", 0.5, {"brightness": 0.2, "contrast": 0.2}, geometric=False),
    PolicyOp("gaussian_noise", 0.3, {"std": (0.01, 0.05)}, geometric=False),
    PolicyOp("gaussian_blur", 0.2, {"kernel": 5, "sigma": (0.1, 1.5)}, geometric=False),
)}


def to_unit_float(image: torch.Tensor) -> torch.Tensor:
    """uint8 0..255 -> float32 0..1; float images pass through as float32."""
    return image.float() / 255.0 if image.dtype == torch.uint8 else image.float()


# %%
import matplotlib.pyplot as plt

from nailseg_common.measure import plots
from nailseg_common.pipelines import gallery

gallery.policy_table()

# %% [markdown]
# In Albumentations 2 the table becomes a list of transforms. Each reads its numbers from
# `POLICY`; masks are resampled with nearest neighbour so they stay binary, and areas the
# affine moves in from outside the frame are 0 in image and mask. The training transform is
# the resize followed by the policy; validation only resizes.
#
# One flag deserves a second look: the mask's resize is `cv2.INTER_NEAREST_EXACT`, not
# `cv2.INTER_NEAREST`. OpenCV's older nearest-neighbour resize samples each output pixel at
# its top-left corner instead of its centre, so its masks sit about half a pixel below and to
# the right of the bilinear image. Every nail's outline would be taught, and scored, half a
# pixel off; notebook 07 shows what a pixel of outline costs.

# %%
#| export pipelines.albumentations_pipeline: the Albumentations pipeline of the policy on CPU workers, its datasets and DataModule
import albumentations as A
import cv2

from nailseg_common.pipelines.policy import POLICY


def resize(image_size: int) -> A.Resize:
    """Resize image (bilinear) and mask (nearest, on the image's pixel grid) to ``image_size²``."""
    return A.Resize(image_size, image_size, cv2.INTER_LINEAR, mask_interpolation=cv2.INTER_NEAREST_EXACT)


def policy_transforms() -> list[A.BasicTransform]:
    """The policy ops, in table order, as Albumentations transforms."""
    p = {name: op.probability for name, op in POLICY.items()}
    affine, light = POLICY["affine"].params, POLICY["brightness_contrast"].params
    blur, shift, angle = POLICY["gaussian_blur"].params, affine["translate"], affine["rotate_deg"]
    return [
        A.HorizontalFlip(p=p["horizontal_flip"]), A.VerticalFlip(p=p["vertical_flip"]),
        A.Affine(scale=affine["scale"], translate_percent=(-shift, shift), rotate=(-angle, angle),
                 interpolation=cv2.INTER_LINEAR, mask_interpolation=cv2.INTER_NEAREST,
                 border_mode=cv2.BORDER_CONSTANT, fill=0, fill_mask=0, p=p["affine"]),
        A.RandomBrightnessContrast(brightness_limit=light["brightness"],
                                   contrast_limit=light["contrast"], p=p["brightness_contrast"]),
        A.GaussNoise(std_range=POLICY["gaussian_noise"].params["std"], p=p["gaussian_noise"]),
        A.GaussianBlur(blur_limit=(blur["kernel"],) * 2, sigma_limit=blur["sigma"],
                       p=p["gaussian_blur"]),
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
# untouched, not even resized. Let's count, over a few hundred draws of the same image, how
# often each version returns what the model expects: resized and normalised. `ready_draws`
# (plumbing from `nailseg_common.pipelines.gallery`) calls a transform 200 times on the first
# training photo and counts the outputs that come back as float32 at the profile's size.

# %%
for p in (0.5, 1.0):
    transform = A.Compose([resize(cfg.image_size), *policy_transforms(), A.Normalize()], p=p, seed=0)
    print(f"Compose(..., p={p}):", gallery.ready_draws(transform, data, cfg.image_size))

# %% [markdown]
# With `p=0.5` roughly half the draws come back as the raw photo: a different size, uint8
# instead of normalised floats. In 1.x those samples trained on unnormalised pixels; in 2.x
# the DataLoader cannot even stack them into a batch. The fix is to leave `Compose` at `p=1`
# and give each transform its own probability, as `train_transform` does. The course
# normalises on the device instead (see the LightningModule below), so the CPU side never
# needs `Normalize`.
#
# A gallery says more than the table: each row is one training image, first resized only,
# then three random draws of the policy. The yellow outline is the mask; it must hug the
# nails after every flip and warp. The gallery is plot plumbing from
# `nailseg_common.pipelines.gallery`: `albumentations_panels` resizes one training image of
# each type with `valid_transform` and draws `A.Compose(policy_transforms())` on them three
# times through `gallery_panels`, which takes the augmentation to show as a function, so
# notebooks 03 (Kornia) and 04 (DALI) draw their galleries with it too.

# %%
plots.plot_augmentation_gallery(gallery.albumentations_panels(data, cfg.image_size))
plt.show()

# %% [markdown]
# ## The `Dataset`
#
# A `Dataset` maps an index to one sample. `NailDataset` reads the pair of files listed in
# the split (notebook 01 wrote `csv_file/train.csv` and `valid.csv`), checks that image and
# mask agree in size (`split_paths` and `read_pair`, plumbing from
# `nailseg_common.data.preparation`, take the paths from the split's table, read a pair and
# check it), applies the transform and returns the course's **batch contract**: a
# dict with a `uint8` image `3×H×W` and a `uint8` label `1×H×W` in {0, 1}. Staying in
# `uint8` on the CPU makes each batch four times smaller to copy than float32; conversion
# and normalisation happen on the device.
#
# One subtlety: an Albumentations 2 `Compose` owns its random generator. DataLoader workers
# are forked copies of the main process, so without `seed_worker_transform` every worker
# would draw the same augmentations in lockstep.

# %%
#| export pipelines.albumentations_pipeline
import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from nailseg_common.data.preparation import read_pair, split_paths


class NailDataset(Dataset):
    """Photo/label pairs listed in ``frame`` (columns ``image`` and ``label``: absolute paths)."""

    def __init__(self, frame: pd.DataFrame, transform=None):
        self.images, self.masks = split_paths(frame)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        image, mask = read_pair(self.images[index], self.masks[index])  # sizes checked
        out = self.transform(image=image, mask=mask) if self.transform else {"image": image, "mask": mask}
        image, mask = out["image"], out["mask"]
        return {"image": torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))),
                "label": torch.from_numpy(np.ascontiguousarray(mask[None]))}


def seed_worker_transform(worker_id: int) -> None:
    """Each DataLoader worker its own Albumentations random stream (seeded by PyTorch)."""
    info = get_worker_info()
    transform = getattr(info.dataset, "transform", None)
    if hasattr(transform, "set_random_seed"):
        transform.set_random_seed(info.seed % 2**32)


# %% [markdown]
# ## 1. The `LightningDataModule`
#
# Every training image goes through Python on a CPU worker: decode the JPEG, turn it upright as
# its EXIF orientation says, resize it, then flip, warp, re-light, add noise and blur it, one
# image at a time. A DataLoader spreads
# that over `num_workers` processes; whether they keep up with the model is what the end of
# this notebook measures.
#
# The DataModule owns the data: it builds the two datasets from the prepared split and the
# DataLoaders around them. Training shuffles and drops the last incomplete batch (every step
# sees a full batch); validation keeps every image once. Pinned memory makes the copy to the
# GPU asynchronous; persistent workers are not restarted every epoch. `augment=False` trains
# on resized images only. `loaders_summary` (plumbing from `nailseg_common.pipelines.gallery`)
# prints the sizes of both sets and what a training batch holds.

# %%
#| export pipelines.albumentations_pipeline
import pytorch_lightning as pl

from nailseg_common.data.preparation import read_split
from nailseg_common.setup.paths import DataLocation
from nailseg_common.setup.profiles import Profile


class NailDataModule(pl.LightningDataModule):
    """Train/valid loaders over the prepared split, Albumentations on CPU workers."""

    def __init__(self, location: DataLocation, profile: Profile, augment: bool = True):
        super().__init__()
        self.location, self.profile, self.augment = location, profile, augment

    def setup(self, stage: str | None = None) -> None:
        size = self.profile.image_size  # cheap to repeat: Lightning calls it for every stage
        transform = train_transform(size) if self.augment else valid_transform(size)
        self.train_set = NailDataset(read_split(self.location, "train"), transform)
        self.valid_set = NailDataset(read_split(self.location, "valid"), valid_transform(size))

    def _loader(self, dataset: NailDataset, train: bool) -> DataLoader:
        workers = self.profile.num_workers
        return DataLoader(dataset, batch_size=self.profile.batch_size, shuffle=train,
                          drop_last=train, num_workers=workers, persistent_workers=workers > 0,
                          pin_memory=self.profile.device.type == "cuda",
                          worker_init_fn=seed_worker_transform if workers > 0 else None)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.valid_set, train=False)


# %%
datamodule = NailDataModule(data, cfg)
datamodule.setup("fit")
first_batches = [b for _, b in zip(range(4), datamodule.train_dataloader())]  # for the bound
print(gallery.loaders_summary(datamodule, first_batches[0]))

# %% [markdown]
# ## 2. The `LightningModule`
#
# The LightningModule owns the model and the maths. The model is an `smp.Unet` with one
# output channel of logits. Its encoder, EfficientNet-Lite0 (timm's `efficientnet_lite0`, which
# smp names `tu-efficientnet_lite0`), starts from weights trained on ImageNet's 1.3 million
# photos, as nearly every segmentation model does: edges, textures and parts it has already
# learned, so our few hundred images only teach it nails. The weights come with a pinned pip
# package, so nothing downloads; `load_encoder_weights` (plumbing from
# `nailseg_common.training.imagenet`) copies them in with `load_imagenet_encoder` (it renames the
# package's tensors to timm's names, and a test checks that the classifier they make names a
# sample photo's ImageNet class). `encoder_weights=None` starts from random weights instead:
# exercise 5 measures what ImageNet buys.

# %%
#| export training.unet: the U-Net as a LightningModule, its losses and its scores
import segmentation_models_pytorch as smp
import torch
from torch import nn

from nailseg_common.training.imagenet import load_encoder_weights


def create_model(encoder: str = "tu-efficientnet_lite0",
                 encoder_weights: str | None = "imagenet") -> nn.Module:
    """An ``smp.Unet`` with one output channel (logits), its encoder from ImageNet by default."""
    model = smp.Unet(encoder_name=encoder, encoder_weights=None, in_channels=3, classes=1)
    load_encoder_weights(model.encoder, encoder, encoder_weights)  # "imagenet", or None: random
    return model


# %% [markdown]
# ### The loss
#
# The loss has three terms. The **Lovász hinge** (Berman et al., 2018) is a convex surrogate
# of the Jaccard loss, 1 − IoU: sort the pixels' hinge errors `1 − logit·(±1)` from worst to
# best, and weigh each by how much it changes the IoU of the prediction. `symmetric_lovasz`
# averages it over the nail class and the background class,
# `0.5·(hinge(logits, t) + hinge(−logits, 1 − t))`, so both sides of the boundary are
# optimised, and computes it per image, then averages over the batch: the original
# series' loss. segmentation-models-pytorch's `LovaszLoss(mode="binary", per_image=True)`
# computes the same hinge but loops over the images in Python; `lovasz_hinge` does the whole
# batch with one sort (the tests check that both agree, gradients included).
#
# For an image without nail pixels the nail term reduces to `relu(1 + max logit)`: only
# the most confident false positive is penalised, and the background term stays an ordinary
# hinge. On its own the hinge learns slowly from a fresh decoder and only asks for a margin
# (a background logit of −1 already satisfies it, at a probability of sigmoid(−1) ≈ 0.27).
# Binary cross-entropy gets training going, and a **soft Dice** term on the probabilities
# pushes them towards 0 and 1. All three are computed in float32 whatever the autocast
# dtype (sorting bf16 values loses ties): `flat_pair` (plumbing from
# `nailseg_common.training.scores`) checks that logits and targets have one shape and turns
# each image into a float32 row. `segmentation_loss` adds the three terms;
# `bce_weight=dice_weight=0` leaves the Lovász hinge alone (exercise 4).

# %%
#| export training.unet
import torch.nn.functional as F

from nailseg_common.training.scores import flat_pair


def lovasz_hinge(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Binary Lovász hinge per image, averaged over the batch."""
    logits, labels = flat_pair(logits, targets)
    errors = 1.0 - logits * (2.0 * labels - 1.0)
    errors_sorted, order = torch.sort(errors, dim=1, descending=True)
    labels_sorted = labels.gather(1, order)
    positives = labels_sorted.sum(dim=1, keepdim=True)
    intersection = positives - labels_sorted.cumsum(dim=1)
    union = positives + (1.0 - labels_sorted).cumsum(dim=1)
    jaccard = 1.0 - intersection / union  # its steps: the Lovász gradient at the sorted errors
    grad = torch.cat([jaccard[:, :1], jaccard[:, 1:] - jaccard[:, :-1]], dim=1)
    return (F.relu(errors_sorted) * grad).sum(dim=1).mean()


def symmetric_lovasz(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``0.5·(lovasz_hinge(logits, t) + lovasz_hinge(−logits, 1 − t))``, per image averaged."""
    return 0.5 * (lovasz_hinge(logits, targets) + lovasz_hinge(-logits, 1.0 - targets.float()))


def soft_dice_loss(logits: torch.Tensor, targets: torch.Tensor, smooth: float = 1.0) -> torch.Tensor:
    """``1 − (2·Σpt + smooth) / (Σp + Σt + smooth)`` per image, ``p = sigmoid(logits)``."""
    logits, targets = flat_pair(logits, targets)
    probs = torch.sigmoid(logits)
    dice = (2.0 * (probs * targets).sum(1) + smooth) / (probs.sum(1) + targets.sum(1) + smooth)
    return (1.0 - dice).mean()


def segmentation_loss(logits, targets, bce_weight: float = 1.0, dice_weight: float = 1.0) -> torch.Tensor:
    """``symmetric_lovasz + bce_weight · BCE + dice_weight · soft_dice_loss``, in float32."""
    bce = F.binary_cross_entropy_with_logits(logits.float(), targets.float())
    return (symmetric_lovasz(logits, targets) + bce_weight * bce
            + dice_weight * soft_dice_loss(logits, targets))


# %% [markdown]
# ### The metrics
#
# The numbers people compare are the **hard Dice and IoU**: the prediction is thresholded at
# probability 0.5 (a logit above 0), each image is scored on its own and the scores are
# averaged over all validation images of the epoch (`val_dice`, `val_iou`), so a small nail
# counts as much as a large one. The soft Dice on probabilities is logged too
# (`val_soft_dice`), as the training signal it is, not as a score. Empty masks: an image
# whose target and prediction are both empty scores 1 (nothing to find, nothing found); an
# empty target with a non-empty prediction scores 0. For the soft Dice any probability mass
# is a prediction, so read the hard scores on sets with empty images. The functions return
# one value per image, so the LightningModule can average them over the whole epoch rather
# than averaging batch means. Two helpers come from `nailseg_common.training.scores`:
# `ratio_or_one`, a ratio that is 1 where its denominator is 0 (both masks empty), and
# `per_image_soft_dice`, the same ratio on probabilities.

# %%
#| export training.unet
from nailseg_common.training.scores import per_image_soft_dice, ratio_or_one


def per_image_dice(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Dice of each image with the prediction thresholded at probability 0.5; shape ``B``."""
    logits, targets = flat_pair(logits, targets)
    predicted = (logits > 0).float()  # sigmoid(x) > 0.5  <=>  x > 0
    return ratio_or_one(2.0 * (predicted * targets).sum(1), predicted.sum(1) + targets.sum(1))


def per_image_iou(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """IoU of each image at threshold 0.5, from its Dice: ``D / (2 − D)``; shape ``B``."""
    dice = per_image_dice(logits, targets)
    return dice / (2.0 - dice)


SCORES = {"val_dice": per_image_dice, "val_iou": per_image_iou, "val_soft_dice": per_image_soft_dice}


# %% [markdown]
# The module comes in two cells. The first is what turning images into logits needs, for
# training and for inference alike:
#
# - `on_after_batch_transfer` runs once the batch is on the device: `uint8` → float in
#   [0, 1], and, for training batches only, an optional `gpu_augmentation` module. That hook
#   is where notebook 03 plugs in Kornia.
# - `forward` scales the pixels to [-1, 1], the range the encoder saw on ImageNet, and runs
#   the U-Net in channels-last memory (`channels_last`), where its convolutions run faster:
#   in bf16 on a GPU, and in float32 on this course's 2-core CPU too.

# %%
#| export training.unet
import pytorch_lightning as pl
from torchmetrics import MeanMetric

INPUT_MEAN, INPUT_STD = (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)  # pixels to [-1, 1], as Lite0 saw ImageNet


class SegmentationModel(pl.LightningModule):
    """The U-Net on the device; :class:`LitNailSegmentation` adds the training."""

    def __init__(self, encoder: str = "tu-efficientnet_lite0", lr: float = 1e-3, max_steps: int = 1,
                 gpu_augmentation: nn.Module | None = None, encoder_weights: str | None = "imagenet",
                 channels_last: bool = True, weight_decay: float = 1e-4,
                 bce_weight: float = 1.0, dice_weight: float = 1.0):
        super().__init__()
        self.save_hyperparameters(ignore=["gpu_augmentation"])
        self.model = create_model(encoder, encoder_weights)
        self.gpu_augmentation = gpu_augmentation  # keep it stateless: checkpoints load without it
        self.register_buffer("mean", torch.tensor(INPUT_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(INPUT_STD).view(1, 3, 1, 1), persistent=False)
        for name in SCORES:  # the validation scores, averaged over the epoch on the device
            setattr(self, name, MeanMetric(nan_strategy="disable"))

    def on_fit_start(self) -> None:
        if self.hparams.channels_last:
            self.model.to(memory_format=torch.channels_last)

    def on_after_batch_transfer(self, batch: dict, dataloader_idx: int) -> dict:
        image, label = to_unit_float(batch["image"]), batch["label"].float()
        if self.gpu_augmentation is not None and self.trainer.training:
            image, label = self.gpu_augmentation(image, label)
        return {"image": image, "label": label}

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        """Logits ``B×1×H×W`` for an image batch (uint8, or float in [0, 1])."""
        image = (to_unit_float(image) - self.mean) / self.std
        if self.hparams.channels_last:
            image = image.contiguous(memory_format=torch.channels_last)
        return self.model(image)


# %% [markdown]
# The second cell is the training:
#
# - `training_step` and `validation_step` compute the loss and, for validation, per-image
#   scores that `MeanMetric`s sum on the device: no host synchronisation until the epoch ends.
# - the per-image hard Dice of the last validation epoch is kept, too: a list of device
#   tensors during the epoch, one host tensor `val_dice_per_image` at its end, in loader
#   order. A mean hides how much the images differ; these scores give its spread below.
# - `configure_optimizers`: AdamW with a cosine learning-rate schedule stepped every batch,
#   over the profile's `max_steps` optimizer steps. Training length is counted in steps,
#   not epochs, so a few dozen photos train as long as the whole synthetic set.
#
# `pl.seed_everything(0)` before the model is built fixes its new decoder weights and, through
# the seeds PyTorch hands the DataLoader workers, every augmentation: a re-run trains the same
# run, and notebooks 03 and 04 start from the same seed.

# %%
#| export training.unet
class LitNailSegmentation(SegmentationModel):
    """U-Net training with :func:`segmentation_loss`, AdamW and a per-step cosine schedule."""

    def _loss(self, logits: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        return segmentation_loss(logits, label, self.hparams.bce_weight, self.hparams.dice_weight)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        loss = self._loss(self(batch["image"]), batch["label"])
        self.log("train_loss", loss, on_step=False, on_epoch=True, batch_size=len(batch["image"]))
        return loss

    def on_validation_epoch_start(self) -> None:
        self.val_dice_per_image = []  # this epoch's per-image hard Dice, on the device

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        logits, label = self(batch["image"]), batch["label"]
        self.log("val_loss", self._loss(logits, label), batch_size=len(label))  # once per epoch
        scores = {name: score(logits, label) for name, score in SCORES.items()}
        for name, values in scores.items():  # per-image scores, summed on the device
            getattr(self, name).update(values)
            self.log(name, getattr(self, name))
        self.val_dice_per_image.append(scores["val_dice"])

    def on_validation_epoch_end(self) -> None:  # one copy to the host, at the end
        self.val_dice_per_image = torch.cat(self.val_dice_per_image or [torch.empty(0)]).cpu()

    def configure_optimizers(self):
        hp = self.hparams
        optimizer = torch.optim.AdamW(self.parameters(), lr=hp.lr, weight_decay=hp.weight_decay)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(1, hp.max_steps))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


# %%
pl.seed_everything(0, verbose=False)
model = LitNailSegmentation(encoder=cfg.encoder, lr=cfg.lr, max_steps=cfg.max_steps)
print(f"{cfg.encoder} U-Net: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters")

# %% [markdown]
# ## 3. The `Trainer`
#
# `make_trainer` configures the Trainer from the profile: accelerator, precision
# (`bf16-mixed` on the GPU), the step budget, how many batches an epoch may take, and how
# often to validate (`val_every_n_epochs`: every epoch on a CPU, every third in the `gpu`
# profile, whose validations and checkpoints would otherwise take a third of the run). TF32
# for the float32 matrix products on a GPU is no Trainer option but a process-wide torch
# setting: `start` set it at the top, from the profile. cuDNN's kernel search
# (`benchmark=True`) stays off: it would compile and time several candidate kernels for each
# new input shape, which on this U-Net makes the first step several times longer and no
# later step faster. What every course run logs is plumbing,
# `nailseg_common.training.run_logs.course_logging`: a checkpoint (full state: weights,
# optimizer and schedule) at each new best validation Dice, an `EpochClock` that logs each
# epoch's wall time (`epoch_s`), about ten progress lines per training and a CSV log under
# `runs/<profile>/<run name>/`, with Lightning's own progress bar, model summary and sanity
# check turned off; `run_logs.read_metrics` turns that log into one row per epoch.

# %%
#| export training.trainer: the Lightning trainer of every run, its speed callback and the bound of a resident batch
import dataclasses

import pytorch_lightning as pl

from nailseg_common.setup.profiles import Profile
from nailseg_common.training import run_logs


def make_trainer(profile: Profile, run_name: str, **overrides) -> pl.Trainer:
    """A ``pl.Trainer`` for ``profile``; ``overrides`` go to ``pl.Trainer`` (``callbacks``: added)."""
    return pl.Trainer(**{
        **run_logs.course_logging(profile, run_name, overrides),  # callbacks, CSV log, quiet output
        "accelerator": profile.accelerator, "devices": 1, "precision": profile.precision,
        "max_steps": profile.max_steps, "check_val_every_n_epoch": profile.val_every_n_epochs,
        "limit_train_batches": profile.max_train_batches or 1.0, "max_epochs": -1,
        "limit_val_batches": profile.max_valid_batches or 1.0,
        "benchmark": False,  # cuDNN's kernel search: a slower first step, no faster later one
        **overrides})  # what the caller sets wins


# %% [markdown]
# ### How fast does it train?
#
# The course measures a pipeline with one instrument, taught here and used again in
# notebooks 03, 04 and 05. `TrainingSpeed` is a callback that times the training part of
# every epoch: it reads the clock at the start of the epoch and after its last training
# step, so validation is left out. On a GPU the clock first waits for the queued kernels
# (`synchronized_now`); it does so only at the two ends of each epoch, so the steps in
# between run as they always do. Its report comes from `run_logs.EpochRates`: `rates()` are
# the epochs' images/s, without the first (starting workers, choosing cuDNN kernels) when
# there are several; `images_per_second()` is their median, `ratio_to(bound)` divides it by
# a bound (below), with its spread, and `report(bound, name)` prints all of it in one line.
# **Throughout the course `x ± s` means one thing: `x - s` to `x + s` is a 95 % interval,
# computed from repeats with Student's t for their count** (here the epochs' rates, the
# bound's among them). With hundreds of photos `s` is about twice the
# standard error; with three timing windows it is 4.3 times it, with two 12.7 times. Repeated seeds are shown as a median and a range instead.

# %%
#| export training.trainer
from pytorch_lightning.callbacks import Callback

from nailseg_common.core.clock import synchronized_now


class TrainingSpeed(run_logs.EpochRates, Callback):
    """Training images/s of each epoch, validation excluded (``epochs``: images, seconds)."""

    start = None  # the clock at the start of the open window (``epochs``: see EpochRates)

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.start, self.images = synchronized_now(pl_module.device), 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.images += len(batch["image"]) * trainer.world_size
        if batch_idx + 1 >= trainer.num_training_batches or trainer.global_step == trainer.max_steps:
            self.stop(trainer, pl_module)  # the epoch's last training step is done

    def stop(self, trainer, pl_module) -> None:
        if self.start is not None and self.images:
            images, seconds = self.images, synchronized_now(pl_module.device) - self.start
            self.epochs.append({"images": images, "seconds": seconds, "img_s": images / seconds})
        self.start = None

    on_validation_start = on_train_epoch_end = stop  # closes a window still open (no loader length)


# %% [markdown]
# A speed means little on its own: is it the model's limit or the input pipeline's? The
# **bound** answers that. `bound_speed` runs the same training step, on a fresh model from
# `make_model()`, over a few batches that are already on the device, so the input costs
# nothing; `TrainingSpeed` times it the same way, over `steps` steps in about five epochs,
# and those epochs are the bound's repeats. The last section of the notebook divides one
# by the other.

# %%
#| export training.trainer
from torch.utils.data import DataLoader


def bound_speed(profile: Profile, make_model, batches: list[dict], steps: int) -> TrainingSpeed:
    """The :class:`TrainingSpeed` of ``make_model()`` on ``batches`` already on the device."""
    per_epoch = max(1, steps // 5)
    speed = TrainingSpeed()
    trainer = make_trainer(dataclasses.replace(profile, max_steps=steps), "bound",
                           callbacks=[speed], enable_checkpointing=False,
                           enable_progress_bar=False, limit_train_batches=per_epoch, limit_val_batches=0)
    loader = DataLoader([batches[i % len(batches)] for i in range(per_epoch)], batch_size=None)
    trainer.fit(make_model(), loader, loader)  # limit_val_batches=0: no validation runs
    return speed


# %% [markdown]
# ## Training
#
# `trainer.fit` runs the steps and prints about ten lines on the way (`ProgressLines`: step,
# epoch, seconds, training loss and the last validation Dice and IoU); `TrainingSpeed`
# times it.

# %%
speed = TrainingSpeed()
trainer = make_trainer(cfg, "02_lightning_baseline", callbacks=[speed])
trainer.fit(model, datamodule=datamodule)

# %% [markdown]
# ## Loss and score curves
#
# The loss falls (a model that knows nothing scores a Lovász hinge near 1, a cross-entropy
# of ln 2 ≈ 0.69 and a soft-Dice loss near 1, so about 2.7 in all; the log's first line, a
# tenth of the way in, is already well below that) and the hard Dice and IoU rise as the
# model finds the nails. With
# the `smoke` profile you see a single epoch, so expect a single point near the start. The
# table shows the last three epochs of the log that have validation scores.

# %%
metrics = run_logs.read_metrics(trainer)
plots.plot_training_curves({"this run": metrics})
plt.show()
metrics.dropna(subset=["val_dice"]).tail(3).round(3)

# %% [markdown]
# ## Validation Dice and IoU of the best checkpoint
#
# The checkpoint callback kept the weights of the epoch with the best validation Dice.
# `trainer.validate(ckpt_path="best")` loads them and runs the whole validation set: the
# hard Dice and IoU (threshold 0.5), the soft Dice and the loss, each a mean over the images.

# %%
scores = trainer.validate(model, datamodule=datamodule, ckpt_path="best", verbose=False)[0]
print("best checkpoint, means over the images:", {k: round(v, 3) for k, v in scores.items()})

# %% [markdown]
# ## How good is good enough? A target from the labels themselves
#
# A Dice of 1 is out of reach: the labels were drawn by hand (or, in the synthetic set,
# rasterised from smooth shapes), and no model reproduces their every edge pixel. The labels
# themselves say how much an edge costs. Draw each validation mask a pixel or two too large
# or too small and score it against the true mask with the same hard Dice: such a mask is
# right everywhere except along its outline. `grown` dilates a mask with a maximum over a
# square neighbourhood (a max-pool of side `2·pixels + 1`); a negative `pixels` erodes it,
# as the dilation of the background. `outline_levels` scores the four versions per image;
# `dataset_labels` (plumbing from `nailseg_common.pipelines.gallery`) stacks the validation labels.

# %%
#| export training.unet
import pandas as pd

OUTLINE_ERRORS = {"1 px larger": 1, "1 px smaller": -1, "2 px larger": 2, "2 px smaller": -2}


def grown(mask: torch.Tensor, pixels: int) -> torch.Tensor:
    """``B×1×H×W`` {0, 1} masks dilated by ``pixels`` (a square neighbourhood); negative erodes."""
    if pixels < 0:
        return 1.0 - grown(1.0 - mask, -pixels)
    return F.max_pool2d(mask, 2 * pixels + 1, stride=1, padding=pixels) if pixels else mask


def outline_levels(labels: torch.Tensor) -> pd.DataFrame:
    """Per-image hard Dice (a row per image) of ``labels`` drawn 1 and 2 px too large or small."""
    labels = labels.float()
    return pd.DataFrame({name: per_image_dice(2 * grown(labels, pixels) - 1, labels).cpu().numpy()
                         for name, pixels in OUTLINE_ERRORS.items()})


# %%
valid_labels = gallery.dataset_labels(datamodule.valid_set).to(cfg.device)  # max-pools run where the model runs
levels = outline_levels(valid_labels)  # mean hard Dice against the true masks:
levels.mean().to_frame(f"{len(levels)} validation masks at {cfg.image_size} px").T.round(3)

# %% [markdown]
# One pixel of outline costs more than you might think, and the levels depend on the image
# size: a nail of a given share of the photo has fewer pixels inside for each pixel of its
# outline at 192 px (the `cpu` profile) than at 384 px (the `gpu` profile), so the same
# one-pixel error costs more Dice the smaller the images. That is why the course states its
# target in pixels of outline, not as a typed Dice: **every pipeline trains a model whose
# masks are closer to the labels than masks drawn two pixels too large.**
#
# `validate` above ran the best checkpoint over the validation set, and the model kept each
# image's hard Dice of that epoch (`val_dice_per_image`). `run_logs.outline_verdict`
# (reporting plumbing) compares their mean with the `2 px larger` level of `outline_levels`
# on the same images, and the spread comes from both sets of per-image scores
# (`difference_spread`: the 95 % interval of the difference, the course's `±`).
# Notebooks 03 and 04 judge their own runs the same way.

# %%
print(run_logs.outline_verdict(model.val_dice_per_image, valid_labels, cfg.device))

# %% [markdown]
# ## Predictions over the ground truth
#
# Numbers hide where a model fails. Here are validation images with the ground truth
# outlined in yellow and the prediction (probability above 0.5) in cyan, and below them the
# predicted probability; each title is that image's IoU. `plot_model_predictions` (plumbing
# from `nailseg_common.measure.plots`) runs the model on the first four without gradients, in the
# training's bf16 where it trained in bf16, and draws it.

# %%
plots.plot_model_predictions(model, datamodule.valid_set, cfg.precision)  # its first 4 images
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
# Why not time how long each step *waits* for its batch? Because the waiting hides. The
# DataLoader's workers prepare batches ahead, and Lightning fetches the next batch before it
# runs the current step, so a timer around the steps sees little waiting even when the
# workers cannot keep up: the steps simply come less often. A wait share reads about the
# same for a pipeline that holds the GPU to two thirds of its speed as for one that keeps up
# with it; a rate compared with the bound tells them apart. `bound_speed` runs a
# fresh model for a few hundred steps at most on a GPU (a few on a CPU).

# %%
on_device = [{key: value.to(cfg.device) for key, value in b.items()} for b in first_batches]
bound = bound_speed(cfg, lambda: LitNailSegmentation(cfg.encoder, cfg.lr, cfg.max_steps),
                                on_device, steps=200 if cfg.device.type == "cuda" else 4)
print(speed.report(bound, "Albumentations"))  # the ratio to the bound and its spread

# %% [markdown]
# Read the ratio (`ratio r ± s`); its spread is the 95 % interval from the epochs' rates of
# both runs, the training's and the bound's. On a CPU the model itself is slow, but the workers compete with it for
# the same few cores, so the ratio says as much about the machine as about the pipeline (and
# in the `smoke` profile, with its two steps, it says nothing). On a GPU the step shrinks
# while the CPU's cost per image stays, so whatever the workers cannot deliver shows as a
# ratio below 1. Notebooks 03 and 04 close that gap by moving augmentation, and then reading
# and resizing too, onto the GPU, and measure it with the same two functions; notebook 05
# repeats the measurement with windows and spread.
#
# ## Summary
#
# - The reference pipeline decodes the JPEG photos and augments them with Albumentations on
#   CPU workers,
#   yielding compact `uint8` batches; the LightningModule converts and normalises on the device.
# - The augmentation policy lives in one table (`policy.POLICY`); the Albumentations,
#   Kornia and DALI builders all read it. A `Compose` keeps `p=1`: its `p` gates the whole
#   list, which silently left half of the original series' samples raw.
# - Lightning splits the work into a DataModule (data), a LightningModule (model, loss,
#   optimiser, metrics) and a Trainer (loops, precision, logging, checkpoints).
# - The loss is Lovász hinge + cross-entropy + soft Dice; the scores to report are the hard
#   Dice and IoU at threshold 0.5, per image, averaged over the validation set.
# - The course's accuracy target comes from the labels: a model's masks must be closer to
#   them than the same labels drawn two pixels too large, judged with the per-image spread.
# - The ratio of the training speed to the bound (the same step on batches already on the
#   device) is the course's one instrument: a wait share cannot see a CPU-bound pipeline.
#
# ## Exercises
#
# 1. Train with `NailDataModule(data, cfg, augment=False)` and compare the validation Dice
#    and the curves: how much does the policy help on this dataset?
# 2. Re-run with `num_workers=0` and with as many workers as your machine has cores. How
#    does the ratio to the bound change?
# 3. Resume training for 100 more steps from the best checkpoint
#    (`trainer.checkpoint_callback.best_model_path`)
#    (`trainer.fit(model, datamodule=datamodule, ckpt_path=...)` with a trainer made for
#    `max_steps + 100` steps). Does `trainer.global_step` continue where it stopped?
# 4. Train with `LitNailSegmentation(..., bce_weight=0, dice_weight=0)` (the Lovász hinge
#    alone). Compare the hard Dice and the soft Dice with the default: why does the soft Dice
#    suffer most?
# 5. Train with `LitNailSegmentation(..., encoder_weights=None)`: how far do random weights
#    get in the same steps as ImageNet's?
