"""The synthetic nail dataset: reproducible, in the real layout, atomic."""

import json

import numpy as np
import pytest
from PIL import Image, ImageOps

from nailseg_common.core.files import MANIFEST
from nailseg_common.data import synthetic
from nailseg_common.data.scenes import (
    LOOKS,
    MAX_SIDE,
    MIN_SIDE,
    SKIN_TONES,
    TYPES,
    synthetic_sample,
)
from nailseg_common.data.synthetic import (
    ensure_synthetic_dataset,
    generate_synthetic_dataset,
    is_complete,
)


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="module")
def small_set(tmp_path_factory):
    return generate_synthetic_dataset(tmp_path_factory.mktemp("synthetic") / "set", 8, seed=3,
                                      progress=False)


def test_same_seed_gives_the_same_bytes(small_set, tmp_path):
    again = generate_synthetic_dataset(tmp_path / "again", 8, seed=3, progress=False)
    assert _files(again) == _files(small_set)


def test_another_seed_gives_other_images(small_set, tmp_path):
    other = generate_synthetic_dataset(tmp_path / "other", 8, seed=4, progress=False)
    assert _files(other).keys() == _files(small_set).keys()
    first = "Images/1/00000.jpg"
    assert _files(other)[first] != _files(small_set)[first]


def test_layout_matches_the_real_dataset(small_set):
    for kind in TYPES:
        images = sorted(p.name for p in (small_set / "Images" / str(kind)).iterdir())
        masks = sorted(p.name for p in (small_set / "Masks" / str(kind)).iterdir())
        assert len(images) == 2 and all(name.endswith(".jpg") for name in images)  # JPEG photos
        assert masks == [name.replace(".jpg", ".png") for name in images]  # PNG masks, same stems


def test_images_are_jpegs_of_their_kind_and_masks_binary_non_empty(small_set):
    photos = sorted((small_set / "Images").rglob("*.jpg"))
    assert len(photos) == 8
    for image_path in photos:
        stored = Image.open(image_path)
        assert stored.format == "JPEG"
        assert stored.mode == synthetic.jpeg_kind(int(image_path.stem)).mode
        image = ImageOps.exif_transpose(stored)  # as a viewer shows it, as the mask is drawn
        mask = np.asarray(Image.open((small_set / "Masks" / image_path.relative_to(
            small_set / "Images")).with_suffix(".png")))
        assert MIN_SIDE <= min(image.size) and max(image.size) == MAX_SIDE  # the default side
        assert mask.shape == (image.size[1], image.size[0])
        assert set(np.unique(mask)) == {0, 255}


def test_sizes_and_aspect_ratios_vary():
    shapes = {synthetic_sample(0, i)[1].shape[:2] for i in range(8)}
    assert len(shapes) == 8
    assert len({h > w for h, w in shapes}) == 2  # portrait and landscape


def test_types_differ_in_scale():
    def nail_fraction(kind):
        return np.mean([synthetic_sample(1, i)[2].mean() for i in range(kind - 1, 80, 4)])
    assert nail_fraction(1) > 3 * nail_fraction(3)


def test_no_single_threshold_finds_the_nails():
    """The best threshold on any one channel (R, G, B or gray), either direction, misses."""
    samples = [synthetic_sample(0, i) for i in range(8)]
    pixels = np.concatenate([s[1].reshape(-1, 3) for s in samples]).astype(np.int64)
    nail = np.concatenate([s[2].reshape(-1) for s in samples]).astype(bool)
    best = 0.0
    for values in (*pixels.T, pixels.mean(axis=1).astype(np.int64)):
        in_nail = np.bincount(values[nail], minlength=256)
        in_rest = np.bincount(values[~nail], minlength=256)
        for counts_nail, counts_rest in ((in_nail, in_rest), (in_nail[::-1], in_rest[::-1])):
            hit = np.cumsum(counts_nail[::-1])  # predicted nail = value >= threshold
            false = np.cumsum(counts_rest[::-1])
            best = max(best, float(np.max(hit / (nail.sum() + false))))
    assert best < 0.3


def test_manifest_marks_a_complete_set(small_set):
    manifest = json.loads((small_set / MANIFEST).read_text())
    assert manifest["seed"] == 3 and manifest["num_images"] == 8
    assert is_complete(small_set, 8, seed=3)
    assert not is_complete(small_set, 8, seed=0)
    assert not is_complete(small_set, 9, seed=3)
    assert manifest["photo_side"] == MAX_SIDE  # the default side
    assert not is_complete(small_set, 8, seed=3, photo_side=256)  # another side is another set


