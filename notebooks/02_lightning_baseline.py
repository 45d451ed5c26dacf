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
#       the reference training, its augmentation policy, and how long each step waits
#       for CPU-side data.'
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
# This notebook trains the reference model of the course: a U-Net that segments nails,
# written with PyTorch Lightning 2 and fed by a classic input pipeline, where DataLoader
# workers read PNG files and augment them with Albumentations on the CPU. Everything the
# later notebooks speed up is here: the same model, loss, metrics and augmentation policy,
# so notebooks 03 (Kornia) and 04 (DALI) change only where the augmentation runs.
#
# ## What you'll learn
# - why augmentation on CPU workers becomes the bottleneck as the GPU gets faster
# - the course's augmentation policy, written down once as a table, and what it does to an image
# - the three Lightning pieces: a `LightningDataModule`, a `LightningModule` and the `Trainer`
# - training with a symmetric Lovász loss (plus cross-entropy and soft Dice), reading the loss and Dice curves from the CSV log
# - judging a model by validation Dice/IoU and by looking at its predictions
# - measuring how much of each training step waits for data
#
# > **CPU or GPU?** The notebook runs everywhere. On a CPU it picks a small profile (the
# > `smoke` profile finishes in about a minute); on a GPU the `gpu` profile trains the full
# > model at 384 px with bf16 mixed precision.

# %% tags=["parameters"]
profile = ""       # "smoke", "cpu" or "gpu"; "" = $NAILSEG_PROFILE, else chosen from the hardware
data_root = ""     # a real dataset (Images/1..4, Masks/1..4); "" = the synthetic set
num_epochs = None  # None = the profile's value

# %%
from nailseg_common.environment import environment_report
from nailseg_common.preparation import ensure_prepared
from nailseg_common.profiles import select_profile

cfg = select_profile(profile, num_epochs=num_epochs)
print(environment_report(cfg))
data = ensure_prepared(cfg, data_root)
print("data:", data.raw)

# %% [markdown]
# ## Why CPU augmentation becomes the bottleneck
#
# In the classic pipeline every training image goes through Python on a CPU worker: decode
# the PNG, resize it, then flip, warp, re-light, add noise and blur it, one image at a
# time. A DataLoader spreads that over `num_workers` processes, but the cost per image is
# fixed by the CPU. The training step on the other side gets faster with every GPU
# generation and with mixed precision. When the GPU finishes a step before the workers have
# the next batch ready, it idles: the input pipeline, not the model, sets the speed.
#
# Let's measure the CPU side alone: how long one core needs to produce one training image.

# %%
import time

import torch

from nailseg_common.datasets import NailDataModule

torch.manual_seed(0)
datamodule = NailDataModule(data, cfg)
datamodule.setup("fit")
count = min(32, len(datamodule.train_set))
start = time.perf_counter()
for index in range(count):
    datamodule.train_set[index]
per_image = (time.perf_counter() - start) / count
print(f"{len(datamodule.train_set)} training and {len(datamodule.valid_set)} validation images")
print(f"one CPU core: {1e3 * per_image:.1f} ms per image (read + resize + augment) "
      f"= {1 / per_image:.0f} images/s")
print(f"a batch of {cfg.batch_size} on {max(cfg.num_workers, 1)} worker(s): "
      f"about {1e3 * per_image * cfg.batch_size / max(cfg.num_workers, 1):.0f} ms")

# %% [markdown]
# Keep that number in mind: a GPU training step of the U-Net at this size takes a few tens
# of milliseconds on a modern GPU, so a handful of CPU workers can hardly keep up. At the end
# of the notebook we measure how long each training step actually waited for its batch.
#
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
# The Albumentations 2.x version of that table (`nailseg_common.augmentation`) is a plain
# `A.Compose`: `Resize`, `HorizontalFlip`, `VerticalFlip`, `Affine`,
# `RandomBrightnessContrast`, `GaussNoise(std_range=...)` and `GaussianBlur(sigma_limit=...)`.
# A gallery says more than the table: each row is one training image, first resized only,
# then three random draws of the policy. The yellow outline is the mask; it must hug the
# nails after every flip and warp.

