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
# step by step, what it takes to train as fast as if the batches were already on the GPU.
#
# ## What you'll learn
#
# - augmentation as an `nn.Module` on a batch: the course's policy as a Kornia 0.9
#   `AugmentationSequential` over image and mask (nearest interpolation keeps masks binary)
# - why the textbook version is slow on a GPU (per-op parameter sampling on the CPU, host
#   synchronisations, one resampling per geometric op), and a fused version of the same
#   policy that is not
# - the Lightning hook the augmentation runs in, and a uint8 cache with its DataModule
# - timing augmentation alone: Albumentations per image on CPU workers vs Kornia per batch
# - training with the augmentation inside the step, compared with notebook 02 from the logs
# - closing the gap to the bound, one measured step at a time
#
# Runs everywhere: without a GPU, Kornia runs on the CPU (the notebook says so) and the
# numbers tell the CPU's story; on a GPU the same cells measure the GPU's. The reference GPU
# numbers at the end come from `make bench` on an H100.

# %% tags=["parameters"]
profile = ""            # smoke, cpu or gpu; empty: $NAILSEG_PROFILE, else chosen from the hardware
data_root = ""          # your own photos (Images/<type>/, Masks/<type>/); empty: the synthetic set
num_images = None       # size of the synthetic set (ignored with data_root)
image_size = None       # side of the square images the model sees
batch_size = None
max_steps = None        # optimizer steps of the Kornia training
compare_epochs = None   # epochs of the speed-only Albumentations run
encoder = None          # smp encoder name
lr = None               # peak learning rate
num_workers = None      # CPU workers (Albumentations, PNG decoding)
precision = None        # Lightning precision, e.g. 32-true, bf16-mixed
accelerator = None      # cpu or gpu
max_train_batches = None  # cap per epoch (0: the whole set)
max_valid_batches = None
bench_steps = None      # batches per timed window
bench_repeats = None    # timed windows per measurement

# %%
from nailseg_common.environment import environment_report
from nailseg_common.preparation import ensure_prepared, fit_batch_to_split
from nailseg_common.profiles import select_profile

cfg = select_profile(profile, num_images=num_images, image_size=image_size, batch_size=batch_size,
                     max_steps=max_steps, compare_epochs=compare_epochs, encoder=encoder, lr=lr,
                     num_workers=num_workers, precision=precision, accelerator=accelerator,
                     max_train_batches=max_train_batches, max_valid_batches=max_valid_batches,
                     bench_steps=bench_steps, bench_repeats=bench_repeats)
print(environment_report(cfg))
data = ensure_prepared(cfg, data_root)
cfg = fit_batch_to_split(cfg, data)
print("data:", data.raw)
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
#| export gpu_augmentation
from collections.abc import Mapping

import kornia.augmentation as K

from nailseg_common.policy import POLICY, PolicyOp


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
from IPython.display import display

from nailseg_common.policy import policy_table

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
#| export gpu_augmentation
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
# Then the module. `KorniaAugmentation` takes the batch contract (uint8 or float, any
# device) and returns a float image in [0, 1] and a {0, 1} label, with either
# implementation. The fused path draws every random number of the batch in one call on the
# batch's device, switches ops on per sample with `torch.where` instead of indexing, and
# blurs with Kornia's Gaussian kernels (one sigma per sample). Nothing is read back to the
# host, so the CPU just queues GPU work and runs ahead.
#
# A seed makes it repeatable: `KorniaAugmentation(seed=0)` owns its random generator;
# without a seed it uses PyTorch's global one, so `pl.seed_everything` covers it.

# %%
#| export gpu_augmentation
from kornia.filters import filter2d_separable, get_gaussian_kernel1d
from torch import nn

from nailseg_common.models import to_unit_float

IMPLEMENTATIONS = ("fused", "sequential")


