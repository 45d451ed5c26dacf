"""The augmentation policy on a whole batch, on whatever device the batch is on (Kornia 0.9).

Augmentation becomes an ``nn.Module``: it takes a ``B×3×H×W`` image batch and the
``B×1×H×W`` label batch of the batch contract and returns both augmented, so it can
run on the GPU right after the batch arrives (``LitNailSegmentation``'s
``on_after_batch_transfer``) instead of per image in CPU workers.

Two implementations of the same :data:`~nailseg_common.policy.POLICY`:

``"sequential"``
    The textbook Kornia version, :func:`kornia_sequential`: one
    ``kornia.augmentation`` module per policy row inside an ``AugmentationSequential``
    with ``data_keys=["input", "mask"]`` (masks resampled with nearest neighbour).
    Easy to read and to extend, but each op draws its parameters with the CPU
    generator and copies them to the device, the noise op draws a full-size noise
    tensor on the CPU, ``ColorJiggle`` and ``gaussian_blur2d`` read values on the host
    (``.any()``/``bool()``: a device synchronisation each), and every geometric op
    resamples the whole batch again.
``"fused"`` (default)
    The same policy written for the GPU: every random number of the batch is drawn in
    one call on the batch's device, the two flips and the affine are composed into
    one matrix per sample, the batch is resampled once (bilinear for the image,
    nearest for the mask, through the same grid), ops a sample does not get are
    switched off with ``torch.where`` instead of indexing, and the blur uses Kornia's
    kernels (``get_gaussian_kernel1d`` + ``filter2d_separable``) with one sigma per
    sample. Nothing reads a value back to the host, so the CPU only queues kernels
    and runs ahead of the GPU.

Randomness is per sample. ``seed=None`` draws from PyTorch's global generators (so
``pl.seed_everything``/``torch.manual_seed`` make a run repeatable); ``seed=<int>``
gives the module its own generator, so two modules built with the same seed produce
the same sequence of augmentations for the same sequence of batches on the same
device type, whatever else uses the global generator.
"""

from __future__ import annotations

from collections.abc import Mapping

import kornia.augmentation as K
import torch
import torch.nn.functional as F
from kornia.filters import filter2d_separable, get_gaussian_kernel1d
from torch import nn

from .models import to_unit_float
from .policy import POLICY, PolicyOp

IMPLEMENTATIONS = ("fused", "sequential")


def _check_policy(policy: Mapping[str, PolicyOp]) -> None:
    unknown = set(policy) - set(POLICY)
    if unknown:
        raise ValueError(f"Unknown policy ops {sorted(unknown)}; known: {list(POLICY)}.")


def kornia_sequential(policy: Mapping[str, PolicyOp] = POLICY) -> K.AugmentationSequential:
    """The policy as a Kornia ``AugmentationSequential`` over ``(image, mask)``.

    Ops not in ``policy`` are left out, so tests can build one op alone. Masks use
    nearest interpolation (Kornia's default for ``DataKey.MASK``); pixels moved in from
    outside the frame are 0 in both. Kornia's ``RandomGaussianNoise`` has a fixed
    standard deviation: it uses the middle of the policy's range.
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


def _to_unit_float(image: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch contract tensors as float32: image in [0, 1], label in {0, 1}."""
    if image.ndim != 4 or image.shape[1] != 3 or label.ndim != 4 or label.shape[1] != 1:
        raise ValueError(f"Expected image B×3×H×W and label B×1×H×W, got {tuple(image.shape)} "
                         f"and {tuple(label.shape)}.")
    if image.shape[0] != label.shape[0] or image.shape[2:] != label.shape[2:]:
        raise ValueError(f"Image {tuple(image.shape)} and label {tuple(label.shape)} differ in "
                         "batch size or spatial size.")
    return to_unit_float(image), label.float()


