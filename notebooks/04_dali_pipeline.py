# ---
# jupyter:
#   blog:
#     categories:
#     - dali
#     - gpu
#     - data-loading
#     - pytorch-lightning
#     date: '2026-11-23'
#     description: Numpy files read, resized and augmented by a DALI 2.4 graph on the
#       GPU, an iterator with exact epochs and shards for Lightning, and the legacy
#       ops API next to today's fn API.
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
# # 04 · The whole input pipeline on the GPU with NVIDIA DALI
#
# Notebook 03 moved the augmentation onto the GPU but still needed the CPU to prepare
# resized images (a uint8 cache). NVIDIA DALI goes one step further: reading the files,
# resizing and every augmentation become one *pipeline graph* that DALI runs itself, with
# CPU threads for the reading and CUDA kernels for the pixel work, several batches ahead of
# the training loop. The batches arrive as CUDA tensors, already in the batch contract of
# notebook 02, so Lightning trains on them unchanged. This is part V of the original series,
# rewritten for DALI 2.4's functional API.
#
# ## What you'll learn
#
# - how a DALI pipeline is defined (`@pipeline_def`, `fn.*` operators) and built into a graph,
#   and its three stages: CPU → mixed → GPU
# - reading the `.npy` files of notebook 01 with `fn.readers.numpy`, images and masks in the
#   same order, and the course's augmentation policy as DALI operators on the GPU
# - flips and the affine as one matrix per sample (`fn.transforms.*`) and one `fn.warp_affine`
# - an iterator (`DALIGenericIterator`) that Lightning can use: epoch length, the last batch,
#   sharding by rank for multi-GPU training
# - training the notebook-02 model on DALI batches and comparing it with Albumentations
# - a sidebar: the legacy `ops`/`define_graph` style of the original posts, next to today's
#
# Runs everywhere DALI installs (Linux x86_64/aarch64): without a GPU the same pipelines run
# CPU-only (`device_id=None`), which is what CI does; on a GPU every pixel operation runs
# there. DALI has no macOS or Windows wheels: there the notebook explains what it would do
# and still runs to the end. The reference GPU numbers come from notebook 05 on an H100.

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
# ## Is DALI here, and where will it run?
#
# `dali_available()` only tries the import. Where it fails (macOS, Windows, or a Linux
# environment without the wheel) every DALI cell below prints a short note instead of
# running, and the text explains what it would have shown. `resolve_device("auto")` picks
# the GPU when PyTorch sees one, otherwise DALI's CPU-only mode.

# %%
from nailseg_common import dali_pipelines as dp

HAVE_DALI = dp.dali_available()
print(dp.dali_status())
device = dp.resolve_device("auto")
if HAVE_DALI:
    print(f"DALI operators will run on the {device.upper()}"
          + ("" if device == "gpu" else " (CPU-only mode: device_id=None, every operator on CPU threads)"))

# %% [markdown]
# ## A first pipeline: how the graph is built
#
# A DALI pipeline is a Python function decorated with `@pipeline_def`. Calling `fn.*`
# operators inside it does not process any data: each call adds a node to a graph and
# returns a `DataNode`, a symbolic handle to that node's output. Calling the decorated
# function with `batch_size`, `num_threads` and `device_id` returns a `Pipeline`; `build()`
# turns the graph into a plan, and each `run()` produces one *batch*.
#
# Every operator has a device, and data only flows forward, CPU → GPU:
#
# | stage | runs | example |
# | --- | --- | --- |
# | `cpu` | per sample, on the pipeline's CPU threads | `fn.readers.numpy`, random numbers, `fn.transforms.*` |
# | `mixed` | CPU input, GPU output | `fn.decoders.image(device="mixed")` (nvJPEG); `.gpu()` is the plain copy |
# | `gpu` | on the whole batch, in CUDA kernels | `fn.resize`, `fn.warp_affine`, `fn.noise.gaussian`, ... |
#
# The original posts read `.npy` files, and so do we: there is nothing to decode, so the
# mixed stage is just the copy `.gpu()`, one host-to-device transfer of the original uint8
# arrays. An operator runs where its input lives: after `.gpu()`, `fn.resize` picks its GPU
# implementation by itself. Here is a tiny pipeline over four training images:

# %%
import numpy as np

from nailseg_common.preparation import read_split