class KorniaAugmentation(nn.Module):
    """The course's augmentation policy on a batch: ``forward(image, label) -> (image, label)``.

    ``implementation`` is ``"fused"`` (default) or ``"sequential"`` (:func:`kornia_sequential`);
    ``policy`` may hold a subset of :data:`POLICY`; ``seed`` gives the module its own generator.
    """

    def __init__(self, policy: Mapping[str, PolicyOp] = POLICY, implementation: str = "fused",
                 seed: int | None = None):
        super().__init__()
        if implementation not in IMPLEMENTATIONS:
            raise ValueError(f"implementation must be one of {IMPLEMENTATIONS}, got {implementation!r}.")
        _check_policy(policy)
        self.policy = dict(policy)
        self.implementation = implementation
        self.seed = seed
        self.sequential = kornia_sequential(policy) if implementation == "sequential" else None
        self._generators: dict[str, torch.Generator] = {}
        self._cpu_rng_state = (torch.Generator().manual_seed(seed).get_state()
                               if seed is not None else None)

    def extra_repr(self) -> str:
        return f"implementation={self.implementation!r}, ops={list(self.policy)}, seed={self.seed}"

    def _generator(self, device: torch.device) -> torch.Generator | None:
        if self.seed is None:
            return None
        key = str(device)
        if key not in self._generators:
            self._generators[key] = torch.Generator(device=device).manual_seed(self.seed)
        return self._generators[key]

    @torch.no_grad()
    def forward(self, image: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if image.ndim != 4 or image.shape[1] != 3 or label.ndim != 4 or label.shape[1] != 1:
            raise ValueError(f"Expected image B×3×H×W and label B×1×H×W, got "
                             f"{tuple(image.shape)} and {tuple(label.shape)}.")
        if image.shape[0] != label.shape[0] or image.shape[2:] != label.shape[2:]:
            raise ValueError(f"Image {tuple(image.shape)} and label {tuple(label.shape)} differ "
                             "in batch size or spatial size.")
        image, label = to_unit_float(image), label.float()
        if self.implementation == "sequential":
            return self._forward_sequential(image, label)
        return self._forward_fused(image, label)

    def _forward_sequential(self, image, label):
        # Kornia samples with the global CPU generator: with a seed, swap in our own state.
        if self._cpu_rng_state is None:
            image, label = self.sequential(image, label)
        else:
            with torch.random.fork_rng(devices=[]):
                torch.set_rng_state(self._cpu_rng_state)
                image, label = self.sequential(image, label)
                self._cpu_rng_state = torch.get_rng_state()
        return image.clamp_(0, 1), label

    def _forward_fused(self, image, label):
        p = self.policy
        batch, _, height, width = image.shape
        device = image.device
        generator = self._generator(device)
        # Every uniform number of the batch in one call: gates and parameters, one row per sample.
        u = torch.rand(batch, 12, device=device, generator=generator)

        def gate(name: str, column: int) -> torch.Tensor:
            if name not in p:
                return torch.zeros_like(u[:, 0], dtype=torch.bool)
            return u[:, column] < p[name].probability

        def uniform(column: int, low: float, high: float) -> torch.Tensor:
            return low + (high - low) * u[:, column]

        if any(name in p for name in ("horizontal_flip", "vertical_flip", "affine")):
            flip_x = torch.where(gate("horizontal_flip", 0), -1.0, 1.0)
            flip_y = torch.where(gate("vertical_flip", 1), -1.0, 1.0)
            angle = shift_x = shift_y = torch.zeros_like(flip_x)
            scale = torch.ones_like(flip_x)
            if "affine" in p:
                q, on = p["affine"].params, gate("affine", 2)
                angle = torch.where(on, torch.deg2rad(uniform(3, -q["rotate_deg"], q["rotate_deg"])), 0.0)
                scale = torch.where(on, uniform(4, *q["scale"]), 1.0)
                shift_x = torch.where(on, uniform(5, -q["translate"], q["translate"]) * width, 0.0)
                shift_y = torch.where(on, uniform(6, -q["translate"], q["translate"]) * height, 0.0)
            image, label = _warp(image, label, flip_x, flip_y, angle, scale, shift_x, shift_y)
        if "brightness_contrast" in p:
            q, on = p["brightness_contrast"].params, gate("brightness_contrast", 7)
            alpha = torch.where(on, uniform(8, 1 - q["contrast"], 1 + q["contrast"]), 1.0)
            beta = torch.where(on, uniform(9, -q["brightness"], q["brightness"]), 0.0)
            image = (image * alpha.view(-1, 1, 1, 1) + beta.view(-1, 1, 1, 1)).clamp_(0, 1)
        if "gaussian_noise" in p:
            std = torch.where(gate("gaussian_noise", 10),
                              uniform(11, *p["gaussian_noise"].params["std"]), 0.0)
            noise = torch.randn(image.shape, device=device, generator=generator)
            image = (image + noise * std.view(-1, 1, 1, 1)).clamp_(0, 1)
        if "gaussian_blur" in p:
            q = p["gaussian_blur"].params
            # Two more numbers per sample (a second call keeps the columns above stable).
            v = torch.rand(batch, 2, device=device, generator=generator)
            on = v[:, 0] < p["gaussian_blur"].probability
            sigma = (q["sigma"][0] + (q["sigma"][1] - q["sigma"][0]) * v[:, 1]).view(-1, 1)
            kernel = get_gaussian_kernel1d(q["kernel"], sigma)
            blurred = filter2d_separable(image, kernel, kernel, border_type="reflect")
            image = torch.where(on.view(-1, 1, 1, 1), blurred, image)
        return image, label


# %%
augment = KorniaAugmentation(seed=0)
print(augment)

# %% [markdown]
# ## The hook it runs in
#
# The augmentation runs inside notebook 02's `LitNailSegmentation`, unchanged: the model
# takes an optional `gpu_augmentation` module, and Lightning calls `on_after_batch_transfer`
# once the batch is on the device. Here is that hook again, as the package holds it:
# training batches are augmented, validation batches are only converted, so validation sees
# exactly what it saw in notebook 02.

# %%
import inspect

from IPython.display import Code

from nailseg_common.models import LitNailSegmentation

Code(inspect.getsource(LitNailSegmentation.on_after_batch_transfer), language="python")

# %% [markdown]
# ## A pre-resized uint8 cache and its DataModule
#
# With augmentation on the GPU the CPU is left with decoding and resizing, and at H100 speed
# even that is too slow for 16 cores. Both are the same every epoch, so they are done once:
# every image and mask is resized with the baseline's validation transform and stored as one
# contiguous uint8 array per split (`N×3×S×S` and `N×1×S×S`) under the prepared folder. The
# cache is written to a temporary folder and renamed into place under a lock, and a
# manifest (the source files, the size, and a size and digest of every written file, from
# `nailseg_common.integrity`) tells a later run whether it is still current and whole: a
# truncated, deleted or replaced file makes it rebuild rather than train on broken data.

# %%
#| export cache
import json
import os
from pathlib import Path

import numpy as np
import torch

from nailseg_common.atomic import folder_lock, staged_folder
from nailseg_common.augmentation import valid_transform
from nailseg_common.integrity import file_records, verify_records
from nailseg_common.paths import DataLocation
from nailseg_common.preparation import read_split

SPLITS = ("train", "valid")
CACHE_FORMAT = 2
CACHE_FILES = tuple(f"{split}_{kind}.npy" for split in SPLITS for kind in ("images", "labels"))


def cache_dir(location: DataLocation, image_size: int) -> Path:
    """Where the cache for ``image_size`` lives."""
    return location.prepared / f"cache_{image_size}"


def _manifest(location: DataLocation, image_size: int) -> dict:
    """What the cache is made from: per split, the npy files (relative to the prepared folder)."""
    sources = {split: [os.path.relpath(p, location.prepared)
                       for p in read_split(location, split)["npy_image"]] for split in SPLITS}
    return {"format": CACHE_FORMAT, "image_size": image_size, "sources": sources}


def _is_current(folder: Path, manifest: dict) -> bool:
    """The cache was made from these sources, and every file is as it was written."""
    try:
        written = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    files = written.pop("files", None)
    return written == manifest and isinstance(files, dict) and not verify_records(folder, files)


def _write_split(location: DataLocation, split: str, image_size: int, folder: Path) -> None:
    """Resize every pair of ``split`` into two uint8 memory-mapped arrays in ``folder``."""
    frame, transform = read_split(location, split), valid_transform(image_size)
    shape = (len(frame), image_size, image_size)
    images = np.lib.format.open_memmap(folder / f"{split}_images.npy", mode="w+",
                                       dtype=np.uint8, shape=(shape[0], 3, *shape[1:]))
    labels = np.lib.format.open_memmap(folder / f"{split}_labels.npy", mode="w+",
                                       dtype=np.uint8, shape=(shape[0], 1, *shape[1:]))
    for i, (image_file, mask_file) in enumerate(zip(frame["npy_image"], frame["npy_mask"])):
        image, mask = np.load(image_file), np.load(mask_file)
        if image.ndim != 3 or image.shape[2] != 3 or mask.shape[:2] != image.shape[:2]:
            raise ValueError(f"{image_file}: expected an H×W×3 image with an H×W×1 mask, got "
                             f"{image.shape} and {mask.shape}; re-run `make data`.")
        out = transform(image=image, mask=mask.reshape(mask.shape[:2]))
        images[i] = out["image"].transpose(2, 0, 1)
        labels[i, 0] = out["mask"]
    images.flush()
    labels.flush()


def ensure_cache(location: DataLocation, image_size: int) -> Path:
    """Build the uint8 cache of both splits once; later calls check it and return its folder.

    A cache made from another split, or with a missing or resized file, is rebuilt.
    """
    target = cache_dir(location, image_size)
    manifest = _manifest(location, image_size)
    if _is_current(target, manifest):
        return target
    with folder_lock(target):
        if _is_current(target, manifest):
            return target
        with staged_folder(target) as staging:
            for split in SPLITS:
                _write_split(location, split, image_size, staging)
            files = file_records(staging, CACHE_FILES)
            (staging / "manifest.json").write_text(json.dumps({**manifest, "files": files}))
    return target


def load_cache(location: DataLocation, image_size: int, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The cached ``(images, labels)`` of one split as uint8 tensors in memory (built if needed)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}.")
    folder = ensure_cache(location, image_size)
    return tuple(torch.from_numpy(np.load(folder / f"{split}_{kind}.npy")) for kind in ("images", "labels"))


# %% [markdown]
# A batch is then a single gather from that array: `BatchSlices` is a dataset whose item is
# a whole batch, and a `BatchSampler` hands it a list of indices. No per-item `__getitem__`,
# no collate, uint8 on the wire (four times less than float32). The DataModule pins the
# memory when training on a GPU, so Lightning's `non_blocking` copy really is asynchronous.
# Its training batches are *not* augmented: pair it with
# `LitNailSegmentation(gpu_augmentation=KorniaAugmentation())`.

# %%
#| export cache
import pytorch_lightning as pl
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler

from nailseg_common.profiles import Profile


class BatchSlices(torch.utils.data.Dataset):
    """Whole batches from contiguous uint8 tensors: ``dataset[list_of_indices]`` is one batch."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor):
        if images.dtype != torch.uint8 or images.shape[0] != labels.shape[0]:
            raise ValueError(f"Expected uint8 images and labels of the same length, got {images.dtype} "
                             f"{tuple(images.shape)} and {tuple(labels.shape)}.")
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return self.images.shape[0]

    def __getitem__(self, indices) -> dict[str, torch.Tensor]:
        index = torch.as_tensor(indices, dtype=torch.long)
        return {"image": self.images.index_select(0, index), "label": self.labels.index_select(0, index)}


class CachedNailDataModule(pl.LightningDataModule):
    """Batches of the batch contract (uint8) straight from the pre-resized cache.

    ``num_workers`` defaults to at most 2 of the profile's (a gather is a memory copy);
    ``pin_memory`` defaults to on when the profile trains on a GPU.
    """

    def __init__(self, location: DataLocation, profile: Profile, num_workers: int | None = None,
                 pin_memory: bool | None = None, seed: int = 0):
        super().__init__()
        self.location, self.profile, self.seed = location, profile, seed
        self.num_workers = min(profile.num_workers, 2) if num_workers is None else num_workers
        self.pin_memory = profile.device.type == "cuda" if pin_memory is None else pin_memory
        self.data: dict[str, BatchSlices] = {}

    def prepare_data(self) -> None:
        ensure_cache(self.location, self.profile.image_size)

    def setup(self, stage: str | None = None) -> None:
        for split in SPLITS:
            if split not in self.data:
                images, labels = load_cache(self.location, self.profile.image_size, split)
                if self.num_workers > 0:  # workers started with spawn get handles, not copies
                    images, labels = images.share_memory_(), labels.share_memory_()
                self.data[split] = BatchSlices(images, labels)

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        if split not in self.data:
            self.setup()
        dataset = self.data[split]
        if shuffle:
            order = RandomSampler(dataset, generator=torch.Generator().manual_seed(self.seed))
        else:
            order = SequentialSampler(dataset)
        batches = BatchSampler(order, self.profile.batch_size,
                               drop_last=shuffle and len(dataset) >= self.profile.batch_size)
        return DataLoader(dataset, sampler=batches, batch_size=None, num_workers=self.num_workers,
                          pin_memory=self.pin_memory, persistent_workers=self.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("valid", shuffle=False)


# %%
images, labels = load_cache(data, cfg.image_size, "train")
print(f"cache: {cache_dir(data, cfg.image_size).name}  "
      f"images {tuple(images.shape)} {images.dtype}, labels {tuple(labels.shape)} {labels.dtype}, "
      f"{(images.numel() + labels.numel()) / 2**20:.1f} MiB")
batch_image, batch_label = images[: cfg.batch_size].to(device), labels[: cfg.batch_size].to(device)
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
#| export gpu_augmentation
import albumentations as A

from nailseg_common.augmentation import augment_pairs, policy_transforms


def gallery_panels(images: torch.Tensor, labels: torch.Tensor, seed: int = 0) -> dict:
    """The same uint8 batch (``N×3×S×S``, ``N×1×S×S``) as input, through Albumentations and both
    Kornia implementations: ``{name: (N×S×S×3 float images in [0, 1], N×S×S masks)}``."""
    hwc, masks = images.permute(0, 2, 3, 1).numpy(), labels[:, 0].numpy()
    panels = {"input (resized)": (hwc / 255, masks),
              "Albumentations": augment_pairs(A.Compose(policy_transforms(), seed=seed), hwc, masks)}
    for implementation in IMPLEMENTATIONS:
        image, label = KorniaAugmentation(implementation=implementation, seed=seed)(images, labels)
        panels[f"Kornia {implementation}"] = (image.permute(0, 2, 3, 1).numpy(), label[:, 0].numpy())
    return panels


# %%
import matplotlib.pyplot as plt

from nailseg_common import plots

plots.plot_augmentation_gallery(gallery_panels(images[:4], labels[:4], seed=1))
plt.show()

# %% [markdown]
# ## Augmentation alone: per image on CPU workers vs per batch
#
# Before training, the augmentation by itself: Albumentations per image in the profile's CPU
# workers (as in notebook 02, on already-resized images), and Kornia on whole batches on the
# CPU and, when the profile uses one, on the GPU. Each method is timed with notebook 05's
# `measure_loader` (explained there): warm-up batches, then several timed windows with the
# GPU synchronised at both ends of each; bars show the median and whiskers the spread.

# %%
#| export gpu_augmentation
import pandas as pd
from torch.utils.data import DataLoader

from nailseg_common.datasets import seed_worker_transform
from nailseg_common.profiles import Profile
from nailseg_common.timing import measure_loader


class _AlbumentationsItems(torch.utils.data.Dataset):
    """Per-item Albumentations over a uint8 batch-contract cache (for :func:`time_augmentations`)."""

    def __init__(self, images, labels):
        self.images, self.labels = images, labels
        self.transform = A.Compose(policy_transforms())

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        out = self.transform(image=self.images[index].permute(1, 2, 0).numpy(),
                             mask=self.labels[index, 0].numpy())
        return {"image": torch.from_numpy(out["image"].transpose(2, 0, 1).copy()),
                "label": torch.from_numpy(out["mask"][None].copy())}


def _repeat(batch: dict):
    """The same batch forever, already on its device (augmentation-only timing)."""
    while True:
        yield dict(batch)


def time_augmentations(images: torch.Tensor, labels: torch.Tensor, profile: Profile) -> pd.DataFrame:
    """Augmentation alone, images/s (median, min, max over the windows): Albumentations per
    image on the profile's CPU workers, Kornia per batch on the CPU and the profile's device."""
    rows, steps, repeats = [], profile.bench_steps, profile.bench_repeats

    def add(method, where, workers, result):
        rows.append({"method": method, "runs on": where, "workers": workers,
                     "img/s (median)": result["img_s"], "min": result["img_s_min"],
                     "max": result["img_s_max"]})

    workers = profile.num_workers
    loader = DataLoader(_AlbumentationsItems(images, labels), batch_size=profile.batch_size,
                        shuffle=True, drop_last=True, num_workers=workers,
                        persistent_workers=workers > 0,
                        worker_init_fn=seed_worker_transform if workers else None)
    add("Albumentations, per image", "CPU", workers,
        measure_loader(loader, torch.device("cpu"), 1, steps, repeats))
    for device in dict.fromkeys([torch.device("cpu"), profile.device]):
        batch = {"image": images[:profile.batch_size].to(device),
                 "label": labels[:profile.batch_size].to(device)}
        for implementation in IMPLEMENTATIONS:
            augmentation = KorniaAugmentation(implementation=implementation, seed=0)
            result = measure_loader(_repeat(batch), device, 2, steps, repeats, augmentation)
            add(f"Kornia {implementation}, per batch", device.type.upper(), 0, result)
    return pd.DataFrame(rows)


# %%
timing = time_augmentations(images, labels, cfg)
display(timing.round(1))
plots.plot_augmentation_timing(timing)
plt.show()

# %% [markdown]
# On a CPU, Kornia competes with the model for the same cores, and at small image sizes
# per-op overheads dominate, so a per-batch module is not automatically faster there. On a
# GPU the picture flips: the fused module is a handful of kernels per batch with no CPU
# worker at all, while the textbook `AugmentationSequential` spends most of its time on the
# CPU, so the GPU waits for it.
#
# ## Training with the augmentation inside the step
#
# The model is notebook 02's `LitNailSegmentation`; the only change is
# `gpu_augmentation=KorniaAugmentation()`, fed by the cache. It trains for the profile's
# `max_steps`, with a progress line per epoch.

# %%
import time

import pytorch_lightning as pl

from nailseg_common.training import DataWaitTimer, latest_run_metrics, make_trainer, read_metrics

pl.seed_everything(0, verbose=False)
model = LitNailSegmentation(cfg.encoder, cfg.lr, cfg.max_steps, gpu_augmentation=KorniaAugmentation())
kornia_timer = DataWaitTimer()
trainer = make_trainer(cfg, "03_kornia", callbacks=[kornia_timer])
start = time.perf_counter()
trainer.fit(model, CachedNailDataModule(data, cfg))
print(f"{trainer.current_epoch} epoch(s) in {time.perf_counter() - start:.0f} s; "
      f"{100 * kornia_timer.summary()['wait_share']:.0f}% of the step time waited for data")
kornia_metrics = read_metrics(trainer)

# %% [markdown]
# ### Speed: a short Albumentations run is enough
#
# Seconds per epoch settle after the first epoch, so to compare speed we do not re-train
# notebook 02's pipeline for the whole profile: we run it for `compare_epochs` epochs
# (progress shown) and compare the median epoch time (validation included), leaving out the
# first epoch, which starts workers and warms caches, whenever there is more than one.

# %%
from nailseg_common.datasets import NailDataModule
from nailseg_common.training import steady_epoch_seconds

pl.seed_everything(0, verbose=False)
short = make_trainer(cfg, "03_albumentations_speed", max_epochs=cfg.compare_epochs, max_steps=-1,
                     enable_checkpointing=False)
short.fit(LitNailSegmentation(cfg.encoder, cfg.lr, cfg.max_steps), NailDataModule(data, cfg))
speed = pd.DataFrame({
    "s / epoch": {"Albumentations on CPU workers": steady_epoch_seconds(read_metrics(short)),
                  f"cache + Kornia on {device.type.upper()}": steady_epoch_seconds(kornia_metrics)},
})
speed["speed-up"] = speed["s / epoch"].iloc[0] / speed["s / epoch"]
speed.round(2)

# %% [markdown]
# ### Accuracy: the logs of the full runs
#
# Accuracy needs whole runs, and notebook 02 already made one in this profile: its CSV log
# is under `runs/<profile>/02_lightning_baseline/`. We draw both runs together (the same
# model, loss, policy and schedule; only where and how the augmentation runs differs).

# %%
runs = {f"cache + Kornia ({device.type.upper()})": kornia_metrics}
baseline = latest_run_metrics(cfg, "02_lightning_baseline")
if baseline is None:
    print(f"No finished run of notebook 02 in the {cfg.name!r} profile under runs/: run notebook "
          "02 with the same profile first to compare accuracy; showing the Kornia run alone.")
else:
    runs["Albumentations (notebook 02)"] = baseline[0]
    print("notebook 02's log:", baseline[1].split("runs/")[-1])
plots.plot_training_curves(runs)
plt.show()
pd.DataFrame({name: m[["val_dice", "val_iou"]].iloc[-1] for name, m in runs.items()}).T.round(3)

# %% [markdown]
# The same policy with other random draws reaches a similar Dice; in the smoke profile one
# short epoch says little about accuracy. Runs of different lengths (notebook 02 run with
# other overrides) are not comparable: check the epochs on the x axis.
#
# ## Closing the gap to the bound, step by step
#
# The **bound** is the same training step with batches already on the device: no loading,
# no copy, no augmentation. A pipeline is good when it trains at nearly the bound's rate. On
# an H100 with 16 cores the straightforward GPU version (PNG decode and resize in 15
# workers, Kornia inside the step) reaches only about half of it, no better than
# Albumentations. Each row below adds one change and measures the training rate with
# notebook 05's harness (warm-up, then timed windows; median and spread):
#
# 0. PNG decode + resize in workers, the textbook `AugmentationSequential` in the step;
# 1. the fused Kornia module: no host synchronisations, one resampling, parameters drawn on
#    the device;
# 2. the uint8 cache instead of PNG decoding: a batch is one gather from a contiguous array;
# 3. pinned memory (page-locked host buffers), so Lightning's `non_blocking=True` copy is
#    really asynchronous and overlaps with the GPU's work instead of stalling the CPU.

# %%
from nailseg_common.benchmark import train_loader_of
from nailseg_common.timing import measure_training, resident_batches

on_gpu = device.type == "cuda"
steps = [
    ("0 · PNG decode + resize, Kornia sequential",
     lambda: train_loader_of(NailDataModule(data, cfg, augment=False)), "sequential"),
    ("1 · + fused Kornia (no host syncs)",
     lambda: train_loader_of(NailDataModule(data, cfg, augment=False)), "fused"),
    ("2 · + uint8 cache instead of PNG decode",
     lambda: train_loader_of(CachedNailDataModule(data, cfg, pin_memory=False)), "fused"),
]
if on_gpu:
    steps.append(("3 · + pinned memory, non-blocking copy",
                  lambda: train_loader_of(CachedNailDataModule(data, cfg, pin_memory=True)), "fused"))
else:
    print("No GPU: step 3 (pinned memory for asynchronous host-to-GPU copies) has nothing to "
          "overlap here; skipped.")
measure_train = on_gpu or cfg.name != "smoke"
if not measure_train:
    print("Smoke profile on a CPU: only the input side is timed (training steps would take minutes here).")

warmup, n_steps, repeats = max(1, cfg.bench_steps // 5), cfg.bench_steps, cfg.bench_repeats
rows = []
if measure_train:
    bound = measure_training(resident_batches(train_loader_of(CachedNailDataModule(data, cfg)), device),
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
# `make bench BENCH_OUT=results/benchmark_h100.json` and committed; the cell below reads them
# from there, with the device, versions and date of that run.

# %%
from nailseg_common.benchmark import load_results, results_label

reference = load_results()
if reference is None:
    print("No committed GPU results: run `make bench BENCH_OUT=results/benchmark_h100.json` on a GPU.")
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
#   batches only; the CPU side shrinks to serving uint8 batches from a cache.
# - The textbook `AugmentationSequential` is not fast on a GPU: CPU-side parameter sampling,
#   a CPU noise tensor and host synchronisations make the CPU, not the GPU, the limit. The
#   same policy fused (one matrix, one resampling, `torch.where` gates, random numbers drawn
#   on the device) costs a few milliseconds per batch and never stalls the host.
# - Speed is compared on a few epochs, accuracy on the logs of full runs.
# - To train at the bound the input side must be boring: decode and resize once (a uint8
#   cache), copy uint8 from pinned memory with `non_blocking=True`, and never make the CPU
#   wait for the GPU.
#
# ## Exercises
#
# 1. Add a policy row (say `RandomPerspective` or a hue shift) to `kornia_sequential`, and the
#    alignment test for it in `tests/test_gpu_augmentation.py`. What does it take to add it to
#    the fused version?
# 2. Count host synchronisations: wrap one call of each implementation in
#    `torch.cuda.set_sync_debug_mode("warn")` on a GPU. Then add `loss.item()` to
#    `training_step` and measure what it costs.
# 3. The whole cache at 384 px is about 0.5 GB: keep it on the GPU instead and index batches
#    there. How close to the bound does that get, and what does it cost in GPU memory for a
#    larger dataset?
# 4. Run the "closing the gap" cell with `num_workers` set to 1, 2 and 8 for step 0. Where does
#    the PNG-decoding pipeline stop scaling on your machine?
