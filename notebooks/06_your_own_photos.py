# ---
# jupyter:
#   blog:
#     categories:
#     - fine-tuning
#     - transfer-learning
#     - segmentation
#     - pytorch-lightning
#     date: '2026-11-23'
#     description: Fine-tune the course's U-Net on your own nail photos from three starts
#       (random weights, the synthetic-pretrained checkpoint, ImageNet), score every
#       held-out photo, look at the worst ones, and choose a start from the measured
#       numbers.
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
# fine-tunes the same model from three starts on the same training photos, with the same
# budget and seed, and scores each one on the same held-out photos:
#
# - **random**: no prior knowledge at all;
# - **synthetic**: the checkpoint that notebook 02 (or 04) trained on the synthetic set;
# - **imagenet**: an encoder pretrained on ImageNet photos, where the machine can download it.
#
# Why bother with the synthetic checkpoint? On 2026-11-23 the course's maintainers measured,
# on an H100, notebook 02's gpu-profile model (trained only on the previous version of the
# synthetic set) on a held-back set of 52 real phone photos it had never seen: hard Dice 0.68
# (IoU 0.56), while the same U-Net trained from scratch on 40 of those photos reached 0.39.
# Whether that holds for *your* photos is what this notebook measures.
#
# ## What you'll learn
# - finding the course's own checkpoint, and checking that it fits the model you build
# - three ways to start a fine-tuning run, and how to make the comparison fair (same
#   encoder, budget, seed, batches and augmentations)
# - scoring photo by photo (hard Dice and IoU at 0.5), not only as one mean
# - reading the worst photos: a low score may be the model, or the mask
# - choosing a start from measured numbers, with the noise of a small held-out set in view
#
# > **CPU or GPU?** The notebook runs everywhere. Without a GPU it picks the `cpu` profile;
# > CI runs the tiny `smoke` profile, where every model trains for two steps and the numbers
# > mean nothing. On a GPU the `gpu` profile fine-tunes at 384 px. Without your photos
# > (`data_root`) it runs on a small synthetic stand-in of another style and says so, so
# > every cell still runs the real code.
#
# Every knob below is a parameter (papermill `-p name value`); `None` keeps the profile's
# value.

# %% tags=["parameters"]
profile = ""            # smoke, cpu or gpu; empty: $NAILSEG_PROFILE, else chosen from the hardware
data_root = ""          # your photos: Images/<type>/ + Masks/<type>/, or flat images/ + masks/
checkpoint = ""         # the synthetic-pretrained checkpoint; empty: the newest of notebook 02 or 04
try_imagenet = True     # also fine-tune from ImageNet weights (needs a download, once)
num_images = None       # photos in the stand-in used without data_root; None: half the
                        # profile's synthetic set, at most 60
image_size = None       # side of the square images the model sees
batch_size = None
max_steps = None        # optimizer steps of each fine-tuning run (the same for every start)
encoder = None          # smp encoder name; a found checkpoint's encoder wins
lr = None               # peak learning rate of AdamW's cosine schedule
num_workers = None      # DataLoader worker processes for Albumentations
precision = None        # Lightning precision, e.g. 32-true, bf16-mixed
accelerator = None      # cpu or gpu
max_train_batches = None  # cap per epoch (0: the whole set)
max_valid_batches = None  # cap of the validation that picks each run's best checkpoint

# %% [markdown]
# The setup picks the profile and the photos. With `data_root` (or `NAILSEG_DATA_ROOT`) it
# uses your set; without, it generates a **stand-in**: synthetic photos in another style
# than the training set (one hand close up, warm indoor light, plain surfaces out of focus,
# other polish), all of one type as a user's own photos would be. Either way the folder goes
# through `ensure_prepared`, exactly as a real set does: checked, split into training and
# held-out photos (20 %, seeded), converted.

# %%
from nailseg_common.environment import environment_report
from nailseg_common.paths import data_dir, data_location
from nailseg_common.preparation import ensure_prepared, fit_batch_to_split, read_split
from nailseg_common.profiles import select_profile
from nailseg_common.synthetic import ensure_synthetic_dataset

cfg = select_profile(profile, num_images=num_images, image_size=image_size, batch_size=batch_size,
                     max_steps=max_steps, encoder=encoder, lr=lr, num_workers=num_workers,
                     precision=precision, accelerator=accelerator,
                     max_train_batches=max_train_batches, max_valid_batches=max_valid_batches)
