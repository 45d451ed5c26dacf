"""Data preparation: pairs, validation, split, CSVs, labels, and every bad input."""

import dataclasses
import io
import json
import os
import re
import subprocess
import sys
import unicodedata
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from nailseg_common.commands.prepare import main
from nailseg_common.core.errors import DataError
from nailseg_common.data import synthetic
from nailseg_common.data.images import MASK_THRESHOLD, read_binary_mask, read_rgb
from nailseg_common.data.preparation import (
    COLUMNS,
    MIN_STEPS_PER_EPOCH,
    SPLITS,
    dataset_table,
    ensure_prepared,
    find_pairs,
    fit_batch_to_split,
    label_of,
    prepare_dataset,
    read_label,
    read_split,
    split_pairs,
    summary,
)
from nailseg_common.setup.paths import DataLocation
from nailseg_common.setup.profiles import select_profile

H, W = 10, 12


def _image(seed, mode="RGB", size=(W, H)):
    rng = np.random.default_rng(seed)
    channels = {"RGB": 3, "RGBA": 4, "L": 1}[mode]
    pixels = rng.integers(0, 256, (size[1], size[0], channels), dtype=np.uint8)
    return Image.fromarray(pixels.squeeze(axis=2) if channels == 1 else pixels, mode)


def _mask(seed, size=(W, H)):
    mask = np.zeros((size[1], size[0]), np.uint8)
    mask[2:6, 1 + seed % 5: 6 + seed % 5] = 255
    return Image.fromarray(mask)


def write_pair(root, kind, name, image=None, mask=None, image_suffix=".png", mask_suffix=".png"):
    seed = sum(map(ord, f"{kind}{name}"))
    (root / "Images" / str(kind)).mkdir(parents=True, exist_ok=True)
    (root / "Masks" / str(kind)).mkdir(parents=True, exist_ok=True)
    image_path = root / "Images" / str(kind) / f"{name}{image_suffix}"
    mask_path = root / "Masks" / str(kind) / f"{name}{mask_suffix}"
    (image if image is not None else _image(seed)).save(image_path)
    (mask if mask is not None else _mask(seed)).save(mask_path)
    return image_path, mask_path


@pytest.fixture
def dataset(tmp_path):
    """Four types of five tiny pairs each."""
    root = tmp_path / "raw"
    for kind in (1, 2, 3, 4):
        for i in range(5):
            write_pair(root, kind, f"img{i}")
    return root


def _prepare(raw, tmp_path, **kwargs):
    return prepare_dataset(raw, tmp_path / "prepared", progress=False, **kwargs)


def _location(raw, tmp_path):
    return DataLocation(raw=raw, prepared=tmp_path / "prepared", synthetic=False)