train_split = read_split(data, "train")
files = train_split["npy_image"].tolist()[:4]
print("npy image:", np.load(files[0], mmap_mode="r").shape, np.load(files[0], mmap_mode="r").dtype)

if HAVE_DALI:
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def
    def first_pipeline(image_files, on_gpu):
        image = fn.readers.numpy(files=image_files, name="images")  # CPU: reads one file per sample
        image = fn.reshape(image, layout="HWC")  # .npy carries no layout; resize needs one
        if on_gpu:
            image = image.gpu()  # mixed stage: the copy to the GPU
        small = fn.resize(image, size=[cfg.image_size, cfg.image_size],
                          interp_type=types.INTERP_LINEAR, antialias=False)
        return image, small

    pipe = first_pipeline(files, device == "gpu", batch_size=4, num_threads=2,
                          device_id=0 if device == "gpu" else None)
    pipe.build()
    original, small = pipe.run()
    for name, batch in (("original", original), ("resized", small)):
        print(f"{name:9s} {type(batch).__name__:14s} layout {batch.layout()}  "
              f"shapes {[tuple(batch[i].shape()) for i in range(len(batch))]}")
else:
    print("No DALI: the pipeline would return a TensorListCPU of the original sizes and a "
          "TensorListGPU (TensorListCPU without a GPU) of resized images.")

# %% [markdown]
# A batch is a `TensorList`: samples may have different shapes (the originals do), and
# `TensorListGPU` means the data already lives in GPU memory. Nothing was copied back to
# the host to print the shapes: they are metadata.
#
# ## The course pipeline
#
# `nailseg_common.dali_pipelines.nail_pipeline` is the real graph. Its parts:
#
# 1. **Two numpy readers**, one for images and one for masks, with identical file lists,
#    shard and shuffle settings, so sample *i* of both is always the same pair (the tests
#    check the pairing through shuffles, shards and epochs). Training reshuffles the whole
#    set every epoch (`shuffle_after_epoch`) with a seed that all ranks share.
# 2. **`.gpu()`**, then **`fn.resize`** to `image_size` (bilinear for images, nearest for
#    masks, as notebook 02's Albumentations pipeline does).
# 3. **Augmentation** (training only), from the policy table. DALI operators take *per-sample
#    arguments*: a `DataNode` from `fn.random.*` gives each sample of the batch its own value.
#    "with probability p" is therefore not a branch but a parameter that becomes the identity
#    when a per-sample coin says no; every operator runs once on the whole batch.
# 4. **`fn.transpose`** from `HWC` to `CHW`: `image` `B×3×S×S` and `label` `B×1×S×S`, both uint8.

# %%
display(dp.dali_policy_table())

# %% [markdown]
# Flips and the affine are all 2×3 matrices. `fn.transforms.scale/rotation/translation`
# build and multiply them on the CPU (a few numbers per sample), and one `fn.warp_affine`
# per tensor applies the product on the GPU: bilinear for the image, nearest for the mask
# (so it stays binary), the same matrix for both (so they stay aligned), areas moved in
# from outside filled with 0. A flip alone maps pixel centres onto pixel centres, so it
# copies pixels exactly.
#
# Differences from the Albumentations (02) and Kornia (03) builders of the same table:
# the random draws are DALI's own; the affine's scale is one factor for both axes (as
# Kornia's); contrast scales around 0 (`x·c + b·255`, as both others); noise is drawn per
# pixel and channel. The op order is the table's order.

# %% [markdown]
# ## DALI batches: the gallery
#
# `make_loader` builds the pipeline and wraps it in `DALILoader`, the iterator for
# Lightning (next section). One training batch, straight from the GPU if there is one;
# yellow is the mask's outline:

# %%
import matplotlib.pyplot as plt

from nailseg_common import plots

train_images, train_masks = dp.split_files(data, "train")
valid_images, valid_masks = dp.split_files(data, "valid")
if HAVE_DALI:
    train_loader = dp.make_loader(train_images, train_masks, image_size=cfg.image_size,
                                  batch_size=cfg.batch_size, train=True, device=device)
    batch = next(iter(train_loader))
    for key, value in batch.items():
        print(f"{key:6s} {tuple(value.shape)} {value.dtype} on {value.device}, "
              f"values {value.min().item()}..{value.max().item()}")
    plots.plot_batch_gallery(batch, title="one DALI training batch (augmented)")
    plt.show()
else:
    print("No DALI: this cell would show one augmented training batch from the GPU.")

