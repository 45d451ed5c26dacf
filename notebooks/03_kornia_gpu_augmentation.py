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
#       GPU, a fused sync-free version, JPEG photos decoded on the GPU, and the measured
#       steps that close the gap to the bound.
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
# `on_after_batch_transfer` hook. Then the decoding follows: the GPU decodes the JPEG photos
# itself, so the CPU is left with reading files, and we measure, step by step, how close that
# gets to training as fast as if the batches were already on the GPU: notebook 02's ratio to
# the bound.
#
# ## What you'll learn
#
# - augmentation as an `nn.Module` on a batch: the course's policy as a Kornia 0.9
#   `AugmentationSequential` over image and mask (nearest interpolation keeps masks binary)
# - why the textbook version is slow on a GPU, and a fused version of the same policy
# - the Lightning hook the augmentation runs in, and a DataModule whose batches are JPEG bytes
#   that are decoded on the device (nvJPEG) as Lightning moves them there, photos turned
#   upright as their EXIF orientation says
# - training with the augmentation inside the step, compared with notebook 02's logged run
# - closing the gap to the bound, one measured step at a time, beside decoding once ahead of
#   time (a uint8 cache) and what that costs
#
# Runs everywhere: without a GPU, Kornia runs on the CPU (the notebook says so) and the
# numbers tell the CPU's story. The reference GPU numbers at the end come from `make bench`
# on an H200.

# %%
import nailseg_common  # noqa: F401, I001  (first: it silences notices the libraries below print)
import inspect

import matplotlib.pyplot as plt
import pytorch_lightning as pl
from IPython.display import display

from nailseg_common.measure import benchmark, plots
from nailseg_common.pipelines.gallery import decoded_and_augmented, gallery_panels, item_shapes, policy_table
from nailseg_common.training import run_logs
from nailseg_common.training.trainer import TrainingSpeed, make_trainer
from nailseg_common.training.unet import LitNailSegmentation

# %% tags=["parameters"]
profile = ""            # smoke, cpu or gpu; empty: $NAILSEG_PROFILE, else chosen from the hardware
data_root = ""          # your own photos (Images/<type>/, Masks/<type>/); empty: the synthetic set
num_images = None       # size of the synthetic set (ignored with data_root)
image_size = None       # side of the square images the model sees
batch_size = None
max_steps = None        # optimizer steps of the Kornia training
encoder = None          # smp encoder name
lr = None               # peak learning rate
num_workers = None      # CPU DataLoader workers
precision = None        # Lightning precision, e.g. 32-true, bf16-mixed
accelerator = None      # cpu or gpu
max_train_batches = None  # cap per epoch (0: the whole set)
max_valid_batches = None
val_every_n_epochs = None  # validate (and checkpoint) every n epochs
bench_steps = None      # training batches per timed epoch in the gap measurements
bench_repeats = None    # timed epochs per measurement (after one warm-up epoch)

# %%
from nailseg_common.course import start

cfg, data = start(globals())
device = cfg.device
print(f"Kornia runs on the {cfg.accelerator.upper()} in this notebook"
      + ("" if device.type == "cuda" else " (no GPU in this profile: same code, other device)."))

# %% [markdown]
# ## The idea: augmentation as a module on a batch
#
# Albumentations works on one `H×W×3` NumPy image at a time, so it has to run where the
# images are decoded: in CPU workers. Kornia's augmentations are `torch.nn.Module`s on
# `B×C×H×W` tensors, so they run wherever the tensors are, and every sample of the batch
# still gets its own random parameters. Here is the course's policy (the table from notebook
# 02) as the textbook Kornia container. `data_keys=["input", "mask"]` tells it that the
# second tensor is a mask: every geometric op moves it with the same parameters as the
# image, resampled with nearest neighbour so it stays binary; photometric ops leave it alone.

# %%
#| export pipelines.kornia_pipeline: the Kornia pipeline: the policy on the GPU, and photos decoded on the device
from collections.abc import Mapping

import kornia.augmentation as K

from nailseg_common.pipelines.policy import POLICY, PolicyOp


def _check_policy(policy: Mapping[str, PolicyOp]) -> None:
    unknown = set(policy) - set(POLICY)
    if unknown:
        raise ValueError(f"Unknown policy ops {sorted(unknown)}; known: {list(POLICY)}.")


