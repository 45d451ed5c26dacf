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
# Notebook 03 moved the augmentation and the JPEG decoding onto the GPU, but left them to
# Lightning's hooks, one batch at a time, with the CPU turning and resizing each photo.
# NVIDIA DALI goes one step further: reading the photos, decoding them (with nvJPEG, or the
# hardware JPEG decoder that A100, H100 and H200 GPUs carry), resizing and every augmentation
# become one *pipeline graph* that DALI runs itself, with CPU threads for the reading and
# CUDA kernels for the pixel work, several batches ahead of
# the training loop. The batches arrive as CUDA tensors, already in the batch contract of
# notebook 02, so Lightning trains on them unchanged. This is part V of the original series,
# rewritten for DALI 2.4's functional API, with every line of the pipeline written out here;
# the series read `.npy` arrays decoded ahead of time, and this notebook reads the photos.
#
# ## What you'll learn
#
# - how a DALI pipeline is defined (`@pipeline_def`, `fn.*` operators) and built into a graph,
#   and its three stages: CPU → mixed → GPU
# - reading the photos with `fn.readers.file` and decoding them with `fn.decoders.image` (on the
#   GPU: `device="mixed"`), upright as their EXIF orientation says, labels in the same order,
#   and the course's augmentation policy as DALI operators
# - an iterator (`DALIGenericIterator`) and a `LightningDataModule`: epoch length, the last
#   batch, shards by rank
# - two mistakes of the original series, measured: masks resized with linear interpolation,
#   and validation batches padded with duplicates
# - training the notebook-02 model on DALI batches: the course's accuracy target, its ratio
#   to the bound, and notebook 02's logged run beside it
# - a sidebar: the legacy `ops`/`define_graph` style of the original posts, next to today's
#
# > **CPU or GPU?** DALI installs on Linux (x86_64, aarch64). With a GPU profile every pixel
# > operation runs on the GPU; with the `cpu` or `smoke` profile (CI) the same graph runs in
# > DALI's CPU-only mode (`device_id=None`). Without DALI (macOS, Windows) the notebook says
# > so once, shows the code, skips the cells that run it and still runs to the end.

# %%
import nailseg_common  # noqa: F401, I001  (first: it silences notices the libraries below print)
import matplotlib.pyplot as plt
import pytorch_lightning as pl
import torch
from IPython.display import display

from nailseg_common.data.preparation import read_split
from nailseg_common.measure import benchmark, dali_report, plots
from nailseg_common.pipelines.gallery import policy_table
from nailseg_common.setup.dali import dali_available, where_dali_runs
from nailseg_common.training import run_logs
from nailseg_common.training.trainer import TrainingSpeed, make_trainer
from nailseg_common.training.unet import LitNailSegmentation

# %% tags=["parameters"]
profile = ""            # smoke, cpu or gpu; empty: $NAILSEG_PROFILE, else chosen from the hardware
data_root = ""          # your own photos (Images/<type>/, Masks/<type>/); empty: the synthetic set
num_images = None       # size of the synthetic set (ignored with data_root)
image_size = None       # side of the square images the model sees
batch_size = None
max_steps = None        # optimizer steps of the DALI training run
encoder = None          # smp encoder name
lr = None               # peak learning rate of AdamW's cosine schedule
precision = None        # Lightning precision, e.g. 32-true, bf16-mixed
accelerator = None      # cpu or gpu: also where DALI runs its pixel operators
max_train_batches = None  # cap per epoch (0: the whole set)
max_valid_batches = None
val_every_n_epochs = None  # validate (and checkpoint) every n epochs
bench_steps = None      # steps per epoch of the bound measurement (five epochs)

# %%
from nailseg_common.course import start

cfg, data = start(globals())

# %% [markdown]
# ## Is DALI here, and where will it run?
#
# `nailseg_common.setup.environment` imports DALI where it can; where it cannot,
# `where_dali_runs` says why in one line and anything that would run DALI raises that line as
# an error. Where DALI runs
# follows the profile: a profile that trains on CUDA runs DALI's pixel operators on the GPU,
# any other runs the whole graph on CPU threads. (Cells that start with `#| export` are
# written into `nailseg_common.pipelines.dali_pipeline`, which the benchmark and notebook 08 import.)

