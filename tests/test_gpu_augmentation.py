"""The Kornia augmentation: image and mask move together, masks stay binary, randomness per sample."""

from dataclasses import replace

import pytest
import torch
from kornia.constants import DataKey, Resample

from nailseg_common.pipelines.kornia_pipeline import KorniaAugmentation, kornia_sequential
from nailseg_common.pipelines.policy import POLICY

IMPLEMENTATIONS = ["fused", "sequential"]
GEOMETRIC = [name for name, op in POLICY.items() if op.geometric]
PHOTOMETRIC = [name for name, op in POLICY.items() if not op.geometric]


def only(*names, probability=1.0):
    """A policy with just these ops, each applied with ``probability``."""
    return {n: replace(POLICY[n], probability=probability) for n in names}


def blob_batch(batch=6, size=64):
    """The same asymmetric L-shaped blob (off centre) in a uint8 image and its mask."""
    mask = torch.zeros(batch, 1, size, size, dtype=torch.uint8)
    mask[:, :, 10:40, 12:22] = 1  # long vertical bar
    mask[:, :, 30:40, 22:44] = 1  # foot to the right
    image = (mask.repeat(1, 3, 1, 1) * 230 + 10).to(torch.uint8)
    return image, mask


def random_batch(batch=8, size=48, seed=0):
    g = torch.Generator().manual_seed(seed)
    image = torch.randint(0, 256, (batch, 3, size, size), generator=g, dtype=torch.uint8)
    label = (torch.rand(batch, 1, size, size, generator=g) > 0.6).to(torch.uint8)
    return image, label


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("op", GEOMETRIC)
def test_image_and_mask_move_together(implementation, op):
    image, mask = blob_batch()
    out_image, out_mask = KorniaAugmentation(only(op), implementation, seed=3)(image, mask)
    assert out_mask.shape == mask.shape
    assert not torch.equal(out_mask, mask.float()), "the op did not move the blob"
    bright = (out_image.mean(1, keepdim=True) > 0.5).float()
    # Bilinear (image) and nearest (mask) may disagree on the blob's border pixels only.
    disagree = (bright != out_mask).float().sum((1, 2, 3))
    blob = mask.float().sum((1, 2, 3))
    assert (disagree <= 0.1 * blob).all(), disagree
    if op == "horizontal_flip":
        assert torch.equal(out_mask, mask.flip(-1).float())
    if op == "vertical_flip":
        assert torch.equal(out_mask, mask.flip(-2).float())


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_affine_moves_the_blob_differently_per_sample(implementation):
    image, mask = blob_batch(batch=8)
    _, out_mask = KorniaAugmentation(only("affine"), implementation, seed=0)(image, mask)
    assert len({tuple(m.flatten().tolist()) for m in out_mask}) == 8


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_photometric_ops_leave_the_mask_alone(implementation):
    image, mask = random_batch()
    out_image, out_mask = KorniaAugmentation(only(*PHOTOMETRIC), implementation, seed=0)(image, mask)
    assert torch.equal(out_mask, mask.float())
    assert not torch.allclose(out_image, image.float() / 255)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_full_policy_output_contract(implementation):
    image, label = random_batch()
    out_image, out_label = KorniaAugmentation(implementation=implementation, seed=1)(image, label)
    assert out_image.dtype == out_label.dtype == torch.float32
    assert out_image.shape == image.shape and out_label.shape == label.shape
    assert 0 <= out_image.min() and out_image.max() <= 1
    assert set(out_label.unique().tolist()) <= {0.0, 1.0}


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_uint8_and_float_inputs_agree(implementation):
    image, label = random_batch()
    a = KorniaAugmentation(implementation=implementation, seed=2)(image, label)
    b = KorniaAugmentation(implementation=implementation, seed=2)(image.float() / 255, label.float())
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_randomness_is_per_sample(implementation):
    one_image, one_label = random_batch(batch=1)
    image, label = one_image.repeat(16, 1, 1, 1), one_label.repeat(16, 1, 1, 1)
    out_image, _ = KorniaAugmentation(implementation=implementation, seed=0)(image, label)
    distinct = len({tuple(x.flatten()[::97].tolist()) for x in out_image})
    assert distinct >= 12, distinct


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_reproducible_with_a_seed(implementation):
    image, label = random_batch()
    first, second = (KorniaAugmentation(implementation=implementation, seed=7) for _ in range(2))
    calls_first = [first(image, label) for _ in range(2)]
    calls_second = [second(image, label) for _ in range(2)]
    for a, b in zip(calls_first, calls_second):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # The stream moves on between calls, and another seed gives other augmentations.
    assert not torch.equal(calls_first[0][0], calls_first[1][0])
    other = KorniaAugmentation(implementation=implementation, seed=8)(image, label)
    assert not torch.equal(other[0], calls_first[0][0])


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_seed_none_follows_the_global_generator(implementation):
    image, label = random_batch()
    aug = KorniaAugmentation(implementation=implementation)
    torch.manual_seed(11)
    a = aug(image, label)
    torch.manual_seed(11)
    b = aug(image, label)
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_sequential_is_a_kornia_container_with_nearest_masks():
    seq = kornia_sequential()
    assert seq.data_keys == [DataKey.INPUT, DataKey.MASK]
    assert len(list(seq.children())) == len(POLICY)
    assert seq.extra_args[DataKey.MASK]["resample"] == Resample.NEAREST


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="B×3×H×W"):
        KorniaAugmentation()(torch.zeros(2, 64, 64), torch.zeros(2, 1, 64, 64))
    with pytest.raises(ValueError, match="Unknown policy ops"):
        KorniaAugmentation({"cutout": POLICY["affine"]})
    with pytest.raises(ValueError, match="implementation"):
        KorniaAugmentation(implementation="dali")