print(environment_report(cfg))
if data_location(cfg.num_images, data_root).synthetic:
    standin_images = num_images or min(cfg.num_images // 2, 60)
    photos = ensure_synthetic_dataset(data_dir() / f"standin-{standin_images}", standin_images,
                                      style="photo")
    print(f"no data_root: a synthetic stand-in of another style, {standin_images} images "
          f"({photos}) — bring your photos with data_root=...")
else:
    photos = data_location(cfg.num_images, data_root).raw
    print(f"your photos: {photos}")
data = ensure_prepared(cfg, photos)
cfg = fit_batch_to_split(cfg, data)
train, valid = read_split(data, "train"), read_split(data, "valid")
print(f"{len(train)} photos to fine-tune on, {len(valid)} held out to compare the starts")

# %% [markdown]
# ## The synthetic checkpoint
#
# Notebook 02 (and 04, with DALI) trained the U-Net on the synthetic set and kept the
# weights of its best validation Dice as `best-*.ckpt` under
# `runs/<profile>/<run>/version_N/checkpoints/`. `find_checkpoint` takes the newest of
# them in the current profile; `resolve_checkpoint` prefers the path you pass. A Lightning
# checkpoint also stores the module's hyperparameters, so `checkpoint_hparams` tells which
# encoder the weights belong to, without building a model. (Cells that start with
# `#| export finetune` are also written into `nailseg_common.finetune` by `make export`.)

# %%
#| export finetune
from pathlib import Path

import torch

from nailseg_common.paths import runs_dir
from nailseg_common.profiles import Profile

CHECKPOINT_RUNS = ("02_lightning_baseline", "04_dali")
"""The runs whose best checkpoint is the course's synthetic-pretrained model."""


def find_checkpoint(profile: Profile, runs: tuple[str, ...] = CHECKPOINT_RUNS) -> Path | None:
    """The newest ``best-*.ckpt`` of ``runs`` in ``profile``
    (``runs_dir()/<profile>/<run>/version_*/checkpoints/``); ``None`` when there is none."""
    found = [path for run in runs
             for path in (runs_dir() / profile.name / run).glob("*/checkpoints/best-*.ckpt")]
    return max(found, key=lambda path: path.stat().st_mtime, default=None)


def resolve_checkpoint(checkpoint: str | Path, profile: Profile) -> Path | None:
    """``checkpoint`` when given (it must exist), else :func:`find_checkpoint`."""
    if not checkpoint:
        return find_checkpoint(profile)
    path = Path(checkpoint).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint={str(checkpoint)!r} is not a file: pass the path of "
                                "a best-*.ckpt written by notebook 02 or 04, or leave it empty to "
                                "use the newest one of this profile.")
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
import dataclasses

synthetic_checkpoint = resolve_checkpoint(checkpoint, cfg)
if synthetic_checkpoint is None:
    print(f"No synthetic-pretrained checkpoint in profile {cfg.name!r} (looked for best-*.ckpt "
          f"under {runs_dir() / cfg.name}/{{{','.join(CHECKPOINT_RUNS)}}}/*/checkpoints/): run "
          "notebook 02 (or 04) in this profile first, or pass checkpoint=... . "
          "Going on without the synthetic start.")
else:
    trained_with = checkpoint_hparams(synthetic_checkpoint)["encoder"]
    print(f"synthetic checkpoint: {synthetic_checkpoint} (encoder {trained_with})")
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
# Offline, the Hub client retries each file with growing pauses, half a minute or more
# before it gives up; `hub_reachable` asks first (one connection, a few seconds at most)
# and, when the Hub cannot be reached, looks in the local cache only. Either way a missing
# download ends in `create_model`'s `RuntimeError`, which says what to do. Every start
# draws its random initialisation from the same seed.

# %%
#| export finetune
import socket
from urllib.parse import urlparse

from huggingface_hub import constants as hub_constants

from nailseg_common.models import LitNailSegmentation

STARTS = ("random", "synthetic", "imagenet")