# %%
#| export pipelines.dali_pipeline: the DALI pipeline that decodes and augments on the GPU, and its DataModule
from nailseg_common.setup.dali import (
    DALIGenericIterator,
    LastBatchPolicy,
    default_num_threads,
    fn,
    pipeline_def,
    require_dali,
    types,
)
from nailseg_common.setup.profiles import Profile


def dali_device(profile: Profile) -> str:
    """DALI's device: ``"gpu"`` when ``profile`` trains on CUDA, else ``"cpu"`` (CPU-only)."""
    return "gpu" if profile.device.type == "cuda" else "cpu"


# %%
HAVE_DALI = dali_available()
device = dali_device(cfg)
device_id = 0 if device == "gpu" else None
print(where_dali_runs(device))  # or why DALI is missing, and what is skipped then

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
# | `cpu` | per sample, on the pipeline's CPU threads | `fn.readers.file`, random numbers, `fn.transforms.*` |
# | `mixed` | CPU input, GPU output | `fn.decoders.image(device="mixed")` (nvJPEG, the hardware decoder); `.gpu()` is the plain copy |
# | `gpu` | on the whole batch, in CUDA kernels | `fn.resize`, `fn.warp_affine`, `fn.noise.gaussian`, ... |
#
# `fn.readers.file` reads each file's bytes, and `fn.decoders.image` turns them into `H×W×C`
# pixels: with `device="mixed"` it parses the header on the CPU and decodes on the GPU, with
# the hardware JPEG decoder where the GPU has one (`hw_decoder_load`, the share of each batch
# sent to it) and nvJPEG's CUDA decoder for the rest; PNGs are decoded on CPU threads and
# copied. It turns every photo upright as its EXIF orientation says (`adjust_orientation`, on
# by default). An `fn` operator runs where its input lives: after a mixed decoder, `fn.resize`
# picks its GPU implementation by itself. Here is a tiny pipeline over four training labels
# (preparation's 0/255 PNGs), which resizes them with the interpolation we ask for:

# %%
@pipeline_def
def first_pipeline(files, interp_type, as_float=False):
    data, _ = fn.readers.file(files=files)  # CPU: the bytes of one file per sample
    image = fn.decoders.image(data, device="mixed" if device == "gpu" else "cpu",
                              output_type=types.GRAY)  # mixed: the decoded pixels land on the GPU
    if as_float:  # as the original posts: masks as floats in [0, 1]
        image = fn.cast(image, dtype=types.FLOAT) / 255.0
    return image, fn.resize(image, size=[cfg.image_size] * 2, interp_type=interp_type, antialias=False)


def run_once(files, interp_type, as_float=False):
    pipe = first_pipeline(files, interp_type, as_float, batch_size=len(files), num_threads=2,
                          device_id=device_id)
    pipe.build()
    return pipe.run()


mask_files = read_split(data, "train")["label"].tolist()[:32]
if HAVE_DALI:
    original, small = run_once(mask_files[:4], types.INTERP_NN)
    for name, batch in (("original", original), ("resized", small)):
        print(f"{name:9s} {type(batch).__name__} {batch.layout()} {[batch[i].shape() for i in range(len(batch))]}")

# %% [markdown]
# A batch is a `TensorList`: samples may have different shapes (the originals do), and
# `TensorListGPU` means the data lives in GPU memory (`TensorListCPU` in CPU-only mode).
# Nothing was copied back to the host to print the shapes: they are metadata.
#
# ### A mistake of the original series: masks resized with linear interpolation
#
# The original posts stored each mask as floats (`mask / 255`), cast it to float on the GPU
# and resized it with `fn.resize`, whose default interpolation is linear. Along every edge a
# linear resize blends nail and background, so the "mask" the loss saw had values between 0
# and 1. The fix is nearest-neighbour interpolation (`types.INTERP_NN`), which only ever
# copies a value. The same pipeline, on float masks as the posts had them and on the
# course's uint8 labels (0 and 255 as stored); `dali_report.interpolation_table` (plumbing
# from `nailseg_common.measure.dali_report`) counts the pixels of each resize that are
# neither label, and those unlike the nearest-neighbour resize:

# %%
if HAVE_DALI:
    def resized(name, as_float):  # the masks through the first pipeline with types.<name>, as one array
        return run_once(mask_files, getattr(types, name), as_float)[1].as_cpu().as_array()

    print(f"{len(mask_files)} training masks resized to {cfg.image_size} px")
    display(dali_report.interpolation_table(resized))