def _leftovers(folder):
    return [p.name for p in folder.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


# --- the happy path -------------------------------------------------------------------------

def test_csvs_and_labels_follow_the_contract(dataset, tmp_path):
    _prepare(dataset, tmp_path)
    location = _location(dataset, tmp_path)
    train = pd.read_csv(location.train_csv)
    assert list(train.columns) == COLUMNS == ["image", "mask", "type", "label"]
    assert train["image"].str.match(r"Images/\d/img\d\.png$").all()
    assert (train["mask"] == train["image"].str.replace("Images/", "Masks/")).all()
    assert train["label"].str.match(r"labels/\d/img\d\.png$").all()
    assert (train["label"] == [label_of(str(t), Path(i).stem).as_posix()
                               for t, i in zip(train["type"], train["image"])]).all()
    assert not list(location.prepared.rglob("*.npy"))  # the photos stay as they are
    for split in ("train", "valid"):
        table = read_split(location, split)
        assert list(table.columns) == COLUMNS
        for _, row in table.iterrows():
            assert Path(row["label"]).is_absolute() and Path(row["label"]).is_relative_to(
                location.prepared)
            written = np.asarray(Image.open(row["label"]))
            assert written.shape == (H, W) and written.dtype == np.uint8
            assert set(np.unique(written)) == {0, 255}  # 0/255 PNG
            label = read_label(row["label"])
            assert label.shape == (H, W) and label.dtype == np.uint8
            assert set(np.unique(label)) == {0, 1}
            np.testing.assert_array_equal(label, np.asarray(Image.open(row["mask"])) // 255)
            assert read_rgb(row["image"]).shape == (H, W, 3)  # the photo, at its label's size


def test_no_leakage_and_every_pair_used_once(dataset, tmp_path):
    _prepare(dataset, tmp_path)
    location = _location(dataset, tmp_path)
    train, valid = read_split(location, "train"), read_split(location, "valid")
    assert not set(train["image"]) & set(valid["image"])
    assert not set(train["label"]) & set(valid["label"])
    assert len(train) + len(valid) == 20 == len(set(train["label"]) | set(valid["label"]))


def test_split_is_stratified_by_type_and_seeded(dataset):
    pairs = find_pairs(dataset)
    train, valid = split_pairs(pairs, valid_fraction=0.2, seed=0)
    assert sorted(p.type for p in valid) == ["1", "2", "3", "4"]
    assert sorted(p.type for p in train) == sorted(["1", "2", "3", "4"] * 4)
    assert split_pairs(pairs, 0.2, seed=0) == (train, valid)
    other_seeds = [split_pairs(pairs, 0.2, seed=s)[1] for s in range(1, 6)]
    assert any(v != valid for v in other_seeds)
    _, bigger = split_pairs(pairs, valid_fraction=0.4, seed=0)
    assert sorted(p.type for p in bigger) == sorted(["1", "2", "3", "4"] * 2)


def test_second_run_is_skipped_and_forced_rerun_is_byte_identical(dataset, tmp_path):
    prepared = _prepare(dataset, tmp_path)
    files = sorted(p for p in prepared.rglob("*") if p.is_file())
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files}
    _prepare(dataset, tmp_path)
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files} == before  # untouched
    _prepare(dataset, tmp_path, force=True)
    assert sorted(p for p in prepared.rglob("*") if p.is_file()) == files
    assert {p: p.read_bytes() for p in files} == {p: b for p, (b, _) in before.items()}
    assert _leftovers(tmp_path) == []


def test_changed_inputs_are_prepared_again(dataset, tmp_path):
    _prepare(dataset, tmp_path)
    write_pair(dataset, 1, "added")
    _prepare(dataset, tmp_path)
    location = _location(dataset, tmp_path)
    both = pd.concat([read_split(location, "train"), read_split(location, "valid")])
    assert str(dataset / "Images" / "1" / "added.png") in set(both["image"])


def test_a_mask_replaced_with_the_same_size_and_time_is_prepared_again(dataset, tmp_path):
    """Uncompressed PNGs: another mask of the same size in bytes, given the old one's time."""
    _, mask = write_pair(dataset, 1, "redrawn")
    _mask(0).save(mask, compress_level=0)
    before = mask.stat()
    _prepare(dataset, tmp_path)
    _mask(3).save(mask, compress_level=0)
    os.utime(mask, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (mask.stat().st_size, mask.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    _prepare(dataset, tmp_path)
    table = pd.concat([read_split(_location(dataset, tmp_path), split) for split in SPLITS])
    prepared = table[table["mask"] == str(mask)]["label"].item()
    assert np.array_equal(read_label(prepared) > 0, np.asarray(_mask(3)) > 0)


def test_ensure_prepared_generates_the_synthetic_set_once(tmp_path, monkeypatch):
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("NAILSEG_DATA_ROOT", raising=False)
    profile = dataclasses.replace(select_profile("smoke"), num_images=8)
    location = ensure_prepared(profile, "", progress=False)
    assert location.synthetic and location.raw == tmp_path / "synthetic-8"
    assert len(read_split(location, "train")) == 4 and len(read_split(location, "valid")) == 4
    csv_time = location.train_csv.stat().st_mtime_ns

    def fail(*args, **kwargs):
        raise AssertionError("regenerated")
    monkeypatch.setattr(synthetic, "_generate", fail)
    assert ensure_prepared(profile, None, progress=False) == location
    assert location.train_csv.stat().st_mtime_ns == csv_time


def test_ensure_prepared_uses_a_real_data_root(dataset, tmp_path, monkeypatch):
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path / "data"))
    location = ensure_prepared(select_profile("smoke"), str(dataset), progress=False)
    assert not location.synthetic and location.raw == dataset
    assert len(read_split(location, "valid")) == 4


def test_command_line_prints_a_summary(dataset, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path / "data"))
    assert main(["--profile", "smoke", "--data-root", str(dataset)]) == 0
    out = capsys.readouterr().out
    assert "real dataset" in out and "20 pairs" in out