def kornia_sequential(policy: Mapping[str, PolicyOp] = POLICY) -> K.AugmentationSequential:
    """The policy as a Kornia ``AugmentationSequential`` over ``(image, mask)``.

    Ops not in ``policy`` are left out, so tests can build one op alone. Kornia's
    ``RandomGaussianNoise`` has a fixed standard deviation: the middle of the policy's range.
    """
    _check_policy(policy)
    ops = []
    for name, op in policy.items():
        p, q = op.probability, op.params
        if name == "horizontal_flip":
            ops.append(K.RandomHorizontalFlip(p=p))
        elif name == "vertical_flip":
            ops.append(K.RandomVerticalFlip(p=p))
        elif name == "affine":
            ops.append(K.RandomAffine(degrees=q["rotate_deg"], translate=(q["translate"],) * 2,
                                      scale=q["scale"], padding_mode="zeros", p=p))
        elif name == "brightness_contrast":
            ops.append(K.ColorJiggle(brightness=q["brightness"], contrast=q["contrast"], p=p))
        elif name == "gaussian_noise":
            ops.append(K.RandomGaussianNoise(mean=0.0, std=sum(q["std"]) / 2, p=p))
        elif name == "gaussian_blur":
            ops.append(K.RandomGaussianBlur(kernel_size=q["kernel"], sigma=q["sigma"], p=p))
    return K.AugmentationSequential(*ops, data_keys=["input", "mask"])


# %%
display(policy_table())
kornia_sequential()

# %% [markdown]
# ## Why the textbook version is slow on a GPU, and a fused one
#
# `AugmentationSequential` is readable and easy to extend, but on a GPU its costs are on the
# CPU: each op draws its parameters with the CPU generator and copies them over, the noise
# op draws a full-size noise tensor on the CPU, `ColorJiggle` and the blur read values back
# to the host (`.any()`, `bool()`: each one makes the CPU wait for the GPU), and every
# geometric op resamples the whole batch again.
#
# The fused version writes the same policy for the GPU. First the geometry: both flips and
# the affine are composed into one matrix per sample, and the batch is resampled once through
# one grid (bilinear for the image, nearest for the mask). The matrix is built from Python
# numbers and device tensors only: a `torch.tensor(..., device="cuda")` would be a blocking
# host-to-device copy.

# %%
#| export pipelines.kornia_pipeline
import torch
import torch.nn.functional as F


