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
#       weights, the synthetic-pretrained checkpoint and, where it can be downloaded,
#       ImageNet; score every held-out photo, look at the worst ones, and choose a start
#       from the measured numbers.
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
# same budget and seed, and scores each one on the same held-out photos:
#
# - **random**: no prior knowledge at all;
# - **synthetic**: the checkpoint that notebook 02 (or 04) trained on the synthetic set, or,
#   where there is none, the one the course ships;
# - **imagenet**: an encoder pretrained on ImageNet photos, where the machine can download
#   it (offline, and with nothing in the local cache, the run says so and skips it).
#
# Whether the synthetic checkpoint helps on *your* photos is what this notebook measures.
#
# ## What you'll learn
# - finding the course's own checkpoint, and checking that it fits the model you build
# - three ways to start a fine-tuning run, and how to make the comparison fair (same
#   encoder, budget, seed, batches and augmentations)
# - scoring photo by photo (hard Dice and IoU at probability 0.5), not only as one mean
# - reading the worst photos: a low score may be the model, or the mask
# - choosing a start from measured numbers, with the noise of a small held-out set in view
#
# > **CPU or GPU?** The notebook runs everywhere. Without a GPU it picks the `cpu` profile;
# > CI runs the tiny `smoke` profile, where every model trains for a handful of steps and
# > the numbers mean nothing. Without your photos (`data_root`) it runs on a small synthetic
# > stand-in of another style and says so, so every cell still runs the real code.

# %%
import dataclasses
import shutil
import time

import matplotlib.pyplot as plt
import pandas as pd
import torch

from nailseg_common import predict
from nailseg_common.paths import runs_dir
from nailseg_common.photos import photos_or_standin
from nailseg_common.plots import plot_overlays, plot_predictions, plot_training_curves
from nailseg_common.preparation import read_split
from nailseg_common.training import read_metrics

# %% [markdown]
# Every knob is a parameter (papermill `-p name value`); `None` keeps the profile's value.

# %% tags=["parameters"]
profile = ""            # smoke, cpu or gpu; empty: $NAILSEG_PROFILE, else chosen from the hardware
data_root = ""          # your photos: Images/<type>/ + Masks/<type>/, or flat images/ + masks/
checkpoint = ""         # the synthetic-pretrained checkpoint; empty: the newest of notebook 02
                        # or 04 in this profile, else the model the course ships
try_imagenet = True     # also fine-tune from ImageNet weights (needs a download, once)
standin_images = None   # photos in the stand-in used without data_root; None: half the
                        # profile's synthetic set, at most 60
image_size = None       # side of the square images the model sees
batch_size = None
finetune_steps = None   # optimizer steps of each fine-tuning run (the same for every start)
encoder = None          # smp encoder name; a found checkpoint's encoder wins
lr = None               # peak learning rate of AdamW's cosine schedule
precision = None        # Lightning precision, e.g. 32-true, bf16-mixed
accelerator = None      # cpu or gpu
max_train_batches = None  # cap per epoch (0: the whole set)
max_valid_batches = None  # cap of each validation

# %% [markdown]
# `photos_or_standin` (in `nailseg_common.photos`) returns the folder of your photos, or
# generates the **stand-in**: synthetic photos in another style than the training set (one
# hand close up, warm indoor light, plain surfaces out of focus, other polish), all of one
# type as a user's own photos would be. Either way `start` prepares the folder exactly as a
# real set: checked, split into training and held-out photos (seeded), converted.

# %%
from nailseg_common.course import start

photos = photos_or_standin(profile, data_root, standin_images)
cfg, data = start(profile, photos, image_size=image_size, batch_size=batch_size,
                  finetune_steps=finetune_steps, encoder=encoder, lr=lr,
                  precision=precision, accelerator=accelerator, max_train_batches=max_train_batches,
                  max_valid_batches=max_valid_batches)
train, valid = read_split(data, "train"), read_split(data, "valid")
print(f"{len(train)} photos to fine-tune on, {len(valid)} held out to compare the starts "
      f"({len(valid) / (len(train) + len(valid)):.0%})")