# %% [markdown]
# On float masks and on 0/255 labels alike, the linear resize leaves a rim of in-between
# values around every nail, and nearest neighbour leaves none. The course resizes and warps
# labels with nearest neighbour, so a label is always a label.
#
# ## The course pipeline
#
# The real graph has four parts:
#
# 1. **Two file readers**, one for photos and one for labels, with identical file lists,
#    shard and shuffle settings, so sample *i* of both is always the same pair (the tests
#    check the pairing through shuffles, shards and epochs). Training reshuffles the whole
#    set every epoch (`shuffle_after_epoch`) with a seed that all ranks share.
# 2. **`fn.decoders.image`** (mixed on a GPU): photos as RGB, upright; labels as gray, 0/255
#    made 0/1. Then **`fn.resize`** to `image_size`: bilinear for photos, nearest for labels.
# 3. **Augmentation** (training only), from the policy table. DALI operators take *per-sample
#    arguments*: a `DataNode` from `fn.random.*` gives each sample of the batch its own value.
#    "with probability p" is therefore not a branch but a parameter that becomes the identity
#    when a per-sample coin says no; every operator runs once on the whole batch.
# 4. **`fn.transpose`** from `HWC` to `CHW`: `image` `B×3×S×S` and `label` `B×1×S×S`, both uint8.
#
# First the names the graph and the iterator share, and two helpers for random per-sample
# arguments.

# %%
#| export pipelines.dali_pipeline
import os
from collections.abc import Mapping, Sequence
from typing import Self

from nailseg_common.pipelines.policy import POLICY, PolicyOp

READER_NAME = "images"  # the reader whose epoch the iterator follows
OUTPUT_MAP = ["image", "label"]
SAMPLE_ID_BYTES = 512  # the file path of each sample, zero-padded to a fixed length
SHUFFLE_SEED = 1234  # the same on every rank: one global permutation per epoch, split in shards


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
# filled with 0. When the affine's coin says no, its zoom is 1, its angle 0 and its offset 0.

# %%
#| export pipelines.dali_pipeline
def _geometry(image_size: int, policy: Mapping[str, PolicyOp]):
    """One 2×3 matrix per sample: the flips, then the affine, of the resized image."""
    center = [image_size / 2.0] * 2
    flip_x = 1.0 - 2.0 * _coin(policy, "horizontal_flip")  # -1 mirrors about the center
    flip_y = 1.0 - 2.0 * _coin(policy, "vertical_flip")
    matrix = fn.transforms.scale(scale=fn.stack(flip_x, flip_y), center=center)
    if op := policy.get("affine"):
        apply, p = _coin(policy, "affine"), op.params
        zoom = 1.0 + (_uniform(p["scale"]) - 1.0) * apply
        matrix = fn.transforms.scale(matrix, scale=fn.stack(zoom, zoom), center=center)
        angle = _uniform((-p["rotate_deg"], p["rotate_deg"])) * apply
        matrix = fn.transforms.rotation(matrix, angle=angle, center=center)
        offset = _uniform((-p["translate"], p["translate"]), shape=[2]) * (float(image_size) * apply)
        matrix = fn.transforms.translation(matrix, offset=offset)
    return matrix


# %% [markdown]
# The photometric ops touch the image only. Each one's "off" value is an exact identity:
# brightness shift 0 and contrast 1, noise with standard deviation 0, and a blur with
# sigma 0.001, whose 5-tap kernel is `[0, 0, 1, 0, 0]`.

# %%
#| export pipelines.dali_pipeline
def _photometric(image, policy: Mapping[str, PolicyOp]):
    """Brightness/contrast, noise and blur on the image (never the mask)."""
    if op := policy.get("brightness_contrast"):  # x·c + b·255: around 0, as in 02 and 03
        apply, b, c = _coin(policy, op.op), op.params["brightness"], op.params["contrast"]
        image = fn.brightness_contrast(image, brightness_shift=_uniform((-b, b)) * apply,
                                       contrast=1.0 + _uniform((-c, c)) * apply, contrast_center=0.0)
    if op := policy.get("gaussian_noise"):  # std in [0, 1] units; uint8 is 0..255
        image = fn.noise.gaussian(image, stddev=_uniform(op.params["std"]) * 255.0 * _coin(policy, op.op))
    if op := policy.get("gaussian_blur"):  # sigma 1e-3 when off: the identity
        apply = _coin(policy, op.op)
        sigma = _uniform(op.params["sigma"]) * apply + 1e-3 * (1 - apply)
        image = fn.gaussian_blur(image, window_size=op.params["kernel"], sigma=sigma)
    return image


