"""Mask encodings: each documented one is read right, anything else is refused by name."""

import io
import re

import numpy as np
import pytest
from PIL import Image, ImageFilter

from nailseg_common.core.errors import DataError
from nailseg_common.data.images import (
    MASK_THRESHOLD,
    exif_orientation,
    read_binary_mask,
    read_mask,
    read_rgb,
)
from nailseg_common.data.scenes import synthetic_sample

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


@pytest.mark.parametrize("background,nail", [(0, 100), (1, 2), (100, 200), (0, 64)])
def test_two_level_masks_in_any_pair_of_levels(tmp_path, background, nail):
    """A dim export (0/100) or a label pair (1/2): the higher level is nail, whatever it is."""
    pixels = np.where(TRUTH == 1, nail, background).astype(np.uint8)
    np.testing.assert_array_equal(read_binary_mask(_file(tmp_path, pixels)), TRUTH)


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
    _, _, truth = synthetic_sample(0, 0)  # a close-up: a large nail, whose edges ring
    path = _oriented(tmp_path, truth, 6, "JPEG", quality=75)
    assert np.asarray(Image.open(path)).max() >= 2
    assert np.mean(read_binary_mask(path) != truth) < 0.01


# --- every kind of mask read by the rule, nothing thresholded into something else ---

RING = np.zeros_like(TRUTH)
RING[4:16, 3:15] = 1
RING[5:15, 4:14] = 0  # a one-pixel ring around the first nail, as VOC draws its void


def test_a_stray_255_pixel_in_a_0_1_mask_is_void_not_the_nail(tmp_path):
    pixels = TRUTH.copy()
    pixels[0, 0] = 255
    reading = read_mask(_file(tmp_path, pixels))
    np.testing.assert_array_equal(reading.mask, TRUTH)
    assert reading.void_pixels == 1


def test_label_masks_with_a_void_ring_keep_their_nail(tmp_path):
    pixels = np.where(RING == 1, 255, TRUTH).astype(np.uint8)
    reading = read_mask(_file(tmp_path, pixels))
    np.testing.assert_array_equal(reading.mask, TRUTH)
    assert reading.void_pixels == RING.sum()


def test_a_void_that_outweighs_its_label_is_refused(tmp_path):
    """A 0/255 mask with a region of 1s: neither reading is safe, so neither is made."""
    pixels = TRUTH * 255
    pixels[6:9, 5:8] = 1
    with pytest.raises(DataError, match=re.escape(str(tmp_path / "mask.png"))
                       + r"' has values 0, 1, 255: more levels than a two-level mask"):
        read_binary_mask(_file(tmp_path, pixels))


def test_a_stray_low_pixel_in_a_0_255_mask_is_an_edge(tmp_path):
    pixels = TRUTH * 255
    pixels[0, 0] = 1
    np.testing.assert_array_equal(read_binary_mask(_file(tmp_path, pixels)), TRUTH)


@pytest.mark.parametrize("edit", ["feathered", "once a JPEG"])
def test_soft_and_once_lossy_edges_of_lossless_masks_are_edges(tmp_path, edit):
    _, _, truth = synthetic_sample(0, 0)
    mask = Image.fromarray(truth * 255)
    if edit == "feathered":
        mask = mask.filter(ImageFilter.GaussianBlur(4))
    else:
        buffer = io.BytesIO()
        mask.save(buffer, format="JPEG", quality=60)
        mask = Image.open(buffer)
    path = tmp_path / "mask.png"
    mask.save(path)
    assert len(np.unique(np.asarray(mask))) > 8
    assert np.mean(read_binary_mask(path) != truth) < 0.001


def _palette_file(tmp_path, indices, colours):
    image = Image.fromarray(indices.astype(np.uint8), "P")
    palette = np.zeros((256, 3), np.uint8)
    for index, colour in colours.items():
        palette[index] = colour
    image.putpalette(palette.ravel().tolist())
    path = tmp_path / "mask.png"
    image.save(path)
    return path