def test_command_line_reports_bad_data_without_a_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path / "data"))
    assert main(["--profile", "smoke", "--data-root", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "does not exist" in err and err.count("\n") == 1



# --- formats that must be accepted ----------------------------------------------------------

def test_rgba_and_grayscale_images_are_converted(dataset, tmp_path):
    rgba, gray = _image(1, "RGBA"), _image(2, "L")
    write_pair(dataset, 1, "rgba", image=rgba)
    write_pair(dataset, 2, "gray", image=gray)
    assert read_rgb(dataset / "Images/1/rgba.png").shape == (H, W, 3)
    _prepare(dataset, tmp_path)
    table = dataset_table(_location(dataset, tmp_path))
    photos = {Path(p).stem: p for p in table["image"]}
    np.testing.assert_array_equal(read_rgb(photos["rgba"]), np.asarray(rgba)[:, :, :3])
    np.testing.assert_array_equal(read_rgb(photos["gray"]),
                                  np.repeat(np.asarray(gray)[:, :, None], 3, axis=2))
    assert set(table[table["image"].isin(photos.values())]["height"]) == {H}  # labels at size


def test_jpeg_images_and_masks_are_accepted(dataset, tmp_path):
    write_pair(dataset, 3, "photo", image_suffix=".jpg", mask_suffix=".jpeg")
    _prepare(dataset, tmp_path)
    location = _location(dataset, tmp_path)
    both = pd.concat([read_split(location, "train"), read_split(location, "valid")])
    row = both[both["image"].str.endswith("photo.jpg")].iloc[0]
    assert row["mask"].endswith("Masks/3/photo.jpeg") and row["label"].endswith("labels/3/photo.png")
    assert set(np.unique(read_label(row["label"]))) == {0, 1}


def _saved(pixels, fmt="PNG", mode=None):
    buffer = io.BytesIO()
    Image.fromarray(pixels, mode).save(buffer, format=fmt, **({"quality": 70} if fmt == "JPEG"
                                                               else {}))
    buffer.seek(0)
    return buffer


TRUTH = np.zeros((16, 16), np.uint8)
TRUTH[4:12, 3:10] = 1


@pytest.mark.parametrize("name,encoded", [
    ("0/255", lambda: _saved(TRUTH * 255)),
    ("0/1", lambda: _saved(TRUTH)),
    ("3-channel", lambda: _saved(np.repeat(TRUTH[:, :, None] * 255, 3, axis=2))),
    ("coloured", lambda: _saved(np.dstack([TRUTH * 200, TRUTH * 0, TRUTH * 0]))),
    ("jpeg", lambda: _saved(TRUTH * 255, "JPEG")),
    ("rgba", lambda: _saved(np.dstack([TRUTH * 255] * 3 + [np.full_like(TRUTH, 255)]))),
])
def test_masks_are_binarized(name, encoded):
    np.testing.assert_array_equal(read_binary_mask(encoded()), TRUTH)


def test_palette_bilevel_and_16_bit_files_are_read():
    palette = Image.fromarray(TRUTH, "P")
    palette.putpalette([0, 0, 0, 255, 255, 255])
    bilevel = Image.fromarray(TRUTH * 255).convert("1")
    for mask in (palette, bilevel):
        buffer = io.BytesIO()
        mask.save(buffer, format="PNG")
        buffer.seek(0)
        np.testing.assert_array_equal(read_binary_mask(buffer), TRUTH)
    deep = Image.fromarray((TRUTH.astype(np.uint16) * 65535), "I;16")
    buffer = io.BytesIO()
    deep.save(buffer, format="PNG")
    buffer.seek(0)
    np.testing.assert_array_equal(read_rgb(buffer), np.repeat(TRUTH[:, :, None] * 255, 3, axis=2))


def test_antialiased_masks_are_binarized_at_the_documented_threshold():
    mask = np.array([[0, 40, MASK_THRESHOLD - 1, MASK_THRESHOLD, 200, 255]], np.uint8)
    np.testing.assert_array_equal(read_binary_mask(_saved(mask)), [[0, 0, 0, 1, 1, 1]])


# --- bad input: each error names the file and the fix ---------------------------------------

def test_missing_data_root(tmp_path):
    missing = tmp_path / "no-such-folder"
    with pytest.raises(DataError, match=re.escape(str(missing))) as error:
        _prepare(missing, tmp_path)
    assert "make data" in str(error.value) and "Images/" in str(error.value)


def test_empty_data_root(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match=re.escape(str(empty))) as error:
        _prepare(empty, tmp_path)
    assert "generate_synthetic_dataset" in str(error.value)


def test_data_root_with_empty_type_folders(tmp_path):
    root = tmp_path / "raw"
    (root / "Images" / "1").mkdir(parents=True)
    (root / "Masks" / "1").mkdir(parents=True)
    with pytest.raises(DataError, match="No images found under .*raw") as error:
        _prepare(root, tmp_path)
    assert "make data" in str(error.value)


def test_images_without_masks_and_masks_without_images_are_listed(dataset, tmp_path):
    (dataset / "Masks" / "2" / "img3.png").unlink()
    (dataset / "Masks" / "4" / "img1.png").unlink()
    _mask(0).save(dataset / "Masks" / "3" / "orphan.png")
    with pytest.raises(DataError) as error:
        _prepare(dataset, tmp_path)
    message = str(error.value)
    assert "Images/2/img3.png" in message and "Images/4/img1.png" in message
    assert "Masks/3/orphan.png" in message
    assert "2 image(s) without a mask" in message and "1 mask(s) without an image" in message
    assert not (tmp_path / "prepared").exists()


@pytest.mark.parametrize("which", ["Images", "Masks"])
@pytest.mark.parametrize("content", [b"not a png at all", "truncated"])
def test_corrupt_files_are_named_and_nothing_is_written(dataset, tmp_path, which, content):
    path = dataset / which / "3" / "img2.png"
    if content == "truncated":
        content = path.read_bytes()[:60]
    path.write_bytes(content)
    with pytest.raises(DataError, match=re.escape(str(path))) as error:
        _prepare(dataset, tmp_path)
    assert "corrupt" in str(error.value) and "Re-export" in str(error.value)
    assert not (tmp_path / "prepared").exists() and _leftovers(tmp_path) == []


def test_corrupt_file_keeps_the_previous_preparation(dataset, tmp_path):
    prepared = _prepare(dataset, tmp_path)
    before = prepared.joinpath("csv_file", "train.csv").read_bytes()
    (dataset / "Images" / "1" / "img0.png").write_bytes(b"garbage")
    with pytest.raises(DataError, match="img0.png"):
        _prepare(dataset, tmp_path)
    assert prepared.joinpath("csv_file", "train.csv").read_bytes() == before
    assert _leftovers(tmp_path) == []


def test_image_and_mask_sizes_differ(dataset, tmp_path):
    image, mask = write_pair(dataset, 2, "odd", mask=_mask(0, size=(W + 3, H)))
    with pytest.raises(DataError, match="Size mismatch") as error:
        _prepare(dataset, tmp_path)
    assert str(image) in str(error.value) and str(mask) in str(error.value)
    assert f"{W}x{H}" in str(error.value) and f"{W + 3}x{H}" in str(error.value)


def test_a_split_that_comes_out_empty(tmp_path):
    root = tmp_path / "raw"
    for i in range(5):
        write_pair(root, 1, f"img{i}")
    write_pair(root, 2, "lonely")
    with pytest.raises(DataError, match=r"Type '2' .*Images/2.*only 1 image") as error:
        _prepare(root, tmp_path)
    assert "at least 2 per type" in str(error.value)


def test_unsupported_files_are_named(dataset, tmp_path):
    bmp = dataset / "Images" / "1" / "scan.bmp"
    _image(0).save(bmp)
    with pytest.raises(DataError, match=re.escape(str(bmp))):
        _prepare(dataset, tmp_path)


def test_two_files_with_the_same_name(dataset, tmp_path):
    _image(0).save(dataset / "Images" / "1" / "img0.jpg")
    with pytest.raises(DataError, match=r"Images/1: img0.jpg and img0.png"):
        _prepare(dataset, tmp_path)


def test_read_split_before_preparation_says_how_to_prepare(tmp_path):
    location = _location(tmp_path / "raw", tmp_path)
    with pytest.raises(DataError, match="train.csv does not exist.*make data"):
        read_split(location, "train")
    with pytest.raises(ValueError, match="split must be one of"):
        read_split(location, "test")


# --- damaged, ambiguous or silently wrong data: named, never trained on ---------------------

def test_masks_that_fit_no_encoding_are_named_and_nothing_is_written(dataset, tmp_path):
    classes = np.zeros((H, W), np.uint8)
    classes[2:6, 1:4], classes[2:6, 6:9] = 1, 2
    _, class_mask = write_pair(dataset, 1, "classes", mask=Image.fromarray(classes))
    _, full_mask = write_pair(dataset, 2, "full", mask=Image.fromarray(np.full((H, W), 255, np.uint8)))
    with pytest.raises(DataError, match="2 problem") as error:
        _prepare(dataset, tmp_path)
    message = str(error.value)
    assert f"{class_mask}' has values 0, 1, 2" in message and "nail pixels 255 (or 1)" in message
    assert f"{full_mask}' is nail everywhere" in message and "remove the pair" in message
    assert not (tmp_path / "prepared").exists() and _leftovers(tmp_path) == []


def test_jpeg_0_1_masks_are_prepared_without_losing_nails(tmp_path):
    root = tmp_path / "raw"
    for i in range(20):
        mask = np.zeros((32, 32), np.uint8)
        mask[4 + i % 7: 20, 3: 12 + i % 9] = 1
        write_pair(root, 1 + i % 2, f"m{i}", image=_image(i, size=(32, 32)),
                   mask=Image.fromarray(mask), mask_suffix=".jpg")
    _prepare(root, tmp_path)
    table = dataset_table(_location(root, tmp_path))
    assert len(table) == 20 and (table["nail_fraction"] > 0).all()  # none emptied


def test_a_few_empty_masks_are_kept_and_named(dataset, tmp_path):
    write_pair(dataset, 3, "no-nail", mask=Image.fromarray(np.zeros((H, W), np.uint8)))
    with pytest.warns(UserWarning, match=r"1 mask\(s\) in .* have no nail pixel; they are kept") \
            as caught:
        _prepare(dataset, tmp_path)
    assert "Masks/3/no-nail.png" in str(caught[0].message)
    location = _location(dataset, tmp_path)
    assert "21 pairs, 1 of them without any nail pixel (kept)" in summary(location)
    manifest = json.loads((location.prepared / "prepared.json").read_text())
    assert manifest["empty_masks"] == ["Masks/3/no-nail.png"]


def test_mostly_empty_masks_are_refused(dataset, tmp_path):
    blank = Image.fromarray(np.zeros((H, W), np.uint8))
    for path in sorted((dataset / "Masks").rglob("*.png"))[:11]:
        blank.save(path)
    with pytest.raises(DataError, match=r"11 of 20 masks have no nail pixel at all") as error:
        _prepare(dataset, tmp_path)
    assert "Masks/1/img0.png" in str(error.value) and "Re-export them as PNG" in str(error.value)
    assert not (tmp_path / "prepared").exists()


def _damage(prepared, how):
    label = prepared / "labels" / "2" / "img3.png"
    if how == "deleted":
        label.unlink()
    elif how == "truncated":
        label.write_bytes(label.read_bytes()[:50])
    elif how == "other shape":  # a valid label, transposed
        Image.fromarray(np.ascontiguousarray(np.asarray(Image.open(label)).T)).save(
            label, compress_level=1)
    elif how == "other content":  # the same number of bytes, one of them changed
        data = bytearray(label.read_bytes())
        data[len(data) // 2] ^= 0xFF
        label.write_bytes(bytes(data))
    elif how == "valid.csv removed":
        (prepared / "csv_file" / "valid.csv").unlink()
    else:
        (prepared / "prepared.json").write_text("{")


DAMAGES = ["deleted", "truncated", "other shape", "other content", "valid.csv removed",
           "manifest cut"]


@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_prepared_files_are_rebuilt(dataset, tmp_path, how):
    prepared = _prepare(dataset, tmp_path)
    files = sorted(p for p in prepared.rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in files}
    _damage(prepared, how)
    if how == "manifest cut":
        _prepare(dataset, tmp_path)  # no manifest: rebuilt like a first run
    else:
        with pytest.warns(UserWarning, match=r"Prepared folder .*prepared is damaged \(1 file") \
                as caught:
            _prepare(dataset, tmp_path)
        damaged = "csv_file/valid.csv" if how.startswith("valid") else "labels/2/img3.png"
        assert damaged in str(caught[0].message) and "rebuilding it from" in str(caught[0].message)
    assert {p: p.read_bytes() for p in prepared.rglob("*") if p.is_file()} == before
    assert _leftovers(tmp_path) == []


def test_make_data_repairs_a_missing_valid_csv(dataset, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path / "data"))
    location = ensure_prepared(select_profile("smoke"), str(dataset), progress=False)
    location.valid_csv.unlink()
    with pytest.raises(DataError, match="valid.csv does not exist.*make data"):
        read_split(location, "valid")
    with pytest.warns(UserWarning, match="csv_file/valid.csv is missing"):
        main(["--profile", "smoke", "--data-root", str(dataset)])
    assert "20 pairs" in capsys.readouterr().out
    assert len(read_split(location, "valid")) == 4


def test_damage_without_the_raw_data_is_refused_in_one_sentence(dataset, tmp_path):
    prepared = _prepare(dataset, tmp_path)
    _damage(prepared, "deleted")
    moved = dataset.rename(tmp_path / "moved")
    with pytest.raises(DataError, match=f"Data root {re.escape(str(dataset))} does not exist"):
        _prepare(dataset, tmp_path)
    assert moved.is_dir()


def test_two_datasets_with_the_same_folder_name_keep_their_own_split(tmp_path, monkeypatch):
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path / "data"))
    first, second = tmp_path / "a" / "nails", tmp_path / "b" / "nails"
    for root, count in ((first, 3), (second, 5)):
        for i in range(count):
            write_pair(root, 1, f"{root.parent.name}{i}")
    profile = select_profile("smoke")
    one = ensure_prepared(profile, str(first), progress=False)
    two = ensure_prepared(profile, str(second), progress=False)
    assert one.prepared != two.prepared
    assert one.prepared.name.startswith("nails-") and two.prepared.name.startswith("nails-")
    assert all(name.startswith(str(first)) for name in read_split(one, "train")["image"])
    assert len(read_split(two, "train")) == 4 and len(read_split(one, "train")) == 2
    assert ensure_prepared(profile, str(first), progress=False).prepared == one.prepared


