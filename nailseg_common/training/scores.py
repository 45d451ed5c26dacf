"""Score helpers of ``nailseg_common.training.unet`` (notebook 02).

:func:`flat_pair` checks that logits and targets agree in shape and flattens them per image;
:func:`ratio_or_one` is a per-image ratio that scores 1 where both masks are empty (nothing
to find, nothing found); :func:`per_image_soft_dice` is the soft Dice of each image, logged
as ``val_soft_dice``: the training signal, not a score.
"""

from __future__ import annotations

import torch


def flat_pair(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``B×1×H×W`` logits and {0, 1} targets as float32 ``B×(H·W)``; shapes must agree."""
    if logits.shape != targets.shape:
        raise ValueError(f"logits {tuple(logits.shape)}, targets {tuple(targets.shape)}: not the same shape")
    return logits.float().flatten(1), targets.float().flatten(1)


def ratio_or_one(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    """``numerator / denominator``, and 1 where the denominator is 0 (both masks empty)."""
    return torch.where(denominator > 0, numerator / denominator.clamp_min(1e-12),
                       torch.ones_like(denominator))


def per_image_soft_dice(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Soft Dice ``2·Σpt / (Σp + Σt)`` of each image, ``p = sigmoid(logits)``; shape ``B``."""
    logits, targets = flat_pair(logits, targets)
    probs = torch.sigmoid(logits)
    return ratio_or_one(2.0 * (probs * targets).sum(1), probs.sum(1) + targets.sum(1))
