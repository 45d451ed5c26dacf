"""The panels of an augmentation gallery, whatever the pipeline that draws them.

``plots.plot_augmentation_gallery`` draws ``{name: (N×S×S×3 floats in [0, 1], N×S×S
masks)}``; :func:`gallery_panels` builds that from a resized batch and the augmentation to
show, given as a function, so notebooks 02 (Albumentations), 03 (Kornia) and 04 (DALI)
draw their galleries the same way; :func:`augment_pairs` is the Albumentations one, and
:func:`one_per_type` picks and resizes the images to show;
:func:`albumentations_panels` is notebook 02's gallery. :func:`policy_table` shows the
policy of ``nailseg_common.pipelines.policy`` as a table (with the operators of a pipeline
that builds it, from :data:`BUILT_WITH`); :func:`fingerprints` hashes the images of batches,
:func:`item_shapes` lists what a loader's items carry and :func:`decoded_and_augmented` what a
batch became. Notebook 02's reporting: :func:`ready_draws` counts how often a transform
returns a sample resized and normalised, :func:`loaders_summary` says what a DataModule serves
and :func:`dataset_labels` stacks a dataset's labels.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from nailseg_common.data.images import read_binary_mask, read_rgb
from nailseg_common.data.preparation import read_pair, read_split
from nailseg_common.pipelines.policy import POLICY

BUILT_WITH = {  # how a pipeline builds each op of the policy (notebook 04's table)
    "DALI": {"horizontal_flip": "fn.transforms.scale, x by -1",
             "vertical_flip": "fn.transforms.scale, y by -1",
             "affine": "fn.transforms.scale/rotation/translation",
             "brightness_contrast": "fn.brightness_contrast",
             "gaussian_noise": "fn.noise.gaussian (stddev × 255)", "gaussian_blur": "fn.gaussian_blur"},
}


def policy_table(*pipelines: str) -> pd.DataFrame:
    """The policy as a table: op, probability, parameters, what it moves, and for each of
    ``pipelines`` (a key of :data:`BUILT_WITH`) the operators that build it."""
    return pd.DataFrame([{"op": p.op, "probability": p.probability,
                          "parameters": ", ".join(f"{k}={v}" for k, v in p.params.items()) or "-",
                          "applies to": "image + mask" if p.geometric else "image only",
                          **{name: BUILT_WITH[name][p.op] for name in pipelines}}
                         for p in POLICY.values()])


def fingerprints(batches) -> list[int]:
    """One hash per image of ``batches`` (batch-contract dicts), to compare sets of images."""
    return [hash(image.cpu().numpy().tobytes()) for batch in batches for image in batch["image"]]


def item_shapes(items) -> str:
    """One line per loader item (a dict with a ``file``): the file's name and every other
    field's shape, or its value when it has none."""
    lines = []
    for item in items:
        shapes = {k: getattr(v, "shape", v) for k, v in item.items() if k != "file"}
        lines.append(f"{item['file'].rsplit('/', 1)[-1]} {shapes}")
    return "\n".join(lines)


def decoded_and_augmented(image: torch.Tensor, augmented: torch.Tensor) -> str:
    """One line: a decoded batch's shape, dtype and device, and its augmentation's dtype and range."""
    return (f"decoded: {tuple(image.shape)} {image.dtype} {image.device} "
            f"| augmented: {augmented.dtype} [{augmented.min():.2f}, {augmented.max():.2f}]")


def augment_pairs(transform, images, masks) -> tuple[np.ndarray, np.ndarray]:
    """An Albumentations ``transform`` on each HxWx3 uint8 image and HxW mask:
    (N×S×S×3 floats in [0, 1], N×S×S)."""
    pairs = [transform(image=image, mask=mask) for image, mask in zip(images, masks, strict=True)]
    return np.stack([p["image"] for p in pairs]) / 255.0, np.stack([p["mask"] for p in pairs])


def one_per_type(frame: pd.DataFrame, resize, count: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """The first image of each ``type`` in a split's ``frame`` (at most ``count``), with its
    mask, through the Albumentations ``resize``: (N×S×S×3 uint8, N×S×S)."""
    examples = frame.groupby("type").head(1).head(count)
    pairs = [resize(image=read_rgb(image), mask=read_binary_mask(mask))
             for image, mask in zip(examples["image"], examples["mask"], strict=True)]
    return np.stack([p["image"] for p in pairs]), np.stack([p["mask"] for p in pairs])


def albumentations_panels(location, image_size: int, seed: int = 0) -> dict:
    """Notebook 02's gallery: :func:`one_per_type` of the training split of ``location`` at
    ``image_size``, then three draws of the Albumentations policy
    (``albumentations_pipeline.policy_transforms``)."""
    import albumentations as A

    from nailseg_common.pipelines import albumentations_pipeline as pipeline

    images, masks = one_per_type(read_split(location, "train"), pipeline.valid_transform(image_size))
    policy = A.Compose(pipeline.policy_transforms(), seed=seed)
    return gallery_panels(images, masks, lambda i, m: augment_pairs(policy, i, m))


def as_panel(images, masks) -> tuple[np.ndarray, np.ndarray]:
    """NumPy (N×S×S×3, N×S×S) or batch-contract tensors (N×3×S×S, N×1×S×S, on any device),
    uint8 or floats in [0, 1], as (N×S×S×3 floats in [0, 1], N×S×S) arrays."""
    if isinstance(images, torch.Tensor):
        images = images.float() if images.is_floating_point() else images  # bf16: no NumPy
        images, masks = images.permute(0, 2, 3, 1).cpu().numpy(), masks[:, 0].cpu().numpy()
    return (images / 255.0 if images.dtype == np.uint8 else images), np.asarray(masks)


def gallery_panels(images, masks, augment: Callable, draws: int = 3) -> dict:
    """``{"resized": (images, masks), "augmented #1": augment(images, masks), ...}`` with
    ``draws`` random passes of ``augment(images, masks) -> (images, masks)``, every panel
    converted by :func:`as_panel` for ``plots.plot_augmentation_gallery``."""
    panels = {"resized": as_panel(images, masks)}
    for draw in range(1, draws + 1):
        panels[f"augmented #{draw}"] = as_panel(*augment(images, masks))
    return panels


def ready_draws(transform, location, image_size: int, draws: int = 200) -> str:
    """How many of ``draws`` calls of the Albumentations ``transform`` on the first training
    photo of ``location`` return what the model expects: float32 (normalised) at ``image_size²``."""
    frame = read_split(location, "train")
    image, mask = read_pair(frame["image"].iloc[0], frame["label"].iloc[0])
    outputs = [transform(image=image, mask=mask)["image"] for _ in range(draws)]
    ready = sum(o.dtype == "float32" and o.shape[:2] == (image_size,) * 2 for o in outputs) / draws
    return f"{ready:.1%} of {draws} draws resized and normalised"


def loaders_summary(datamodule, batch: dict) -> str:
    """The sizes of a set-up DataModule's ``train_set`` and ``valid_set``, and the shape,
    dtype and range of each tensor of a ``batch``."""
    tensors = {k: f"{tuple(v.shape)} {v.dtype} {v.min()}..{v.max()}" for k, v in batch.items()}
    return (f"{len(datamodule.train_set)} training, {len(datamodule.valid_set)} validation images; "
            f"a batch: {tensors}")


def dataset_labels(dataset) -> torch.Tensor:
    """Every ``label`` of a batch-contract ``dataset``, in order, stacked: ``N×1×H×W``."""
    return torch.stack([dataset[i]["label"] for i in range(len(dataset))])
