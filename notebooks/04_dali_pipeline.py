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
#       GPU, written out in full; an iterator with exact epochs and shards for Lightning;
#       two mistakes of the original series measured; the legacy ops API next to fn.
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
# rewritten for DALI 2.4's functional API, with every line of the pipeline written out here.
#
# ## What you'll learn
#
# - how a DALI pipeline is defined (`@pipeline_def`, `fn.*` operators) and built into a graph,
#   and its three stages: CPU → mixed → GPU
# - reading the `.npy` files of notebook 01 with `fn.readers.numpy`, images and masks in the
#   same order, and the course's augmentation policy as DALI operators
# - flips and the affine as one matrix per sample (`fn.transforms.*`) and one `fn.warp_affine`
# - an iterator (`DALIGenericIterator`) that Lightning can use: epoch length, the last batch,
#   sharding by rank for multi-GPU training
# - two mistakes of the original series, measured: masks resized with linear interpolation,
#   and validation batches padded with duplicates
# - training the notebook-02 model on DALI batches, and comparing speed and accuracy with
#   notebook 02's Albumentations pipeline
# - a sidebar: the legacy `ops`/`define_graph` style of the original posts, next to today's
#
# > **CPU or GPU?** DALI installs on Linux (x86_64, aarch64). With a GPU profile every pixel
# > operation runs on the GPU; with the `cpu` or `smoke` profile (CI) the same graph runs in
# > DALI's CPU-only mode (`device_id=None`). DALI has no macOS or Windows wheels: there the
# > notebook says so, skips the DALI cells and still runs to the end. The reference GPU
# > numbers come from the command-line benchmark on an H100 (see the end).
#
# Every knob below is a parameter (papermill `-p name value`); `None` keeps the profile's
# value, and the cell after it prints what was chosen.

# %% tags=["parameters"]
profile = ""            # smoke, cpu or gpu; empty: $NAILSEG_PROFILE, else chosen from the hardware
data_root = ""          # your own photos (Images/<type>/, Masks/<type>/); empty: the synthetic set
num_images = None       # size of the synthetic set (ignored with data_root)
image_size = None       # side of the square images the model sees
batch_size = None
max_steps = None        # optimizer steps of the DALI training run
encoder = None          # smp encoder name, e.g. resnet18, resnet34
lr = None               # peak learning rate of AdamW's cosine schedule
precision = None        # Lightning precision, e.g. 32-true, bf16-mixed
accelerator = None      # cpu or gpu: also where DALI runs its pixel operators
num_workers = None      # DataLoader workers of the Albumentations speed comparison
compare_epochs = None   # epochs of the Albumentations speed comparison
max_train_batches = None  # cap per epoch (0: the whole set)
max_valid_batches = None

# %%
from nailseg_common.environment import environment_report
from nailseg_common.preparation import ensure_prepared, fit_batch_to_split
from nailseg_common.profiles import select_profile

cfg = select_profile(profile, num_images=num_images, image_size=image_size, batch_size=batch_size,
                     max_steps=max_steps, encoder=encoder, lr=lr, precision=precision,
                     accelerator=accelerator, num_workers=num_workers,
                     compare_epochs=compare_epochs, max_train_batches=max_train_batches,
                     max_valid_batches=max_valid_batches)
print(environment_report(cfg))
data = ensure_prepared(cfg, data_root)
cfg = fit_batch_to_split(cfg, data)
print("data:", data.raw)

# %% [markdown]
# ## Is DALI here, and where will it run?
#
# The import of DALI is guarded: where it fails (macOS, Windows, or a Linux environment
# without the wheel) the module still imports, `dali_available()` is False and
# `dali_status()` says why. Where DALI runs follows the profile, the one place that decides
# the device: a profile that trains on CUDA runs DALI's pixel operators on the GPU, any other
# runs the whole graph on CPU threads. (Cells that start with `#| export` are written into
# `nailseg_common.dali_pipelines` by `make export`, which the benchmark imports.)

# %%
#| export dali_pipelines
import os
import platform

from nailseg_common.profiles import Profile

try:
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    from nvidia.dali.plugin.pytorch import DALIGenericIterator
except ImportError as error:  # macOS, Windows, or a Linux environment without the wheel
    _IMPORT_ERROR: ImportError | None = error
else:
    _IMPORT_ERROR = None


def dali_available() -> bool:
    """True when ``nvidia.dali`` imports (Linux x86_64/aarch64 with the wheel installed)."""
    return _IMPORT_ERROR is None


def dali_status() -> str:
    """One line: the DALI version in use, or why it is missing and what to do."""
    if _IMPORT_ERROR is None:
        import nvidia.dali

        return f"NVIDIA DALI {nvidia.dali.__version__} is available."
    system = platform.system()
    where = (f"DALI has no wheels for {system}" if system in ("Darwin", "Windows")
             else "DALI is not installed in this environment")
    return (f"{where} ({_IMPORT_ERROR}). DALI ships Linux wheels only: run this notebook on "
            "Linux, WSL2 or Colab, or `pip install nvidia-dali-cuda120` on Linux.")


def require_dali() -> None:
    """Raise a RuntimeError with :func:`dali_status` when DALI is missing."""
    if _IMPORT_ERROR is not None:
        raise RuntimeError(dali_status()) from _IMPORT_ERROR


def dali_device(profile: Profile) -> str:
    """DALI's device for ``profile``: ``"gpu"`` when it trains on CUDA, else ``"cpu"``
    (CPU-only mode: ``device_id=None``, every operator on CPU threads)."""
    return "gpu" if profile.device.type == "cuda" else "cpu"


