# ---
# jupyter:
#   blog:
#     categories:
#     - kornia
#     - gpu
#     - augmentation
#     - pytorch-lightning
#     date: '2026-11-23'
#     description: The augmentation policy as a Kornia module on whole batches on the
#       GPU, a fused sync-free version, a uint8 cache, and the measured steps that close
#       the gap to the bound.
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
# # 03 · Augmentation on the GPU with Kornia
#
# In notebook 02 every training image was decoded, resized and augmented by Albumentations,
# one image at a time, in CPU worker processes. On a fast GPU those workers cannot keep up:
# the GPU waits for data. This notebook moves the augmentation to where the model already
# is. With Kornia, augmentation is an `nn.Module` that takes a whole `B×3×H×W` batch (and
# its `B×1×H×W` masks) on the GPU and returns it augmented, inside Lightning's
# `on_after_batch_transfer` hook. The CPU is left with almost nothing to do, and we measure,
# step by step, what it takes to make the training as fast as if the batches were already on the GPU.
#
# ## What you'll learn
#
# - augmentation as an `nn.Module` on a batch: the course's policy as a Kornia 0.9
#   `AugmentationSequential` over image and mask (nearest interpolation keeps masks binary)
# - why the textbook version is slow on a GPU (per-op parameter sampling on the CPU, host
#   synchronisations, one resampling per geometric op) and a fused version of the same policy that is not
# - a gallery of Albumentations vs Kornia on the same images
# - timing augmentation alone: Albumentations per image on CPU workers vs Kornia per batch on CPU and GPU
# - training with the augmentation inside the step, and the comparison of epoch time and Dice with notebook 02
# - closing the gap to the bound, one measured step at a time: a uint8 cache instead of PNG decoding,
#   pinned memory with non-blocking copies, no host synchronisations
#
# Runs everywhere: without a GPU, Kornia runs on the CPU (the notebook says so) and the
# numbers show the CPU's story; on a GPU the same cells measure the GPU's. The reference GPU
# numbers come from notebook 05 on an H100.

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
# ## The idea: augmentation as a module on a batch
#
# Albumentations works on one `H×W×3` NumPy image at a time, so it has to run where the
# images are decoded: in CPU workers. Kornia's augmentations are `torch.nn.Module`s on
# `B×C×H×W` tensors, so they run wherever the tensors are, and every sample of the batch
# still gets its own random parameters. The course's policy (the table from notebook 02)
# as the textbook Kornia container:

# %%
import torch

from nailseg_common.gpu_augmentation import KorniaAugmentation, kornia_sequential
from nailseg_common.policy import policy_table

display(policy_table())
kornia_sequential()

# %% [markdown]
# `data_keys=["input", "mask"]` tells the container that the second tensor is a mask: every
# geometric op moves it with the same parameters as the image, resampled with nearest
# neighbour so it stays binary; photometric ops leave it alone.
#
# `KorniaAugmentation` wraps the policy for the training loop: it takes the batch contract
# (uint8 or float, any device) and returns a float image in [0, 1] and a {0, 1} label. It
# comes in two implementations of the same policy:
#
# - `"sequential"`: the `AugmentationSequential` above. Readable and extensible, but each op
#   draws its parameters on the CPU and copies them over, the noise op draws a full-size noise
#   tensor on the CPU, some ops read values back to the host (`.any()`, `bool()`), which makes
#   the CPU wait for the GPU, and each geometric op resamples the whole batch again.
# - `"fused"` (the default): all random numbers of a batch in one call on the batch's device,
#   flips and affine composed into one matrix per sample and one `grid_sample` (bilinear for
#   the image, nearest for the mask), ops switched on per sample with `torch.where` instead of
#   indexing, Kornia's Gaussian kernels for the blur. Nothing is read back to the host, so the
#   CPU just queues GPU work and runs ahead.
#
# A seed makes it repeatable: `KorniaAugmentation(seed=0)` owns its random generator;
# without a seed it uses PyTorch's global one, so `pl.seed_everything` covers it.

# %%
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if device.type == "cpu":
    print("No GPU here: Kornia runs on the CPU in this notebook (same code, other device).")