# %%
import matplotlib.pyplot as plt

from nailseg_common.augmentation import gallery_panels
from nailseg_common.images import read_binary_mask, read_rgb
from nailseg_common.plots import plot_augmentation_gallery
from nailseg_common.preparation import read_split

train_frame = read_split(data, "train")
examples = train_frame.groupby("type").head(1).head(4)
panels = gallery_panels([read_rgb(p) for p in examples["image"]],
                        [read_binary_mask(p) for p in examples["mask"]], cfg.image_size)
plot_augmentation_gallery(panels)
plt.show()

# %% [markdown]
# ## The three Lightning pieces
#
# **1. The `LightningDataModule`** (`NailDataModule`) owns the data: it reads the train and
# validation splits written by notebook 01 and builds the DataLoaders, with Albumentations
# running in the workers. It yields batches in the course's batch contract: a dict with a
# `uint8` image `B×3×H×W` and a `uint8` label `B×1×H×W`. Keeping the CPU side in `uint8`
# makes each batch four times smaller to copy than float32.

# %%
batch = next(iter(datamodule.train_dataloader()))
for key, value in batch.items():
    print(f"{key:6} {tuple(value.shape)} {value.dtype}  values {value.min().item()}..{value.max().item()}")

# %% [markdown]
# **2. The `LightningModule`** (`LitNailSegmentation`) owns the model and the maths: an
# `smp.Unet` with the profile's encoder (random weights, nothing downloads), the loss,
# AdamW with a cosine learning-rate schedule, and the validation metrics.
# It converts the batch on the device (`uint8` → float, ImageNet normalisation), and its
# `on_after_batch_transfer` hook is where notebook 03 plugs in GPU augmentation.
#
# The loss is `symmetric_lovasz`, the Lovász hinge (a convex surrogate of 1 − IoU) averaged
# over the nail and the background class and computed per image, plus binary cross-entropy
# and a soft-Dice term: the hinge alone learns slowly from random weights and leaves
# probabilities soft (a background logit of −1 already satisfies it); cross-entropy gets
# training going and the soft-Dice term pushes the probabilities the validation Dice is
# computed on towards 0 and 1. The metrics are the
# soft Dice on sigmoid probabilities (`binary_dice_coefficient`) and the IoU at a 0.5
# threshold (`binary_mean_iou`), each a mean over all validation images of the epoch.

# %%
from nailseg_common.models import LitNailSegmentation

model = LitNailSegmentation(encoder=cfg.encoder, lr=cfg.lr, num_epochs=cfg.num_epochs)
print(f"U-Net with a {cfg.encoder} encoder: "
      f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters")

# %% [markdown]
# **3. The `Trainer`** runs the loops. `make_trainer` configures it from the profile:
# accelerator, precision (`bf16-mixed` on the GPU), epochs, a CSV logger under `runs/`, and
# a checkpoint of the best validation Dice. We also pass a `DataWaitTimer`, a small callback
# that records, for every training step, how long the loop waited for the batch and how
# long the step itself took.

# %%
from nailseg_common.training import DataWaitTimer, make_trainer

timer = DataWaitTimer()
trainer = make_trainer(cfg, "02_lightning_baseline", callbacks=[timer])

# %% [markdown]
# ## Training
#
# `trainer.fit` runs the epochs with a progress bar; validation runs after each epoch.

# %%
start = time.perf_counter()
trainer.fit(model, datamodule=datamodule)
print(f"trained {trainer.current_epoch} epoch(s), {trainer.global_step} steps "
      f"in {time.perf_counter() - start:.0f} s")

# %% [markdown]
# ## Loss and Dice curves
#
# Lightning wrote every logged value to a CSV file; `read_metrics` turns it into one row
# per epoch. The loss falls (a model that knows nothing scores a Lovász hinge of 1, a
# cross-entropy of about 0.7 and a soft-Dice loss near 1) and the Dice rises from near 0 as the model finds the nails. With the `smoke` profile
# you see a single epoch, so expect a single point near the start.

# %%
from nailseg_common.plots import plot_training_curves
from nailseg_common.training import read_metrics

metrics = read_metrics(trainer)
plot_training_curves(metrics)
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
      f"(an all-background prediction scores 0 on images with nails)")