def default_num_threads(device: str) -> int:
    """CPU threads for DALI: all cores when everything runs on the CPU, a few for the reader."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, cores) if device == "cpu" else max(1, min(4, cores))


# %%
HAVE_DALI = dali_available()
print(dali_status())
device = dali_device(cfg)
device_id = 0 if device == "gpu" else None
if HAVE_DALI:
    print(f"DALI operators will run on the {device.upper()}"
          + ("" if device == "gpu" else " (CPU-only mode: device_id=None)"))

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
# arrays. An `fn` operator runs where its input lives: after `.gpu()`, `fn.resize` picks its
# GPU implementation by itself. Here is a tiny pipeline over four training images:

# %%
import numpy as np

from nailseg_common.preparation import read_split

train_split = read_split(data, "train")
files = train_split["npy_image"].tolist()[:4]
print("npy image:", np.load(files[0], mmap_mode="r").shape, np.load(files[0], mmap_mode="r").dtype)

if HAVE_DALI:
    @pipeline_def
    def first_pipeline(image_files, on_gpu):
        image = fn.readers.numpy(files=image_files)  # CPU: reads one file per sample
        image = fn.reshape(image, layout="HWC")  # .npy carries no layout; resize needs one
        if on_gpu:
            image = image.gpu()  # mixed stage: the copy to the GPU
        small = fn.resize(image, size=[cfg.image_size, cfg.image_size],
                          interp_type=types.INTERP_LINEAR, antialias=False)
        return image, small

    pipe = first_pipeline(files, device == "gpu", batch_size=4, num_threads=2, device_id=device_id)
    pipe.build()
    original, small = pipe.run()
    for name, batch in (("original", original), ("resized", small)):
        print(f"{name:9s} {type(batch).__name__:14s} layout {batch.layout()}  "
              f"shapes {[tuple(batch[i].shape()) for i in range(len(batch))]}")
else:
    print("No DALI: the pipeline would return the original images and the resized ones.")

# %% [markdown]
# A batch is a `TensorList`: samples may have different shapes (the originals do), and
# `TensorListGPU` means the data lives in GPU memory (`TensorListCPU` in CPU-only mode).
# Nothing was copied back to the host to print the shapes: they are metadata.
#
# ### A mistake of the original series: masks resized with linear interpolation
#
# The original posts stored each mask as floats (`mask / 255`), cast it to float on the GPU
# and resized it with `fn.resize(mask, size=[384, 384])`, whose default interpolation is
# linear. Along every edge a linear resize blends nail and background, so the "mask" the
# loss saw had values between 0 and 1. The fix is nearest-neighbour interpolation
# (`types.INTERP_NN`), which only ever copies a value. Let's resize real masks both ways and
# count the pixels that are no longer 0 or 1; the course stores masks as uint8 in {0, 1}, so
# we also try that:

# %%
import pandas as pd
from IPython.display import display

if HAVE_DALI:
    @pipeline_def
    def mask_resize(mask_files, as_float, interp_type):
        mask = fn.reshape(fn.readers.numpy(files=mask_files), layout="HWC")
        if device == "gpu":
            mask = mask.gpu()
        if as_float:  # as the original posts: masks as floats in [0, 1]
            mask = fn.cast(mask, dtype=types.FLOAT)
        return fn.resize(mask, size=[cfg.image_size, cfg.image_size], interp_type=interp_type)

    def resized_masks(mask_files, as_float, interp_type):
        pipe = mask_resize(mask_files, as_float, interp_type, batch_size=len(mask_files),
                           num_threads=2, device_id=device_id)
        pipe.build()
        (masks,) = pipe.run()
        return masks.as_cpu().as_array()

    mask_files = train_split["npy_mask"].tolist()[:32]
    counts = []
    for as_float in (True, False):
        nearest = resized_masks(mask_files, as_float, types.INTERP_NN)
        linear = resized_masks(mask_files, as_float, types.INTERP_LINEAR)
        for name, masks in (("INTERP_LINEAR", linear), ("INTERP_NN", nearest)):
            other = int(((masks != 0) & (masks != 1)).sum())
            counts.append({"mask dtype": "float32" if as_float else "uint8", "interpolation": name,
                           "pixels not 0/1": other, "share": f"{other / masks.size:.2%}",
                           "pixels unlike nearest": int((masks != nearest).sum())})
    print(f"{len(mask_files)} training masks resized to {cfg.image_size} px")
    display(pd.DataFrame(counts))
else:
    print("No DALI: a linear resize would leave float masks with values between 0 and 1.")

# %% [markdown]
# On float masks the linear resize leaves a rim of in-between values around every nail, and
# nearest neighbour leaves none. On uint8 masks DALI rounds the interpolated value back to
# 0 or 1, so the first count hides the problem: the last column shows that the rounded
# interpolation still moves edge pixels compared with a copy of the mask. The course resizes
# masks with `INTERP_NN` (as notebook 02's Albumentations pipeline does with `INTER_NEAREST`)
# and warps them with nearest neighbour too, so a label is always a label.
#
# ## The course pipeline
#
# The real graph has four parts:
#
# 1. **Two numpy readers**, one for images and one for masks, with identical file lists,
#    shard and shuffle settings, so sample *i* of both is always the same pair (the tests
#    check the pairing through shuffles, shards and epochs). Training reshuffles the whole
#    set every epoch (`shuffle_after_epoch`) with a seed that all ranks share.
# 2. **`.gpu()`** (on a GPU), then **`fn.resize`** to `image_size`: bilinear for images,
#    nearest for masks.
# 3. **Augmentation** (training only), from the policy table. DALI operators take *per-sample
#    arguments*: a `DataNode` from `fn.random.*` gives each sample of the batch its own value.
#    "with probability p" is therefore not a branch but a parameter that becomes the identity
#    when a per-sample coin says no; every operator runs once on the whole batch.
# 4. **`fn.transpose`** from `HWC` to `CHW`: `image` `B×3×S×S` and `label` `B×1×S×S`, both uint8.
#
# First the names the graph and the iterator share, and two helpers for random
# per-sample arguments. Without DALI, `nail_pipeline` becomes a stand-in that explains why it
# cannot run.

# %%
#| export dali_pipelines
from collections.abc import Mapping, Sequence
from typing import Self

from nailseg_common.policy import POLICY, PolicyOp

READER_NAME = "images"  # the reader whose epoch the iterator follows
OUTPUT_MAP = ["image", "label"]
SAMPLE_ID_BYTES = 512  # the file path of each sample, zero-padded to a fixed length
SHUFFLE_SEED = 1234  # the same on every rank: one global permutation per epoch, split in shards


def _pipeline_def(graph):
    """``pipeline_def`` when DALI is importable; else a stand-in that raises :func:`dali_status`."""
    if _IMPORT_ERROR is None:
        return pipeline_def(graph)

    def unavailable(*args, **kwargs):
        require_dali()

    return unavailable


def _coin(policy: Mapping[str, PolicyOp], name: str):
    """A per-sample 0/1 draw that is 1 with the probability of op ``name`` (0 if absent)."""
    op = policy.get(name)
    return fn.random.coin_flip(probability=op.probability if op else 0.0)


def _uniform(bounds, shape=None):
    """A per-sample uniform draw in ``bounds`` (of ``shape`` per sample, if given)."""
    low, high = (float(b) for b in bounds)
    return fn.random.uniform(range=[low, high], shape=shape)


# %% [markdown]
# Flips and the affine are all 2×3 matrices. `fn.transforms.scale/rotation/translation`
# build and multiply them on the CPU (a few numbers per sample), and one `fn.warp_affine`
# per tensor applies the product: bilinear for the image, nearest for the mask (so it stays
# binary), the same matrix for both (so they stay aligned), areas moved in from outside
# filled with 0. A flip alone maps pixel centres onto pixel centres, so it copies pixels
# exactly. When the affine's coin says no, its zoom is 1, its angle 0 and its offset 0.

# %%
#| export dali_pipelines
def _geometry(image_size: int, policy: Mapping[str, PolicyOp]):
    """One 2×3 matrix per sample: the flips, then the affine, of the resized image."""
    size = float(image_size)
    center = [size / 2.0, size / 2.0]
    flip_x = 1.0 - 2.0 * _coin(policy, "horizontal_flip")  # -1 mirrors about the center
    flip_y = 1.0 - 2.0 * _coin(policy, "vertical_flip")
    matrix = fn.transforms.scale(scale=fn.stack(flip_x, flip_y), center=center)
    op = policy.get("affine")
    if op:
        apply, p = _coin(policy, "affine"), op.params
        zoom = 1.0 + (_uniform(p["scale"]) - 1.0) * apply
        matrix = fn.transforms.scale(matrix, scale=fn.stack(zoom, zoom), center=center)
        angle = _uniform((-p["rotate_deg"], p["rotate_deg"])) * apply
        matrix = fn.transforms.rotation(matrix, angle=angle, center=center)
        offset = _uniform((-p["translate"], p["translate"]), shape=[2]) * (size * apply)
        matrix = fn.transforms.translation(matrix, offset=offset)
    return matrix


# %% [markdown]
# The photometric ops touch the image only. Each one's "off" value is an exact identity:
# brightness shift 0 and contrast 1, noise with standard deviation 0, and a blur with
# sigma 0.001, whose 5-tap kernel is `[0, 0, 1, 0, 0]`.

# %%
#| export dali_pipelines
def _photometric(image, policy: Mapping[str, PolicyOp]):
    """Brightness/contrast, noise and blur on the image (never the mask)."""
    op = policy.get("brightness_contrast")
    if op:  # x * contrast + shift * 255, contrast around 0 as Albumentations and Kornia do
        apply, b, c = _coin(policy, op.op), op.params["brightness"], op.params["contrast"]
        image = fn.brightness_contrast(image, brightness_shift=_uniform((-b, b)) * apply,
                                       contrast=1.0 + _uniform((-c, c)) * apply,
                                       contrast_center=0.0)
    op = policy.get("gaussian_noise")
    if op:  # the policy's stddev is in [0, 1] units; on uint8 DALI works in 0..255
        image = fn.noise.gaussian(image, stddev=_uniform(op.params["std"])
                                  * (255.0 * _coin(policy, op.op)))
    op = policy.get("gaussian_blur")
    if op:  # sigma 1e-3 makes the 5-tap kernel exactly [0, 0, 1, 0, 0]: the identity
        apply = _coin(policy, op.op)
        sigma = _uniform(op.params["sigma"]) * apply + 1e-3 * (1 - apply)
        image = fn.gaussian_blur(image, window_size=op.params["kernel"], sigma=sigma)
    return image


# %% [markdown]
# Now the graph itself. Both readers pad the last batch of their shard with copies of the
# last sample (`pad_last_batch=True`), so that the iterator below can cut it back to the real
# samples; validation keeps the file order. With `sample_ids=True` the graph also returns
# which file each sample came from (the reader's `source_info`, padded to a fixed length so
# that a batch of them is one tensor): notebook 07 uses it to check that several GPUs see
# every training image exactly once per epoch.

# %%
#| export dali_pipelines
@_pipeline_def
def nail_pipeline(image_files: Sequence[str], mask_files: Sequence[str], image_size: int,
                  augment: bool, on_gpu: bool, shard_id: int = 0, num_shards: int = 1,
                  policy: Mapping[str, PolicyOp] = POLICY, shuffle: bool | None = None,
                  sample_ids: bool = False):
    """The DALI graph: read image and mask npy, resize (and augment), CHW uint8 out
    (and each image's zero-padded file path with ``sample_ids``).

    Two numpy readers with the same files, shard and shuffle settings read images and
    masks in the same order. ``shuffle=None`` follows ``augment``: training reshuffles the
    whole set every epoch with a seed shared by all ranks (so the shards stay disjoint).
    """
    reader = {"shard_id": shard_id, "num_shards": num_shards, "pad_last_batch": True,
              "prefetch_queue_depth": 2}
    if shuffle is None:
        shuffle = augment
    if shuffle:
        reader.update(shuffle_after_epoch=True, shuffle_after_epoch_seed=SHUFFLE_SEED)
    image = fn.readers.numpy(files=list(image_files), name=READER_NAME, **reader)
    mask = fn.readers.numpy(files=list(mask_files), **reader)
    source = fn.pad(fn.get_property(image, key="source_info"), fill_value=0,
                    shape=[SAMPLE_ID_BYTES])
    image = fn.reshape(image, layout="HWC")  # npy carries no layout; ops need one
    mask = fn.reshape(mask, layout="HWC")
    if on_gpu:  # CPU stage ends here: one host-to-device copy of the original uint8 arrays
        image, mask = image.gpu(), mask.gpu()
    image = fn.resize(image, size=[image_size, image_size], interp_type=types.INTERP_LINEAR,
                      antialias=False)
    mask = fn.resize(mask, size=[image_size, image_size], interp_type=types.INTERP_NN,
                     antialias=False)
    if augment:
        warp = {"matrix": _geometry(image_size, policy), "inverse_map": False, "fill_value": 0}
        image = fn.warp_affine(image, interp_type=types.INTERP_LINEAR, **warp)
        mask = fn.warp_affine(mask, interp_type=types.INTERP_NN, **warp)
        image = _photometric(image, policy)
    outputs = (fn.transpose(image, perm=[2, 0, 1]), fn.transpose(mask, perm=[2, 0, 1]))
    return (*outputs, source) if sample_ids else outputs


# %% [markdown]
# `build_pipeline` checks its inputs, fills in `batch_size`, `num_threads`, `device_id` and
# `seed` (the arguments every `@pipeline_def` function accepts) and builds the graph. On the
# GPU it runs on `device_id` (0 unless a rank says otherwise); on the CPU the pipeline gets
# `device_id=None`.

# %%
#| export dali_pipelines
def build_pipeline(image_files: Sequence[str], mask_files: Sequence[str], *, image_size: int,
                   batch_size: int, augment: bool, device: str = "cpu",
                   device_id: int | None = None, shard_id: int = 0, num_shards: int = 1,
                   num_threads: int | None = None, seed: int = 42, prefetch_queue_depth: int = 2,
                   policy: Mapping[str, PolicyOp] = POLICY, shuffle: bool | None = None,
                   sample_ids: bool = False):
    """A built :func:`nail_pipeline` on ``device`` ("gpu" or "cpu", see :func:`dali_device`).

    ``seed`` drives the augmentations: give every rank its own (``seed + rank``).
    """
    require_dali()
    if device not in ("gpu", "cpu"):
        raise ValueError(f"device must be 'gpu' or 'cpu', not {device!r}")
    if len(image_files) != len(mask_files):
        raise ValueError(f"{len(image_files)} image files but {len(mask_files)} mask files: "
                         "images and masks must pair up one to one.")
    if not image_files:
        raise ValueError("No npy files to read: run preparation.ensure_prepared first.")
    if not 0 <= shard_id < num_shards:
        raise ValueError(f"shard_id {shard_id} is outside 0..{num_shards - 1}")
    pipe = nail_pipeline(
        list(map(str, image_files)), list(map(str, mask_files)), image_size, augment,
        device == "gpu", shard_id, num_shards, policy, shuffle, sample_ids,
        batch_size=batch_size, num_threads=num_threads or default_num_threads(device),
        device_id=(device_id or 0) if device == "gpu" else None, seed=seed,
        prefetch_queue_depth=prefetch_queue_depth)
    pipe.build()
    return pipe


# %% [markdown]
# How each row of the policy table is built here:

# %%
from nailseg_common.policy import policy_table

table = policy_table()
table["DALI"] = table["op"].map({
    "horizontal_flip": "fn.transforms.scale(scale=[-1, 1]), part of the warp matrix",
    "vertical_flip": "fn.transforms.scale(scale=[1, -1]), part of the warp matrix",
    "affine": "fn.transforms.scale/rotation/translation, then fn.warp_affine",
    "brightness_contrast": "fn.brightness_contrast (contrast around 0)",
    "gaussian_noise": "fn.noise.gaussian (stddev × 255 on uint8)",
    "gaussian_blur": "fn.gaussian_blur (window 5)",
})
table

# %% [markdown]
# Differences from the Albumentations (02) and Kornia (03) builders of the same table: the
# random draws are DALI's own; the affine's scale is one factor for both axes (as Kornia's);
# contrast scales around 0 (`x·c + b·255`, as both others); noise is drawn per pixel and
# channel. The op order is the table's order.
#
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
# - **What about the last, incomplete batch?** Validation uses `LastBatchPolicy.PARTIAL`: the
#   padding is cut off, so every validation image counts exactly once. Training uses `DROP`:
#   every step sees a full batch and, as the set is reshuffled every epoch, a different
#   remainder is left out each time. DALI's default, `FILL`, keeps the padded copies (the
#   second mistake below).
# - **Early stops.** DALI cannot rewind in the middle of an epoch. When Lightning stops an
#   epoch early (`limit_val_batches`), the validation loader finishes that epoch before the
#   next pass, so validation always sees the same images; training simply continues.

# %%
#| export dali_pipelines
class DALILoader:
    """Batches ``{"image", "label"}`` from a DALI pipeline, with ``len()`` = batches per epoch.

    ``train=True``: ``LastBatchPolicy.DROP`` (full batches only), and an epoch stopped early
    continues on the next pass. ``train=False``: ``PARTIAL`` (every sample of the shard once),
    and an epoch stopped early is finished before the next pass, so every pass starts at the
    first sample. ``last_batch_policy`` overrides the policy (``FILL`` is DALI's default).
    A pipeline built with ``sample_ids=True`` needs ``sample_ids=True`` here too.
    """

    def __init__(self, pipeline, *, train: bool, last_batch_policy=None, sample_ids: bool = False):
        require_dali()
        if last_batch_policy is None:
            last_batch_policy = LastBatchPolicy.DROP if train else LastBatchPolicy.PARTIAL
        output_map = OUTPUT_MAP + ["sample_id"] if sample_ids else OUTPUT_MAP
        self._iterator = DALIGenericIterator([pipeline], output_map, reader_name=READER_NAME,
                                             last_batch_policy=last_batch_policy, auto_reset=True)
        self._finish_partial_epochs = not train
        self._served = 0  # batches handed out in the current epoch
        self.batch_size = pipeline.max_batch_size

    def __len__(self) -> int:
        return len(self._iterator)

    def __iter__(self) -> Self:
        if self._served and (self._finish_partial_epochs or self._served >= len(self)):
            try:  # DALI cannot reset mid-epoch: run the epoch to its end instead
                while True:
                    next(self._iterator)
            except StopIteration:
                self._served = 0  # auto_reset has rewound the reader
        return self

    def __next__(self) -> dict:
        try:
            outputs = next(self._iterator)  # one pipeline: a list with one dict
        except StopIteration:
            self._served = 0
            raise
        self._served += 1
        return outputs[0]


# %% [markdown]
# `make_loader` puts the two together for one split; `split_files` lists a split's npy files
# in the order of notebook 01's CSV.

# %%
#| export dali_pipelines
from nailseg_common.paths import DataLocation
from nailseg_common.preparation import read_split


def make_loader(image_files: Sequence[str], mask_files: Sequence[str], *, image_size: int,
                batch_size: int, train: bool, last_batch_policy=None, sample_ids: bool = False,
                **pipeline_options) -> DALILoader:
    """A :class:`DALILoader` for training (augmented, shuffled, DROP) or validation (PARTIAL);
    ``pipeline_options`` go to :func:`build_pipeline`."""
    pipe = build_pipeline(image_files, mask_files, image_size=image_size, batch_size=batch_size,
                          augment=train, sample_ids=sample_ids, **pipeline_options)
    return DALILoader(pipe, train=train, last_batch_policy=last_batch_policy,
                      sample_ids=sample_ids)


def sample_names(sample_id) -> list[str]:
    """The file names (without ``.npy``) of a batch's ``sample_id`` tensor (``B×SAMPLE_ID_BYTES``)."""
    rows = sample_id.cpu().numpy()
    return [os.path.basename(bytes(row).rstrip(b"\0").decode()).removesuffix(".npy") for row in rows]


def split_files(location: DataLocation, split: str) -> tuple[list[str], list[str]]:
    """Absolute image and mask npy paths of ``split`` ("train" or "valid"), in CSV order."""
    frame = read_split(location, split)
    return frame["npy_image"].tolist(), frame["npy_mask"].tolist()


# %% [markdown]
# ## DALI batches: the gallery
#
# One training batch, straight from the GPU if there is one; yellow is the mask's outline:

# %%
import matplotlib.pyplot as plt

from nailseg_common import plots

train_images, train_masks = split_files(data, "train")
valid_images, valid_masks = split_files(data, "valid")
if HAVE_DALI:
    train_loader = make_loader(train_images, train_masks, image_size=cfg.image_size,
                               batch_size=cfg.batch_size, train=True, device=device)
    batch = next(iter(train_loader))
    for key, value in batch.items():
        print(f"{key:6s} {tuple(value.shape)} {value.dtype} on {value.device}, "
              f"values {value.min().item()}..{value.max().item()}")
    plots.plot_batch_gallery(batch, title="one DALI training batch (augmented)")
    plt.show()
else:
    print("No DALI: this cell would show one augmented training batch.")

# %% [markdown]
# For a closer look, the same four images resized only, then three passes of the training
# graph over them (the readers do not shuffle here, so each column shows the same images).
# The outline must follow the nail through every flip, rotation and zoom:

# %%
#| export dali_pipelines
def gallery_panels(image_files: Sequence[str], mask_files: Sequence[str], image_size: int,
                   draws: int = 3, device: str = "cpu", seed: int = 0) -> dict:
    """The images resized, then ``draws`` passes of the training graph over the same images:
    ``{name: (N×S×S×3 float images in [0, 1], N×S×S masks)}`` for the gallery plot."""
    def panel(batch: dict) -> tuple:
        image = batch["image"].permute(0, 2, 3, 1).float().div(255).cpu().numpy()
        return image, batch["label"][:, 0].cpu().numpy()

    options = {"image_size": image_size, "batch_size": len(image_files), "device": device,
               "seed": seed, "shuffle": False}
    plain = DALILoader(build_pipeline(image_files, mask_files, augment=False, **options),
                       train=False)
    panels = {"resized": panel(next(iter(plain)))}
    augmented = DALILoader(build_pipeline(image_files, mask_files, augment=True, **options),
                           train=False)
    for draw in range(1, draws + 1):
        panels[f"augmented #{draw}"] = panel(next(iter(augmented)))
    return panels


# %%
if HAVE_DALI:
    plots.plot_augmentation_gallery(gallery_panels(train_images[:4], train_masks[:4],
                                                   cfg.image_size, device=device))
    plt.show()
else:
    print("No DALI: this cell would show the same four images resized and augmented three times.")

# %% [markdown]
# ## Epoch lengths
#
# Validation has ceil(N / batch) batches, the last one partial; training has floor(N / batch)
# full batches:

# %%
import math

if HAVE_DALI:
    valid_loader = make_loader(valid_images, valid_masks, image_size=cfg.image_size,
                               batch_size=cfg.batch_size, train=False, device=device)
    sizes = [len(b["image"]) for b in valid_loader]
    print(f"validation: {len(valid_images)} images, batch {cfg.batch_size} -> len {len(valid_loader)} "
          f"(ceil = {math.ceil(len(valid_images) / cfg.batch_size)}), batch sizes {sizes}")
    print(f"training:   {len(train_images)} images -> len {len(train_loader)} full batches "
          f"(floor = {len(train_images) // cfg.batch_size}), the remainder is dropped each epoch")
else:
    print("No DALI: validation would have ceil(N / batch) batches, training floor(N / batch).")

# %% [markdown]
# ### A mistake of the original series: the default last-batch policy in validation
#
# The original posts wrapped the pipelines in `DALIGenericIterator` with the default
# `last_batch_policy`, `FILL`, and readers with `pad_last_batch=True`. When the batch size
# does not divide the validation set, `FILL` hands the padded last batch over whole: copies
# of the last image enter the validation metrics, which weigh that image several times.
# Let's read one validation epoch with each policy, with the profile's batch size or, where
# that divides the set, the nearest smaller one that does not, and compare a per-image
# statistic (the share of nail pixels) averaged over what each loader yields:

# %%
import torch

if HAVE_DALI:
    count = len(valid_images)
    eval_batch = next((b for b in range(min(cfg.batch_size, count), 1, -1) if count % b), count + 1)

    def fingerprints(batches):  # one hash per image, to compare sets of images
        return [hash(image.cpu().numpy().tobytes()) for b in batches for image in b["image"]]

    rows = {}
    for policy in (LastBatchPolicy.FILL, LastBatchPolicy.PARTIAL):
        loader = make_loader(valid_images, valid_masks, image_size=cfg.image_size,
                             batch_size=eval_batch, train=False, device=device,
                             last_batch_policy=policy)
        batches = list(loader)  # one epoch
        samples = fingerprints(batches)
        nail_share = torch.cat([b["label"].float().mean(dim=(1, 2, 3)).cpu() for b in batches])
        rows[policy.name] = {"batches": len(loader), "samples yielded": len(samples),
                             "duplicates": len(samples) - len(set(samples)),
                             "mean nail share": nail_share.mean().item()}
    print(f"{count} validation images, batch size {eval_batch}")
    display(pd.DataFrame(rows).T)
else:
    print("No DALI: FILL would yield whole batches, padded with copies of the last image.")

# %% [markdown]
# `PARTIAL` yields each validation image once, so its mean is the mean over the set; `FILL`
# yields the padded copies too, and its mean drifts towards the last image's value. After
# training we measure the same effect on the model's Dice.
#
# **Sharding.** With several GPUs, each rank runs its own pipeline on its own GPU and reads
# its own *shard*: `shard_id = global_rank`, `num_shards = world_size`, which
# `DALINailDataModule` takes from the trainer. All ranks shuffle with the same seed, so each
# epoch's global order is cut into disjoint pieces. Three shards of the validation set, as
# three ranks would read them:

# %%
if HAVE_DALI:
    everything = fingerprints(valid_loader)
    shards = []
    for rank in range(3):
        shard = make_loader(valid_images, valid_masks, image_size=cfg.image_size,
                            batch_size=cfg.batch_size, train=False, device=device,
                            shard_id=rank, num_shards=3)
        shards.append(fingerprints(shard))
        print(f"rank {rank}: {len(shards[-1])} images in {len(shard)} batch(es)")
    print("together the shards are the validation set, each image once:",
          sorted(h for s in shards for h in s) == sorted(everything))
else:
    print("No DALI: three shards would hold about a third of the validation set each.")

# %% [markdown]
# ## The `LightningDataModule`
#
# `DALINailDataModule(location, profile)` gives Lightning a `DALILoader` per split. The
# profile decides the device (`dali_device`); under a multi-device strategy the trainer
# decides the shard and the GPU of each rank, and each rank augments with its own seed.

# %%
#| export dali_pipelines
import pytorch_lightning as pl


class DALINailDataModule(pl.LightningDataModule):
    """Train and validation :class:`DALILoader` s for Lightning, on :func:`dali_device` of
    ``profile``. Each rank reads shard ``global_rank`` of ``world_size`` on its own GPU.
    ``sample_ids=True`` adds each sample's file to the training batches (``sample_id``)."""

    def __init__(self, location: DataLocation, profile: Profile, seed: int = 42,
                 num_threads: int | None = None, sample_ids: bool = False):
        super().__init__()
        require_dali()
        self.location, self.profile, self.seed = location, profile, seed
        self.device = dali_device(profile)
        self.num_threads, self.sample_ids = num_threads, sample_ids
        self._loaders: dict[str, DALILoader] = {}

    def _rank(self) -> tuple[int, int, int | None]:
        """(shard_id, num_shards, CUDA device index) from the trainer, if one is attached."""
        trainer = self.trainer
        if trainer is None:
            return 0, 1, None
        root = trainer.strategy.root_device
        return trainer.global_rank, trainer.world_size, root.index if root.type == "cuda" else None

    def _loader(self, split: str) -> DALILoader:
        if split not in self._loaders:
            shard_id, num_shards, device_id = self._rank()
            images, masks = split_files(self.location, split)
            loader = make_loader(
                images, masks, image_size=self.profile.image_size,
                batch_size=self.profile.batch_size, train=split == "train", device=self.device,
                device_id=device_id, shard_id=shard_id, num_shards=num_shards,
                num_threads=self.num_threads, seed=self.seed + shard_id,
                sample_ids=self.sample_ids and split == "train")
            if len(loader) == 0:
                raise ValueError(
                    f"The {split} split ({len(images)} samples, {num_shards} shard(s)) has fewer "
                    f"samples per shard than batch_size={self.profile.batch_size}: lower the "
                    "batch size or prepare more images.")
            self._loaders[split] = loader
        return self._loaders[split]

    def train_dataloader(self) -> DALILoader:
        return self._loader("train")

    def val_dataloader(self) -> DALILoader:
        return self._loader("valid")

    def teardown(self, stage: str) -> None:
        self._loaders.clear()


# %% [markdown]
# ## Training with Lightning
#
# The model is notebook 02's `LitNailSegmentation`, unchanged (it converts uint8 to float and
# normalises on the device), and so is the Trainer: `make_trainer` logs each epoch's metrics
# and wall time under `runs/<profile>/04_dali/`. This is the notebook's full training run,
# `max_steps` optimizer steps; a `DataWaitTimer` records how long each step waited for its batch.

# %%
import time

import pytorch_lightning as pl

from nailseg_common.models import LitNailSegmentation
from nailseg_common.training import DataWaitTimer, make_trainer, read_metrics

if HAVE_DALI:
    pl.seed_everything(0, verbose=False)
    datamodule = DALINailDataModule(data, cfg)
    model = LitNailSegmentation(encoder=cfg.encoder, lr=cfg.lr, max_steps=cfg.max_steps)
    timer = DataWaitTimer()
    trainer = make_trainer(cfg, "04_dali", callbacks=[timer])
    start = time.perf_counter()
    trainer.fit(model, datamodule=datamodule)
    print(f"trained {trainer.current_epoch} epoch(s), {trainer.global_step} steps "
          f"in {time.perf_counter() - start:.0f} s")
    dali_metrics = read_metrics(trainer)
else:
    print("No DALI: no DALI training run; the comparisons below show what they can.")

# %%
if HAVE_DALI:
    summary = timer.summary()
    print(f"median wait {summary['median_wait_ms']:.1f} ms, median step "
          f"{summary['median_step_ms']:.1f} ms: {100 * summary['wait_share']:.0f}% of the "
          f"training time waited for data ({summary['steps']} steps)")
    plots.plot_data_wait(timer.frame())
    plt.show()

# %% [markdown]
# *Waiting for data* is the share of the training loop spent waiting for the next batch. On
# a GPU the DALI pipeline runs on its own CUDA stream, `prefetch_queue_depth` batches ahead
# of the training loop, so the loop only waits when the pipeline is slower than the step. In
# CPU-only mode DALI's threads and the model share the same cores. The timer synchronises
# the GPU around every step, so it explains; it does not benchmark.
#
# ### The FILL mistake, measured on the model's Dice
#
# The trained model, scored on one validation epoch of each policy: hard Dice (threshold 0.5)
# per image, averaged over what the loader yields, as the LightningModule's `val_dice` does.

# %%
from nailseg_common.metrics import per_image_dice

if HAVE_DALI:
    model.to(cfg.device).eval()
    for policy in (LastBatchPolicy.FILL, LastBatchPolicy.PARTIAL):
        loader = make_loader(valid_images, valid_masks, image_size=cfg.image_size,
                             batch_size=eval_batch, train=False, device=device,
                             last_batch_policy=policy)
        with torch.no_grad():
            dice = torch.cat([per_image_dice(model(b["image"].to(cfg.device)).float().cpu(),
                                             b["label"].cpu()) for b in loader])
        print(f"{policy.name:7s}: {len(dice)} images scored, hard Dice {dice.mean().item():.4f}")

# %% [markdown]
# The only difference between the two is the padded copies of the last image: `PARTIAL`
# scores each validation image once, `FILL` adds the copies to the average. How far it moves
# depends on the batch size and on that one image, so runs with different batch sizes are
# not even wrong in the same way.
#
# ## Speed: DALI against Albumentations
#
# Seconds per epoch settle after the first epoch, so for speed we do not re-train notebook
# 02's pipeline for the whole profile: its `NailDataModule` (Albumentations on `num_workers`
# CPU workers) trains the same model for `compare_epochs` epochs, progress shown. Each run's
# seconds per epoch are the median `epoch_s` of its log (validation included), leaving out
# the first epoch, which starts workers and warms caches, whenever there is more than one.

# %%
from nailseg_common.datasets import NailDataModule
from nailseg_common.training import steady_epoch_seconds

pl.seed_everything(0, verbose=False)
short = make_trainer(cfg, "04_albumentations_speed", max_epochs=cfg.compare_epochs, max_steps=-1,
                     enable_checkpointing=False)
short.fit(LitNailSegmentation(cfg.encoder, cfg.lr, cfg.max_steps), NailDataModule(data, cfg))
speed = {f"Albumentations, {cfg.num_workers} CPU worker(s)": read_metrics(short)}
if HAVE_DALI:
    speed[f"DALI on the {device.upper()}"] = dali_metrics
speed = pd.DataFrame({name: {"epochs": len(m), "s / epoch": steady_epoch_seconds(m)}
                      for name, m in speed.items()}).T
speed["speed-up"] = speed["s / epoch"].iloc[0] / speed["s / epoch"]
speed.round(2)

# %% [markdown]
# On a CPU-only machine DALI and the model share the same few cores, and the numbers say
# little about a GPU. There, only DALI's reading stays on CPU threads while resizing and
# augmenting run on the GPU, whereas the Albumentations workers decode, resize and augment
# every image on the CPU; the measured reference is at the end of this notebook.
#
# ## Accuracy: DALI against notebook 02
#
# Accuracy needs full runs. DALI's run above is one; notebook 02's run in the same profile is
# the other, read from its log if notebook 02 has been run here. Same model, same policy,
# other random draws: the curves should end close together.

# %%
from nailseg_common.plots import plot_training_curves
from nailseg_common.training import latest_run_metrics

curves = {"DALI (this notebook)": dali_metrics} if HAVE_DALI else {}
baseline = latest_run_metrics(cfg, "02_lightning_baseline")
if baseline is None:
    print(f"Notebook 02 has not been run in profile {cfg.name!r}: no Albumentations run to "
          "compare with. Run notebook 02 with the same profile, then this cell again.")
else:
    curves["Albumentations (notebook 02)"] = baseline[0]
    print("notebook 02's run:", baseline[1])
if curves:
    plot_training_curves(curves)
    plt.show()
    display(pd.DataFrame({name: {"epochs": len(m), "last val_dice": m["val_dice"].iloc[-1],
                                 "last val_iou": m["val_iou"].iloc[-1],
                                 "best val_dice": m["val_dice"].max()}
                          for name, m in curves.items()}).T.round(3))

# %% [markdown]
# Compare runs of the same length: notebook 02 may have been run with other overrides, and
# the table shows each run's epochs. In the `smoke` profile a couple of steps say nothing
# about accuracy.
#
# ## The reference: DALI on an H100
#
# CPU-only DALI is a correctness mode: it runs the same graph so that CI executes this
# notebook, not to be fast. The reference numbers come from the command-line benchmark,
# `make bench BENCH_OUT=results/benchmark_h100.json` (that is, `python -m
# nailseg_common.benchmark --out results/benchmark_h100.json`), run on an H100 with the
# `gpu` profile: every pipeline, the loader alone and the full training step, against the
# *bound* (the same step on batches already on the GPU). Notebook 05 explains the method.
# The course's targets for DALI are at least 5000 images/s for the loader alone and at
# least 0.97 of the bound for training. The committed results:

# %%
from nailseg_common.benchmark import describe_targets, load_results, results_label, summary_table

reference = load_results()
if reference is None:
    print("No committed reference yet: run `make bench BENCH_OUT=results/benchmark_h100.json` "
          "on a GPU to produce it.")
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
# without the boilerplate, and is what the current documentation teaches.
#
# One difference bites: an `ops` operator's device is fixed when it is created and defaults
# to `"cpu"`, while an `fn` operator takes the device of its input. An `ops.Resize()` fed
# with data after `.gpu()` is a CPU operator with a GPU input, and DALI refuses to build the
# pipeline ("The input 0 for cpu operator nvidia.dali.ops.Resize is stored on incompatible
# device gpu"). So every `ops` operator after the copy gets `device=` of its input: here
# `dali_device(cfg)`, the same device as everything above.

# %%
if HAVE_DALI:
    from nvidia.dali import ops
    from nvidia.dali.pipeline import Pipeline

    class LegacyPipeline(Pipeline):  # the style of the original posts
        def __init__(self, image_files, pixel_device, batch_size, num_threads, device_id):
            super().__init__(batch_size, num_threads, device_id, seed=42)
            self.pixel_device = pixel_device
            self.reader = ops.readers.Numpy(files=image_files)  # CPU
            self.layout = ops.Reshape(layout="HWC")  # CPU, before the copy
            self.resize = ops.Resize(device=pixel_device, size=[cfg.image_size, cfg.image_size],
                                     antialias=False)
            self.flip = ops.Flip(device=pixel_device, horizontal=1)

        def define_graph(self):
            image = self.layout(self.reader())
            if self.pixel_device == "gpu":
                image = image.gpu()
            return self.flip(self.resize(image))

    @pipeline_def
    def modern_pipeline(image_files):  # the same graph with fn: devices follow the inputs
        image = fn.reshape(fn.readers.numpy(files=image_files), layout="HWC")
        if device == "gpu":
            image = image.gpu()
        image = fn.resize(image, size=[cfg.image_size, cfg.image_size], antialias=False)
        return fn.flip(image, horizontal=1)

    legacy = LegacyPipeline(files, device, batch_size=4, num_threads=2, device_id=device_id)
    modern = modern_pipeline(files, batch_size=4, num_threads=2, device_id=device_id)
    for pipe in (legacy, modern):
        pipe.build()
    (old,), (new,) = legacy.run(), modern.run()
    same = np.array_equal(old.as_cpu().as_array(), new.as_cpu().as_array())
    print(f"legacy: {type(old).__name__} {old.as_cpu().as_array().shape}, modern: "
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
#
# ## Summary
#
# - A DALI pipeline is a graph of operators built once by a `@pipeline_def` function and run
#   batch by batch, several batches ahead of the training loop: CPU operators for reading and
#   per-sample parameters, `.gpu()` (or a `mixed` decoder) to cross over, GPU operators for
#   every pixel. The profile decides whether that is a GPU or DALI's CPU-only mode.
# - Two numpy readers with identical settings keep images and masks paired; geometric ops
#   share one per-sample matrix, photometric ops touch the image only.
# - Masks are resized and warped with nearest neighbour: the original series' linear resize
#   of float masks left non-binary labels along every edge.
# - `DALILoader` gives Lightning an exact `len`, validation that sees every image once
#   (`PARTIAL`; the default `FILL` counted padded copies in the original series' metrics),
#   full training batches (`DROP`) and shards by rank for multi-GPU training.
# - Batches arrive in the batch contract, so the notebook-02 model trains on them unchanged;
#   speed is compared per epoch from the logs, accuracy on full runs.
# - In the legacy `ops` API every operator after `.gpu()` needs `device="gpu"`; `fn` infers it.

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
# 5. Try `prefetch_queue_depth` 1, 2 and 3 and `num_threads` 1 to 8 in `build_pipeline` with
#    notebook 05's harness: which one moves the DALI loader, and which the training rate?