else:
    print(f"Kornia runs on {torch.cuda.get_device_name(device)}.")

augment = KorniaAugmentation(seed=0)
print(augment)

# %% [markdown]
# ## A pre-resized uint8 cache
#
# Training batches for the GPU pipeline come from a cache built once: every image and mask
# resized with the baseline's validation transform and stored as one contiguous uint8 array
# per split (`N×3×S×S` and `N×1×S×S`). A batch is then a single gather from that array, and
# uint8 is four times less to copy than float32. The validation batches are the same pixels
# as notebook 02's.

# %%
from nailseg_common.cache import cache_dir, load_cache

images, labels = load_cache(data, cfg.image_size, "train")
print(f"cache: {cache_dir(data, cfg.image_size).relative_to(data.prepared.parent)}  "
      f"images {tuple(images.shape)} {images.dtype}, labels {tuple(labels.shape)} {labels.dtype}, "
      f"{(images.numel() + labels.numel()) / 2**20:.1f} MiB")

batch_image = images[: cfg.batch_size].to(device)
batch_label = labels[: cfg.batch_size].to(device)
out_image, out_label = augment(batch_image, batch_label)
print("in :", tuple(batch_image.shape), batch_image.dtype, batch_image.device)
print("out:", tuple(out_image.shape), out_image.dtype, f"[{out_image.min():.2f}, {out_image.max():.2f}]",
      "| label values", out_label.unique().tolist())

# %% [markdown]
# ## Albumentations vs Kornia on the same images
#
# The same four resized images through Albumentations (notebook 02's CPU pipeline) and both
# Kornia implementations. The random draws differ between libraries, so the pictures differ;
# what must agree is the kind of change (flips, rotations within ±20°, small shifts and
# zooms, brightness/contrast, a little noise and blur) and that the yellow mask outline stays
# on the nail after every geometric change.

# %%
import matplotlib.pyplot as plt

from nailseg_common import plots
from nailseg_common.gpu_augmentation import gallery_panels

plots.plot_augmentation_gallery(gallery_panels(images[:4], labels[:4], seed=1))
plt.show()

# %% [markdown]
# ## Augmentation alone: per image on CPU workers vs per batch
#
# Before training, the augmentation by itself: Albumentations per image in the profile's
# CPU workers (as in notebook 02, on already-resized images), and Kornia on whole batches on
# the CPU and, if there is one, on the GPU. Each method gets warm-up batches, then several
# timed windows (the GPU is synchronised at the ends of each window); bars show the median
# and the whiskers the spread.

# %%
from nailseg_common.gpu_augmentation import time_augmentations

timing = time_augmentations(images, labels, cfg.batch_size, cfg.num_workers,
                            steps=cfg.bench_steps, repeats=cfg.bench_repeats)
display(timing.round(1))
plots.plot_augmentation_timing(timing)
plt.show()

# %% [markdown]
# On a CPU, Kornia competes with the model for the same cores, and at small image sizes
# per-op overheads dominate, so a per-batch module is not automatically faster there. On a
# GPU the picture flips: the fused module is a handful of kernels per batch with no CPU
# worker at all, while the textbook `AugmentationSequential` spends most of its time on the
# CPU (parameter sampling and a full-size noise tensor drawn there), so the GPU waits for it.
# Run this notebook on a GPU (profile `gpu`) to see the numbers for your machine.

# %% [markdown]
# ## Training with the augmentation inside the step
#
# The model is notebook 02's `LitNailSegmentation`; the only change is
# `gpu_augmentation=KorniaAugmentation()`. Its `on_after_batch_transfer` hook converts the
# uint8 batch to float on the device and augments training batches only, so validation sees
# exactly what it saw in notebook 02. We train both pipelines with the same seed and profile
# and compare the wall time per epoch (validation included) and the Dice.

# %%
import time

import pandas as pd
import pytorch_lightning as pl

from nailseg_common.cache import CachedNailDataModule
from nailseg_common.datasets import NailDataModule
from nailseg_common.models import LitNailSegmentation
from nailseg_common.training import make_trainer, read_metrics