# %% [markdown]
# Now the graph itself. Both readers pad the last batch of their shard with copies of the
# last sample (`pad_last_batch=True`), so that the iterator below can cut it back to the real
# samples; validation keeps the file order. With `sample_ids=True` the graph also returns
# which file each sample came from (the reader's `source_info`, padded to a fixed length so
# that a batch of them is one tensor): notebook 08 uses it to check that two GPUs see every
# training image exactly once per epoch.

# %%
#| export pipelines.dali_pipeline
@pipeline_def
def nail_pipeline(image_files: Sequence[str], mask_files: Sequence[str], image_size: int,
                  augment: bool, on_gpu: bool, shard_id: int = 0, num_shards: int = 1,
                  policy: Mapping[str, PolicyOp] = POLICY, shuffle: bool | None = None,
                  sample_ids: bool = False, hw_decoder_load: float | None = None):
    """The DALI graph: read and decode photo and label, resize (and augment), CHW uint8 out.
    ``hw_decoder_load``: the share of JPEGs for the hardware decoder (``None``: DALI's default)."""
    reader = {"shard_id": shard_id, "num_shards": num_shards, "pad_last_batch": True,
              "prefetch_queue_depth": 2}
    if augment if shuffle is None else shuffle:
        reader.update(shuffle_after_epoch=True, shuffle_after_epoch_seed=SHUFFLE_SEED)
    image, _ = fn.readers.file(files=list(image_files), name=READER_NAME, **reader)
    mask, _ = fn.readers.file(files=list(mask_files), **reader)
    source = fn.pad(fn.get_property(image, key="source_info"), fill_value=0, shape=[SAMPLE_ID_BYTES])
    decoder = "mixed" if on_gpu else "cpu"  # mixed: the CPU stage ends here, pixels land on the GPU
    hardware = {} if hw_decoder_load is None or not on_gpu else {"hw_decoder_load": hw_decoder_load}
    image = fn.decoders.image(image, device=decoder, output_type=types.RGB, **hardware)  # upright (EXIF)
    mask = fn.decoders.image(mask, device=decoder, output_type=types.GRAY)
    mask = fn.cast(mask > 127, dtype=types.UINT8)  # preparation's 0/255 labels as 0/1
    image = fn.resize(image, size=[image_size] * 2, interp_type=types.INTERP_LINEAR, antialias=False)
    mask = fn.resize(mask, size=[image_size] * 2, interp_type=types.INTERP_NN, antialias=False)
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
#| export pipelines.dali_pipeline
def build_pipeline(image_files: Sequence[str], mask_files: Sequence[str], *, image_size: int,
                   batch_size: int, augment: bool, device: str = "cpu",
                   device_id: int | None = None, shard_id: int = 0, num_shards: int = 1,
                   num_threads: int | None = None, seed: int = 42, prefetch_queue_depth: int = 2,
                   policy: Mapping[str, PolicyOp] = POLICY, shuffle: bool | None = None,
                   sample_ids: bool = False, hw_decoder_load: float | None = None):
    """A built :func:`nail_pipeline` on ``device``; ``seed`` (one per rank) drives augmentation."""
    require_dali()
    if device not in ("gpu", "cpu"):
        raise ValueError(f"device must be 'gpu' or 'cpu', not {device!r}")
    if len(image_files) != len(mask_files):
        raise ValueError(f"{len(image_files)} images and {len(mask_files)} masks do not pair up")
    pipe = nail_pipeline(
        list(map(str, image_files)), list(map(str, mask_files)), image_size, augment,
        device == "gpu", shard_id, num_shards, policy, shuffle, sample_ids, hw_decoder_load,
        batch_size=batch_size, num_threads=num_threads or default_num_threads(device),
        device_id=(device_id or 0) if device == "gpu" else None, seed=seed,
        prefetch_queue_depth=prefetch_queue_depth)
    pipe.build()
    return pipe