def hub_reachable(timeout: float = 3.0) -> bool:
    """True when a connection to the Hugging Face Hub (``HF_ENDPOINT``) opens within ``timeout``."""
    url = urlparse(hub_constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
    except OSError:
        return False
    return True


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
    if hub_reachable():
        return LitNailSegmentation(encoder, lr, max_steps, encoder_weights="imagenet")
    offline = hub_constants.HF_HUB_OFFLINE
    hub_constants.HF_HUB_OFFLINE = True  # the local cache only, no minute of retries
    try:
        return LitNailSegmentation(encoder, lr, max_steps, encoder_weights="imagenet")
    finally:
        hub_constants.HF_HUB_OFFLINE = offline


# %%
starts = {}
for start in STARTS:
    if start == "synthetic" and synthetic_checkpoint is None:
        print("synthetic start skipped: no checkpoint (see above)")
    elif start == "imagenet" and not try_imagenet:
        print("imagenet start skipped: try_imagenet=False")
    else:
        try:
            starts[start] = start_model(start, cfg.encoder, cfg.lr, cfg.max_steps,
                                        synthetic_checkpoint)
        except RuntimeError as error:
            print(f"imagenet start skipped: {error}")
print(f"starts to fine-tune: {', '.join(starts)} (U-Net with a {cfg.encoder} encoder)")

# %% [markdown]
# ## Scoring photo by photo
#
# The training log has one validation Dice per epoch: a mean. To compare starts and to find
# the photos a model gets wrong we need one score per photo. `predict_photos` runs a model
# over the held-out photos in their order, resized to the model's size exactly as in
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
    models[ZERO_SHOT] = start_model("synthetic", cfg.encoder, cfg.lr, cfg.max_steps,
                                    synthetic_checkpoint)
    tables[ZERO_SHOT] = score_photos(models[ZERO_SHOT], valid, cfg.image_size, cfg.device)
    print(f"zero-shot: hard Dice {tables[ZERO_SHOT]['dice'].mean():.3f}, IoU "
          f"{tables[ZERO_SHOT]['iou'].mean():.3f} (mean over the {len(valid)} held-out photos)")
else:
    print("no zero-shot row: there is no synthetic checkpoint")

# %% [markdown]
# ## Fine-tuning each start
#
# `fine_tune` trains one start with notebook 02's `NailDataModule` and `make_trainer`, for
# `cfg.max_steps` steps. Two details make the starts comparable:
#
# - **the same batches and augmentations**: `seed_everything` fixes PyTorch's generators
#   (shuffling, the workers' seeds), but an Albumentations 2 `Compose` draws from its own
#   generator, so that one is seeded too (with workers, `seed_worker_transform` reseeds it
#   from PyTorch's seed, which `seed_everything` fixed);
# - **validation at the same steps**: a small set makes short epochs (a few steps each),
#   and validating and writing a checkpoint after each of them would cost more than the
#   training; `fine_tune` validates every `max_steps // validations` steps instead (20
#   validations by default), counted across epochs.
#
# The checkpoint of each run's best validation Dice is then scored on every held-out photo.

# %%
#| export finetune
import pytorch_lightning as pl

from nailseg_common.datasets import NailDataModule
from nailseg_common.paths import DataLocation
from nailseg_common.training import make_trainer


def fine_tune(model: LitNailSegmentation, data: DataLocation, profile: Profile, run_name: str,
              seed: int = 0, validations: int = 20) -> pl.Trainer:
    """Train ``model`` on ``data``'s training split for ``profile.max_steps`` steps, logged as
    ``run_name``, validating every ``max_steps // validations`` steps; the same ``seed`` gives
    every start the same batches and augmentations. Returns the trainer (its ``checkpoint_callback``
    knows the best checkpoint)."""
    pl.seed_everything(seed, verbose=False)
    datamodule = NailDataModule(data, profile)
    datamodule.setup("fit")
    datamodule.train_set.transform.set_random_seed(seed)  # Albumentations' own generator
    trainer = make_trainer(profile, run_name, enable_progress_bar=False,
                           val_check_interval=max(1, profile.max_steps // validations),
                           check_val_every_n_epoch=None)  # every N steps, across epochs
    trainer.fit(model, datamodule=datamodule)
    return trainer


# %%
import time

from nailseg_common.training import read_metrics

curves = {}
for start, model in starts.items():
    began = time.perf_counter()
    trainer = fine_tune(model, data, cfg, f"06_{start}")
    curves[start] = read_metrics(trainer).dropna(subset=["val_dice"])
    best_path = trainer.checkpoint_callback.best_model_path
    models[start] = load_weights(LitNailSegmentation(cfg.encoder), best_path)
    tables[start] = score_photos(models[start], valid, cfg.image_size, cfg.device)
    print(f"{start:>9s}: {trainer.global_step} steps ({trainer.current_epoch} epoch(s)) in "
          f"{time.perf_counter() - began:.0f} s; best checkpoint "
          f"{Path(best_path).name}: hard Dice {tables[start]['dice'].mean():.3f}, IoU "
          f"{tables[start]['iou'].mean():.3f} on the {len(valid)} held-out photos")

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
    the mean ``gain`` in Dice, its standard error ``gain_se`` (NaN for one photo), and the
    photos it ``wins`` and ``loses``; ``runner_up`` is ``None`` when there is one start."""
    ranking = compare_starts(tables).index
    best = ranking[0]
    advice = {"best": best, "runner_up": None, "photos": len(tables[best])}
    if len(ranking) > 1:
        runner_up = ranking[1]
        gain = tables[best]["dice"] - tables[runner_up]["dice"]
        advice.update(runner_up=runner_up, gain=gain.mean(),
                      gain_se=gain.std(ddof=1) / math.sqrt(len(gain)) if len(gain) > 1
                      else math.nan,
                      wins=int((gain > 0).sum()), loses=int((gain < 0).sum()))
    return advice


# %%
import matplotlib.pyplot as plt

from nailseg_common.plots import plot_training_curves

if curves:
    plot_training_curves(curves)
    plt.show()
compare_starts(tables).round(3)

# %% [markdown]
# ## The worst photos of the best start
#
# A mean hides the photos that drag it down. Here are the four held-out photos the best
# start scores lowest, with the ground truth outlined in yellow and the prediction in cyan,
# and below them the predicted probability. Look at the masks as much as at the
# predictions: on a small hand-labelled set, a missed nail in the *mask* costs as much as
# one in the prediction.

# %%
from nailseg_common.plots import plot_predictions

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
# The advice below is computed from this run's numbers. A gain counts as clear when it is
# more than twice its standard error over the held-out photos; with a few photos that is a
# high bar, and it should be.

# %%
photos_held_out = advice["photos"]
print(f"best on these {photos_held_out} held-out photos: {best} (hard Dice "
      f"{tables[best]['dice'].mean():.3f}, IoU {tables[best]['iou'].mean():.3f})")
if advice["runner_up"] is None:
    print("-> only one start could be measured here, so there is nothing to choose between: "
          "run notebook 02 in this profile (synthetic start) or allow the ImageNet download.")
else:
    runner_up, gain, gain_se = advice["runner_up"], advice["gain"], advice["gain_se"]
    print(f"ahead of {runner_up} by {gain:+.3f} Dice ± {gain_se:.3f} (standard error), better "
          f"on {advice['wins']} photos, worse on {advice['loses']}, of {photos_held_out}")
    if gain > 2 * gain_se:
        verdict = f"use the {best} start: its lead is more than twice its standard error"
    else:
        verdict = (f"{best} and {runner_up} are within the noise of {photos_held_out} photos: "
                   "either will do; hold out more photos before you trust the ranking")
    if best == ZERO_SHOT:
        verdict += ("; fine-tuning did not beat the checkpoint as it is, so use it unchanged "
                    "or fine-tune longer (max_steps)")
    print(f"-> {verdict}")
print(f"caveats: with {photos_held_out} held-out photos one photo moves a mean by up to "
      f"{1 / photos_held_out:.3f}; the scores are at {cfg.image_size} px after "
      f"{cfg.max_steps} steps; check the masks of the worst photos above before you blame the "
      "model")

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
#   photos, or repeat with another split (`ensure_prepared(..., seed=1)`).
#
# ## Summary
#
# - Your photos go through the same `ensure_prepared` as the synthetic set; without them
#   the notebook runs on a stand-in of another style, so every cell runs real code.
# - The course's own checkpoint is found in `runs/<profile>/` (or passed), and its encoder
#   decides the encoder of every start, so the starts differ only in their weights.
# - Fair fine-tuning: the same steps, seed, batches and augmentations for every start, and
#   the same validation steps; Albumentations needs its own seed.
# - Scores per photo (hard Dice and IoU at 0.5) show which photos fail, and the paired
#   gain with its standard error says whether one start really beats another.
#
# ## Exercises
#
# 1. Fine-tune only the decoder of the synthetic start: set `requires_grad_(False)` on
#    `starts["synthetic"].model.encoder` before `fine_tune`. Does a frozen encoder do better
#    or worse on a few dozen photos?
# 2. Run with `max_steps` a quarter and four times the profile's. Which start gains most from
#    a longer run, and does any of them start to overfit (training loss falling while the
#    validation Dice drops)?
# 3. Open the worst photos' masks in an image editor. Is any of them wrong? Fix it, re-run,
#    and compare the per-photo table.
# 4. Repeat with another split (`ensure_prepared(cfg, photos, seed=1)`): does the ranking of
#    the starts survive? How large is the spread of each start's mean Dice?
# 5. Score the zero-shot checkpoint at a larger `image_size` than it was trained at. Does a
#    model trained at one size transfer to another?