# %% [markdown]
# ## The synthetic checkpoint
#
# Notebook 02 (and 04, with DALI) trained the U-Net on the synthetic set and kept the
# weights of its best validation Dice as `best-*.ckpt` under
# `runs/<profile>/<run>/version_N/checkpoints/`. `find_checkpoint` takes the newest of
# them in the current profile; `resolve_checkpoint` prefers the path you pass, and without
# either it takes `SHIPPED_MODEL`: the U-Net the course ships in the package, trained by
# notebook 04 on an H100 (how, and how well, is in the `.json` beside it), so that a machine
# without a GPU has a good start too. A checkpoint also stores the module's
# hyperparameters, so `checkpoint_hparams` tells which encoder the weights belong to,
# without building a model. (Cells that start with `#| export finetune` are also written
# into `nailseg_common.finetune` by `make export`.)

# %%
#| export finetune
from pathlib import Path

import torch

import nailseg_common
from nailseg_common.paths import runs_dir
from nailseg_common.profiles import Profile

CHECKPOINT_RUNS = ("02_lightning_baseline", "04_dali")
"""The runs whose best checkpoint is the course's synthetic-pretrained model."""
SHIPPED_MODEL = Path(nailseg_common.__file__).parent / "pretrained" / "unet-mobilenet_v2.pt"
"""The synthetic-pretrained model the course ships; its provenance is the ``.json`` beside it."""


def find_checkpoint(profile: Profile, runs: tuple[str, ...] = CHECKPOINT_RUNS) -> Path | None:
    """The newest ``best-*.ckpt`` of ``runs`` in ``profile``
    (``runs_dir()/<profile>/<run>/version_*/checkpoints/``); ``None`` when there is none."""
    found = [path for run in runs
             for path in (runs_dir() / profile.name / run).glob("*/checkpoints/best-*.ckpt")]
    return max(found, key=lambda path: path.stat().st_mtime, default=None)


def resolve_checkpoint(checkpoint: str | Path, profile: Profile) -> Path | None:
    """``checkpoint`` when given (it must exist), else :func:`find_checkpoint`, else
    :data:`SHIPPED_MODEL` when the package holds it; ``None`` when there is none."""
    if not checkpoint:
        found = find_checkpoint(profile)
        return found or (SHIPPED_MODEL if SHIPPED_MODEL.is_file() else None)
    path = Path(checkpoint).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint={str(checkpoint)!r} is not a file: pass the path of "
                                "a best-*.ckpt written by notebook 02 or 04, or leave it empty to "
                                "use the newest one of this profile (else the course's model).")
    return path


def checkpoint_hparams(checkpoint: str | Path) -> dict:
    """The hyperparameters a ``LitNailSegmentation`` checkpoint was made with (``encoder``...)."""
    return torch.load(checkpoint, map_location="cpu", weights_only=True)["hyper_parameters"]


# %% [markdown]
# The starts must differ in their weights and nothing else, so every start uses the
# checkpoint's encoder; if the profile or the `encoder` parameter says otherwise, the
# checkpoint wins and the cell says so. Without a checkpoint the notebook goes on with the
# other starts.

# %%
synthetic_checkpoint = resolve_checkpoint(checkpoint, cfg)
if synthetic_checkpoint is None:
    print(f"No synthetic-pretrained checkpoint in profile {cfg.name!r} (looked for best-*.ckpt "
          f"under {runs_dir() / cfg.name}/{{{','.join(CHECKPOINT_RUNS)}}}/*/checkpoints/) and "
          f"no {SHIPPED_MODEL}: run notebook 02 (or 04) in this profile first, or pass "
          "checkpoint=... . Going on without the synthetic start.")
else:
    trained_with = checkpoint_hparams(synthetic_checkpoint)["encoder"]
    origin = ("the model the course ships" if synthetic_checkpoint == SHIPPED_MODEL
              else "given" if checkpoint else f"the newest of profile {cfg.name!r}")
    print(f"synthetic checkpoint: {synthetic_checkpoint} ({origin}; encoder {trained_with})")
    if trained_with != cfg.encoder:
        print(f"encoder {cfg.encoder!r} -> {trained_with!r}: every start uses the checkpoint's "
              "encoder, so the starts differ only in their weights")
        cfg = dataclasses.replace(cfg, encoder=trained_with)