# %% [markdown]
# How each row of the policy table is built here (`policy_table("DALI")` adds the column,
# from `BUILT_WITH` in `nailseg_common.pipelines.gallery`):

# %%
policy_table("DALI")

# %% [markdown]
# The three geometric rows are one matrix and one `fn.warp_affine` per tensor. Differences
# from the Albumentations (02) and Kornia (03) builders of the same table: the random draws
# are DALI's own; the affine's scale is one factor for both axes (as Kornia's); contrast
# scales around 0 (`x·c + b·255`, as both others); noise is drawn per pixel and channel.
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
#| export pipelines.dali_pipeline
class DALILoader:
    """``len()`` batches ``{"image", "label"}`` per epoch: training DROPs, validation is PARTIAL."""

    def __init__(self, pipeline, *, train: bool, last_batch_policy=None, sample_ids: bool = False):
        require_dali()
        if last_batch_policy is None:
            last_batch_policy = LastBatchPolicy.DROP if train else LastBatchPolicy.PARTIAL
        output_map = OUTPUT_MAP + ["sample_id"] if sample_ids else OUTPUT_MAP
        self._iterator = DALIGenericIterator([pipeline], output_map, reader_name=READER_NAME,
                                             last_batch_policy=last_batch_policy, auto_reset=True)
        self._finish_partial_epochs, self._served = not train, 0  # _served: batches this epoch
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
# `make_loader` puts the two together for one split; `split_files` lists a split's photos and
# labels in the order of notebook 01's CSV, and `sample_names` decodes the `sample_id` output.

# %%
#| export pipelines.dali_pipeline
from nailseg_common.data.images import refuse_deep_photos
from nailseg_common.data.preparation import read_split
from nailseg_common.setup.paths import DataLocation


def make_loader(image_files: Sequence[str], mask_files: Sequence[str], *, image_size: int,
                batch_size: int, train: bool, last_batch_policy=None, sample_ids: bool = False,
                **pipeline_options) -> DALILoader:
    """A :class:`DALILoader` for training or validation; options go to :func:`build_pipeline`."""
    pipe = build_pipeline(image_files, mask_files, image_size=image_size, batch_size=batch_size,
                          augment=train, sample_ids=sample_ids, **pipeline_options)
    return DALILoader(pipe, train=train, last_batch_policy=last_batch_policy, sample_ids=sample_ids)


def sample_names(sample_id) -> list[str]:
    """The photos' file names (without extension) of a batch's ``sample_id`` tensor (``B×SAMPLE_ID_BYTES``)."""
    rows = sample_id.cpu().numpy()
    return [os.path.splitext(os.path.basename(bytes(row).rstrip(b"\0").decode()))[0] for row in rows]


def split_files(location: DataLocation, split: str) -> tuple[list[str], list[str]]:
    """Absolute photo and label paths of ``split`` ("train" or "valid"), in CSV order; photos
    of more than 8 bits a channel, which DALI would misread, are refused with their names."""
    frame = read_split(location, split)
    refuse_deep_photos(frame["image"])
    return frame["image"].tolist(), frame["label"].tolist()


# %% [markdown]
# ## DALI batches, epochs and the last batch
#
# One training batch, straight from the GPU if there is one (yellow is the mask's outline:
# it must follow the nail through every flip, rotation and zoom), then one epoch of
# validation: ceil(N / batch) batches, the last one partial, where training has
# floor(N / batch) full batches (`dali_report.epochs_line`, plumbing from
# `nailseg_common.measure.dali_report`, counts them).

# %%
train_images, train_masks = split_files(data, "train")
valid_images, valid_masks = split_files(data, "valid")
options = {"image_size": cfg.image_size, "device": device}
if HAVE_DALI:
    train_loader = make_loader(train_images, train_masks, batch_size=cfg.batch_size, train=True, **options)
    batch = next(iter(train_loader))
    print({key: (tuple(value.shape), value.dtype, str(value.device)) for key, value in batch.items()})
    plots.plot_batch_gallery(batch, title="one DALI training batch (augmented)")
    plt.show()
    valid_loader = make_loader(valid_images, valid_masks, batch_size=cfg.batch_size, train=False, **options)
    print(dali_report.epochs_line(train_loader, valid_loader, train_images, valid_images))

