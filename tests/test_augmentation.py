"""The Albumentations pipeline: built from the policy table, image and mask stay aligned."""

import albumentations as A
import numpy as np
import pytest

from nailseg_common.pipelines.albumentations_pipeline import (
    policy_transforms,
    train_transform,
    valid_transform,
)
from nailseg_common.pipelines.policy import POLICY


def sample(height=90, width=120):
    """An image whose red channel is 255 exactly where an asymmetric mask is 1."""
    mask = np.zeros((height, width), np.uint8)
    mask[10:50, 15:40] = 1  # a block in the upper left
    mask[60:80, 70:110] = 1  # and a bar lower right
    image = np.full((height, width, 3), 40, np.uint8)
    image[..., 0] = 255 * mask
    return image, mask


def test_ops_follow_the_policy_table():
    ops = policy_transforms()
    assert [op.p for op in ops] == [op.probability for op in POLICY.values()]
    affine = next(op for op in ops if isinstance(op, A.Affine))
    assert affine.rotate == (-POLICY["affine"].params["rotate_deg"], POLICY["affine"].params["rotate_deg"])
    noise = next(op for op in ops if isinstance(op, A.GaussNoise))
    assert tuple(noise.std_range) == POLICY["gaussian_noise"].params["std"]


def test_train_transform_keeps_image_and_mask_aligned():
    image, mask = sample()
    transform = train_transform(64, seed=0)
    changed = 0
    for _ in range(40):
        out = transform(image=image, mask=mask)
        assert out["image"].shape == (64, 64, 3) and out["image"].dtype == np.uint8
        assert out["mask"].shape == (64, 64) and out["mask"].dtype == np.uint8
        assert set(np.unique(out["mask"])) <= {0, 1}
        # brightness/contrast/noise keep 255 above 128 and 0 below; edges blur a little
        agreement = ((out["image"][..., 0] > 128) == (out["mask"] == 1)).mean()
        assert agreement > 0.97
        changed += not np.array_equal(out["mask"], valid_transform(64)(image=image, mask=mask)["mask"])
    assert changed > 20  # flips and affines move the mask most of the time


def test_valid_transform_only_resizes():
    image, mask = sample()
    out = valid_transform(32)(image=image, mask=mask)
    assert out["image"].shape == (32, 32, 3)
    assert np.array_equal(out["mask"], valid_transform(32)(image=image, mask=mask)["mask"])
    assert out["mask"][5:15, 5:10].all() and not out["mask"][:, -2:].any()


@pytest.mark.parametrize("seed", [1, 2])
def test_seeded_transform_is_reproducible(seed):
    image, mask = sample()
    first = train_transform(64, seed=seed)(image=image, mask=mask)
    second = train_transform(64, seed=seed)(image=image, mask=mask)
    assert np.array_equal(first["image"], second["image"])


def centre_sampled(mask: np.ndarray, side: int) -> np.ndarray:
    """``mask`` (H×W) sampled at the centre of each pixel of a ``side × side`` grid."""
    h, w = mask.shape
    rows = np.minimum(((np.arange(side) + 0.5) * h / side).astype(int), h - 1)
    cols = np.minimum(((np.arange(side) + 0.5) * w / side).astype(int), w - 1)
    return mask[rows][:, cols]


@pytest.mark.parametrize("shape", [(240, 300), (640, 500)])  # up and down, as the synthetic set's sides
def test_the_mask_is_resized_on_the_pixel_centres_of_the_image(shape):
    """Each output pixel of the mask takes the source pixel under its centre, on the grid of
    the image's bilinear resize; OpenCV's INTER_NEAREST takes its corner, about half a pixel off."""
    mask = np.random.default_rng(0).integers(0, 2, shape, dtype=np.uint8)  # any shift shows
    out = valid_transform(384)(image=np.zeros((*shape, 3), np.uint8), mask=mask)["mask"]
    assert (out == centre_sampled(mask, 384)).mean() > 0.999