@pytest.mark.parametrize("folders", [("train", "val"), ("training", "validation"),
                                     ("train_images", "test")])
def test_split_folders_are_not_taken_for_types(tmp_path, folders):
    root = tmp_path / "raw"
    for folder in folders:
        for i in range(3):
            write_pair(root, folder, f"img{i}")
    with pytest.raises(DataError, match=f"Images/{folders[0]}.* look like a train/validation "
                                        "split") as error:
        _prepare(root, tmp_path)
    assert "validation photos would be trained on" in str(error.value)
    assert "Images/1..4" in str(error.value)
    assert not (tmp_path / "prepared").exists()


def test_named_type_folders_are_said_to_be_types(tmp_path):
    root = tmp_path / "raw"
    for folder in ("left", "right"):
        for i in range(3):
            write_pair(root, folder, f"img{i}")
    with pytest.warns(UserWarning, match=r"Images/left, Images/right of .* are taken as nail types"):
        _prepare(root, tmp_path)


def test_folders_inside_a_type_folder_are_named(dataset, tmp_path):
    write_pair(dataset / "Images" / "1", "extra", "img9")
    with pytest.raises(DataError, match=r"Folder Images/1/Images inside a type folder.*Move its "
                                        "files up"):
        _prepare(dataset, tmp_path)


