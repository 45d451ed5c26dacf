"""The helpers this question's script shares with the other real-photo questions, copied from
``lab/real_photos_recipe``, ``lab/zero_shot_by_side`` and ``lab/transfer_held_out_style`` so
that this folder imports no other lab folder and nothing from ``tools/``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from nailseg_common.data.images import read_binary_mask, read_rgb
from nailseg_common.data.preparation import find_pairs
from nailseg_common.training.unet import per_image_dice


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


def named_models(pairs: list[str]) -> dict[str, Path]:
    """``NAME=PATH`` arguments as ``{name: path}``; a missing file or a malformed pair exits."""
    models = {}
    for pair in pairs:
        name, _, path = pair.partition("=")
        if not name or not path or not Path(path).is_file():
            raise SystemExit(f"--model {pair!r}: give NAME=PATH of an existing weights file")
        models[name] = Path(path)
    return models