class KorniaAugmentation(nn.Module):
    """The course's augmentation policy on a batch: ``forward(image, label) -> (image, label)``.

    Takes batch-contract tensors (uint8 or float, any device) and returns a float32
    image in [0, 1] and a float32 label in {0, 1} on the same device. See the module
    docstring for ``implementation`` and ``seed``; ``policy`` may hold a subset of
    :data:`~nailseg_common.policy.POLICY` (with changed probabilities, e.g. for tests).
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
        image, label = _to_unit_float(image, label)
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
            return u[:, column] < p[name].probability if name in p else torch.zeros_like(u[:, 0], dtype=torch.bool)

        def uniform(column: int, low: float, high: float) -> torch.Tensor:
            return low + (high - low) * u[:, column]

        # Geometry: flips then affine, composed into one 2×2 matrix + shift in pixel units
        # around the image centre (forward map, input -> output).
        geometric = [name for name in ("horizontal_flip", "vertical_flip", "affine") if name in p]
        if geometric:
            flip_x = torch.where(gate("horizontal_flip", 0), -1.0, 1.0)
            flip_y = torch.where(gate("vertical_flip", 1), -1.0, 1.0)
            affine_on = gate("affine", 2)
            if "affine" in p:
                q = p["affine"].params
                angle = torch.deg2rad(uniform(3, -q["rotate_deg"], q["rotate_deg"]))
                scale = uniform(4, *q["scale"])
                shift_x = uniform(5, -q["translate"], q["translate"]) * width
                shift_y = uniform(6, -q["translate"], q["translate"]) * height
                angle, shift_x, shift_y = (torch.where(affine_on, v, 0.0) for v in (angle, shift_x, shift_y))
                scale = torch.where(affine_on, scale, 1.0)
            else:
                angle = shift_x = shift_y = torch.zeros_like(flip_x)
                scale = torch.ones_like(flip_x)
            image, label = _warp(image, label, flip_x, flip_y, angle, scale, shift_x, shift_y)

        if "brightness_contrast" in p:
            q = p["brightness_contrast"].params
            on = gate("brightness_contrast", 7)
            alpha = torch.where(on, uniform(8, 1 - q["contrast"], 1 + q["contrast"]), 1.0)
            beta = torch.where(on, uniform(9, -q["brightness"], q["brightness"]), 0.0)
            image = (image * alpha.view(-1, 1, 1, 1) + beta.view(-1, 1, 1, 1)).clamp_(0, 1)
        if "gaussian_noise" in p:
            std = torch.where(gate("gaussian_noise", 10), uniform(11, *p["gaussian_noise"].params["std"]), 0.0)
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


def _warp(image, label, flip_x, flip_y, angle, scale, shift_x, shift_y):
    """Resample image (bilinear) and label (nearest) through one grid per sample.

    The forward map in pixel units around the centre is ``p_out = R(angle)·scale·Flip·p_in
    + shift``; ``affine_grid`` wants the inverse, ``p_in = Flip·R(-angle)/scale·(p_out -
    shift)``, in coordinates normalised by the half width and half height. Built from
    Python numbers and device tensors only: a ``torch.tensor(..., device="cuda")`` would
    be a blocking host-to-device copy.
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


def gallery_panels(images: torch.Tensor, labels: torch.Tensor, seed: int = 0) -> dict:
    """The same uint8 batch (``N×3×S×S``, ``N×1×S×S``) as input, through Albumentations and both
    Kornia implementations: ``{name: (N×S×S×3 float images in [0, 1], N×S×S masks)}``."""
    import albumentations as A

    from .augmentation import augment_pairs, policy_transforms

    hwc, masks = images.permute(0, 2, 3, 1).numpy(), labels[:, 0].numpy()
    panels = {"input (resized)": (hwc / 255, masks),
              "Albumentations": augment_pairs(A.Compose(policy_transforms(), seed=seed), hwc, masks)}
    for implementation in ("fused", "sequential"):
        image, label = KorniaAugmentation(implementation=implementation, seed=seed)(images, labels)
        panels[f"Kornia {implementation}"] = (image.permute(0, 2, 3, 1).numpy(), label[:, 0].numpy())
    return panels


def time_augmentations(images: torch.Tensor, labels: torch.Tensor, batch_size: int,
                       num_workers: int, steps: int = 5, repeats: int = 3):
    """Augmentation alone, images/s: Albumentations per image on ``num_workers`` CPU workers,
    Kornia (both implementations) per batch on the CPU and, if there is one, on the GPU.

    Each method gets warm-up batches, then ``repeats`` windows of ``steps`` batches; the
    GPU is synchronised at each window's ends. Returns a DataFrame with the median,
    min and max images/s over the windows. The inputs are uint8 batch-contract tensors.
    """
    import pandas as pd
    from torch.utils.data import DataLoader

    from .augmentation import policy_transforms
    from .benchmark import measure_loader
    from .datasets import seed_worker_transform

    rows = []

    def add(method, where, workers, result):
        rows.append({"method": method, "runs on": where, "workers": workers,
                     "img/s (median)": result["img_s"], "min": result["img_s_min"],
                     "max": result["img_s_max"]})

    items = _AlbumentationsItems(images, labels, policy_transforms())
    loader = DataLoader(items, batch_size=batch_size, shuffle=True, drop_last=True,
                        num_workers=num_workers, persistent_workers=num_workers > 0,
                        worker_init_fn=seed_worker_transform if num_workers else None)
    add("Albumentations, per image", "CPU", num_workers,
        measure_loader(loader, torch.device("cpu"), 1, steps, repeats))
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    for device in devices:
        batch = {"image": images[:batch_size].to(device), "label": labels[:batch_size].to(device)}
        for implementation in IMPLEMENTATIONS:
            augmentation = KorniaAugmentation(implementation=implementation, seed=0)
            result = measure_loader(_Repeat(batch), device, 2, steps, repeats, augmentation)
            add(f"Kornia {implementation}, per batch", device.type.upper(), 0, result)
    return pd.DataFrame(rows)


class _AlbumentationsItems(torch.utils.data.Dataset):
    """Per-item Albumentations over a uint8 batch-contract cache (for :func:`time_augmentations`)."""

    def __init__(self, images, labels, transforms):
        import albumentations as A

        self.images, self.labels = images, labels
        self.transform = A.Compose(transforms)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        out = self.transform(image=self.images[index].permute(1, 2, 0).numpy(),
                             mask=self.labels[index, 0].numpy())
        return {"image": torch.from_numpy(out["image"].transpose(2, 0, 1).copy()),
                "label": torch.from_numpy(out["mask"][None].copy())}


class _Repeat:
    """The same batch forever, already on its device (augmentation-only timing)."""

    def __init__(self, batch):
        self.batch = batch

    def __iter__(self):
        while True:
            yield dict(self.batch)
