# ---
# jupyter:
#   blog:
#     categories:
#     - fine-tuning
#     - transfer-learning
#     - segmentation
#     - pytorch-lightning
#     date: '2026-11-23'
#     description: Fine-tune the course's U-Net on your own nail photos from random
#       weights, ImageNet weights and ImageNet plus synthetic nails; score every held-out
#       photo, look at the worst ones, and choose a start from the measured numbers.
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
# # 06 · Your own photos
#
# The course trains on synthetic nails. This notebook takes the step to *your* photos: a
# few dozen pictures with hand-drawn masks, far too few to train a U-Net from nothing. It
# fine-tunes the same model from up to three starts on the same training photos, with the
# same budget and seed, and scores each one on photos it did not train on:
#
# - **random**: no prior knowledge at all;
# - **imagenet**: the encoder as it learned ImageNet's photos (the decoder random), the start
#   notebook 02 trained from;
# - **synthetic**: ImageNet *and* synthetic nails: the checkpoint that notebook 02 (or 04)
#   trained on the synthetic set, or, where there is none, the one the course ships.
#
# What ImageNet buys, and whether the synthetic nails add to it on *your* photos, is what
# this notebook measures.
#
# ## What you'll learn
# - finding the course's own checkpoint, and checking that it fits the model you build
# - three ways to start a fine-tuning run, and how to make the comparison fair (same
#   encoder, budget, seed, batches and augmentations)
# - fine-tuning in seconds: photos held on the GPU, augmentation there, CUDA graphs
# - k-fold cross-validation: every photo scored once, by a model that never saw it
# - scoring photo by photo (hard Dice and IoU at probability 0.5), not only as one mean
# - a learning curve: would more labelled photos help?
# - reading the worst photos: a low score may be the model, or the mask
# - whether fine-tuning beats the start as it is, judged against the noise, and what to
#   try when it does not
# - choosing a start from measured numbers, with their standard errors in view
#
# > **CPU or GPU?** The notebook runs everywhere. Without a GPU it picks the `cpu` profile;
# > CI runs the tiny `smoke` profile, where every model trains for a handful of steps and
# > the numbers mean nothing. Without your photos (`data_root`) it runs on a small synthetic
# > stand-in of another style and says so, so every cell still runs the real code.

# %%
import dataclasses

import matplotlib.pyplot as plt
import pandas as pd

from nailseg_common.commands import predict
from nailseg_common.core.statistics import Verdict, mean_spread
from nailseg_common.data.synthetic import photos_or_standin
from nailseg_common.measure import own_photos_report, plots
from nailseg_common.setup.profiles import select_profile

# %% [markdown]
# Every knob is a parameter (papermill `-p name value`); `None` keeps the profile's value.

# %% tags=["parameters"]
profile = ""            # smoke, cpu or gpu; empty: $NAILSEG_PROFILE, else chosen from the hardware
data_root = ""          # your photos: Images/<type>/ + Masks/<type>/, or flat images/ + masks/
checkpoint = ""         # the synthetic-pretrained checkpoint; empty: found (see below)
standin_images = None   # stand-in photos (without data_root); None: the profile's, at most 60
folds = 5               # k of the k-fold cross-validation
curve_sizes = [5, 10, 20]  # training photos of the learning curve's points (and all of them)
curve_folds = None      # folds the learning curve uses (the first ones)
image_size = None       # side of the images the model sees; None: profile's fine_tune_image_size
batch_size = None
fine_tune_steps = None   # optimizer steps of each fine-tuning run (the same for every start)
encoder = None          # smp encoder name; a found checkpoint's encoder wins
fine_tune_lr = None      # peak learning rate of AdamW's cosine schedule
fine_tune_keep_statistics = None  # a trained start keeps its BatchNorm statistics (True/False)
precision = None        # Lightning precision, e.g. 32-true, bf16-mixed
accelerator = None      # cpu or gpu
max_train_batches = None  # cap per epoch (0: the whole set)
max_valid_batches = None  # cap of each validation

# %% [markdown]
# `photos_or_standin` (in `nailseg_common.data.synthetic`) returns the folder of your photos, or
# generates the **stand-in**: synthetic photos in another style than the training set (one
# hand close up, warm indoor light, plain surfaces out of focus, other polish), all of one
# type as a user's own photos would be. Either way `start` prepares the folder exactly as a
# real set: checked, split into training and validation photos (seeded; the batch is fitted
# to the training split), converted. Fine-tuning has a side of its own,
# `fine_tune_image_size`: on a laptop, larger than the other notebooks' `image_size`, because
# the course's model was trained at 384 px and loses much of its skill far below that.

# %%
from nailseg_common.course import start

photos = photos_or_standin(profile, data_root, standin_images)
side = image_size or select_profile(profile, accelerator=accelerator).fine_tune_image_size
cfg, data = start(globals() | {"image_size": side}, photos)