# %% [markdown]
# ## Three starts
#
# `start_model` builds notebook 02's `LitNailSegmentation` and sets its starting weights:
#
# - `"random"`: smp's random initialisation (`encoder_weights=None`);
# - `"synthetic"`: the same model, then every weight copied from the checkpoint with
#   `load_weights` (the state dict of the whole module: encoder *and* decoder);
# - `"imagenet"`: `encoder_weights="imagenet"`, downloaded once from the Hugging Face Hub
#   into its cache; the decoder starts random.
#
# Offline, the Hub client would retry each file for half a minute or more before giving up;
# `cache_only_when_offline` (in `nailseg_common.hub`) first checks whether the Hub can be
# reached and, when it cannot, lets the client look in its local cache only. Either way a
# missing download ends in `create_model`'s `RuntimeError`, which says what to do. Every
# start draws its random initialisation from the same seed.

# %%
#| export finetune
from nailseg_common.hub import cache_only_when_offline
from nailseg_common.models import LitNailSegmentation

STARTS = ("random", "synthetic", "imagenet")


def load_weights(model: LitNailSegmentation, checkpoint: str | Path) -> LitNailSegmentation:
    """Copy every weight of a ``LitNailSegmentation`` checkpoint into ``model``; a checkpoint
    of another encoder raises ``ValueError``."""
    saved = torch.load(checkpoint, map_location="cpu", weights_only=True)
    encoder = saved["hyper_parameters"]["encoder"]
    if encoder != model.hparams.encoder:
        raise ValueError(f"{checkpoint} holds a U-Net with a {encoder!r} encoder, the model has "
                         f"{model.hparams.encoder!r}: build the model with encoder={encoder!r}.")
    model.load_state_dict(saved["state_dict"])
    return model


def start_model(start: str, encoder: str, lr: float, max_steps: int,
                checkpoint: str | Path | None = None, seed: int = 0) -> LitNailSegmentation:
    """A ``LitNailSegmentation`` whose weights start as ``start`` says (one of :data:`STARTS`).

    ``"synthetic"`` needs ``checkpoint``; ``"imagenet"`` raises ``RuntimeError`` when the
    weights can be neither downloaded nor found in the Hugging Face cache.
    """
    if start not in STARTS:
        raise ValueError(f"start must be one of {STARTS}, not {start!r}")
    if start == "synthetic" and checkpoint is None:
        raise ValueError("The synthetic start needs a checkpoint: run notebook 02 (or 04) in "
                         "this profile first, or pass the path of a best-*.ckpt.")
    torch.manual_seed(seed)
    if start != "imagenet":
        model = LitNailSegmentation(encoder, lr, max_steps)
        return load_weights(model, checkpoint) if start == "synthetic" else model
    with cache_only_when_offline():
        return LitNailSegmentation(encoder, lr, max_steps, encoder_weights="imagenet")


# %%
starts, skipped = {}, {}
for start_name in STARTS:
    if start_name == "synthetic" and synthetic_checkpoint is None:
        skipped[start_name] = "no checkpoint (see above)"
    elif start_name == "imagenet" and not try_imagenet:
        skipped[start_name] = "try_imagenet=False"
    else:
        try:
            starts[start_name] = start_model(start_name, cfg.encoder, cfg.lr, cfg.finetune_steps,
                                             synthetic_checkpoint)
        except RuntimeError as error:
            skipped[start_name] = str(error)
for start_name, reason in skipped.items():
    print(f"{start_name} start skipped: {reason}")
print(f"{len(starts)} of {len(STARTS)} starts to fine-tune: {', '.join(starts)} "
      f"(U-Net with a {cfg.encoder} encoder)")

# %% [markdown]
# ## Scoring photo by photo
#
# The training log has one validation Dice per validation: a mean. To compare starts and to
# find the photos a model gets wrong we need one score per photo. `predict_photos` runs a
# model over the held-out photos in their order, resized to the model's size exactly as in
# validation; `score_photos` turns that into a table with the photo's file name, its type
# and its hard Dice and IoU (probability above 0.5), the same per-image metrics the
# LightningModule averages into `val_dice` and `val_iou`.

# %%
#| export finetune
import pandas as pd
from torch.utils.data import DataLoader

from nailseg_common.augmentation import valid_transform
from nailseg_common.datasets import NailDataset
from nailseg_common.metrics import per_image_dice, per_image_iou