# %% [markdown]
# The same four images resized only, and then three passes of the training graph over them
# (the readers do not shuffle here, so each column shows the same images). The outline must
# follow the nail through every flip, rotation and zoom:

# %%
if HAVE_DALI:
    panels = dp.gallery_panels(train_images[:4], train_masks[:4], cfg.image_size, device=device)
    plots.plot_augmentation_gallery(panels)
    plt.show()
else:
    print("No DALI: this cell would show the same four images resized and augmented three times.")

# %% [markdown]
# ## An iterator for Lightning: epochs, the last batch, shards
#
# `DALIGenericIterator` turns the pipeline's outputs into dictionaries of PyTorch tensors;
# on the GPU they are CUDA tensors shared with DALI through DLPack (no copy), so Lightning's
# move to the device does nothing. `DALILoader` wraps it for the batch contract and settles
# three questions:
#
# - **How long is an epoch?** `reader_name="images"` lets the iterator ask the reader for the
#   number of samples, so `len(loader)` is exact, which Lightning needs for its progress,
#   schedules and `limit_*_batches`.
# - **What about the last, incomplete batch?** The readers pad it with copies of the last
#   sample (`pad_last_batch=True`). Validation uses `LastBatchPolicy.PARTIAL`: the padding is
#   cut off, so every validation image counts exactly once. Training uses `DROP`: every step
#   sees a full batch and, as the set is reshuffled every epoch, a different remainder is left
#   out each time (`FILL` would count some images twice in one epoch).
# - **Early stops.** DALI cannot rewind in the middle of an epoch. When Lightning stops an
#   epoch early (`limit_val_batches`), the validation loader finishes that epoch before the
#   next pass, so validation always sees the same images; training simply continues.

# %%
import math

if HAVE_DALI:
    valid_loader = dp.make_loader(valid_images, valid_masks, image_size=cfg.image_size,
                                  batch_size=cfg.batch_size, train=False, device=device)
    seen = [len(b["image"]) for b in valid_loader]
    print(f"validation: {len(valid_images)} images, batch {cfg.batch_size} -> len {len(valid_loader)} "
          f"(ceil = {math.ceil(len(valid_images) / cfg.batch_size)}), batch sizes {seen}")
    print(f"training:   {len(train_images)} images -> len {len(train_loader)} full batches "
          f"(floor = {len(train_images) // cfg.batch_size}), the remainder is dropped each epoch")
else:
    print("No DALI: validation would have ceil(N / batch) batches, training floor(N / batch).")

# %% [markdown]
# **Sharding.** With several GPUs, each rank runs its own pipeline on its own GPU and reads
# its own *shard*: `shard_id = global_rank`, `num_shards = world_size`, which
# `DALINailDataModule` takes from the trainer. All ranks shuffle with the same seed, so each
# epoch's global order is cut into disjoint pieces. Three shards of the validation set, as
# three ranks would read them:

# %%
if HAVE_DALI:
    def first_values(batch):  # a cheap fingerprint of each image
        return batch["image"].float().mean(dim=(1, 2, 3)).round(decimals=3).tolist()

    reference = [v for b in valid_loader for v in first_values(b)]
    shards = []
    for rank in range(3):
        shard = dp.make_loader(valid_images, valid_masks, image_size=cfg.image_size,
                               batch_size=cfg.batch_size, train=False, device=device,
                               shard_id=rank, num_shards=3)
        shards.append([v for b in shard for v in first_values(b)])
        print(f"rank {rank}: {len(shards[-1])} images in {len(shard)} batch(es)")
    print("together the shards are the validation set, each image once:",
          sorted(v for s in shards for v in s) == sorted(reference))
else:
    print("No DALI: three shards would hold about a third of the validation set each.")

# %% [markdown]
# ## Training with Lightning
#
# `DALINailDataModule(location, profile)` is a `LightningDataModule` whose loaders are
# `DALILoader`s; the model is notebook 02's `LitNailSegmentation`, unchanged (it converts
# uint8 to float and normalises on the device). As in notebook 03, we train with both
# notebook 02's Albumentations pipeline and DALI, with the same seed and profile, and a
# `DataWaitTimer` records how long each step waited for its batch.

# %%
import time

import pandas as pd
import pytorch_lightning as pl

from nailseg_common.datasets import NailDataModule
from nailseg_common.models import LitNailSegmentation
from nailseg_common.training import DataWaitTimer, make_trainer, read_metrics