# %% [markdown]
# ## The synthetic checkpoint
#
# Notebook 02 (and 04, with DALI) trained the U-Net on the synthetic set and kept the
# weights of its best validation Dice as `best-*.ckpt` under
# `runs/<profile>/<run>/version_N/checkpoints/`. The course also ships a U-Net in the
# package, `SHIPPED_MODEL`, trained by notebook 04 on an H200 on a wider synthetic set than
# the course's (the generator's `wide` style: fingertips filling the frame, four fingers from
# an edge, plain backgrounds, small photos; how, and how well, is in the `.json` beside it),
# so that a machine without a GPU has a good start too.
# `choose_checkpoint` reads the path you pass; without one, the newest checkpoint of this
# profile and the shipped model, and keeps the one that recorded the better hard Dice on its
# synthetic validation images (`recorded_dice`). A checkpoint also stores the module's
# hyperparameters, so its `encoder` says which U-Net the weights belong to. Finding,
# reading (once), loading and saving checkpoints is plumbing of
# `nailseg_common.training.checkpoints`; the code this notebook teaches starts below, in
# cells that start with `#| export training.fine_tuning`, which `make export` writes into
# `nailseg_common.training.fine_tuning`.

# %%
#| export training.fine_tuning: fine-tuning on your own photos, the starts compared by cross-validation, the weights kept
import math
from pathlib import Path

import torch

from nailseg_common.setup.profiles import Profile

# %% [markdown]
# The starts must differ in their weights and nothing else, so every start uses the
# checkpoint's encoder; if the profile or the `encoder` parameter says otherwise, the
# checkpoint wins and the cell says so. Without a checkpoint the notebook goes on with the
# other starts. `checkpoint_in_words` (plumbing from `nailseg_common.measure.own_photos_report`)
# says which checkpoint it found, or how to get one.
# %%
from nailseg_common.training.checkpoints import choose_checkpoint

synthetic_checkpoint = choose_checkpoint(checkpoint, cfg.name)
if synthetic_checkpoint is not None:
    cfg = dataclasses.replace(cfg, encoder=synthetic_checkpoint.encoder)
print(own_photos_report.checkpoint_in_words(synthetic_checkpoint, cfg.name, cfg.encoder))

# %% [markdown]
# ## Three starts
#
# `start_model` builds the U-Net and sets its starting weights:
#
# - `"random"`: smp's random initialisation (`encoder_weights=None`);
# - `"imagenet"`: `encoder_weights="imagenet"`, the weights notebook 02's `create_model`
#   copies from the pinned package; the decoder starts random;
# - `"synthetic"`: the same model, then every weight copied from the checkpoint with
#   `load_weights` (the state dict of the whole module: encoder *and* decoder; a checkpoint
#   of another encoder is refused).
#
# The module is notebook 02's `LitNailSegmentation` with AdamW's fused kernel (notebook 07's
# `FastNailSegmentation`). Every start draws its random initialisation from the same seed.
# Without a checkpoint the synthetic start is skipped (the docstring of `start_model` says how
# it handles the first step of depthwise convolutions on a GPU).

# %%
#| export training.fine_tuning
from nailseg_common.training.checkpoints import Checkpoint, load_weights
from nailseg_common.training.depthwise import run_depthwise_as
from nailseg_common.training.fast_training import FastNailSegmentation
from nailseg_common.training.unet import LitNailSegmentation

STARTS = ("random", "imagenet", "synthetic")


def start_model(start: str, encoder: str, lr: float, max_steps: int,
                checkpoint: Checkpoint | None = None, seed: int = 0) -> LitNailSegmentation:
    """The U-Net to fine-tune from ``start`` (:data:`STARTS`), with AdamW's fused kernel (one
    launch per step instead of dozens: launches are what a small batch's step costs).
    ``"synthetic"`` needs ``checkpoint`` (read once, loaded for every run). ``run_depthwise_as``
    keeps depthwise convolutions in float32: a GPU's first step skips cuDNN compiling them."""
    if start not in STARTS:
        raise ValueError(f"start must be one of {STARTS}, not {start!r}")
    if start == "synthetic" and checkpoint is None:
        raise ValueError("The synthetic start needs a checkpoint: run notebook 02 (or 04) in "
                         "this profile first, or pass the path of a best-*.ckpt.")
    torch.manual_seed(seed)
    options = {"encoder": encoder, "lr": lr, "max_steps": max_steps, "fused_optimizer": True}
    weights = "imagenet" if start == "imagenet" else None  # the synthetic start loads its own
    model = FastNailSegmentation(**options, encoder_weights=weights)
    if start == "synthetic":
        load_weights(model, checkpoint)
    run_depthwise_as(model.model)  # depthwise layers in float32: see the docstring
    return model


# %%
def make_start(start_name: str) -> LitNailSegmentation:
    return start_model(start_name, cfg.encoder, cfg.fine_tune_lr, cfg.fine_tune_steps,
                       synthetic_checkpoint)