# %% [markdown]
# **Sharding.** With several GPUs, each rank runs its own pipeline on its own GPU and reads
# its own *shard*: `shard_id = global_rank`, `num_shards = world_size`. All ranks shuffle with
# the same seed, so each epoch's global order is cut into disjoint pieces. Three shards of
# the validation set, as three ranks would read them, compared by the names of the files each
# batch came from (`sample_ids=True`). Not by their pixels: on an H200 the shards' decoded
# photos did not all match the same photos decoded in the whole set's batches. The mixed
# decoder splits each batch between the hardware decoder and nvJPEG's CUDA decoder, which is
# the likely cause (not measured here). `dali_report.shard_check` (plumbing from
# `nailseg_common.measure.dali_report`) reads the names with `sample_names` and counts them.

# %%
def validation_loader(batch_size=cfg.batch_size, **extra) -> DALILoader:
    return make_loader(valid_images, valid_masks, batch_size=batch_size, train=False, **options, **extra)


if HAVE_DALI:
    shards = (validation_loader(shard_id=rank, num_shards=3, sample_ids=True) for rank in range(3))
    print(dali_report.shard_check(shards, len(valid_images)))

# %% [markdown]
# ## The `LightningDataModule`
#
# Under a multi-device strategy the trainer knows each rank's place: `shard_of` reads it,
# and `DALINailDataModule(location, profile)` gives Lightning a `DALILoader` per split, on
# the profile's device, each rank on its own shard and GPU with its own augmentation seed.

# %%
#| export pipelines.dali_pipeline
def shard_of(trainer) -> tuple[int, int, int | None]:
    """(shard_id, num_shards, CUDA device index) of this rank; (0, 1, None) without a trainer."""
    if trainer is None:
        return 0, 1, None
    root = trainer.strategy.root_device
    return trainer.global_rank, trainer.world_size, root.index if root.type == "cuda" else None


# %%
#| export pipelines.dali_pipeline
import pytorch_lightning as pl


class DALINailDataModule(pl.LightningDataModule):
    """A :class:`DALILoader` per split on the profile's device, one shard per rank."""

    def __init__(self, location: DataLocation, profile: Profile, seed: int = 42,
                 num_threads: int | None = None, sample_ids: bool = False,
                 hw_decoder_load: float | None = None):
        super().__init__()
        require_dali()
        self.location, self.profile, self.seed = location, profile, seed
        self.num_threads, self.sample_ids, self.device = num_threads, sample_ids, dali_device(profile)
        self.hw_decoder_load = hw_decoder_load
        self._loaders: dict[str, DALILoader] = {}

    def _loader(self, split: str) -> DALILoader:
        if split not in self._loaders:
            shard_id, num_shards, device_id = shard_of(self.trainer)
            images, masks = split_files(self.location, split)
            loader = make_loader(images, masks, image_size=self.profile.image_size, device=self.device,
                                 batch_size=self.profile.batch_size, train=split == "train",
                                 device_id=device_id, shard_id=shard_id, num_shards=num_shards,
                                 num_threads=self.num_threads, seed=self.seed + shard_id,
                                 sample_ids=self.sample_ids and split == "train",
                                 hw_decoder_load=self.hw_decoder_load)
            if len(loader) == 0:
                raise ValueError(f"The {split} split ({len(images)} samples, {num_shards} shard(s)) "
                                 f"has fewer samples per shard than {self.profile.batch_size}.")
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
# and wall time under `runs/<profile>/04_dali/`. This is the notebook's one training run,
# `max_steps` optimizer steps, with notebook 02's instrument: `TrainingSpeed` measures the
# training images/s, and `dali_report.bound_of` (plumbing from
# `nailseg_common.measure.dali_report`) runs notebook 02's `bound_speed`: the same step on
# four training batches already on the device (no loading at all). Their ratio says how
# much of the bound DALI leaves; its spread is the 95 % interval from both runs' epochs.
# Notebook 05 judges the pipelines against each other with repeated windows in one run.
#
# Accuracy is judged by the course's target from notebook 02: the model's per-image hard
# Dice of its last validation epoch against the same validation masks, as DALI's validation
# loader serves them, drawn two pixels too large.