pipelines = {
    "Albumentations on CPU workers": (NailDataModule(data, cfg), None),
    "uint8 cache + Kornia on " + device.type.upper(): (CachedNailDataModule(data, cfg), KorniaAugmentation()),
}
runs = {}
for name, (datamodule, gpu_augmentation) in pipelines.items():
    pl.seed_everything(0, verbose=False)
    model = LitNailSegmentation(cfg.encoder, cfg.lr, cfg.num_epochs, gpu_augmentation=gpu_augmentation)
    trainer = make_trainer(cfg, "03_" + ("kornia" if gpu_augmentation else "albumentations"),
                           enable_progress_bar=False)
    start = time.perf_counter()
    trainer.fit(model, datamodule)
    seconds = time.perf_counter() - start
    last = read_metrics(trainer).iloc[-1]
    runs[name] = {"s / epoch": seconds / cfg.num_epochs, "val_dice": last["val_dice"],
                  "val_iou": last["val_iou"]}
comparison = pd.DataFrame(runs).T
comparison.round(3)

# %% [markdown]
# With the same number of epochs the two pipelines reach a similar Dice (same policy, other
# random draws; in the smoke profile one short epoch says little about accuracy). The epoch
# time is where they differ, and by how much depends on the machine: on a laptop CPU both
# share the same cores, on a GPU the Albumentations workers become the bottleneck.
#
# ## Closing the gap to the bound, step by step
#
# The **bound** is the same training step with batches already on the device: no loading,
# no copy, no augmentation. A pipeline is good when it trains at nearly the bound's rate.
# On an H100 with 16 cores the straightforward GPU version (PNG decode and resize in 15
# workers, Kornia inside the step) reaches only about half of it, no better than
# Albumentations. Each row below adds one change and measures the training rate with the
# same harness as notebook 05 (warm-up, then timed windows; median and spread):
#
# 0. PNG decode + resize in workers, the textbook `AugmentationSequential` in the step;
# 1. the fused Kornia module: no host synchronisations, one resampling, parameters drawn on the device;
# 2. the uint8 cache instead of PNG decoding: a batch is one gather from a contiguous array;
# 3. pinned memory (page-locked host buffers), so Lightning's `non_blocking=True` copy is really
#    asynchronous and overlaps with the GPU's work instead of stalling the CPU.

# %%
from nailseg_common.benchmark import measure_loader, measure_training, resident_batches
from nailseg_common.benchmark import train_loader_of as train_loader

on_gpu = device.type == "cuda"
steps = [
    ("0 · PNG decode + resize, Kornia sequential", lambda: train_loader(NailDataModule(data, cfg, augment=False)), "sequential"),
    ("1 · + fused Kornia (no host syncs)", lambda: train_loader(NailDataModule(data, cfg, augment=False)), "fused"),
    ("2 · + uint8 cache instead of PNG decode", lambda: train_loader(CachedNailDataModule(data, cfg, pin_memory=False)), "fused"),
]
if on_gpu:
    steps.append(("3 · + pinned memory, non-blocking copy", lambda: train_loader(CachedNailDataModule(data, cfg, pin_memory=True)), "fused"))
else:
    print("No GPU: step 3 (pinned memory for asynchronous host-to-GPU copies) has nothing to overlap here; skipped.")
measure_train = on_gpu or cfg.name != "smoke"
if not measure_train:
    print("Smoke profile on a CPU: only the input side is timed (training steps would take minutes here).")