def test_nfc_and_nfd_names_match(dataset, tmp_path):
    nfc, nfd = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")
    assert nfc != nfd
    _image(7).save(dataset / "Images" / "1" / f"{nfc}.png")
    _mask(7).save(dataset / "Masks" / "1" / f"{nfd}.png")
    _prepare(dataset, tmp_path)
    table = dataset_table(_location(dataset, tmp_path))
    assert len(table) == 21
    row = table[table["image"].str.endswith(f"{nfc}.png")].iloc[0]
    assert row["mask"].endswith(f"Masks/1/{nfd}.png") and row["nail_fraction"] > 0


def test_broken_symbolic_links_are_named(dataset, tmp_path):
    link = dataset / "Images" / "2" / "linked.png"
    link.symlink_to(tmp_path / "gone.png")
    with pytest.raises(DataError, match=r"1 broken symbolic link\(s\)") as error:
        _prepare(dataset, tmp_path)
    assert f"Images/2/linked.png -> {tmp_path / 'gone.png'}" in str(error.value)
    assert "delete the links" in str(error.value)


def test_unreadable_files_are_not_called_corrupt(dataset, tmp_path, monkeypatch):
    locked = dataset / "Masks" / "4" / "img2.png"
    opened = Image.open

    def open_(path, *args, **kwargs):
        if str(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(path))
        return opened(path, *args, **kwargs)
    monkeypatch.setattr(Image, "open", open_)
    with pytest.raises(DataError, match=re.escape(str(locked)) + "': permission denied") as error:
        _prepare(dataset, tmp_path)
    assert "corrupt" not in str(error.value) and "chmod u+r" in str(error.value)