pipelines = {"Albumentations on CPU workers": lambda: NailDataModule(data, cfg)}
if HAVE_DALI:
    pipelines[f"DALI on {device.upper()}"] = lambda: dp.DALINailDataModule(data, cfg)
runs, timers, metrics = {}, {}, {}
for name, make_datamodule in pipelines.items():
    pl.seed_everything(0, verbose=False)
    model = LitNailSegmentation(cfg.encoder, cfg.lr, cfg.num_epochs)
    timers[name] = DataWaitTimer()
    trainer = make_trainer(cfg, "04_dali" if "DALI" in name else "04_albumentations",
                           callbacks=[timers[name]], enable_progress_bar=False)
    start = time.perf_counter()
    trainer.fit(model, make_datamodule())
    seconds = time.perf_counter() - start
    metrics[name] = read_metrics(trainer)
    last = metrics[name].iloc[-1]
    runs[name] = {"s / epoch": seconds / cfg.num_epochs,
                  "waiting for data": timers[name].summary()["wait_share"],
                  "val_dice": last["val_dice"], "val_iou": last["val_iou"]}
if not HAVE_DALI:
    print("No DALI: only the Albumentations run; DALI's row would follow it.")
comparison = pd.DataFrame(runs).T
comparison.round(3)

# %%
last_run = list(metrics)[-1]
plots.plot_training_curves(metrics[last_run])
plt.show()
plots.plot_data_wait(timers[last_run].frame())
plt.show()

# %% [markdown]
# *waiting for data* is the share of the training loop spent waiting for the next batch.
# With the same epochs, both pipelines reach a similar Dice (same policy, other random
# draws; in the smoke profile a couple of steps say nothing about accuracy). On a CPU-only
# machine DALI and the model share the same few cores, so the epoch times are close. On a
# GPU the DALI pipeline runs on its own CUDA stream, `prefetch_queue_depth` batches ahead of
# the training loop, so the loop only waits when the pipeline is slower than the step; the
# timer's synchronisations make it an explanation, not a benchmark (that is notebook 05).
#
# ## The loader alone
#
# The same harness as notebooks 03 and 05: warm-up, then timed windows of batches taken from
# each loader and moved to the device (a no-op for DALI's CUDA tensors); median images/s.

# %%
import torch

from nailseg_common.benchmark import measure_loader