def test_ensure_skips_a_complete_set(small_set, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("regenerated a complete set")
    monkeypatch.setattr(synthetic, "_generate", fail)
    assert ensure_synthetic_dataset(small_set, 8, seed=3, progress=False) == small_set


def test_ensure_replaces_a_half_written_set(tmp_path):
    root = tmp_path / "set"
    (root / "Images" / "1").mkdir(parents=True)
    (root / "Images" / "1" / "stale.jpg").write_bytes(b"half")
    ensure_synthetic_dataset(root, 4, progress=False)
    assert is_complete(root, 4)
    assert not (root / "Images" / "1" / "stale.jpg").exists()
    assert len(list((root / "Images").rglob("*.jpg"))) == 4


def test_interrupted_generation_leaves_nothing(tmp_path, monkeypatch):
    calls = []

    def broken(seed, index, style="course", long_side=MAX_SIDE):
        calls.append(index)
        if index == 2:
            raise KeyboardInterrupt
        return synthetic_sample(seed, index, style=style, long_side=long_side)

    monkeypatch.setattr(synthetic, "synthetic_sample", broken)
    monkeypatch.setattr(synthetic, "generation_processes", lambda count: 1)
    with pytest.raises(KeyboardInterrupt):
        generate_synthetic_dataset(tmp_path / "set", 6, progress=False)
    assert calls == [0, 1, 2]
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []


def test_parallel_generation_writes_the_same_files(tmp_path, monkeypatch):
    """Samples drawn in several processes are the ones one process draws, byte for byte."""
    monkeypatch.setattr(synthetic, "generation_processes", lambda count: 2)
    generate_synthetic_dataset(tmp_path / "parallel", 6, progress=False)
    monkeypatch.setattr(synthetic, "generation_processes", lambda count: 1)
    generate_synthetic_dataset(tmp_path / "serial", 6, progress=False)
    files = sorted(p.relative_to(tmp_path / "serial") for p in (tmp_path / "serial").rglob("*")
                   if p.suffix in (".jpg", ".png"))
    assert len(files) == 12 and sum(p.suffix == ".jpg" for p in files) == 6
    for name in files:
        assert (tmp_path / "parallel" / name).read_bytes() == (tmp_path / "serial" / name).read_bytes()


def test_small_sets_are_drawn_in_this_process_and_large_ones_on_every_core(monkeypatch):
    monkeypatch.setattr(synthetic, "usable_cores", lambda: 16)
    assert synthetic.generation_processes(48) == 1  # a smoke set: no process to start
    assert synthetic.generation_processes(400) == 4
    assert synthetic.generation_processes(2400) == 16  # at most one per core


def test_at_least_one_image_is_required(tmp_path):
    with pytest.raises(ValueError, match="at least 1"):
        generate_synthetic_dataset(tmp_path / "set", 0)


@pytest.mark.parametrize("side", [32, 63, True, 128.0])
def test_the_photo_side_is_a_whole_number_of_at_least_64_pixels(tmp_path, side):
    for make in (generate_synthetic_dataset, ensure_synthetic_dataset):
        with pytest.raises(ValueError, match="photo_side must be a whole number"):
            make(tmp_path / "set", 2, photo_side=side, progress=False)
    assert not (tmp_path / "set").exists()


def test_every_photo_is_drawn_at_the_photo_side():
    for index in range(6):
        _, image, mask = synthetic_sample(0, index, long_side=200)
        assert max(image.shape[:2]) == 200 and image.shape[:2] == mask.shape


@pytest.fixture(scope="module")
def photo_set(tmp_path_factory):
    return generate_synthetic_dataset(tmp_path_factory.mktemp("photo") / "set", 4, seed=3,
                                      progress=False, style="photo")


def test_photo_style_is_reproducible_type_one(photo_set, tmp_path):
    again = generate_synthetic_dataset(tmp_path / "again", 4, seed=3, progress=False, style="photo")
    assert _files(again) == _files(photo_set)
    assert sorted(p.name for p in (photo_set / "Images").iterdir()) == ["1"]
    assert sorted(p.name for p in (photo_set / "Masks").iterdir()) == ["1"]


def test_photo_style_masks_are_binary_non_empty(photo_set):
    masks = sorted((photo_set / "Masks" / "1").iterdir())
    assert len(masks) == 4
    for mask_path in masks:
        mask = np.asarray(Image.open(mask_path))
        assert set(np.unique(mask)) == {0, 255}
        stored = Image.open(photo_set / "Images" / "1" / f"{mask_path.stem}.jpg")
        image = ImageOps.exif_transpose(stored)  # the mask is drawn as the photo is shown
        assert stored.mode == synthetic.jpeg_kind(int(mask_path.stem)).mode
        assert mask.shape == (image.size[1], image.size[0])


def test_photo_style_differs_from_the_course():
    """Closer up (more nail per image) and under warmer light (more red than blue)."""
    def stats(style):
        # 16 samples: since every photo is drawn at one long side (generator 5), 8 of seed 5
        # put the photo style at 1.47x the course's nail share, 16 at 1.67x (32: 1.81x)
        samples = [synthetic_sample(5, i, style=style) for i in range(16)]
        means = np.mean([image.reshape(-1, 3).mean(axis=0) for _, image, _ in samples], axis=0)
        return np.mean([mask.mean() for _, _, mask in samples]), means[0] / means[2]
    course_nail, course_warmth = stats("course")
    photo_nail, photo_warmth = stats("photo")
    assert photo_nail > 1.5 * course_nail
    assert photo_warmth > course_warmth + 0.1


def test_manifest_records_the_style(photo_set, tmp_path):
    assert json.loads((photo_set / MANIFEST).read_text())["style"] == "photo"
    assert is_complete(photo_set, 4, seed=3, style="photo")
    assert not is_complete(photo_set, 4, seed=3)  # a course set is never taken from a photo set
    root = tmp_path / "set"
    generate_synthetic_dataset(root, 4, seed=3, progress=False, style="photo")
    ensure_synthetic_dataset(root, 4, seed=3, progress=False)
    assert json.loads((root / MANIFEST).read_text())["style"] == "course"
    assert len(list((root / "Images").rglob("*.jpg"))) == 4


def test_unknown_style_is_refused(tmp_path):
    with pytest.raises(ValueError, match="style"):
        generate_synthetic_dataset(tmp_path / "set", 2, style="anime")
    with pytest.raises(ValueError, match="style"):
        synthetic_sample(0, 0, style="anime")


def test_salon_style_is_reproducible_type_one_with_binary_masks():
    for index in range(3):
        kind, image, mask = synthetic_sample(2, index, style="salon")
        again = synthetic_sample(2, index, style="salon")
        assert kind == again[0] == 1
        assert np.array_equal(image, again[1]) and np.array_equal(mask, again[2])
        assert image.shape[:2] == mask.shape and set(np.unique(mask)) == {0, 1}


def test_the_held_out_style_draws_what_no_training_style_draws():
    """Transfer is measured on the salon style: its background, light, nail art and polish
    palette must stay out of every style a course model may train on."""
    salon = LOOKS["salon"]
    for name, look in LOOKS.items():
        if name == "salon":
            continue
        assert not set(salon.patterns) & set(look.patterns)
        assert not dict(salon.lights).keys() & dict(look.lights).keys()
        assert "marble" not in dict(look.designs)
        distance = np.linalg.norm(salon.polish[:, None] - look.polish[None], axis=2)
        assert distance.min() > 40
    assert dict(salon.designs)["marble"] > 0.5


def test_the_course_style_draws_the_variety_of_real_photos():
    course = LOOKS["course"]
    assert {"glitter", "dots", "stripes", "ombre"} <= dict(course.designs).keys()
    assert {"glossy", "matte", "metallic"} <= dict(course.finishes).keys()
    assert {"coffin", "short", "stiletto"} <= dict(course.shapes).keys()
    assert "flash" in dict(course.lights) and course.rings > 0 and course.cast >= 0.1
    brightness = SKIN_TONES.mean(axis=1)
    assert brightness.min() < 40 and brightness.max() > 235


def test_the_wide_style_adds_framings_sizes_and_plain_backgrounds_to_the_course():
    """The shipped model's pretraining set: every course type, plus fingertips that fill
    the frame, small photos and plain backgrounds, with bare nails as often as polish."""
    samples = [synthetic_sample(1, i, style="wide") for i in range(40)]
    assert {kind for kind, _, _ in samples} == set(TYPES)
    for index in range(3):
        again = synthetic_sample(1, index, style="wide")
        assert np.array_equal(samples[index][1], again[1])
        assert np.array_equal(samples[index][2], again[2])
    assert all(set(np.unique(mask)) == {0, 1} for _, _, mask in samples)
    longest = [max(image.shape[:2]) for _, image, _ in samples]
    assert min(longest) < 320 <= max(longest)  # small photos as well as the course's sizes
    course = [synthetic_sample(1, i) for i in range(0, 40, 4)]  # type 1: one finger close up
    biggest = max(mask.mean() for kind, _, mask in samples if kind == 1)
    assert biggest > 1.5 * max(mask.mean() for _, _, mask in course)  # a fingertip fills it
    corners = [image[:8, :8].reshape(-1, 3).std(axis=0).max() for _, image, _ in samples]
    assert min(corners) < 6  # at least one plain background
    wide = LOOKS["wide"]
    assert wide.nude > LOOKS["course"].nude and wide.plain > 0 and wide.framed > 0
