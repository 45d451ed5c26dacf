"""The helpers this question's script shares with the other real-photo questions, copied from
``lab/real_photos_recipe``, ``lab/zero_shot_by_side`` and ``lab/wide_pretraining`` so that
this folder imports no other lab folder and nothing from ``tools/``."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

from nailseg_common.data.images import read_binary_mask, read_rgb
from nailseg_common.data.preparation import find_pairs
from nailseg_common.training.unet import per_image_dice


def hand_of(name: str) -> str:
    """The hand a photo ``<hand>_<n>`` (any folder, any suffix) shows."""
    return re.sub(r"_\d+$", "", Path(name).stem)


def hand_folds(names: list[str], folds: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(training, held_out)`` indices of each fold; the shots of one hand (``<hand>_<n>``)
    share a fold."""
    hands = [hand_of(name) for name in names]
    groups = sorted(set(hands))
    order = np.random.default_rng(seed).permutation(len(groups))
    fold_of = {groups[g]: i % folds for i, g in enumerate(order)}
    index = np.arange(len(names))
    held = [index[[fold_of[h] == fold for h in hands]] for fold in range(folds)]
    return [(np.random.default_rng(seed + k).permutation(index[~np.isin(index, h)]), h)
            for k, h in enumerate(held)]


def mean_se(values) -> dict:
    """Mean, standard error of the mean and count of ``values``."""
    values = np.asarray(values, dtype=float)
    return {"mean": float(values.mean()), "se": float(values.std(ddof=1) / np.sqrt(len(values))),
            "n": len(values)}


def photo_dice(predicted: np.ndarray, mask: np.ndarray) -> float:
    """Hard Dice of a 0/255 predicted mask against a {0, 1} mask of the same size."""
    as_logits = torch.from_numpy(predicted.astype(np.float32) / 127.5 - 1.0)[None, None]
    return float(per_image_dice(as_logits, torch.from_numpy(mask.astype(np.float32))[None, None]))


def photos_with_masks(folder: Path) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Every photo of ``folder`` (the layouts ``find_pairs`` takes) with its {0, 1} mask, each
    read once: ``(type/name, HxWx3 uint8, HxW uint8)``."""
    return [(f"{pair.type}/{pair.name}", read_rgb(pair.image), read_binary_mask(pair.mask))
            for pair in find_pairs(folder)]


def scores(predicted: np.ndarray, mask: np.ndarray) -> dict[str, float]:
    """Hard Dice, precision and recall of a 0/255 predicted mask against a {0, 1} mask (an
    empty prediction has precision 1, an empty mask recall 1)."""
    nail, truth = predicted > 127, mask > 0
    hits = float((nail & truth).sum())
    return {"dice": photo_dice(predicted, mask), "precision": hits / nail.sum() if nail.any() else 1.0,
            "recall": hits / truth.sum() if truth.any() else 1.0}
