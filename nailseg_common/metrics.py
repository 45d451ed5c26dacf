"""Validation metrics, computed per image.

The headline numbers are the hard Dice and IoU: the prediction is thresholded at
probability 0.5, each image is scored on its own and the scores are averaged over
images, so a small nail counts as much as a large one. The soft Dice on probabilities
(``binary_dice_coefficient``, the original series' name) is the training signal, not
a score to compare. Empty-mask convention (all metrics): an image whose
target and prediction are both empty scores 1 (nothing to find, nothing found); an
empty target with a non-empty prediction scores 0. For the soft Dice any probability
mass is a prediction, so an image without nail pixels scores 0 unless every
probability is exactly 0; :func:`binary_mean_iou` thresholds first and is the metric
to read on sets with empty images.

The ``per_image_*`` functions return one value per image, so a LightningModule can
average them over a whole epoch (see ``models.LitNailSegmentation``) rather than
averaging batch means.
"""

from __future__ import annotations

import torch


def _flat(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if logits.shape != targets.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} "
                         "must have the same shape (B×1×H×W).")
    return logits.float().flatten(1), targets.float().flatten(1)


def _ratio_or_one(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    """``numerator / denominator``, and 1 where the denominator is 0 (both masks empty)."""
    return torch.where(denominator > 0, numerator / denominator.clamp_min(1e-12),
                       torch.ones_like(denominator))


def per_image_soft_dice(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Soft Dice ``2·Σpt / (Σp + Σt)`` of each image, ``p = sigmoid(logits)``; shape ``B``."""
    logits, targets = _flat(logits, targets)
    probs = torch.sigmoid(logits)
    return _ratio_or_one(2.0 * (probs * targets).sum(1), probs.sum(1) + targets.sum(1))


def per_image_dice(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Dice of each image with the prediction thresholded at probability 0.5; shape ``B``."""
    logits, targets = _flat(logits, targets)
    predicted = (logits > 0).float()  # sigmoid(x) > 0.5  <=>  x > 0
    return _ratio_or_one(2.0 * (predicted * targets).sum(1), predicted.sum(1) + targets.sum(1))


def per_image_iou(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """IoU of each image with the prediction thresholded at probability 0.5; shape ``B``."""
    logits, targets = _flat(logits, targets)
    predicted = (logits > 0).float()  # sigmoid(x) > 0.5  <=>  x > 0
    intersection = (predicted * targets).sum(1)
    union = predicted.sum(1) + targets.sum(1) - intersection
    return _ratio_or_one(intersection, union)


def binary_dice_coefficient(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Soft Dice on sigmoid probabilities, mean over images (a scalar tensor)."""
    return per_image_soft_dice(logits, targets).mean()


def binary_mean_iou(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """IoU thresholded at 0.5, mean over images (a scalar tensor)."""
    return per_image_iou(logits, targets).mean()