# %%
if HAVE_DALI:
    pl.seed_everything(0, verbose=False)
    model = LitNailSegmentation(encoder=cfg.encoder, lr=cfg.lr, max_steps=cfg.max_steps)
    trainer = make_trainer(cfg, "04_dali", callbacks=[speed := TrainingSpeed()])
    trainer.fit(model, datamodule=DALINailDataModule(data, cfg))
    dali_metrics, dali_dice = run_logs.read_metrics(trainer), model.val_dice_per_image
    print(run_logs.outline_verdict(dali_dice, torch.cat([b["label"].cpu() for b in valid_loader]), cfg.device))
    bound = dali_report.bound_of(cfg, train_loader, 5 * cfg.bench_steps)
    print(speed.report(bound, f"DALI, {trainer.global_step} steps"))

# %% [markdown]
# On a GPU the DALI pipeline runs on its own CUDA stream, `prefetch_queue_depth` batches
# ahead of the training loop, so the step only waits when the pipeline is slower than the
# model. In CPU-only mode DALI's threads and the model share the same cores, and the ratio
# tells that story instead. A ratio above 1 would not mean DALI beat the bound: the bound is
# a short measurement (five epochs of a few steps), and between runs on one machine it moves
# more than its epochs' spread says. Notebook 05 measures both sides in repeated windows,
# before and after the pipelines, and judges DALI against that.
#
# ### A mistake of the original series: the default last-batch policy in validation
#
# The original posts wrapped the pipelines in `DALIGenericIterator` with the default
# `last_batch_policy`, `FILL`, and readers with `pad_last_batch=True`. When the batch size
# does not divide the validation set, `FILL` hands the padded last batch over whole: copies
# of the last image enter the validation metrics. The trained model, scored on one
# validation epoch of each policy with a batch size that does not divide the set: hard Dice
# (threshold 0.5) per image, averaged over what the loader yields, as `val_dice` does
# (`batch_not_dividing` picks the batch size and `last_batch_table` scores and counts, both
# plumbing from `nailseg_common.measure.dali_report`).

# %%
if HAVE_DALI:
    eval_batch = dali_report.batch_not_dividing(len(valid_images), cfg.batch_size)
    epochs = {policy.name: list(validation_loader(eval_batch, last_batch_policy=policy))
              for policy in (LastBatchPolicy.FILL, LastBatchPolicy.PARTIAL)}
    print(f"{len(valid_images)} validation images, batch size {eval_batch}")
    display(dali_report.last_batch_table(model, epochs, cfg.device).round(4))

# %% [markdown]
# The only difference between the two is the padded copies of the last image: `PARTIAL`
# scores each validation image once, `FILL` adds the copies to the average. How far it moves
# depends on the batch size and on that one image, so runs with different batch sizes are
# not even wrong in the same way.
#
# ## Against notebook 02, from its log
#
# Notebook 02 trained the same model with Albumentations on CPU workers in this profile and
# logged it under `runs/<profile>/02_lightning_baseline/`; we read that run instead of
# training it again. `dali_report.against_baseline` (plumbing from
# `nailseg_common.measure.dali_report`) finds its log with `run_logs.runs_with_baseline`, as
# notebook 03 does, and shows the curves and `run_logs.runs_table`: the last Dice and IoU,
# and the median seconds per epoch (validation included, the first epoch left out).
#
# The verdict compares the final hard Dice of the two runs. Notebook 02's log keeps only the
# mean, so the spread assumes its per-image scores vary as much as this run's (`√2` times
# this run's `mean_spread`; `run_logs.baseline_verdict`). **"Within noise" is the outcome to
# hope for**: the whole input pipeline on the GPU trains the model as well as
# Albumentations on CPU workers.

# %%
dali_run = {f"DALI on the {device.upper()}": dali_metrics} if HAVE_DALI else {}
dali_report.against_baseline(cfg, dali_run, dali_dice if HAVE_DALI else None)

# %% [markdown]
# Same model, same policy, other random draws: the curves should end close together when
# both runs have the same length (check the epochs column). In the `smoke` profile a couple
# of steps say nothing about accuracy.
#
# ## The reference: DALI on an H200
#
# CPU-only DALI is a correctness mode: it runs the same graph so that CI executes this
# notebook, not to be fast. The reference numbers come from the command-line benchmark,
# `make bench BENCH_OUT=results/benchmark_h200.json`, run on an H200 with the `gpu` profile:
# every pipeline, the loader alone and the full training step, against the bound. Notebook
# 05 explains the method and judges the pipelines with repeated windows. The committed results
# (their label names the U-Net's encoder: where it is not this run's, read the shares of the
# bound, not the images/s):

