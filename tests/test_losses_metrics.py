"""Loss and metrics against values worked out by hand on tiny tensors."""

import math

import pytest
import torch
from segmentation_models_pytorch.losses import LovaszLoss
from torchmetrics.functional.classification import binary_jaccard_index

from nailseg_common.training.unet import (
    lovasz_hinge,
    per_image_dice,
    per_image_iou,
    per_image_soft_dice,
    soft_dice_loss,
    symmetric_lovasz,
)


def soft_dice(logits, targets) -> torch.Tensor:
    return per_image_soft_dice(logits, targets).mean()


def mean_iou(logits, targets) -> torch.Tensor:
    return per_image_iou(logits, targets).mean()


def image(values) -> torch.Tensor:
    """A 1×1×1×N tensor (one image of N pixels)."""
    return torch.tensor(values, dtype=torch.float32).view(1, 1, 1, -1)


TARGET = image([1, 0, 1, 0])


def test_perfect_prediction_costs_nothing():
    # every margin >= 1: all hinge errors 1 - |logit| <= 0
    assert symmetric_lovasz(image([2, -2, 3, -1]), TARGET).item() == 0.0


def test_zero_logits_cost_one():
    # all errors are 1 and the Lovász gradient sums to 1 - IoU(nothing) = 1
    assert symmetric_lovasz(torch.zeros(1, 1, 1, 4), TARGET).item() == pytest.approx(1.0)


def test_inverted_prediction():
    # every error is 1 + 2 = 3, both terms give 3
    assert symmetric_lovasz(image([-2, 2, -2, 2]), TARGET).item() == pytest.approx(3.0)


def test_mixed_prediction_by_hand():
    # nail term: errors [1.5 (bg), 0.5 (nail)], gradient [0.5, 0.5] -> 1.0
    # background term: errors [1.5 (nail), 0.5 (bg)], gradient [1, 0] -> 1.5
    logits, target = image([0.5, 0.5]), image([1, 0])
    assert lovasz_hinge(logits, target).item() == pytest.approx(1.0)
    assert lovasz_hinge(-logits, 1 - target).item() == pytest.approx(1.5)
    assert symmetric_lovasz(logits, target).item() == pytest.approx(1.25)


def test_empty_mask_penalises_the_most_confident_false_positive():
    logits, empty = image([-3, -2, 0.5, -1]), torch.zeros(1, 1, 1, 4)
    assert lovasz_hinge(logits, empty).item() == pytest.approx(1.5)  # relu(1 + 0.5)
    # background term: errors sorted [1.5, 0, -1, -2], each gradient step 1/4 -> 0.375
    assert symmetric_lovasz(logits, empty).item() == pytest.approx(0.5 * (1.5 + 0.375))
    assert lovasz_hinge(image([-1, -2, -4, -1]), empty).item() == 0.0


def test_loss_is_averaged_per_image():
    logits = torch.cat([image([2, -2, 3, -1]), image([-2, 2, -2, 2])])
    assert symmetric_lovasz(logits, torch.cat([TARGET, TARGET])).item() == pytest.approx(1.5)


def test_symmetric_lovasz_is_symmetric():
    torch.manual_seed(0)
    logits = torch.randn(3, 1, 8, 8)
    target = (torch.rand(3, 1, 8, 8) > 0.6).float()
    assert torch.allclose(symmetric_lovasz(logits, target), symmetric_lovasz(-logits, 1 - target))


def test_hinge_matches_smp_lovasz_loss_per_image():
    torch.manual_seed(1)
    logits = torch.randn(4, 1, 16, 16, requires_grad=True)
    target = (torch.rand(4, 1, 16, 16) > 0.7).float()
    target[2] = 0  # an empty mask too
    ours = lovasz_hinge(logits, target)
    reference = LovaszLoss(mode="binary", per_image=True)(logits, target)
    assert torch.allclose(ours, reference, atol=1e-6)
    ours_grad, = torch.autograd.grad(ours, logits)
    reference_grad, = torch.autograd.grad(reference, logits)
    assert torch.allclose(ours_grad, reference_grad, atol=1e-6)


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="same shape"):
        symmetric_lovasz(torch.zeros(2, 1, 4, 4), torch.zeros(2, 4, 4))


def test_dice_by_hand():
    assert soft_dice(image([20, -20, 20, -20]), TARGET).item() == pytest.approx(1.0)
    # p = 0.5 everywhere: 2 * (0.5 + 0.5) / (2 + 2)
    assert soft_dice(torch.zeros(1, 1, 1, 4), TARGET).item() == pytest.approx(0.5)
    assert soft_dice(image([-20, 20, -20, 20]), TARGET).item() == pytest.approx(0, abs=1e-6)


def test_dice_empty_mask_convention():
    empty = torch.zeros(1, 1, 1, 4)
    assert soft_dice(torch.full((1, 1, 1, 4), -math.inf), empty).item() == 1.0
    assert soft_dice(torch.zeros(1, 1, 1, 4), empty).item() == 0.0


def test_iou_by_hand():
    # predicted {0, 1}, target {0, 2}: intersection 1, union 3
    assert mean_iou(image([1, 1, -1, -1]), TARGET).item() == pytest.approx(1 / 3)
    assert mean_iou(image([5, -5, 5, -5]), TARGET).item() == 1.0
    assert mean_iou(image([-5, 5, -5, 5]), TARGET).item() == 0.0
    empty = torch.zeros(1, 1, 1, 4)
    assert mean_iou(image([-1, -1, -1, -1]), empty).item() == 1.0  # both empty
    assert mean_iou(image([-1, 1, -1, -1]), empty).item() == 0.0


def test_metrics_are_means_over_images():
    logits = torch.cat([image([1, 1, -1, -1]), image([5, -5, 5, -5])])
    targets = torch.cat([TARGET, TARGET])
    assert per_image_iou(logits, targets).tolist() == pytest.approx([1 / 3, 1.0])
    assert mean_iou(logits, targets).item() == pytest.approx(2 / 3)
    assert per_image_soft_dice(logits, targets).shape == (2,)
    assert per_image_dice(logits, targets).tolist() == pytest.approx([0.5, 1.0])  # 2·1/(2+2), equal


def test_iou_matches_torchmetrics_per_image():
    torch.manual_seed(2)
    logits = torch.randn(5, 1, 12, 12)
    target = (torch.rand(5, 1, 12, 12) > 0.5).long()
    expected = torch.stack([binary_jaccard_index(torch.sigmoid(logit), t)
                            for logit, t in zip(logits, target)])
    assert torch.allclose(per_image_iou(logits, target), expected)


def test_soft_dice_loss_perfect_inverted_and_empty():
    target = torch.zeros(2, 1, 4, 4)
    target[0, :, :2] = 1  # image 0: half nail; image 1: empty
    confident = (target * 2 - 1) * 50  # sigmoid saturates to the target
    assert soft_dice_loss(confident, target).item() == pytest.approx(0.0, abs=1e-6)
    # inverted: image 0 scores (0 + 1) / (8 + 8 + 1), image 1 (0 + 1) / (16 + 0 + 1)
    expected = ((1 - 1 / 17) + (1 - 1 / 17)) / 2
    assert soft_dice_loss(-confident, target).item() == pytest.approx(expected, abs=1e-6)