def predict_photos(model: LitNailSegmentation, frame: pd.DataFrame, image_size: int,
                   device: torch.device, batch_size: int = 8):
    """``model`` on the photos of ``frame`` (a split), in order: ``(images uint8 N×3×S×S,
    labels uint8 N×1×S×S, logits float N×1×S×S)``, all on the CPU."""
    loader = DataLoader(NailDataset(frame, valid_transform(image_size)), batch_size=batch_size)
    model = model.to(device).eval()
    images, labels, logits = [], [], []
    with torch.no_grad():
        for batch in loader:
            images.append(batch["image"])
            labels.append(batch["label"])
            logits.append(model(batch["image"].to(device)).float().cpu())
    return torch.cat(images), torch.cat(labels), torch.cat(logits)


def score_photos(model: LitNailSegmentation, frame: pd.DataFrame, image_size: int,
                 device: torch.device) -> pd.DataFrame:
    """One row per photo of ``frame`` (same index): ``photo`` (file name), ``type``, and the
    hard ``dice`` and ``iou`` at probability 0.5."""
    _, labels, logits = predict_photos(model, frame, image_size, device)
    return pd.DataFrame({"photo": [Path(image).name for image in frame["image"]],
                         "type": frame["type"].to_numpy(),
                         "dice": per_image_dice(logits, labels).numpy(),
                         "iou": per_image_iou(logits, labels).numpy()}, index=frame.index)


# %% [markdown]
# The first row of the comparison needs no training at all: the synthetic checkpoint as it
# is (**zero-shot**), on photos it has never seen. It is the number fine-tuning has to beat.

# %%
ZERO_SHOT = "synthetic, no fine-tuning"
models, tables = {}, {}
if synthetic_checkpoint is not None:
    models[ZERO_SHOT] = start_model("synthetic", cfg.encoder, cfg.lr, cfg.finetune_steps,
                                    synthetic_checkpoint)
    tables[ZERO_SHOT] = score_photos(models[ZERO_SHOT], valid, cfg.image_size, cfg.device)
    print(f"zero-shot: hard Dice {tables[ZERO_SHOT]['dice'].mean():.3f}, IoU "
          f"{tables[ZERO_SHOT]['iou'].mean():.3f} (mean over the {len(valid)} held-out photos)")
else:
    print("no zero-shot row: there is no synthetic checkpoint")

# %% [markdown]
# ## Fine-tuning each start
#
# `fine_tune` trains one start with notebook 02's `make_trainer` for the profile's
# `finetune_steps`, fed as notebook 03 taught and one step further: `PhotosOnDevice` moves
# notebook 03's uint8 cache (the photos already resized) onto the device once, so a batch
# is one gather in GPU memory, with no copy and no worker; the course's augmentation policy
# runs there too, inside the training step (`KorniaAugmentation`). With a few dozen photos
# an epoch is a few batches, and starting each epoch (a new loader iterator, Lightning's
# epoch hooks) would cost more than its steps: training is one epoch of `finetune_steps`
# batches, the photos in a new order on each pass through them. Three details make the
# starts comparable and the run short:
#
# - **the same batches and augmentations**: `seed_everything` fixes PyTorch's generators, the
#   sampler draws from its own seed, and `KorniaAugmentation(seed=...)` from a generator of
#   its own, so every start sees the same batches augmented the same way;
# - **validation at the same steps**: validating often would cost more than the training;
#   `fine_tune` validates a few times (`validations`), at the same steps for every start,
#   for the curves;
# - **no checkpoints**: the held-out photos are both what the runs validate on and what
#   they are scored on, so picking each run's best validation checkpoint would flatter every
#   start with a choice made on the test photos. Each start is scored with its final
#   weights, so nothing needs writing to disk.

# %%
#| export finetune
import pytorch_lightning as pl
from torch.utils.data import BatchSampler, RandomSampler

from nailseg_common.cache import BatchSlices, CachedNailDataModule
from nailseg_common.gpu_augmentation import KorniaAugmentation
from nailseg_common.paths import DataLocation
from nailseg_common.training import make_trainer