def test_staging_folders_of_killed_runs_are_removed(dataset, tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    stale = [tmp_path / f".prepared.tmp-{dead}", tmp_path / f".prepared.old-{dead}"]
    running = tmp_path / ".prepared.tmp-1"  # pid 1 is alive: maybe another run's, kept
    for folder in (*stale, running):
        (folder / "labels").mkdir(parents=True)
    _prepare(dataset, tmp_path)
    assert not any(folder.exists() for folder in stale) and running.exists()


def test_staging_folders_are_removed_even_when_nothing_is_rebuilt(dataset, tmp_path):
    prepared = _prepare(dataset, tmp_path)
    before = prepared.joinpath("prepared.json").stat().st_mtime_ns
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / f".prepared.old-{dead}" / "labels").mkdir(parents=True)  # killed after the rename
    _prepare(dataset, tmp_path)
    assert _leftovers(tmp_path) == []
    assert prepared.joinpath("prepared.json").stat().st_mtime_ns == before


def test_the_batch_never_exceeds_what_the_training_split_can_fill(tmp_path, capsys):
    raw = tmp_path / "nails"
    synthetic.generate_synthetic_dataset(raw, 20, seed=3)
    location = DataLocation(raw=raw, prepared=tmp_path / "prepared", synthetic=True)
    prepare_dataset(raw, location.prepared, progress=False)
    train_size = len(read_split(location, "train"))
    profile = select_profile("smoke", batch_size=32)
    fitted = fit_batch_to_split(profile, location)
    assert fitted.batch_size == train_size // MIN_STEPS_PER_EPOCH
    assert "batch size 32 ->" in capsys.readouterr().out
    small = select_profile("smoke", batch_size=2)
    assert fit_batch_to_split(small, location) == small