# %%
if (reference := benchmark.load_results()) is None:
    print("No committed GPU results of these pipelines: run `make bench BENCH_OUT=results/benchmark_h200.json` on a GPU.")
else:
    print(benchmark.results_label(reference))
    display(benchmark.summary_table(reference).round(2))

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
# with data from a mixed decoder is a CPU operator with a GPU input, and DALI refuses to build
# the pipeline ("The input 0 for cpu operator nvidia.dali.ops.Resize is stored on incompatible
# device gpu"). So every `ops` operator after the crossing gets `device=` of its input.

# %%
if HAVE_DALI:
    from nvidia.dali import ops
    from nvidia.dali.pipeline import Pipeline

    class LegacyPipeline(Pipeline):  # the style of the original posts
        def __init__(self, files, pixel_device, batch_size, num_threads, device_id):
            super().__init__(batch_size, num_threads, device_id, seed=42)
            self.pixel_device = pixel_device
            self.reader = ops.readers.File(files=files)  # CPU
            self.decode = ops.decoders.Image(device="mixed" if pixel_device == "gpu" else "cpu",
                                             output_type=types.GRAY)
            self.resize = ops.Resize(device=pixel_device, size=[cfg.image_size] * 2, antialias=False)

        def define_graph(self):
            data, _ = self.reader()
            return self.resize(self.decode(data))

    legacy = LegacyPipeline(mask_files[:4], device, batch_size=4, num_threads=2, device_id=device_id)
    legacy.build()
    (old,) = legacy.run()
    _, new = run_once(mask_files[:4], types.INTERP_LINEAR)  # the first pipeline, written with fn
    print(f"legacy: {type(old).__name__} {old.as_cpu().as_array().shape}; identical to the fn "
          f"pipeline's: {(old.as_cpu().as_array() == new.as_cpu().as_array()).all()}")

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
#   per-sample parameters, a `mixed` decoder (or `.gpu()`) to cross over, GPU operators for
#   every pixel. The profile decides whether that is a GPU or DALI's CPU-only mode.
# - Two file readers with identical settings keep photos and labels paired; the mixed decoder
#   decodes the JPEGs on the GPU (the hardware decoder where there is one) and turns them
#   upright as their EXIF orientation says; geometric ops share one per-sample matrix,
#   photometric ops touch the image only.
# - Masks are resized and warped with nearest neighbour: the original series' linear resize
#   of float masks left non-binary labels along every edge.
# - `DALILoader` gives Lightning an exact `len`, validation that sees every image once
#   (`PARTIAL`; the default `FILL` counted padded copies in the original series' metrics),
#   full training batches (`DROP`) and shards by rank for multi-GPU training.
# - Batches arrive in the batch contract, so the notebook-02 model trains on them unchanged;
#   its accuracy is judged against the labels drawn two pixels too large and against notebook
#   02's log, its training rate against the bound.
# - In the legacy `ops` API every operator after the crossing needs `device="gpu"`; `fn` infers it.
#
# ## Exercises
#
# 1. Decode at a reduced size: replace the decoder by `fn.decoders.image_random_crop` (training)
#    or pass `fn.decoders.image` a region of interest, so that a 12-megapixel photo is never
#    decoded whole. What does it change in the training rate, and in what the model sees?
# 2. Put the augmentation behind DALI conditionals (`@pipeline_def(enable_conditionals=True)`
#    and `if fn.random.coin_flip(probability=0.2): image = fn.gaussian_blur(...)`). Check with
#    the tests that the pairing and the epoch length are unchanged, and time both versions.
# 3. Set `hw_decoder_load=0` in the decoder (nvJPEG's CUDA decoder only) and `1.0` (the
#    hardware decoder only), and compare the training rate with the default.
# 4. Drop the last training batch differently: train with `LastBatchPolicy.PARTIAL` instead of
#    `DROP` and look at what the last, smaller batch does to the step time and to the loss
#    curve (and why cuDNN's kernel search, off in the course's Trainer, would cost more with
#    one more input shape).
# 5. Try `prefetch_queue_depth` 1, 2 and 3 and `num_threads` 1 to 8 in `build_pipeline`: which
#    one moves the training rate's ratio to the bound?