class PhotosOnDevice(CachedNailDataModule):
    """Notebook 03's uint8 cache, moved to the profile's device once (no copies, no
    workers); training is one epoch of ``steps`` batches, the photos reshuffled each pass."""

    def __init__(self, location: DataLocation, profile: Profile, steps: int, seed: int = 0):
        super().__init__(location, profile, num_workers=0, pin_memory=False, seed=seed)
        self.steps = steps

    def setup(self, stage: str | None = None) -> None:
        super().setup(stage)  # the splits in memory, then on the device
        device = self.profile.device
        self.data = {split: BatchSlices(part.images.to(device), part.labels.to(device))
                     for split, part in self.data.items()}

    def train_dataloader(self) -> DataLoader:
        self.setup()
        photos, batch = self.data["train"], self.profile.batch_size
        passes = RandomSampler(photos, num_samples=self.steps * batch,  # reshuffled each pass
                               generator=torch.Generator().manual_seed(self.seed))
        return DataLoader(photos, sampler=BatchSampler(passes, batch, drop_last=True),
                          batch_size=None)


def fine_tune(model: LitNailSegmentation, data: DataLocation, profile: Profile, run_name: str,
              seed: int = 0, validations: int = 4) -> pl.Trainer:
    """Train ``model`` on ``data``'s training split for ``profile.finetune_steps`` steps, from
    the photos on the device with Kornia augmenting there, logged as ``run_name`` and
    validating ``validations`` times at evenly spaced steps; the same ``seed`` gives every
    start the same batches and augmentations. No checkpoints: the model keeps its final
    weights. Returns the trainer."""
    pl.seed_everything(seed, verbose=False)
    model.gpu_augmentation = KorniaAugmentation(seed=seed)  # runs after the batch transfer
    datamodule = PhotosOnDevice(data, profile, profile.finetune_steps, seed=seed)
    trainer = make_trainer(profile, run_name, max_steps=profile.finetune_steps,
                           enable_checkpointing=False, enable_progress_bar=False,
                           val_check_interval=max(1, profile.finetune_steps // validations),
                           check_val_every_n_epoch=None)  # every N steps of the one epoch
    trainer.fit(model, datamodule=datamodule)
    return trainer


# %%
curves = {}
for start_name, model in starts.items():
    began = time.perf_counter()
    trainer = fine_tune(model, data, cfg, f"06_{start_name}")
    seconds = time.perf_counter() - began
    curves[start_name] = read_metrics(trainer).dropna(subset=["val_dice"])
    models[start_name] = model
    tables[start_name] = score_photos(model, valid, cfg.image_size, cfg.device)
    print(f"{start_name:>9s}: {trainer.global_step} steps in {seconds:.1f} s "
          f"({1000 * seconds / max(1, trainer.global_step):.0f} ms a step, validations included): "
          f"hard Dice {tables[start_name]['dice'].mean():.3f}, "
          f"IoU {tables[start_name]['iou'].mean():.3f} on the {len(valid)} held-out photos")

# %% [markdown]
# ## Every held-out photo
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
# The mean hard Dice and IoU over the held-out photos, the worst photo's Dice, and the
# training curves of the fine-tuned starts (loss, validation Dice and IoU at each
# validation). `compare_starts` ranks by mean Dice; `recommend_start` adds how sure the
# ranking is: the mean gain of the best over the runner-up *on the same photos*, the
# standard error of that gain, and on how many photos the best one wins.

# %%
#| export finetune
import math


def compare_starts(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per start (``{start: score_photos table}``), best mean hard Dice first: the
    means of ``dice`` and ``iou``, the worst photo's Dice and the number of photos."""
    rows = {start: {"hard Dice": table["dice"].mean(), "IoU": table["iou"].mean(),
                    "worst Dice": table["dice"].min(), "photos": len(table)}
            for start, table in tables.items()}
    return pd.DataFrame.from_dict(rows, orient="index").sort_values("hard Dice", ascending=False)


def recommend_start(tables: dict[str, pd.DataFrame]) -> dict:
    """The start with the best mean hard Dice and, against the runner-up on the same photos,
    the mean ``gain`` in Dice, its standard error ``gain_se`` (NaN for one photo), the gain
    in standard errors ``lead_se`` (NaN without a spread), and the photos it ``wins`` and
    ``loses``; ``runner_up`` is ``None`` when there is one start."""
    ranking = compare_starts(tables).index
    best = ranking[0]
    advice = {"best": best, "runner_up": None, "photos": len(tables[best])}
    if len(ranking) > 1:
        runner_up = ranking[1]
        gain = tables[best]["dice"] - tables[runner_up]["dice"]
        se = gain.std(ddof=1) / math.sqrt(len(gain)) if len(gain) > 1 else math.nan
        advice.update(runner_up=runner_up, gain=gain.mean(), gain_se=se,
                      lead_se=gain.mean() / se if se > 0 else math.nan,
                      wins=int((gain > 0).sum()), loses=int((gain < 0).sum()))
    return advice


# %%
if curves:
    plot_training_curves(curves)
    plt.show()
compare_starts(tables).round(3)

# %% [markdown]
# ## The worst photos of the best start
#
# A mean hides the photos that drag it down. Here are the held-out photos the best start
# scores lowest, with the ground truth outlined in yellow and the prediction in cyan, and
# below them the predicted probability. Look at the masks as much as at the predictions: on
# a small hand-labelled set, a missed nail in the *mask* costs as much as one in the
# prediction.

# %%
advice = recommend_start(tables)
best = advice["best"]
worst = tables[best].nsmallest(4, "dice")
images, labels, logits = predict_photos(models[best], valid.loc[worst.index], cfg.image_size,
                                        cfg.device)
figure = plot_predictions(images.permute(0, 2, 3, 1).numpy() / 255, labels[:, 0].numpy(),
                          torch.sigmoid(logits)[:, 0].numpy())
for ax, (_, row) in zip(figure.axes, worst.iterrows()):
    ax.set_title(f"{row['photo']}\nDice {row['dice']:.2f}, IoU {row['iou']:.2f}", fontsize=8)
figure.suptitle(f"worst held-out photos of {best}: ground truth (yellow), prediction (cyan)",
                fontsize=10)
plt.show()

# %% [markdown]
# ## Which start to use?
#
# The advice below is computed from this run's numbers: the paired gain of the best start
# over the runner-up, with its standard error and the number of photos. A gain counts as
# clear when it is more than twice its standard error; with a few photos that is a high
# bar, and it should be.

# %%
photos_held_out = advice["photos"]
print(f"best on these {photos_held_out} held-out photos: {best} (hard Dice "
      f"{tables[best]['dice'].mean():.3f}, IoU {tables[best]['iou'].mean():.3f})")
if advice["runner_up"] is None:
    print("-> only one start could be measured here, so there is nothing to choose between: "
          "run notebook 02 in this profile (synthetic start) or allow the ImageNet download.")
else:
    runner_up, lead_se = advice["runner_up"], advice["lead_se"]
    print(f"ahead of {runner_up} by {advice['gain']:+.3f} Dice ± {advice['gain_se']:.3f} "
          f"(standard error over {photos_held_out} photos), better on {advice['wins']}, "
          f"worse on {advice['loses']}")
    if lead_se > 2:
        verdict = f"use the {best} start: its lead is {lead_se:.1f} standard errors, more than two"
    else:
        verdict = (f"{best} and {runner_up} are within the noise: the lead is {lead_se:.1f} "
                   "standard errors, not more than two; either will do, and more held-out "
                   "photos would tell them apart")
    if best == ZERO_SHOT:
        verdict += ("; fine-tuning did not beat the checkpoint as it is, so use it unchanged "
                    "or fine-tune longer (finetune_steps)")
    print(f"-> {verdict}")
print(f"skipped: {', '.join(skipped) or 'none'}; with {photos_held_out} held-out photos one "
      f"photo moves a mean by up to {1 / photos_held_out:.3f}; the scores are at "
      f"{cfg.image_size} px after {cfg.finetune_steps} steps")

# %% [markdown]
# How to read it, whatever your numbers say:
#
# - **The synthetic start is the one to beat.** It already knows what a nail looks
#   like; fine-tuning only has to adapt it to your light, camera and polish. If it does not
#   beat random weights on your photos, your photos differ from the synthetic set in a way
#   worth looking for in the worst photos.
# - **ImageNet weights** know photos, not nails: the encoder starts from general features,
#   the decoder from nothing, and the weights need a download once.
# - **Zero-shot ahead of every fine-tuned start** means the budget or the learning rate is
#   off for this set (too few steps to adapt, or so many that it overfits a few dozen photos),
#   not that fine-tuning cannot help.
# - **Few held-out photos make noisy means.** Before you trust a small gap, hold out more
#   photos, or repeat with another split (`start(..., seed=1)`).
#
# ## Masks for new photos
#
# A model earns its keep on photos nobody has drawn masks for. `save_weights` writes a
# model's weights and hyperparameters in the form `load_weights` reads, with the image side
# it was trained at; the zero-shot row needs nothing written, it *is* the checkpoint.

# %%
#| export finetune
def save_weights(model: LitNailSegmentation, path: str | Path, image_size: int) -> Path:
    """``model``'s weights as :func:`load_weights` reads them, with the ``image_size`` it was
    trained at (``nailseg_common.predict`` reads it); returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"hyper_parameters": dict(model.hparams), "state_dict": model.state_dict(),
                "image_size": image_size}, path)
    return path


# %% [markdown]
# Then one command gives masks for a folder of photos:
#
#     python -m nailseg_common.predict IMAGES OUT --checkpoint MODEL
#
# For every JPEG or PNG under `IMAGES` (in subfolders too) it writes, at the same relative
# path under `OUT`, `<stem>.png`, the mask (0 or 255) at the size a photo viewer shows the
# photo (EXIF orientation applied, as preparation does), and `<stem>_overlay.jpg`, the
# photo with its nails tinted red. Without `--checkpoint` it takes the model
# `resolve_checkpoint` would (the newest of notebook 02 or 04, else the course's). Here it
# runs on a copy of the held-out photos, called from Python with the same arguments
# (`predict.main`, which returns the command's exit status).

# %%
run_folder = runs_dir() / cfg.name
model_file = (synthetic_checkpoint if best == ZERO_SHOT else
              save_weights(models[best], run_folder / "06_fine_tuned" / f"{best}.pt", cfg.image_size))
new_photos, masks = run_folder / "06_new_photos", run_folder / "06_masks"
for folder in (new_photos, masks):
    shutil.rmtree(folder, ignore_errors=True)  # the outputs of an earlier run
for image in valid["image"]:
    copy = new_photos / Path(image).relative_to(data.raw)
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(image, copy)
status = predict.main([str(new_photos), str(masks), "--checkpoint", str(model_file),
                       "--image-size", str(cfg.image_size), "--device", cfg.device.type])
print(f"exit status {status}; model: {best}")
plot_overlays(sorted(masks.rglob("*_overlay.jpg")))
plt.show()

# %% [markdown]
# ## Summary
#
# - Your photos go through the same preparation as the synthetic set; without them the
#   notebook runs on a stand-in of another style, so every cell runs real code.
# - The course's own checkpoint is found in `runs/<profile>/` (or passed), and its encoder
#   decides the encoder of every start, so the starts differ only in their weights.
# - Fair and fast fine-tuning: the same steps, seed, batches and augmentations for every
#   start (the GPU augmentation with a seed of its own), the same validation steps, the
#   photos held on the device as notebook 03's uint8 cache, one long epoch; scored with the
#   final weights, not a checkpoint chosen on the held-out photos.
# - Scores per photo (hard Dice and IoU at 0.5) show which photos fail, and the paired
#   gain with its standard error says whether one start really beats another.
# - `save_weights` and `python -m nailseg_common.predict` turn the chosen model into masks
#   and overlays for any folder of photos.
#
# ## Exercises
#
# 1. Fine-tune only the decoder of the synthetic start: set `requires_grad_(False)` on
#    `starts["synthetic"].model.encoder` before `fine_tune`. Does a frozen encoder do better
#    or worse on a few dozen photos?
# 2. Run with `finetune_steps` a quarter and four times the profile's. Which start gains
#    most from a longer run, and does any of them start to overfit (training loss falling
#    while the validation Dice drops)?
# 3. Open the worst photos' masks in an image editor. Is any of them wrong? Fix it, re-run,
#    and compare the per-photo table.
# 4. Repeat with another split (`start(profile, photos, seed=1, ...)`): does the ranking of
#    the starts survive? How large is the spread of each start's mean Dice?
# 5. Score the zero-shot checkpoint at a larger `image_size` than it was trained at. Does a
#    model trained at one size transfer to another?
# 6. Photograph a few nails of your own, put the photos in a folder and run
#    `python -m nailseg_common.predict FOLDER masks --checkpoint` with the model this
#    notebook saved. Where do the overlays go wrong: light, skin, polish, background?