def test_palette_masks_are_read_by_their_colour_or_label(tmp_path):
    voc = np.where(RING == 1, 255, TRUTH * 8)  # VOC: index 8 is (64, 0, 0), 255 the void
    reading = read_mask(_palette_file(tmp_path, voc, {8: (64, 0, 0), 255: (224, 224, 192)}))
    np.testing.assert_array_equal(reading.mask, TRUTH)
    assert reading.void_pixels == RING.sum()
    white_first = _palette_file(tmp_path, 1 - TRUTH, {0: (255, 255, 255), 1: (0, 0, 0)})
    np.testing.assert_array_equal(read_binary_mask(white_first), TRUTH)


def test_a_dark_colour_mask_keeps_its_nail(tmp_path):
    pixels = np.dstack([TRUTH * 64, TRUTH * 0, TRUTH * 0]).astype(np.uint8)
    np.testing.assert_array_equal(read_binary_mask(_file(tmp_path, pixels)), TRUTH)


def test_rgba_cut_outs_are_read_by_their_alpha(tmp_path):
    photo = synthetic_sample(0, 1)[1][:24, :32]
    cut_out = np.dstack([photo, TRUTH * 255]).astype(np.uint8)
    assert photo[TRUTH == 1].max(axis=1).min() < MASK_THRESHOLD  # dark nail pixels too
    np.testing.assert_array_equal(read_binary_mask(_file(tmp_path, cut_out, mode="RGBA")), TRUTH)


def _webp_as_png(tmp_path, pixels, **options):
    path = tmp_path / "mask.png"
    Image.fromarray(pixels).save(path, format="WEBP", **options)
    assert Image.open(path).format == "WEBP"
    return path


def test_lossy_webp_named_png_is_judged_by_its_content(tmp_path):
    _, _, truth = synthetic_sample(0, 3)
    mask = read_binary_mask(_webp_as_png(tmp_path, truth * 255, quality=50))
    assert np.mean(mask != truth) < 0.001
    with pytest.raises(DataError, match=r"a 0/1 mask saved as lossy WebP.*Save it as PNG"):
        read_binary_mask(_webp_as_png(tmp_path, truth, quality=90))
    np.testing.assert_array_equal(read_binary_mask(_webp_as_png(tmp_path, truth, lossless=True)),
                                  truth)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_a_photo_in_masks_is_refused(tmp_path, fmt):
    _, photo, _ = synthetic_sample(0, 2)
    path = _file(tmp_path, photo, fmt)
    with pytest.raises(DataError, match=re.escape(str(path)) + r"' has values .*it looks like a "
                                        "photo, not a mask"):
        read_binary_mask(path)


def test_colour_class_masks_are_refused(tmp_path):
    """VOC colours as RGB: black, a class at (64, 0, 0) and a void at (224, 224, 192)."""
    colours = np.array([[0, 0, 0], [64, 0, 0], [224, 224, 192]], np.uint8)
    pixels = colours[TRUTH + (TRUTH * (np.arange(32) >= 20))]
    with pytest.raises(DataError, match=r"values 0, 64, 224: more levels than a two-level"):
        read_binary_mask(_file(tmp_path, pixels))


def test_the_exif_orientation_is_told(tmp_path):
    assert exif_orientation(_oriented(tmp_path, TRUTH * 255, 6)) == 6
    assert exif_orientation(_file(tmp_path, TRUTH * 255, name="plain")) == 1


def test_huge_photos_are_named_with_how_to_downscale(tmp_path, monkeypatch):
    path = _file(tmp_path, np.zeros((20, 20, 3), np.uint8), name="huge")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 300)  # 400 pixels: past the warning size
    with pytest.warns(UserWarning, match=re.escape(str(path)) + r"' has 0 megapixels.*mogrify"):
        read_rgb(path)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 150)  # past twice the limit: refused
    with pytest.raises(DataError, match=re.escape(str(path)) + r"' is too large to read safely "
                                        r"\(0 megapixels\).*Downscale it.*mogrify"):
        read_rgb(path)


def test_data_errors_show_in_a_notebook_without_a_traceback():
    assert DataError("Mask 'x.png' is nail everywhere")._render_traceback_() == [
        "DataError: Mask 'x.png' is nail everywhere"]