# --- real sets as people have them: folder case, the flat layout, EXIF orientation ---------

def _flat(root, images="images", masks="masks", count=10):
    for i in range(count):
        (root / images).mkdir(parents=True, exist_ok=True)
        (root / masks).mkdir(parents=True, exist_ok=True)
        _image(i).save(root / images / f"img{i}.png")
        _mask(i).save(root / masks / f"img{i}.png")
    return root


@pytest.mark.parametrize("images,masks", [("images", "masks"), ("IMAGES", "Masks")])
def test_flat_layout_in_any_letter_case_is_one_type(tmp_path, images, masks):
    root = _flat(tmp_path / "raw", images, masks)
    pairs = find_pairs(root)
    assert [(p.type, p.image.name, p.mask.name) for p in pairs] == \
        [("1", f"img{i}.png", f"img{i}.png") for i in range(10)]
    assert all(p.image.parent.name == images and p.mask.parent.name == masks for p in pairs)
    _prepare(root, tmp_path)
    location = _location(root, tmp_path)
    train, valid = read_split(location, "train"), read_split(location, "valid")
    assert (len(train), len(valid)) == (8, 2) and not set(train["image"]) & set(valid["image"])
    for _, row in pd.concat([train, valid]).iterrows():
        assert row["type"] == 1 and row["mask"] == row["image"].replace(images, masks)
        assert row["label"] == str(location.prepared / "labels" / "1" / Path(row["image"]).name)
        np.testing.assert_array_equal(read_label(row["label"]),
                                      np.asarray(Image.open(row["mask"])) // 255)
    assert (f"flat layout: 10 pairs directly in {images}/ and {masks}/, taken as one type (1)"
            in summary(location))


@pytest.mark.parametrize("where", ["Images", "Masks"])
def test_files_beside_type_folders_are_refused(dataset, tmp_path, where):
    _mask(0).save(dataset / where / "loose.png")
    with pytest.raises(DataError, match=f"{where} holds both files and sub-folders") as error:
        _prepare(dataset, tmp_path)
    message = str(error.value)
    assert f"1 file(s):\n  {where}/loose.png" in message
    assert f"4 sub-folder(s):\n  {where}/1\n  {where}/2" in message
    assert "Move the files into a sub-folder, or the sub-folders' files up" in message
    assert not (tmp_path / "prepared").exists()


def test_flat_images_with_typed_masks_are_refused(tmp_path):
    root = _flat(tmp_path / "raw", "Images", "Masks")
    for mask in sorted((root / "Masks").iterdir()):
        (root / "Masks" / "1").mkdir(exist_ok=True)
        mask.rename(root / "Masks" / "1" / mask.name)
    with pytest.raises(DataError, match=r"Images holds its files directly but .*Masks has "
                                        "sub-folders: lay out images and masks alike"):
        _prepare(root, tmp_path)


def test_two_folders_differing_only_in_case_are_refused(dataset, tmp_path):
    (dataset / "images").mkdir()
    with pytest.raises(DataError, match=r"2 folders named Images: Images and images\. Merge "
                                        "them into one Images folder"):
        _prepare(dataset, tmp_path)


def _pattern(height, width):
    """Two blocks no turn or flip maps onto themselves (8-pixel aligned, for JPEG)."""
    pattern = np.zeros((height, width), np.uint8)
    pattern[0:8, 0:16] = 1
    pattern[16:24, 24:32] = 1
    return pattern


def _phone_file(displayed, orientation):
    """``displayed`` stored as a phone stores it: turned, with the EXIF Orientation tag
    (6: turn clockwise to display, 8: counter-clockwise) that turns it back."""
    exif = Image.Exif()
    if orientation:
        exif[0x0112] = orientation
        displayed = np.rot90(displayed, 1 if orientation == 6 else -1)
    return Image.fromarray(np.ascontiguousarray(displayed)), exif


@pytest.mark.parametrize("size", [(24, 40), (32, 32)])  # a square one used to pass silently
@pytest.mark.parametrize("orientation", [6, 8])
@pytest.mark.parametrize("tagged", ["image", "mask", "both"])
def test_exif_oriented_photos_and_masks_line_up(dataset, tmp_path, size, orientation, tagged):
    """Each file is turned by its own tag, as a photo viewer shows it."""
    pattern = _pattern(*size)
    rgb = np.repeat(pattern[:, :, None] * 200 + 30, 3, axis=2).astype(np.uint8)
    image, image_exif = _phone_file(rgb, orientation if tagged != "mask" else 0)
    mask, mask_exif = _phone_file(pattern * 255, orientation if tagged != "image" else 0)
    image_path, mask_path = write_pair(dataset, 1, "phone", image_suffix=".jpg")
    image.save(image_path, exif=image_exif, quality=95)
    mask.save(mask_path, exif=mask_exif)
    if tagged == "both" or size[0] != size[1]:  # stored sides swapped: the turn lines them up
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _prepare(dataset, tmp_path)
    else:  # the square pair lines up only if the mask was drawn as the viewer shows it: said
        with pytest.warns(UserWarning, match="EXIF orientation of 1 pair") as caught:
            _prepare(dataset, tmp_path)
        assert any(f"{image_path} and {mask_path} (" in str(w.message) for w in caught)
    label = read_label(tmp_path / "prepared" / label_of("1", "phone"))  # written upright
    photo = read_rgb(image_path)  # the photo stays as stored; every reader turns it upright
    assert photo.shape == (*size, 3) and label.shape == size
    np.testing.assert_array_equal(label, pattern)
    np.testing.assert_array_equal(photo.mean(axis=2) > 130, pattern.astype(bool))


def test_a_damaged_exif_block_is_named_once_not_in_pillow_s_words(dataset, tmp_path, recwarn):
    exif = Image.Exif()
    exif[0x0112], exif[0x010E] = 6, "x" * 50
    image_path, _ = write_pair(dataset, 1, "phone", image_suffix=".jpg")
    _image(0).save(image_path, exif=exif.tobytes()[:-30])  # cut inside its description
    _prepare(dataset, tmp_path)
    messages = [str(w.message) for w in recwarn]
    assert messages == [(f"Image '{image_path}' has a damaged EXIF block (Truncated File Read): "
                        "the tags that could be read are used, so it may be turned wrongly; if "
                        "it is, save it again without EXIF (e.g. exiftool -all= FILE).")]
