"""The training loss: a symmetric binary Lovász hinge.

The Lovász hinge (Berman et al., 2018) is a convex surrogate of the Jaccard loss
(1 − IoU). ``symmetric_lovasz`` averages it over the nail class and the background
class, ``0.5·(hinge(logits, t) + hinge(−logits, 1 − t))``, so both sides of the
boundary are optimised, and computes it per image, then averages over the batch.

segmentation-models-pytorch's ``LovaszLoss(mode="binary", per_image=True)`` computes
the same per-image hinge but loops over the images in Python (a sort and a dozen small
kernels per image); :func:`lovasz_hinge` does the whole batch with one sort and is
tested against it.

Empty mask: for an image without nail pixels the hinge of the nail term reduces to
``relu(1 + max logit)``: only the single most confident false positive is penalised,
and the loss is 0 once every logit is ≤ −1. The background term of that image is then
an ordinary full-mask hinge, so the symmetric loss stays informative.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def lovasz_hinge(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Binary Lovász hinge per image, averaged over the batch.

    ``logits`` and ``targets`` are ``B×1×H×W`` (or ``B×H×W``); targets hold {0, 1}.
    Computed in float32 whatever the autocast dtype (sorting bf16 values loses ties).
    """
    if logits.shape != targets.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} "
                         "must have the same shape (B×1×H×W).")
    logits = logits.float().flatten(1)
    labels = targets.float().flatten(1)
    errors = 1.0 - logits * (2.0 * labels - 1.0)
    errors_sorted, order = torch.sort(errors, dim=1, descending=True)
    labels_sorted = labels.gather(1, order)
    # Gradient of the Lovász extension of the Jaccard loss at the sorted errors.
    positives = labels_sorted.sum(dim=1, keepdim=True)
    intersection = positives - labels_sorted.cumsum(dim=1)
    union = positives + (1.0 - labels_sorted).cumsum(dim=1)
    jaccard = 1.0 - intersection / union
    grad = torch.cat([jaccard[:, :1], jaccard[:, 1:] - jaccard[:, :-1]], dim=1)
    return (F.relu(errors_sorted) * grad).sum(dim=1).mean()


def symmetric_lovasz(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``0.5·(lovasz_hinge(logits, t) + lovasz_hinge(−logits, 1 − t))``, per image averaged."""
    targets = targets.float()
    return 0.5 * (lovasz_hinge(logits, targets) + lovasz_hinge(-logits, 1.0 - targets))


def soft_dice_loss(logits: torch.Tensor, targets: torch.Tensor, smooth: float = 1.0) -> torch.Tensor:
    """``1 − (2·Σpt + smooth) / (Σp + Σt + smooth)`` per image (``p = sigmoid(logits)``), averaged.

    The smoothing term makes an empty target with an empty prediction cost 0.
    """
    if logits.shape != targets.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} "
                         "must have the same shape (B×1×H×W).")
    probs = torch.sigmoid(logits.float()).flatten(1)
    targets = targets.float().flatten(1)
    dice = (2.0 * (probs * targets).sum(1) + smooth) / (probs.sum(1) + targets.sum(1) + smooth)
    return (1.0 - dice).mean()