available, skipped = own_photos_report.available_starts(STARTS, synthetic_checkpoint)
print(f"starts to fine-tune: {', '.join(available)} (U-Net with a {cfg.encoder} encoder);",
      "skipped:", skipped or "none")

# %% [markdown]
# ## Every photo held out once
#
# With a few dozen photos, one fixed hold-out of a dozen is a noisy verdict: one photo moves
# the mean by several per cent. **k-fold cross-validation** uses every photo: `k_folds`
# deals the photos into `folds` groups after a seeded shuffle; each group is held out once
# while the others train, so every photo is scored exactly once, by a model that never saw
# it. `photos_on_device` puts every photo (both splits `start` wrote) on the device once,
# decoded once ahead of time into notebook 03's uint8 cache, already resized (a few dozen
# photos are decoded in seconds, and every fold reuses them); a fold is then two lists of
# indices.

# %%
#| export training.fine_tuning
import numpy as np
import pandas as pd

from nailseg_common.core.errors import DataError
from nailseg_common.data.decoded import load_cache
from nailseg_common.data.preparation import SPLITS, read_split
from nailseg_common.pipelines.cached_pipeline import BatchSlices
from nailseg_common.setup.paths import DataLocation


def photos_on_device(data: DataLocation, profile: Profile) -> tuple[pd.DataFrame, BatchSlices]:
    """Every photo of ``data`` (both splits, in order) at ``profile.image_size`` as uint8
    tensors on the profile's device, and the table of the photos (row ``i``: photo ``i``)."""
    frame = pd.concat([read_split(data, split) for split in SPLITS], ignore_index=True)
    parts = [load_cache(data, profile.image_size, split) for split in SPLITS]
    images, labels = (torch.cat([part[kind] for part in parts]).to(profile.device)
                      for kind in (0, 1))
    return frame, BatchSlices(images, labels)