def _warp(image, label, flip_x, flip_y, angle, scale, shift_x, shift_y):
    """Resample image (bilinear) and label (nearest) through one grid per sample.

    The forward map in pixel units around the centre is ``p_out = R(angle)·scale·Flip·p_in
    + shift``; ``affine_grid`` wants the inverse, ``p_in = Flip·R(-angle)/scale·(p_out -
    shift)``, in coordinates normalised by the half width and half height.
    """
    batch, _, height, width = image.shape
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    a, b = flip_x * cos, flip_x * sin  # first row of the inverse
    c, d = -flip_y * sin, flip_y * cos  # second row
    theta = torch.stack([
        torch.stack([a, b * (height / width), -(a * shift_x + b * shift_y) / (width / 2)], -1),
        torch.stack([c * (width / height), d, -(c * shift_x + d * shift_y) / (height / 2)], -1),
    ], -2)
    grid = F.affine_grid(theta, [batch, 1, height, width], align_corners=False)
    image = F.grid_sample(image, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    label = F.grid_sample(label, grid, mode="nearest", padding_mode="zeros", align_corners=False)
    return image, label


# %% [markdown]
# Every random number of the batch is drawn in one call on the batch's device: `u` has one
# row per sample and one column per gate or parameter. An op is switched on per sample with
# `torch.where` instead of indexing, so nothing is read back to the host.

# %%
#| export pipelines.kornia_pipeline
def _gate(u, policy, name: str, column: int) -> torch.Tensor:
    """Per sample: is op ``name`` applied (False for every sample when it is not in the policy)?"""
    if name not in policy:
        return torch.zeros_like(u[:, 0], dtype=torch.bool)
    return u[:, column] < policy[name].probability


def _between(u, column: int, low: float, high: float) -> torch.Tensor:
    return low + (high - low) * u[:, column]


def _fused_geometry(image, label, policy, u):
    """Both flips and the affine as one matrix per sample, one resampling of the batch."""
    if not any(name in policy for name in ("horizontal_flip", "vertical_flip", "affine")):
        return image, label
    height, width = image.shape[2:]
    flip_x = torch.where(_gate(u, policy, "horizontal_flip", 0), -1.0, 1.0)
    flip_y = torch.where(_gate(u, policy, "vertical_flip", 1), -1.0, 1.0)
    angle = shift_x = shift_y = torch.zeros_like(flip_x)
    scale = torch.ones_like(flip_x)
    if "affine" in policy:
        q, on = policy["affine"].params, _gate(u, policy, "affine", 2)
        angle = torch.where(on, torch.deg2rad(_between(u, 3, -q["rotate_deg"], q["rotate_deg"])), 0.0)
        scale = torch.where(on, _between(u, 4, *q["scale"]), 1.0)
        shift_x = torch.where(on, _between(u, 5, -q["translate"], q["translate"]) * width, 0.0)
        shift_y = torch.where(on, _between(u, 6, -q["translate"], q["translate"]) * height, 0.0)
    return _warp(image, label, flip_x, flip_y, angle, scale, shift_x, shift_y)


# %% [markdown]
# Then the photometric ops, on the image only; the blur uses Kornia's Gaussian kernels with
# one sigma per sample.

# %%
#| export pipelines.kornia_pipeline
from kornia.filters import filter2d_separable, get_gaussian_kernel1d


def _fused_photometric(image, policy, u, generator):
    """Brightness/contrast, noise and blur, each switched on per sample."""
    if "brightness_contrast" in policy:
        q, on = policy["brightness_contrast"].params, _gate(u, policy, "brightness_contrast", 7)
        alpha = torch.where(on, _between(u, 8, 1 - q["contrast"], 1 + q["contrast"]), 1.0)
        beta = torch.where(on, _between(u, 9, -q["brightness"], q["brightness"]), 0.0)
        image = (image * alpha.view(-1, 1, 1, 1) + beta.view(-1, 1, 1, 1)).clamp_(0, 1)
    if "gaussian_noise" in policy:
        std = torch.where(_gate(u, policy, "gaussian_noise", 10),
                          _between(u, 11, *policy["gaussian_noise"].params["std"]), 0.0)
        noise = torch.randn(image.shape, device=image.device, generator=generator)
        image = (image + noise * std.view(-1, 1, 1, 1)).clamp_(0, 1)
    if "gaussian_blur" in policy:
        q = policy["gaussian_blur"].params
        # Two more numbers per sample (a second call keeps the columns above stable).
        v = torch.rand(image.shape[0], 2, device=image.device, generator=generator)
        sigma = (q["sigma"][0] + (q["sigma"][1] - q["sigma"][0]) * v[:, 1]).view(-1, 1)
        kernel = get_gaussian_kernel1d(q["kernel"], sigma)
        blurred = filter2d_separable(image, kernel, kernel, border_type="reflect")
        on = v[:, 0] < policy["gaussian_blur"].probability
        image = torch.where(on.view(-1, 1, 1, 1), blurred, image)
    return image


# %% [markdown]
# The module ties it together. `KorniaAugmentation` takes the batch contract (uint8 or
# float, any device) and returns a float image in [0, 1] and a {0, 1} label, with either
# implementation. A seed makes it repeatable: `KorniaAugmentation(seed=0)` owns its random
# generator; without a seed it uses PyTorch's global one, so `pl.seed_everything` covers it.

# %%
#| export pipelines.kornia_pipeline
from torch import nn

from nailseg_common.pipelines.policy import to_unit_float

IMPLEMENTATIONS = ("fused", "sequential")


class KorniaAugmentation(nn.Module):
    """The policy (or a subset) on a batch, ``"fused"`` or ``"sequential"`` (:func:`kornia_sequential`):
    ``forward(image, label) -> (image, label)``; ``seed`` gives the module its own generator."""

    def __init__(self, policy: Mapping[str, PolicyOp] = POLICY, implementation: str = "fused",
                 seed: int | None = None):
        super().__init__()
        if implementation not in IMPLEMENTATIONS:
            raise ValueError(f"implementation must be one of {IMPLEMENTATIONS}, got {implementation!r}.")
        _check_policy(policy)
        self.policy, self.implementation, self.seed = dict(policy), implementation, seed
        self.sequential = kornia_sequential(policy) if implementation == "sequential" else None
        self.generators: dict[str, torch.Generator] = {}  # one per device, with a seed
        self.cpu_rng_state = torch.Generator().manual_seed(seed).get_state() if seed is not None else None

    def extra_repr(self) -> str:
        return f"implementation={self.implementation!r}, ops={list(self.policy)}, seed={self.seed}"

    @torch.no_grad()
    def forward(self, image: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if (image.ndim != 4 or image.shape[1] != 3 or label.ndim != 4 or label.shape[1] != 1
                or image.shape[0] != label.shape[0] or image.shape[2:] != label.shape[2:]):
            raise ValueError(f"Expected image B×3×H×W and label B×1×H×W of the same batch and "
                             f"size, got {tuple(image.shape)} and {tuple(label.shape)}.")
        image, label = to_unit_float(image), label.float()
        if self.implementation == "sequential":  # Kornia samples with the global CPU generator
            with torch.random.fork_rng(devices=[], enabled=self.seed is not None):
                if self.seed is not None:
                    torch.set_rng_state(self.cpu_rng_state)
                image, label = self.sequential(image, label)
                if self.seed is not None:
                    self.cpu_rng_state = torch.get_rng_state()
            return image.clamp_(0, 1), label
        if self.seed is not None and str(image.device) not in self.generators:
            self.generators[str(image.device)] = torch.Generator(image.device).manual_seed(self.seed)
        generator = self.generators.get(str(image.device))
        u = torch.rand(image.shape[0], 12, device=image.device, generator=generator)
        image, label = _fused_geometry(image, label, self.policy, u)
        return _fused_photometric(image, self.policy, u, generator), label


# %%
print(augment := KorniaAugmentation(seed=0))

# %% [markdown]
# ## The hook it runs in
#
# The augmentation runs inside notebook 02's `LitNailSegmentation`, unchanged: the model
# takes an optional `gpu_augmentation` module, and Lightning calls `on_after_batch_transfer`
# once the batch is on the device. Here is that hook as notebook 02 wrote it: training
# batches are augmented, validation batches are only converted, so validation sees exactly
# what it saw in notebook 02.

# %%
print(inspect.getsource(LitNailSegmentation.on_after_batch_transfer))

# %% [markdown]
# ## Decoding on the device, in the loader's hook
#
# With augmentation on the GPU the CPU is left with decoding and resizing the photos, and a
# phone photo is far more pixels than the model sees: at H200 speed, CPU workers decoding
# JPEGs hold training back (notebook 05 measures by how much). The GPU decodes JPEGs too:
# `torchvision.io.decode_jpeg(list_of_bytes, device="cuda")` decodes a whole batch with nvJPEG.
# So the loader's workers only read each file's bytes and its header, and the decoding moves
# to where Lightning moves the batch to the device: Lightning calls a batch's own `.to(device)`
# when it has one, so a batch of bytes can arrive decoded.
#
# A photo the way a user brings it needs three things on the way. The header's EXIF
# orientation says how to turn the stored pixels upright (a phone stores a portrait photo on
# its side); the decoder does not do it on the GPU, so `upright` does. The GPU's hardware
# decoder takes a batch of baseline JPEGs in colour or gray; torchvision decodes a progressive
# one alone, its Huffman stage on the main process's CPU thread, in series with training, and
# CMYK not at all. So progressive and CMYK JPEGs, and PNGs, are decoded in the worker, upright,
# and resized there to the training side, as the decode-once cache does it (`resized_pair`).
# And the labels are preparation's PNGs, already upright, decoded and resized in the worker
# (`resized_label`, nearest on the pixel grid). At the photo's size they would be most of a
# batch's bytes, and the main process receives every batch alone.
#
# One more thing the workers must get right: how an item leaves them. A DataLoader worker
# hands every *tensor* to the main process as a shared-memory file descriptor, and a batch of
# 32 photos and labels is 64 of them: on the H200, four workers ran out (`OSError: [Errno 9]
# Bad file descriptor`). NumPy arrays are pickled through the worker's pipe instead, so the
# items carry arrays, and the tensors are made on the other side.

# %%
#| export pipelines.kornia_pipeline
import functools

import numpy as np
from torch.utils.data import Dataset
from torchvision.io import ImageReadMode, decode_jpeg

from nailseg_common.data.decoded import resized_label, resized_pair
from nailseg_common.data.images import name_undecodable, read_header


class EncodedPhotos(Dataset):
    """The pairs of ``frame`` at side ``S`` as uint8 NumPy arrays (a tensor would leave a worker
    as a file descriptor): a baseline colour or gray JPEG's bytes and EXIF orientation, else
    the photo decoded here, ``3×S×S``; the label ``S×S``."""

    def __init__(self, frame, image_size: int):
        self.images, self.labels = frame["image"].tolist(), frame["label"].tolist()
        self.image_size = image_size

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> dict:
        path, label, side = self.images[index], self.labels[index], self.image_size
        header = read_header(path)
        if header.format != "JPEG" or header.mode not in ("RGB", "L") or header.progressive:
            pixels, label = resized_pair(path, label, side)  # decoded here
            return {"file": path, "pixels": pixels, "label": label}
        return {"file": path, "label": resized_label(label, side), "data": np.fromfile(path, np.uint8),
                "orientation": header.orientation}


# %% [markdown]
# The EXIF orientations are eight ways to lay the stored pixels down: a flip, a transpose, or
# both. `_decode_batch` decodes the batch's JPEGs in one call, turns each photo upright and resizes
# it to the training side, bilinear on the photo's pixel grid, as notebook 02's `A.Resize` and
# the workers do. The photos differ in size, so they are resized one by one; then they are one
# `B×3×S×S` uint8 batch of the batch contract, and the labels are copied in one piece. When
# the decoder refuses the batch, the package's `name_undecodable` decodes its photos one by
# one to name the file.

# %%
#| export pipelines.kornia_pipeline
FLIPS = {2: (-1,), 3: (-1, -2), 4: (-2,), 6: (-1,), 7: (-1, -2), 8: (-2,)}  # after 5-8's transpose


def upright(image: torch.Tensor, orientation: int) -> torch.Tensor:
    """``C×H×W`` pixels as stored, turned as their EXIF ``orientation`` says."""
    image = image.transpose(-1, -2) if orientation in (5, 6, 7, 8) else image
    return image.flip(FLIPS[orientation]) if orientation in FLIPS else image


def _decode_jpegs(items: list[dict], device: torch.device) -> list[torch.Tensor]:
    data = [torch.from_numpy(item["data"]) for item in items]
    try:
        return decode_jpeg(data, mode=ImageReadMode.RGB, device=device) if data else []
    except RuntimeError:
        name_undecodable([item["file"] for item in items],
                         lambda i: decode_jpeg(data[i], mode=ImageReadMode.RGB, device=device))
        raise


def _resized(image: torch.Tensor, size: int) -> torch.Tensor:
    image = F.interpolate(image[None].float(), size=(size, size), mode="bilinear", align_corners=False)
    return image[0].round_().clamp_(0, 255).to(torch.uint8)


def _decode_batch(items: list[dict], image_size: int, device: torch.device) -> dict[str, torch.Tensor]:
    decoded = iter(_decode_jpegs([item for item in items if "data" in item], device))
    images = [torch.from_numpy(item["pixels"]).to(device) if "pixels" in item  # resized in the worker
              else _resized(upright(next(decoded), item["orientation"]), image_size) for item in items]
    labels = torch.from_numpy(np.stack([item["label"] for item in items]))[:, None]
    return {"image": torch.stack(images), "label": labels.to(device)}


# %% [markdown]
# On a GPU, decoding runs on a CUDA stream of its own, for a bug of torchvision's CUDA decoder
# (pytorch/vision#9606): nvJPEG writes on yet another stream, into memory that kernels still
# queued on the caller's stream may be reading; on an H200 that turned the training loss into
# NaN from the first steps. Our stream holds only the last batch's decoding, so waiting for it
# costs next to nothing. A `DecodedBatch` is the result: its `.to(device)` makes the training
# stream wait for the decoding (an event), and `record_stream` keeps the batch's memory from
# being reused before training has read it.

# %%
#| export pipelines.kornia_pipeline
import threading

_threads = threading.local()


def decode_stream(device: torch.device) -> torch.cuda.Stream:
    """This thread's decoding stream on ``device`` (the main thread's, a pin-memory thread's)."""
    streams = _threads.__dict__.setdefault("streams", {})
    if device not in streams:
        streams[device] = torch.cuda.Stream(device)
    return streams[device]


class DecodedBatch:
    """A batch decoded on a side stream; ``.to(device)`` makes the caller's stream wait for it."""

    def __init__(self, batch: dict[str, torch.Tensor], decoded: torch.cuda.Event):
        self.batch, self.decoded = batch, decoded

    def to(self, device: torch.device | str, non_blocking: bool = False) -> dict[str, torch.Tensor]:
        stream = torch.cuda.current_stream(torch.device(device))
        stream.wait_event(self.decoded)
        for tensor in self.batch.values():
            tensor.record_stream(stream)
        return self.batch


def decode_ahead(items: list[dict], image_size: int, device: torch.device) -> DecodedBatch:
    """:class:`EncodedPhotos` items decoded on the GPU ``device``, on this thread's stream: a
    ``B×3×S×S`` uint8 ``image`` and a ``B×1×S×S`` ``label``, photos upright."""
    stream = decode_stream(device)
    stream.synchronize()  # nvJPEG must not write into blocks our queued kernels still read
    with torch.cuda.stream(stream):
        batch = _decode_batch(items, image_size, device)
    return DecodedBatch(batch, stream.record_event())


# %% [markdown]
# `EncodedBatch` is the batch before decoding: the DataLoader's `collate_fn` makes one of each
# batch's items. Decoding should not wait for training to ask for the batch. A DataLoader with
# `pin_memory=True` hands every batch, as soon as a worker has made it, to a thread of the
# main process that calls the batch's `pin_memory()`, meant for copying its tensors into
# page-locked memory. `EncodedBatch.pin_memory` decodes there instead: the next batches are
# decoded while the current step trains (nvJPEG's Huffman stage runs on that thread's CPU
# core, and torchvision lets go of Python's lock meanwhile). Without a GPU, or without a
# pin-memory thread, `.to(device)` decodes. Any loop that moves batches with `.to` (Lightning's,
# the benchmark's) gets them decoded without knowing how.

# %%
#| export pipelines.kornia_pipeline
class EncodedBatch:
    """The items of one batch of :class:`EncodedPhotos`, decoded by ``pin_memory()`` (ahead, on
    the current GPU) or by ``.to(device)``."""

    def __init__(self, items: list[dict], image_size: int):
        self.items, self.image_size = items, image_size

    def __len__(self) -> int:
        return len(self.items)

    def pin_memory(self) -> DecodedBatch:
        return decode_ahead(self.items, self.image_size, torch.device("cuda", torch.cuda.current_device()))

    def to(self, device: torch.device | str, non_blocking: bool = False) -> dict[str, torch.Tensor]:
        device = torch.device(device)
        if device.type != "cuda":
            return _decode_batch(self.items, self.image_size, device)
        return decode_ahead(self.items, self.image_size, device).to(device)


# %% [markdown]
# The DataModule around it is notebook 02's, with `EncodedPhotos` for the dataset and pinning
# on where training is on a GPU. Its training batches are *not* augmented: pair it with
# `LitNailSegmentation(gpu_augmentation=KorniaAugmentation())`, whose
# `on_after_batch_transfer` runs on the decoded batch.

# %%
#| export pipelines.kornia_pipeline
import pytorch_lightning as pl
from torch.utils.data import DataLoader

from nailseg_common.data.preparation import SPLITS, read_split
from nailseg_common.setup.paths import DataLocation
from nailseg_common.setup.profiles import Profile


class DeviceDecodedNailDataModule(pl.LightningDataModule):
    """Train/valid loaders whose CPU workers read the photos' bytes, as :class:`EncodedBatch`
    es, decoded, turned upright and resized on the training device (ahead, on a GPU)."""

    def __init__(self, location: DataLocation, profile: Profile, num_workers: int | None = None,
                 seed: int = 0):
        super().__init__()
        self.location, self.profile, self.seed = location, profile, seed
        self.num_workers = profile.num_workers if num_workers is None else num_workers

    def setup(self, stage: str | None = None) -> None:
        self.photos = {split: EncodedPhotos(read_split(self.location, split), self.profile.image_size)
                       for split in SPLITS}

    def _loader(self, split: str, train: bool) -> DataLoader:
        collate = functools.partial(EncodedBatch, image_size=self.profile.image_size)
        return DataLoader(self.photos[split], batch_size=self.profile.batch_size, shuffle=train,
                          drop_last=train, num_workers=self.num_workers, collate_fn=collate,
                          pin_memory=self.profile.device.type == "cuda",  # decodes ahead
                          persistent_workers=self.num_workers > 0,
                          generator=torch.Generator().manual_seed(self.seed) if train else None)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("valid", train=False)


# %% [markdown]
# One batch through it, before any training: what the workers hand over (the JPEG's bytes
# and its EXIF orientation, or the pixels; the label), and what `.to(device)` makes of it.
# The batch is built from the dataset here, as `collate_fn` builds it, since on a GPU the
# loader would hand it over decoded already. `item_shapes` and `decoded_and_augmented`
# (plumbing from `nailseg_common.pipelines.gallery`) print them.

# %%
(photos := DeviceDecodedNailDataModule(data, cfg, num_workers=0)).setup()
valid = photos.photos["valid"]
encoded = EncodedBatch([valid[i] for i in range(min(cfg.batch_size, len(valid)))], cfg.image_size)
print(item_shapes(encoded.items[:4]))
batch = encoded.to(device)
out_image, out_label = augment(batch["image"], batch["label"])
print(decoded_and_augmented(batch["image"], out_image))

# %% [markdown]
# ## The gallery
#
# Four photos of that batch, decoded and resized only, then three draws of the fused module on
# the same batch, with notebook 02's `gallery_panels` (it takes the augmentation to show as a
# function). The yellow outline is the mask: it must stay on the nail after every flip,
# rotation, shift and zoom, while brightness, contrast, noise and blur touch the image only.

# %%
plots.plot_augmentation_gallery(gallery_panels(batch["image"][:4].cpu(), batch["label"][:4].cpu(),
                                                KorniaAugmentation(seed=1)))
plt.show()

# %% [markdown]
# ## Training with the augmentation inside the step
#
# The model is notebook 02's `LitNailSegmentation`; the only change is
# `gpu_augmentation=KorniaAugmentation()`, fed by the photos decoded on the device. It trains for the profile's
# `max_steps`, with notebook 02's `TrainingSpeed` callback measuring the training images/s
# (validation excluded). The model keeps the per-image hard Dice of its last validation
# epoch, so the course's target from notebook 02 judges this run on its own: closer to the
# labels than the validation masks drawn two pixels too large
# (`run_logs.outline_verdict_from_cache` takes the labels from the uint8 cache).

# %%
pl.seed_everything(0, verbose=False)
model = LitNailSegmentation(cfg.encoder, cfg.lr, cfg.max_steps, gpu_augmentation=KorniaAugmentation())
kornia_speed = TrainingSpeed()
trainer = make_trainer(cfg, "03_kornia", callbacks=[kornia_speed], enable_checkpointing=False)  # nothing loads it
trainer.fit(model, DeviceDecodedNailDataModule(data, cfg))
kornia_metrics, kornia_dice = run_logs.read_metrics(trainer), model.val_dice_per_image
print(f"{trainer.global_step} steps, {len(kornia_metrics)} epochs: {kornia_speed.images_per_second():.1f} img/s")
print(run_logs.outline_verdict_from_cache(kornia_dice, data, cfg))

# %% [markdown]
# ### Against notebook 02, from its log
#
# Notebook 02 already trained the same model with Albumentations on CPU workers in this
# profile; its CSV log is under `runs/<profile>/02_lightning_baseline/`, so we compare with
# that run instead of training it again: the curves, the last Dice and IoU, and the median
# seconds per epoch (validation included, the first epoch left out). `runs_with_baseline`
# and `runs_table` (plumbing from `nailseg_common.training.run_logs`) find the log and
# build the table.
#
# Then the verdict (`run_logs.baseline_verdict`): this run's final hard Dice against notebook
# 02's. Its log keeps the mean, not the per-image scores, so the spread assumes notebook 02's
# scores vary as much as this run's: `√2` times this run's `mean_spread`. Here **"within
# noise" is the good outcome**: the same model trains as well with the augmentation on the GPU
# as on the CPU.

# %%
runs = run_logs.runs_with_baseline(cfg, {f"decoded on the {device.type.upper()} + Kornia": kornia_metrics})
plots.plot_training_curves(runs)
plt.show()
display((table := run_logs.runs_table(runs)).round(3))
if run_logs.BASELINE_LABEL in table.index:
    print(run_logs.baseline_verdict(kornia_dice, table))

# %% [markdown]
# Same model, loss, policy and schedule; only where and how the augmentation runs differs,
# so the curves should end close together. Compare runs of the same length (check the
# epochs column); the smoke profile's few steps say nothing about accuracy.
#
# ## Closing the gap to the bound, step by step
#
# The **bound** (notebook 02) is the same training step on a few batches already on the
# device: no loading, no copy, no augmentation. A pipeline is good when its training rate
# is close to it. Each row adds one change, measured with `TrainingSpeed` over
# `bench_repeats` epochs of `bench_steps` batches after one warm-up epoch (median, range and
# count of the timed epochs); `steps_to_bound` (plumbing from `nailseg_common.measure.benchmark`)
# times the rows so, measures the bound on four batches decoded on the device, and builds the
# table:
#
# 0. the photos decoded and resized in CPU workers (notebook 02's loader, without its
#    augmentation), the textbook `AugmentationSequential` in the step;
# 1. the fused Kornia module: no host synchronisations, one resampling;
# 2. the photos decoded on the device instead: the training run above.
#
# The last row is the other way out, not a step on from row 2: **decode once, ahead of time**.
# Every photo is decoded, turned and resized to the training side once, into one uint8 array a
# split (`nailseg_common.data.decoded`, the series' `.npy` files in one piece), so a batch is a
# single gather from pinned memory. Its cost is printed beside it: the preparation pass, the
# disk, and the side it fixes (another `image_size` is another cache).

# %%
gap, bound = benchmark.steps_to_bound(cfg, data, photos.train_dataloader(), kornia_speed)
gap.round(2)

# %% [markdown]
# Row 2 is the training run above. Its share of the bound, `± ` the course's spread
# (the 95 % interval from its epochs' rates; the bound is a single measurement, counted as
# exact), and every row's share, drawn by `plots.plot_steps_to_bound`:

# %%
print("the training run: {:.2f} ± {:.2f} of the bound".format(*kornia_speed.ratio_to(bound)))
plots.plot_steps_to_bound(gap, cfg)
plt.show()

# %% [markdown]
# On a CPU-only machine the model runs on the same few cores that load and augment, so
# there is no idle accelerator to feed and the shares say little; on a GPU each row's share
# is what that change bought. One run of each row says how far each change gets, not how
# two pipelines rank: notebook 05 judges the pipelines against each other with repeated
# windows in one run.
#
# The same steps on an H200 (the `gpu` profile) were measured by
# `make bench BENCH_OUT=results/benchmark_h200.json` and committed; the cell below reads them
# from there (`kornia_steps_table`, table plumbing from `nailseg_common.measure.benchmark`,
# picks these rows and prints the device, encoder, versions and date of that run). Its U-Net
# may not be this run's (the label names its encoder): compare its shares of the bound, not
# its images/s.

# %%
reference = benchmark.load_results()
if reference is None:
    print("No committed GPU results of these pipelines: run `make bench BENCH_OUT=results/benchmark_h200.json` on a GPU.")
else:
    display(benchmark.kornia_steps_table(reference).round(3))

# %% [markdown]
# ## Summary
#
# - Kornia turns augmentation into an `nn.Module` on a `B×C×H×W` batch; with
#   `data_keys=["input", "mask"]` geometric ops move image and mask together, and masks stay
#   binary with nearest interpolation.
# - Running it in `on_after_batch_transfer` puts augmentation on the GPU for training
#   batches only. Decoding follows it there: the workers read each JPEG's bytes, and moving
#   the batch to the device (its `.to`) decodes it with nvJPEG, turns each photo
#   upright as its EXIF orientation says and resizes it; CMYK JPEGs and PNGs are decoded in
#   the workers.
# - The textbook `AugmentationSequential` is not fast on a GPU: CPU-side parameter sampling,
#   a CPU noise tensor and host synchronisations make the CPU, not the GPU, the limit. The
#   same policy fused (one matrix, one resampling, `torch.where` gates, random numbers drawn
#   on the device) never stalls the host.
# - The model beats the course's target from notebook 02 (its labels drawn two pixels too
#   large) on its own validation scores, and matches notebook 02's logged run within noise;
#   the training rate is read against the bound, with the spread of its epochs.
# - Decoding once, ahead of time (a uint8 cache) makes the input side boring, a gather from
#   pinned memory, at the price printed beside it: a preparation pass, disk, and one fixed
#   training side. The table says what decoding every epoch costs against it, here.
#
# ## Exercises
#
# 1. Add a policy row (say `RandomPerspective` or a hue shift) to `kornia_sequential`, and the
#    alignment test for it in `tests/test_gpu_augmentation.py`. What does it take to add it to
#    the fused version?
# 2. Count host synchronisations: wrap one call of each implementation in
#    `torch.cuda.set_sync_debug_mode("warn")` on a GPU. Then add `loss.item()` to
#    `training_step` and measure what it costs with `TrainingSpeed`.
# 3. Keep the whole cache on the GPU instead and index batches there. How close to the bound
#    does that get, and what does it cost in GPU memory (the cell above printed the cache's
#    size) for a larger dataset?
# 4. Run the notebook with the `num_workers` parameter set to 1, 2 and 8. Where does decoding
#    in CPU workers (step 0 of the "closing the gap" table) stop scaling on your machine? And
#    row 2's workers, which only read bytes?
