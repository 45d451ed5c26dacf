"""Mask encodings: each documented one is read right, anything else is refused by name."""

import re

import numpy as np
import pytest
from PIL import Image

from nailseg_common.images import DataError, read_binary_mask, read_rgb
from nailseg_common.synthetic import synthetic_sample

TRUTH = np.zeros((24, 32), np.uint8)
TRUTH[5:15, 4:14] = 1
TRUTH[8:20, 20:27] = 1


def _file(tmp_path, pixels, fmt="PNG", mode=None, name="mask", **options):
    path = tmp_path / f"{name}.{'jpg' if fmt == 'JPEG' else 'png'}"
    Image.fromarray(pixels, mode).save(path, format=fmt, **options)
    return path


def _rgba(colour, alpha):
    return np.dstack([colour] * 3 + [alpha]).astype(np.uint8)


@pytest.mark.parametrize("quality", [75, 95])
def test_jpeg_0_1_masks_keep_their_nails(tmp_path, quality):
    """The issue's case: twenty 0/1 masks saved as JPEG used to come out mostly empty."""
    noisy = 0
    for index in range(20):
        _, _, truth = synthetic_sample(0, index)
        path = _file(tmp_path, truth, "JPEG", name=f"m{index}", quality=quality)
        noisy += np.asarray(Image.open(path)).max() >= 2
        mask = read_binary_mask(path)
        assert mask.any(), path
        assert np.mean(mask != truth) < 0.01
    assert noisy  # the case is exercised: some pixels did come back at 2


@pytest.mark.parametrize("name,pixels", [
    ("alpha only, white", _rgba(np.full_like(TRUTH, 255), TRUTH * 255)),
    ("alpha only, black", _rgba(np.zeros_like(TRUTH), TRUTH * 255)),
    ("white under transparency, black opaque background",
     _rgba(np.where(np.arange(32) < 16, 255, TRUTH * 255), np.where(np.arange(32) < 16, TRUTH * 255, 255))),
    ("colour with full alpha", _rgba(TRUTH * 255, np.full_like(TRUTH, 255))),
])
def test_alpha_encodings(tmp_path, name, pixels):
    np.testing.assert_array_equal(read_binary_mask(_file(tmp_path, pixels, mode="RGBA")), TRUTH)


def test_gray_with_alpha_only(tmp_path):
    pixels = np.dstack([np.full_like(TRUTH, 255), TRUTH * 255])
    np.testing.assert_array_equal(read_binary_mask(_file(tmp_path, pixels, mode="LA")), TRUTH)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_class_masks_are_refused(tmp_path, fmt):
    classes = TRUTH + (TRUTH * (np.arange(32) >= 20))  # labels 0, 1, 2
    path = _file(tmp_path, classes.astype(np.uint8), fmt, quality=95)
    with pytest.raises(DataError, match=re.escape(str(path))) as error:
        read_binary_mask(path)
    message = str(error.value)
    assert "values 0, 1, 2" in message or fmt == "JPEG"
    assert "class mask" in message and "nail pixels 255 (or 1)" in message


def test_dim_masks_are_refused(tmp_path):
    path = _file(tmp_path, TRUTH * 100)
    with pytest.raises(DataError, match=r"values 0, 100: neither a 0/255 nor a 0/1 mask"):
        read_binary_mask(path)


@pytest.mark.parametrize("mode,pixels", [
    ("L", np.full_like(TRUTH, 255)),
    ("L", np.ones_like(TRUTH)),
    ("RGBA", _rgba(np.full_like(TRUTH, 255), np.full_like(TRUTH, 255))),
])
def test_full_masks_are_refused(tmp_path, mode, pixels):
    path = _file(tmp_path, pixels, mode=mode)
    with pytest.raises(DataError, match=re.escape(str(path)) + r"' is nail everywhere \(32x24") \
            as error:
        read_binary_mask(path)
    assert "inverted" in str(error.value) and "remove the pair" in str(error.value)


@pytest.mark.parametrize("pixels", [np.zeros_like(TRUTH), _rgba(np.full_like(TRUTH, 255),
                                                                np.zeros_like(TRUTH))])
def test_empty_masks_are_read_as_empty(tmp_path, pixels):
    assert not read_binary_mask(_file(tmp_path, pixels)).any()


@pytest.mark.parametrize("bits", [10, 12, 16])
def test_deep_pngs_are_scaled_by_the_bit_depth_they_use(tmp_path, bits):
    top = 2 ** bits - 1
    ramp = np.linspace(0, top, 32).astype(np.uint16)[None, :].repeat(24, axis=0)
    ramp[0, 0] = top
    image = read_rgb(_file(tmp_path, ramp, name="image"))
    np.testing.assert_array_equal(image[:, :, 0], np.rint(ramp * (255 / top)).astype(np.uint8))
    mask = TRUTH.astype(np.uint16) * np.uint16(top)
    np.testing.assert_array_equal(read_binary_mask(_file(tmp_path, mask)), TRUTH)


def _oriented(tmp_path, displayed, orientation, fmt="PNG", name="mask", **options):
    """``displayed`` stored the way a phone stores it: turned, with an EXIF Orientation tag
    (6: turn clockwise to display, 8: counter-clockwise) that turns it back."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    stored = np.rot90(displayed, 1 if orientation == 6 else -1)
    return _file(tmp_path, np.ascontiguousarray(stored), fmt, name=name, exif=exif, **options)


@pytest.mark.parametrize("orientation", [6, 8])
def test_exif_orientation_is_applied(tmp_path, orientation):
    rgb = np.repeat(TRUTH[:, :, None] * 255, 3, axis=2)
    np.testing.assert_array_equal(read_rgb(_oriented(tmp_path, rgb, orientation, name="image")),
                                  rgb)
    np.testing.assert_array_equal(read_binary_mask(_oriented(tmp_path, TRUTH * 255, orientation)),
                                  TRUTH)


def test_exif_oriented_jpeg_0_1_masks_stay_0_1_masks(tmp_path):
    """Turning must not hide that the file is a JPEG, whose 1s come back as 2s."""
    _, _, truth = synthetic_sample(0, 3)
    path = _oriented(tmp_path, truth, 6, "JPEG", quality=75)
    assert np.asarray(Image.open(path)).max() >= 2
    assert np.mean(read_binary_mask(path) != truth) < 0.01