torch_device = torch.device("cuda" if device == "gpu" else "cpu")
warmup, steps, repeats = max(1, cfg.bench_steps // 5), cfg.bench_steps, cfg.bench_repeats
rates = {}
albumentations = NailDataModule(data, cfg)
albumentations.setup("fit")
rates["Albumentations, CPU workers"] = measure_loader(albumentations.train_dataloader(), torch_device,
                                                      warmup, steps, repeats)["img_s"]
if HAVE_DALI:
    rates[f"DALI, {device.upper()}"] = measure_loader(train_loader, torch_device, warmup, steps,
                                                      repeats)["img_s"]
pd.Series(rates, name="training batches, images / s").round(1).to_frame()

# %% [markdown]
# CPU-only DALI is a correctness mode: it runs the same graph so that CI executes this
# notebook, not to be fast. The numbers that matter come from a GPU: notebook 05 measures
# every pipeline with this harness on an H100 with 16 CPU cores (384 px, batch 32), the
# loader alone and the full training step against the *bound* (the same step on batches
# already on the GPU). The course's targets for DALI are at least 5000 images/s for the
# loader alone and at least 0.97 of the bound for training. The committed results:

# %%
from nailseg_common.benchmark import describe_targets, load_results, results_label, summary_table

reference = load_results()
if reference is None:
    print("No committed GPU results yet: run notebook 05 on a GPU (profile 'gpu') to produce them.")
else:
    print(results_label(reference))
    display(summary_table(reference).round(2))
    print(describe_targets(reference))

# %% [markdown]
# ## Sidebar: the legacy `ops` / `define_graph` style
#
# The original posts (DALI 0.x/1.x) wrote pipelines as classes: operators were objects
# created in `__init__` from `nvidia.dali.ops` and wired together in `define_graph`. DALI 2.4
# still runs that style; the functional `fn` API used above is the same set of operators
# without the boilerplate, and is what the current documentation teaches:

# %%
if HAVE_DALI:
    from nvidia.dali import ops
    from nvidia.dali.pipeline import Pipeline

    class LegacyPipeline(Pipeline):  # the style of the original posts
        def __init__(self, image_files, batch_size, num_threads, device_id):
            super().__init__(batch_size, num_threads, device_id, seed=42)
            self.reader = ops.readers.Numpy(files=image_files)
            self.layout = ops.Reshape(layout="HWC")
            self.resize = ops.Resize(size=[cfg.image_size, cfg.image_size], antialias=False)
            self.flip = ops.Flip(horizontal=1)

        def define_graph(self):
            image = self.layout(self.reader())
            if self.device_id is not None:
                image = image.gpu()
            return self.flip(self.resize(image))

    @pipeline_def
    def modern_pipeline(image_files):  # the same graph with fn
        image = fn.reshape(fn.readers.numpy(files=image_files), layout="HWC")
        if device == "gpu":
            image = image.gpu()
        image = fn.resize(image, size=[cfg.image_size, cfg.image_size], antialias=False)
        return fn.flip(image, horizontal=1)

    device_id = 0 if device == "gpu" else None
    legacy = LegacyPipeline(files, batch_size=4, num_threads=2, device_id=device_id)
    modern = modern_pipeline(files, batch_size=4, num_threads=2, device_id=device_id)
    for pipe in (legacy, modern):
        pipe.build()
    (old,), (new,) = legacy.run(), modern.run()
    same = all(np.array_equal(np.asarray(old.as_cpu()[i]), np.asarray(new.as_cpu()[i]))
               for i in range(len(old)))
    print(f"legacy: {type(old).__name__} {old.as_cpu().as_tensor().shape()}, modern: "
          f"{type(new).__name__}; identical outputs: {same}")
else:
    print("No DALI: the legacy Pipeline subclass and the @pipeline_def function would give "
          "identical batches.")

# %% [markdown]
# Renamed since the posts: `ops.NumpyReader` is now `ops.readers.Numpy` (`fn.readers.numpy`),
# `ops.FileReader` is `ops.readers.File`, `ops.ImageDecoder` is `ops.decoders.Image`; the old
# names still exist as deprecated aliases. In `DALIGenericIterator`, `fill_last_batch` is
# deprecated in favour of `last_batch_policy`, and with `reader_name` the iterator reads the
# epoch size from the reader itself instead of a hand-passed `size`.

# %% [markdown]
# ## Summary
#
# - A DALI pipeline is a graph of operators built once by a `@pipeline_def` function and run
#   batch by batch, several batches ahead of the training loop: CPU operators for reading and
#   per-sample parameters, `.gpu()` (or a `mixed` decoder) to cross over, GPU operators for
#   every pixel.
# - Two numpy readers with identical settings keep images and masks paired; geometric ops
#   share one per-sample matrix (nearest for masks), photometric ops touch the image only.
# - `DALILoader` gives Lightning an exact `len`, validation that sees every image once
#   (`PARTIAL`), full training batches (`DROP`) and shards by rank for multi-GPU training.
# - Batches arrive as CUDA tensors in the batch contract, so the notebook-02 model trains on
#   them unchanged; without a GPU the same graph runs CPU-only.

# %% [markdown]
# ## Exercises
#
# 1. Replace the two readers by one: save each image and its mask as a single `H×W×4` array in
#    notebook 01's format and split the channels in the pipeline (`fn.slice` or indexing
#    `image[:, :, :3]`). What does it save, and what does it cost in preparation?
# 2. Put the augmentation behind DALI conditionals (`@pipeline_def(enable_conditionals=True)`
#    and `if fn.random.coin_flip(probability=0.2): image = fn.gaussian_blur(...)`). Check with
#    the tests that the pairing and the epoch length are unchanged, and time both versions.
# 3. Store the training set as JPEG and decode it with `fn.decoders.image(device="mixed")`:
#    compare the loader's images/s and the disk space with the `.npy` files.
# 4. Train with `DALINailDataModule` on two GPUs (`make_trainer(cfg, "04_ddp", devices=2,
#    strategy="ddp")` in a script, `strategy="ddp_notebook"` inside Jupyter) and check that
#    `len(trainer.train_dataloader)` is half of the single-GPU value and that each rank's
#    shard is different.
# 5. Try `prefetch_queue_depth` 1, 2 and 3 and `num_threads` 1 to 8 with notebook 05's
#    harness: which one moves the DALI loader, and which the training rate?