# %% [markdown]
# ## Predictions over the ground truth
#
# Numbers hide where a model fails. Here are validation images with the ground truth
# outlined in yellow and the prediction (probability above 0.5) in cyan, and below them the
# predicted probability.

# %%
from nailseg_common.metrics import per_image_iou
from nailseg_common.plots import plot_predictions

batch = next(iter(datamodule.val_dataloader()))
model.eval()
with torch.no_grad():
    logits = model(batch["image"].to(model.device)).float().cpu()
plot_predictions(batch["image"].permute(0, 2, 3, 1).numpy() / 255, batch["label"][:, 0].numpy(),
                 torch.sigmoid(logits)[:, 0].numpy(), scores=per_image_iou(logits, batch["label"]))
plt.show()

# %% [markdown]
# ## How much of each step waits for data?
#
# The timer measured every training step: the *wait* from the end of one step until the
# next batch was on the device, and the *step* itself (forward, backward, optimizer). The
# first step of each epoch also starts the workers, so the summary keeps it apart.

# %%
from nailseg_common.plots import plot_data_wait

summary = timer.summary()
print(f"median wait {summary['median_wait_ms']:.1f} ms, median step {summary['median_step_ms']:.1f} ms: "
      f"{100 * summary['wait_share']:.0f}% of the training time waited for data "
      f"({summary['steps']} steps; first batch of an epoch waited {summary['first_batch_wait_s']:.2f} s)")
plot_data_wait(timer.frame())
plt.show()

# %% [markdown]
# On a CPU the model itself is slow, so the workers have time to keep up and the wait share
# is small (unless the workers and the model fight over the same few cores). On a GPU the
# step shrinks to a few tens of milliseconds while the CPU cost per image stays, and the
# wait share grows: that gap is what notebooks 03 and 04 close by moving augmentation, and
# then decoding and resizing too, onto the GPU. Notebook 05 measures it properly.

# %% [markdown]
# ## Summary
#
# - The reference pipeline reads PNGs and augments them with Albumentations on CPU workers,
#   yielding compact `uint8` batches; the LightningModule converts and normalises on the device.
# - The augmentation policy lives in one table (`policy.POLICY`); the Albumentations,
#   Kornia and DALI builders all read it.
# - Lightning splits the work into a DataModule (data), a LightningModule (model, loss,
#   optimiser, metrics) and a Trainer (loops, precision, logging, checkpoints).
# - The symmetric Lovász loss optimises IoU directly, cross-entropy gets training going and a
#   soft-Dice term sharpens the probabilities; validation reports soft Dice and
#   thresholded IoU as means over images, aggregated over the whole epoch.
# - A simple callback shows how much of each step waits for data: the number to watch as
#   the GPU gets faster.

# %% [markdown]
# ## Exercises
#
# 1. Train with `augment=False` in `NailDataModule` and compare the validation Dice and
#    the curves: how much does the policy help on this dataset?
# 2. Re-run the data-wait measurement with `num_workers=0` and with as many workers as
#    your machine has cores (`select_profile(profile, num_workers=...)`). How does the wait
#    share change?
# 3. Resume training for two more epochs from `last.ckpt`
#    (`trainer.fit(model, datamodule=datamodule, ckpt_path=...)` with a trainer made for
#    `num_epochs + 2` epochs). Does `trainer.global_step` continue where it stopped?
# 4. Train with `LitNailSegmentation(..., bce_weight=0, dice_weight=0)` (the Lovász hinge alone). Compare
#    validation IoU and soft Dice with the default: why does the soft Dice suffer most?
# 5. Set `encoder_weights="imagenet"` on a machine with internet access: how much faster
#    does a pretrained encoder converge?
