"""The panels of an augmentation gallery, whatever the pipeline that draws them.

``plots.plot_augmentation_gallery`` draws ``{name: (N×S×S×3 floats in [0, 1], N×S×S
masks)}``; :func:`gallery_panels` builds that from a resized batch and the augmentation to
show, given as a function, so notebooks 02 (Albumentations), 03 (Kornia) and 04 (DALI)
draw their galleries the same way; :func:`augment_pairs` is the Albumentations one.
``nailseg_common.pipelines.albumentations_pipeline`` re-exports both. :func:`policy_table`
shows the policy of ``nailseg_common.pipelines.policy`` as a table.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from nailseg_common.pipelines.policy import POLICY


def policy_table() -> pd.DataFrame:
    """The policy as a table: op, probability, parameters, what it moves."""
    return pd.DataFrame([{"op": p.op, "probability": p.probability,
                          "parameters": ", ".join(f"{k}={v}" for k, v in p.params.items()) or "-",
                          "applies to": "image + mask" if p.geometric else "image only"}
                         for p in POLICY.values()])


def augment_pairs(transform, images, masks) -> tuple[np.ndarray, np.ndarray]:
    """An Albumentations ``transform`` on each HxWx3 uint8 image and HxW mask:
    (N×S×S×3 floats in [0, 1], N×S×S)."""
    pairs = [transform(image=image, mask=mask) for image, mask in zip(images, masks, strict=True)]
    return np.stack([p["image"] for p in pairs]) / 255.0, np.stack([p["mask"] for p in pairs])


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