def k_folds(count: int, folds: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(training, held_out)`` photo indices of each fold: every photo held out once;
    ``training`` stays shuffled, so its first ``n`` photos are a random ``n``."""
    if not 2 <= folds <= count:
        raise DataError(f"folds={folds} for {count} photos: choose folds from 2 to {count} (a "
                        "fold holds out one photo at least; with fewer than 2 photos, add some).")
    order = np.random.default_rng(seed).permutation(count)
    held_out = [order[fold::folds] for fold in range(folds)]
    return [(order[~np.isin(order, held)], np.sort(held)) for held in held_out]


# %%
frame, photos_set = photos_on_device(data, cfg)
fold_sets = k_folds(len(frame), min(folds, len(frame)))  # at most one fold a photo
print(f"{len(frame)} photos in {len(fold_sets)} folds (folds={folds}, at most one per photo): "
      f"each start trains {len(fold_sets)} times on {len(fold_sets[0][0])} photos, scores the rest")

# %% [markdown]
# ## Fine-tuning, fast
#
# `PhotosOnDevice` feeds a run from the photos on the device: a batch is one gather in GPU
# memory, with no copy and no worker, and the course's augmentation policy runs there too,
# inside the training step (`KorniaAugmentation`). With a few dozen photos an epoch is a few
# batches, and starting each epoch (a new loader iterator, Lightning's epoch hooks) would cost
# more than its steps: a run is one epoch of `steps` batches, the photos in a new order on
# each pass through them (with fewer photos than a batch, a batch holds some twice, each
# augmented its own way). That order is drawn once and moved to the device as a `steps ×
# batch` tensor of indices, a row per batch: a step that copied its indices from the host
# would wait there for the GPU to finish all the work queued before it, so the host could
# not prepare the next step while the GPU runs this one (torch's sync debug mode,
# `torch.cuda.set_sync_debug_mode("warn")`, finds such places). `fine_tune` trains one start
# on one fold:
#
# - **the same batches and augmentations** for every start: `seed_everything`, the order's
#   own seed and `KorniaAugmentation(seed=...)`;
# - **validation at the same steps**, a few times (`validations`), for the curves;
# - **no checkpoints**: the held-out photos are what the runs are scored on, so picking each
#   run's best validation would flatter every start. Each run keeps its final weights.

# %%
#| export training.fine_tuning
import pytorch_lightning as pl
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

from nailseg_common.pipelines.kornia_pipeline import POLICY, KorniaAugmentation
from nailseg_common.training.trainer import make_trainer


class PhotosOnDevice(pl.LightningDataModule):
    """Batches of the ``train`` and ``valid`` indices of ``photos`` (on the device): training
    is one epoch of ``steps`` batches, reshuffled each pass; validation in order."""

    def __init__(self, photos: BatchSlices, train, valid, batch_size: int, steps: int,
                 seed: int = 0):
        super().__init__()
        self.sets = {name: BatchSlices(*(tensor[torch.as_tensor(part, device=tensor.device)]
                                         for tensor in (photos.images, photos.labels)))
                     for name, part in (("train", train), ("valid", valid))}
        self.batch_size, self.steps, self.seed = batch_size, steps, seed

    def train_dataloader(self) -> DataLoader:
        photos, generator = self.sets["train"], torch.Generator().manual_seed(self.seed)
        passes = -(-self.steps * self.batch_size // len(photos))  # enough for every batch
        order = torch.cat([torch.randperm(len(photos), generator=generator)
                           for _ in range(passes)])[:self.steps * self.batch_size]
        batches = order.view(self.steps, self.batch_size).to(photos.images.device)
        return DataLoader(photos, sampler=batches, batch_size=None)  # a batch: one row

    def val_dataloader(self) -> DataLoader:
        photos = self.sets["valid"]
        return DataLoader(photos, batch_size=None, sampler=BatchSampler(
            SequentialSampler(photos), self.batch_size, drop_last=False))


# %% [markdown]
# At a batch of a dozen photos or so the GPU finishes a step's kernels faster than the host can launch
# them: the U-Net's forward and backward are several hundred launches, each a few
# microseconds of Python, Lightning and CUDA work, and the GPU waits between them. A **CUDA
# graph** records those launches once and replays them as one. `GraphedUNet` captures the
# U-Net's training forward and its backward with `torch.cuda.make_graphed_callables` at the
# first batch, in the precision the steps run in; from then on a step replays the two
# graphs, and the augmentation, loss and optimizer around them stay ordinary PyTorch.
# Capturing costs a few warm-up passes, which would move the BatchNorm statistics, so it
# puts them back. A graph replays fixed shapes at fixed addresses: every training batch
# has the first one's shape (the sampler drops no photos, it repeats them), and in eval mode
# (validation, predictions) the U-Net runs its ordinary forward. A graph keeps its own pool
# of GPU memory, so when the fit ends the callback drops the graphs and gives their memory
# back: a cross-validation trains dozens of models, and without that their pools add up
# until the GPU runs out. On a CPU there is nothing to capture and nothing changes.

# %%
#| export training.fine_tuning
import gc


class GraphedUNet(pl.Callback):
    """On a GPU, the U-Net's training forward and backward as two CUDA graphs captured at the
    first batch (``torch.cuda.make_graphed_callables``); training batches keep its shape."""

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if pl_module.device.type != "cuda" or trainer.global_step > 0:
            return
        unet = pl_module.model
        layout = torch.channels_last if pl_module.hparams.channels_last else torch.contiguous_format
        sample = torch.zeros_like(batch["image"], memory_format=layout)
        statistics = [buffer.clone() for buffer in unet.buffers()]  # warm-up passes move them
        # The capture makes the weights' gradient sinks on its own stream, as it must: the
        # steps' backward waits on that stream, one event, which needs no warning each step.
        torch.autograd.graph.set_warn_on_accumulate_grad_stream_mismatch(False)
        with trainer.precision_plugin.forward_context():
            torch.cuda.make_graphed_callables(unet, (sample,), allow_unused_input=True)
        for buffer, saved in zip(unet.buffers(), statistics):
            buffer.copy_(saved)

    def on_fit_end(self, trainer, pl_module) -> None:
        """Drop the graphs (the module's own ``forward`` again) and the memory they held."""
        if vars(pl_module.model).pop("forward", None) is not None:
            gc.collect()  # the graphs and the module refer to each other
            torch.cuda.empty_cache()


# %% [markdown]
# One more thing differs from training on the synthetic set: **BatchNorm statistics**. Each
# BatchNorm layer keeps a running mean and variance of what it has seen, and a trained model
# normalises with them. In training mode a step normalises with its own batch instead and
# moves the running statistics towards it, so a few dozen photos in small, augmented batches
# replace statistics learned on thousands of images. `KeepLearnedStatistics` keeps each
# layer that arrives with statistics (it has counted batches) in eval mode while the weights
# train; the random start has none to keep and learns them as usual. Which way is better
# depends on the model and the budget, so the profile's `fine_tune_keep_statistics` says which:
# both ways were measured on the stand-in, and the profile keeps the better one (kept on a
# CPU's short run, relearned on a GPU's longer one).

# %%
#| export training.fine_tuning
from torch import nn


class KeepLearnedStatistics(pl.Callback):
    """Keeps every BatchNorm layer that has counted batches before the fit in eval mode: it
    normalises with, and keeps, the running statistics it came with."""

    def on_fit_start(self, trainer, pl_module) -> None:
        self.layers = [layer for layer in pl_module.modules()
                       if isinstance(layer, nn.BatchNorm2d)
                       and layer.num_batches_tracked > 0]

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        for layer in self.layers:  # Lightning sets train mode again after each validation
            layer.eval()


def fine_tune(model: LitNailSegmentation, datamodule: PhotosOnDevice, profile: Profile,
              run_name: str, seed: int = 0, validations: int = 4,
              cuda_graphs: bool = True, policy: dict = POLICY) -> pl.Trainer:
    """Train ``model`` for ``datamodule.steps`` steps, Kornia augmenting on the device with
    ``policy`` (``{}``: none), the U-Net replayed as CUDA graphs (``cuda_graphs``, on a GPU)
    and, if ``profile.fine_tune_keep_statistics``, its BatchNorm statistics kept; ``validations``
    evenly spaced validations; the same ``seed``, the same batches and augmentations."""
    pl.seed_everything(seed, verbose=False)
    model.gpu_augmentation = KorniaAugmentation(policy, seed=seed)  # after the batch transfer
    steps, keep = datamodule.steps, profile.fine_tune_keep_statistics
    callbacks = [KeepLearnedStatistics()] if keep else []  # first: graphs capture eval layers
    trainer = make_trainer(profile, run_name, max_steps=steps, enable_checkpointing=False,
                           callbacks=callbacks + ([GraphedUNet()] if cuda_graphs else []),
                           val_check_interval=max(1, steps // validations),
                           check_val_every_n_epoch=None)  # every N steps of the one epoch
    trainer.fit(model, datamodule=datamodule)
    return trainer


# %% [markdown]
# ## Scoring photo by photo
#
# The training log has one validation Dice per validation: a mean. To compare starts and to
# find the photos a model gets wrong we need one score per photo. `predict_logits` runs a
# model over photos on the device; `score_photos` turns its logits into a table with the
# photo's file name, its type and its hard Dice and IoU (probability above 0.5), the same
# per-image metrics the LightningModule averages into `val_dice` and `val_iou`.
#
# A nail seen in a mirror is still a nail, so `predict_logits` also asks the model about
# each photo's mirror image, mirrors the answer back and averages the two logits
# (**test-time flips**): two views of one photo for twice the inference, no training.

# %%
#| export training.fine_tuning
from nailseg_common.training.unet import per_image_dice, per_image_iou


def predict_logits(model: LitNailSegmentation, images: torch.Tensor, batch_size: int = 16,
                   flips: bool = True) -> torch.Tensor:
    """``model``'s logits (float, on the CPU) for uint8 ``images`` N×3×S×S, in eval mode; with
    ``flips``, the mean of each image's and its mirror image's (mirrored back)."""
    model = model.to(images.device).eval()
    views = (lambda x: x, lambda x: x.flip(-1)) if flips else (lambda x: x,)  # each its own inverse
    with torch.no_grad():
        return torch.cat([sum(view(model(view(batch)).float()) for view in views).cpu() / len(views)
                          for batch in images.split(batch_size)])


def score_photos(logits: torch.Tensor, labels: torch.Tensor, frame: pd.DataFrame) -> pd.DataFrame:
    """One row per photo of ``frame`` (same index, same order as ``logits`` and ``labels``):
    ``photo`` (file name), ``type``, and the hard ``dice`` and ``iou`` at probability 0.5."""
    labels = labels.cpu()
    return pd.DataFrame({"photo": [Path(image).name for image in frame["image"]],
                         "type": frame["type"].to_numpy(),
                         "dice": per_image_dice(logits, labels).numpy(),
                         "iou": per_image_iou(logits, labels).numpy()}, index=frame.index)


# %% [markdown]
# The first row of the comparison needs no training at all: the synthetic checkpoint as it
# is (**zero-shot**), on photos it has never seen: all of them. It is the number fine-tuning
# has to beat. `scores_in_words` (plumbing from `nailseg_common.measure.own_photos_report`)
# prints its means.

# %%
ZERO_SHOT = "synthetic, no fine-tuning"
tables, logits = {}, {}
if synthetic_checkpoint is not None:
    logits[ZERO_SHOT] = predict_logits(make_start("synthetic"), photos_set.images)
    tables[ZERO_SHOT] = score_photos(logits[ZERO_SHOT], photos_set.labels, frame)
    print(own_photos_report.scores_in_words("zero-shot", tables[ZERO_SHOT]))

# %% [markdown]
# ## Cross-validating the starts
#
# `cross_validate` fine-tunes each start once per fold, from fresh weights, and scores the
# fold's held-out photos; put together, the folds give one score per photo and start. With
# `train_size` it trains on the first `train_size` training photos of each fold only: the
# learning curve below.

# %%
#| export training.fine_tuning
import time
from collections.abc import Callable
from typing import NamedTuple

from nailseg_common.training.run_logs import read_metrics


class CrossValidation(NamedTuple):
    tables: dict[str, pd.DataFrame]  # start -> score_photos over every held-out photo
    logits: dict[str, torch.Tensor]  # start -> logits of every photo (row i: photo i)
    curves: dict[str, pd.DataFrame]  # start -> the first fold's training log
    runs: pd.DataFrame  # one row per run: start, fold, photos, steps, seconds
    models: dict[str, LitNailSegmentation]  # start -> the model of the last fold


def cross_validate(make_start: Callable[[str], LitNailSegmentation], starts: list[str],
                   frame: pd.DataFrame, photos: BatchSlices, folds: list, profile: Profile,
                   train_size: int | None = None) -> CrossValidation:
    """Fine-tune every start (``make_start(start)``: fresh weights) on each fold's training
    photos (the first ``train_size``; ``None``: all) and score its held-out photos (the
    tables hold the photos ``folds`` hold out, no other)."""
    tables, logits, curves, models, runs = {}, {}, {}, {}, []
    for name in starts:
        logits[name] = torch.zeros(len(frame), 1, *photos.images.shape[2:])
        for fold, (train, held_out) in enumerate(folds):
            model, train = make_start(name), train[:train_size]
            datamodule = PhotosOnDevice(photos, train, held_out, profile.batch_size,
                                        profile.fine_tune_steps, seed=fold)
            began = time.perf_counter()
            trainer = fine_tune(model, datamodule, profile, f"06_{name}", seed=fold)
            runs.append({"start": name, "fold": fold, "photos": len(train),
                         "steps": trainer.global_step, "seconds": time.perf_counter() - began})
            logits[name][held_out] = predict_logits(model, photos.images[held_out])
            curves.setdefault(name, read_metrics(trainer, by="step"))
            models[name] = model
        scored = np.sort(np.concatenate([held_out for _, held_out in folds]))
        tables[name] = score_photos(logits[name][scored], photos.labels[scored],
                                    frame.loc[scored])
    return CrossValidation(tables, logits, curves, pd.DataFrame(runs), models)


# %%
validation = cross_validate(make_start, available, frame, photos_set, fold_sets, cfg)
tables.update(validation.tables)
logits.update(validation.logits)
runs = validation.runs
print(f"{len(runs)} runs of {cfg.fine_tune_steps} steps (batch {cfg.batch_size}, {cfg.image_size} px,"
      f" validations included) in {runs.seconds.sum():.1f} s, median {runs.seconds.median():.1f} s")

# %% [markdown]
# ## Every photo
#
# One row per photo, one pair of columns per start. Read across a row to see which start
# gets a photo right; read down a column to see whether a start fails on a few photos or
# is mediocre on all of them.

# %%
per_photo = pd.concat({label: table.set_index(["type", "photo"])[["dice", "iou"]]
                       for label, table in tables.items()}, axis=1)
per_photo.round(3)

# %% [markdown]
# ## The starts side by side
#
# Each start's mean hard Dice and IoU over every photo, with the course's spread `±` of the
# mean Dice (the half-width of its 95 % Student-t interval: about twice its standard error,
# the standard deviation of the photos' scores over the square root of their number), the worst photo's Dice, and the training curves of the
# first fold. `compare_starts` ranks by mean Dice; `recommend_start` adds how sure the
# ranking is: the mean gain of the best over the runner-up *on the same photos* (a paired
# difference, which cancels how hard each photo is), the spread of that gain, how many
# standard errors it amounts to, and on how many photos the best one wins
# (`paired_gain`, from the course's statistics in `nailseg_common.core.statistics`).

# %%
#| export training.fine_tuning
from nailseg_common.core.statistics import mean_spread, paired_gain


def compare_starts(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per start (``{start: score_photos table}``), best mean hard Dice first: the
    mean ``hard Dice`` and its spread ``±`` (``mean_spread``), the mean ``IoU``, the worst
    photo's Dice and the number of photos."""
    rows = {start: {"hard Dice": table["dice"].mean(), "±": mean_spread(table["dice"]),
                    "IoU": table["iou"].mean(), "worst Dice": table["dice"].min(),
                    "photos": len(table)}
            for start, table in tables.items()}
    return pd.DataFrame.from_dict(rows, orient="index").sort_values("hard Dice", ascending=False)


def recommend_start(tables: dict[str, pd.DataFrame]) -> dict:
    """The start of best mean hard Dice; against the ``runner_up`` (None for one start), its
    ``paired_gain`` and that gain in standard errors ``lead_se`` (NaN without a spread)."""
    ranking = compare_starts(tables).index
    best = ranking[0]
    advice = {"best": best, "runner_up": None, "photos": len(tables[best])}
    if len(ranking) > 1:
        runner_up = ranking[1]
        gain = paired_gain(tables[best]["dice"], tables[runner_up]["dice"])
        lead = gain["gain"] / gain["gain_se"] if 0 < gain["gain_se"] < math.inf else math.nan
        advice.update(runner_up=runner_up, **gain, lead_se=lead)
    return advice


# %%
if validation.curves:
    plots.plot_training_curves(validation.curves, x="step")
    plt.show()
compare_starts(tables).round(3)

# %% [markdown]
# ## Does fine-tuning pay?
#
# The zero-shot row is the synthetic start as it is; the `synthetic` row is the same weights
# fine-tuned. Their difference photo by photo is what fine-tuning gains, and its spread
# (the 95 % interval of the mean paired gain) is how much the choice of photos alone
# could move it. `Verdict` (in `nailseg_common.core.statistics`) judges the gain against no
# gain at all: met, missed or within noise; `fine_tune_gain_in_words` (in
# `nailseg_common.measure.own_photos_report`) says what the outcome means and what to try.

# %%
if {"synthetic", ZERO_SHOT} <= tables.keys():
    gain = tables["synthetic"].dice - tables[ZERO_SHOT].dice[tables["synthetic"].index]
    verdict = Verdict("fine-tuning gain", gain.mean(), 0.0, mean_spread(gain), "the start as it is")
    print(verdict)
    print("\n".join(own_photos_report.fine_tune_gain_in_words(verdict.outcome, standin=not data_root)))
else:
    print("no verdict on fine-tuning: there is no synthetic checkpoint to start from")

# %% [markdown]
# ## How many photos do you need?
#
# A **learning curve**: the same cross-validation, each fold's run trained on only its first
# 5, 10 or 20 training photos (`curve_sizes`) and scored on the same held-out photos, for
# the synthetic start against random weights, on the profile's first `curve_folds` folds
# (each fold more costs as many runs again). The points at the right are the runs above,
# on all the training photos of every fold; the dotted line is the synthetic start as it
# is. Where the synthetic start is flat, more photos buy little; where random weights
# climb, they still need every photo they can get. A point below the dotted line is a start
# that fine-tuning made worse: a handful of photos pulls the weights towards what they show,
# and the model forgets some of what it knew; the more photos, the less it forgets.
# `learning_curve` (plumbing from `nailseg_common.measure.own_photos_report`) puts each
# point's mean Dice and its spread in a table.

# %%
curve_starts = [name for name in ("synthetic", "random") if name in available]
all_photos = min(len(train) for train, _ in fold_sets)
sizes = sorted({size for size in curve_sizes if size < all_photos})
by_size = {size: cross_validate(make_start, curve_starts, frame, photos_set,
                               fold_sets[:cfg.curve_folds], cfg, train_size=size).tables
           for size in sizes} | {all_photos: {name: tables[name] for name in curve_starts}}
curve = own_photos_report.learning_curve(by_size)
plots.plot_learning_curve(curve, tables[ZERO_SHOT].dice.mean() if ZERO_SHOT in tables else None)
plt.show()
curve.pivot(index="photos", columns="start", values="dice").round(3)

# %% [markdown]
# ## The worst photos of the best start
#
# A mean hides the photos that drag it down. Here are the photos the best start scores
# lowest (each predicted by the model of its fold, which never saw it), with the ground
# truth outlined in yellow and the prediction in cyan, and below them the predicted
# probability. Look at the masks as much as at the predictions: on a small hand-labelled
# set, a missed nail in the *mask* costs as much as one in the prediction.
# (`plot_worst_photos`, in `nailseg_common.measure.plots`, draws them.)

# %%
advice = recommend_start(tables)
best = advice["best"]
plots.plot_worst_photos(tables[best].nsmallest(4, "dice"), photos_set, logits[best], best)
plt.show()

# %% [markdown]
# ## Which start to use?
#
# The advice below is computed from this run's numbers: the paired gain of the best start
# over the runner-up, with its standard error and the number of photos. A gain counts as
# clear when its 95 % interval leaves out zero (more than about two standard errors; with
# few photos, Student's t asks for more); with a few photos that is a high bar, and it
# should be. (`advice_in_words`, in `nailseg_common.measure.own_photos_report`,
# puts the advice in words.)

# %%
print("\n".join(own_photos_report.advice_in_words(advice, tables, ZERO_SHOT)))
print(f"skipped: {', '.join(skipped) or 'none'}; the scores are at {cfg.image_size} px after "
      f"{cfg.fine_tune_steps} steps, {len(fold_sets)} folds")

# %% [markdown]
# How to read it, whatever your numbers say:
#
# - **ImageNet against random** is what a pretrained encoder buys: with a few dozen photos,
#   general features of photos (edges, skin, gloss) are most of what a model can know.
# - **Synthetic against ImageNet** is what the course's synthetic nails add: a decoder that
#   already draws nail masks, and an encoder tuned to them. If it does not beat ImageNet on
#   your photos, your photos differ from the synthetic set in a way worth looking for in the
#   worst photos.
# - **Fine-tuning within noise of the start as it is** means the start already handles
#   photos like these, as on the synthetic stand-in, which resembles what the start was
#   trained on. On real photos unlike the synthetic set, fine-tuning is where the gain comes
#   from; when it does not come, try more steps first (on real photos the number of steps
#   mattered more than the learning rate), then more photos.
# - **A fine-tuned start below the start as it is** (the verdict missed) means too many
#   steps or too high a learning rate for a few dozen photos: it overfits or forgets.
# - **The learning curve says whether to label more photos**: a curve still rising at the
#   right end is worth more photos; a flat one is not.
#
# ## Masks for new photos
#
# A model earns its keep on photos nobody has drawn masks for. `save_weights` (from
# `nailseg_common.training.checkpoints`) writes a model's weights and hyperparameters in the
# form `load_weights` reads, with the image side it was trained at; the zero-shot row needs
# nothing written, it *is* the checkpoint. Then one command gives masks for a folder of photos:
#
#     nailseg-predict IMAGES OUT --checkpoint MODEL
#
# For every JPEG or PNG under `IMAGES` (in subfolders too) it writes, at the same relative
# path under `OUT`, `<stem>.png`, the mask (0 or 255) at the size a photo viewer shows the
# photo (EXIF orientation applied, as preparation does), and `<stem>_overlay.jpg`, the
# photo with its nails tinted cyan. Without `--checkpoint` it takes the model
# `choose_checkpoint` would. Here it runs with the best start's model of the last fold, on
# a copy of that fold's held-out photos, which the model never saw (`copy_keeping_paths`,
# plumbing from `nailseg_common.core.files`, copies them at their relative paths), called
# from Python with the same arguments (`predict.main`, which returns the command's exit status).
#
# The model to keep for your photos is trained on all of them. One command does that, from
# the same synthetic start, with a longer recipe of its own (no sitting to fit: `keep_steps`
# and `keep_image_size` in the profile): `nailseg-fine-tune PHOTOS_ROOT OUT` cross-validates
# it, scores the start and the fine-tuned model each as `nailseg-predict` will run it (its own
# side, its flips, out of fold), and writes `OUT/model.pt` for `predict --checkpoint` only
# when fine-tuning beat the start beyond the interval; otherwise its last line names the
# start to keep (`--write-anyway` writes it all the same).

# %%
import shutil

from nailseg_common.core.files import copy_keeping_paths
from nailseg_common.setup.paths import runs_dir
from nailseg_common.training.checkpoints import save_weights

run_folder = runs_dir() / cfg.name
model_file = (synthetic_checkpoint.path if best == ZERO_SHOT else
              save_weights(validation.models[best], run_folder / "06_fine_tuned" / f"{best}.pt",
                           cfg.image_size))
new_photos, masks = run_folder / "06_new_photos", run_folder / "06_masks"
shutil.rmtree(masks, ignore_errors=True)  # the masks of an earlier run
copy_keeping_paths(frame.loc[fold_sets[-1][1], "image"], data.raw, new_photos)  # emptied first
status = predict.main([str(new_photos), str(masks), "--checkpoint", str(model_file),
                       "--image-size", str(cfg.image_size), "--device", cfg.device.type])
print(f"exit status {status}; model: {best}")
plots.plot_overlays(sorted(masks.rglob("*_overlay.jpg")))
plt.show()

# %% [markdown]
# ## Summary
#
# - Your photos go through the same preparation as the synthetic set; without them the
#   notebook runs on a stand-in of another style, so every cell runs real code.
# - The start from the synthetic set is the better of this profile's checkpoint and the
#   model the course ships, and its encoder decides the encoder of every start, so the
#   starts differ only in their weights.
# - Fair and fast fine-tuning: the same steps, seed, batches and augmentations for every
#   start, the photos held on the device as uint8, one long epoch, AdamW's fused kernel
#   and, on a GPU, the U-Net's forward and backward replayed as CUDA graphs; each run
#   scored with its final weights.
# - k-fold cross-validation scores every photo once, by a model that never saw it: a mean
#   with its standard error per start, and a paired gain with its own that says whether one
#   start really beats another. The learning curve says whether more photos would help.
# - `save_weights` and `nailseg-predict` turn the chosen model into masks
#   and overlays for any folder of photos; `nailseg-fine-tune` trains the
#   model to keep on all your photos.
#
# ## Exercises
#
# 1. Fine-tune only the decoder of the synthetic start: in `make_start`, set
#    `requires_grad_(False)` on the model's `.model.encoder`. Does a frozen encoder do better
#    or worse on a few dozen photos?
# 2. Run with `fine_tune_steps` a quarter and four times the profile's. Which start gains
#    most from a longer run, and does any of them start to overfit (training loss falling
#    while the validation Dice drops)?
# 3. Open the worst photos' masks in an image editor. Is any of them wrong? Fix it, re-run,
#    and compare the per-photo table.
# 4. Re-run with `folds=10`: the runs train on more photos each; do the means and their
#    standard errors change?
# 5. Score the zero-shot checkpoint at a larger `image_size` than it was trained at. Does a
#    model trained at one size transfer to another?
# 6. Photograph a few nails of your own, put the photos in a folder and run
#    `nailseg-predict FOLDER masks --checkpoint` with the model this
#    notebook saved. Where do the overlays go wrong: light, skin, polish, background?