warmup, n_steps, repeats = max(1, cfg.bench_steps // 5), cfg.bench_steps, cfg.bench_repeats
rows = []
if measure_train:
    bound = measure_training(resident_batches(train_loader(CachedNailDataModule(data, cfg)), device),
                             cfg, warmup, n_steps, repeats)
    rows.append({"step": "bound: batches already on the device", "training img/s": bound["img_s"],
                 "share of bound": 1.0})
for name, make_loader, implementation in steps:
    loader = make_loader()
    augmentation = KorniaAugmentation(implementation=implementation)
    row = {"step": name,
           "input side img/s": measure_loader(loader, device, warmup, n_steps, repeats, augmentation)["img_s"]}
    if measure_train:
        row["training img/s"] = measure_training(loader, cfg, warmup, n_steps, repeats, augmentation)["img_s"]
        row["share of bound"] = row["training img/s"] / bound["img_s"]
    rows.append(row)
gap = pd.DataFrame(rows).set_index("step")
gap.round(2)

# %% [markdown]
# *input side* is the loader alone: batches fetched, copied to the device and augmented
# there, no model. *training* is the full `Trainer.fit` step on those batches, and its share
# of the bound is the number that matters.

# %%
column = "share of bound" if measure_train else "input side img/s"
ax = gap[column].iloc[::-1].plot.barh(figsize=(7, 0.6 + 0.5 * len(gap)), color="tab:purple")
if measure_train:
    ax.axvline(0.9, color="red", linestyle=":", label="target 0.90")
    ax.legend()
ax.set_xlabel("training rate / bound" if measure_train else "images / s, loader + copy + augmentation")
ax.set_title(f"Closing the gap on {device.type.upper()} ({cfg.name} profile, {cfg.image_size} px)")
plt.show()

# %% [markdown]
# On a CPU-only machine the model runs on the same few cores that load and augment, so
# there is no idle accelerator to feed and the numbers are noisy; the input-side rates still
# show what the cache saves.
#
# The same steps on the H100 (batch 32, 384 px, ResNet-34 U-Net in bf16) were measured by
# notebook 05's harness (`make bench`) and committed in `results/benchmark_h100.json`; the
# cell below reads them from there, with the device, versions and date of the run.

# %%
from nailseg_common.benchmark import load_results, results_label

reference = load_results()
if reference is None:
    print("No committed GPU results yet: run `make bench` on a GPU machine to produce them.")
else:
    print(results_label(reference))
    names = ["kornia_png_sequential", "kornia_png_fused", "kornia_cache_unpinned", "kornia"]
    measured = {n: reference["pipelines"][n] for n in names if n in reference["pipelines"]}
    display(pd.DataFrame({"training img/s": {n: p["train_img_s"] for n, p in measured.items()},
                          "share of bound": {n: p["train_ratio_to_bound"] for n, p in measured.items()}})
            .round(3))

# %% [markdown]
# ## Summary
#
# - Kornia turns augmentation into an `nn.Module` on a `B×C×H×W` batch; with
#   `data_keys=["input", "mask"]` geometric ops move image and mask together, and masks stay
#   binary with nearest interpolation.
# - Running it in `on_after_batch_transfer` puts augmentation on the GPU for training
#   batches only; the CPU side shrinks to serving uint8 batches.
# - The textbook `AugmentationSequential` is not fast on a GPU: CPU-side parameter sampling,
#   a CPU noise tensor and host synchronisations make the CPU, not the GPU, the limit. The
#   same policy fused (one matrix, one resampling, `torch.where` gates, random numbers drawn
#   on the device) costs a few milliseconds per batch and never stalls the host.
# - To train at the bound the input side must be boring: decode and resize once (a uint8
#   cache), copy uint8 from pinned memory with `non_blocking=True`, and never make the CPU wait for the GPU.

# %% [markdown]
# ## Exercises
#
# 1. Add a policy row (say `RandomPerspective` or a hue shift) to `kornia_sequential`, and the
#    alignment test for it in `tests/test_gpu_augmentation.py`. What does it take to add it to the fused version?
# 2. Count host synchronisations: wrap one call of each implementation in
#    `torch.cuda.set_sync_debug_mode("warn")` on a GPU. Then add `loss.item()` to
#    `training_step` and measure what it costs.
# 3. The whole cache at 384 px is about 0.5 GB: keep it on the GPU instead and index batches
#    there. How close to the bound does that get, and what does it cost in GPU memory for a larger dataset?
# 4. Run the "closing the gap" cell with `cfg.num_workers` set to 1, 2 and 8 for step 0. Where does
#    the PNG-decoding pipeline stop scaling on your machine?
