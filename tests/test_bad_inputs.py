"""Masks that lie, names and folders that break, disks that refuse.

Each case ends in a correct preparation or in one message naming the file or folder and
the fix, with nothing half-written left and a run after the fix working as it is.
"""

import contextlib
import errno
import io
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_preparation import _image, _leftovers, _mask, write_pair

from nailseg_common.commands import prepare
from nailseg_common.core import files
from nailseg_common.core.errors import DataError
from nailseg_common.data.preparation import (
    dataset_table,
    ensure_prepared,
    label_of,
    prepare_dataset,
    read_label,
    read_split,
    summary,
)
from nailseg_common.data.scenes import synthetic_sample
from nailseg_common.setup import profiles
from nailseg_common.setup.paths import DataLocation
from nailseg_common.setup.profiles import select_profile


def main(argv: list[str]) -> None:
    """``nailseg-prepare ARGV`` (``make data``); a failure raises ``SystemExit`` with the one
    line it printed on stderr (a second line, or a traceback, fails the test)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = prepare.main(argv)
    if status:
        lines = err.getvalue().splitlines()
        assert len(lines) == 1, lines
        raise SystemExit(lines[0])


@pytest.fixture
def dataset(tmp_path):
    """Two types of five tiny pairs each, every mask 17 % nail."""
    root = tmp_path / "raw"
    for kind in (1, 2):
        for i in range(5):
            write_pair(root, kind, f"img{i}")
    return root


def _prepare(raw, tmp_path, **kwargs):
    return prepare_dataset(raw, tmp_path / "prepared", progress=False, **kwargs)


def _label(tmp_path, kind, name):
    """The label preparation wrote for pair ``kind``/``name``, as every pipeline reads it."""
    path = tmp_path / "prepared" / label_of(str(kind), name)
    assert set(np.unique(np.asarray(Image.open(path)))) <= {0, 255}  # written 0/255
    return read_label(path)


def _refused(raw, tmp_path, pattern):
    with pytest.raises(DataError, match=pattern) as error:
        _prepare(raw, tmp_path)
    assert not (tmp_path / "prepared").exists() and _leftovers(tmp_path) == []
    return str(error.value)


# --- masks that lie -------------------------------------------------------------------------

TRUTH = np.asarray(_mask(3)) // 255


def test_a_stray_255_in_a_0_1_mask_keeps_the_nail_and_is_named(dataset, tmp_path):
    pixels = TRUTH.copy()
    pixels[0, 0] = 255
    write_pair(dataset, 1, "stray", mask=Image.fromarray(pixels))
    with pytest.warns(UserWarning, match=r"1 mask\(s\) in .* are label masks with void pixels") \
            as caught:
        _prepare(dataset, tmp_path)
    assert "Masks/1/stray.png (1 pixel(s))" in str(caught[0].message)
    np.testing.assert_array_equal(_label(tmp_path, 1, "stray"), TRUTH)


@pytest.mark.parametrize("name,pixels", [
    ("inverted", (1 - TRUTH) * 255),
    ("inverted-01", 1 - TRUTH),
])
def test_inverted_masks_are_refused_by_name(dataset, tmp_path, name, pixels):
    write_pair(dataset, 2, name, mask=Image.fromarray(pixels.astype(np.uint8)))
    message = _refused(dataset, tmp_path, r"1 mask\(s\) are mostly nail, far from the set's 17%")
    assert f"Masks/2/{name}.png (83% nail)" in message and "Invert them" in message


def test_a_photo_copied_into_masks_is_refused_by_name(dataset, tmp_path):
    _, photo, _ = synthetic_sample(0, 0)
    write_pair(dataset, 1, "photo", image=Image.fromarray(photo), mask=Image.fromarray(photo))
    message = _refused(dataset, tmp_path, r"1 problem\(s\)")
    assert f"{dataset / 'Masks/1/photo.png'}' has values" in message
    assert "looks like a photo, not a mask" in message


def test_a_lossy_webp_0_1_mask_named_png_is_refused_by_name(dataset, tmp_path):
    _, photo, truth = synthetic_sample(0, 3)
    _, path = write_pair(dataset, 1, "webp", image=Image.fromarray(photo))
    Image.fromarray(truth).save(path, format="WEBP", quality=90)
    message = _refused(dataset, tmp_path, r"1 problem\(s\)")
    assert f"{path}' has values" in message and "saved as lossy WebP" in message


def test_palette_and_cut_out_masks_are_prepared_by_their_meaning(dataset, tmp_path):
    voc = Image.fromarray((TRUTH * 8).astype(np.uint8), "P")  # index 8: VOC's (64, 0, 0)
    voc.putpalette([0, 0, 0] * 8 + [64, 0, 0] + [0, 0, 0] * 247)
    photo = np.asarray(_image(5))
    cut_out = Image.fromarray(np.dstack([photo, TRUTH * 255]).astype(np.uint8), "RGBA")
    write_pair(dataset, 1, "voc", mask=voc)
    write_pair(dataset, 2, "cut-out", mask=cut_out)
    _prepare(dataset, tmp_path)
    np.testing.assert_array_equal(_label(tmp_path, 1, "voc"), TRUTH)
    np.testing.assert_array_equal(_label(tmp_path, 2, "cut-out"), TRUTH)


def test_huge_photos_are_named(dataset, tmp_path, monkeypatch):
    """Pillow warns past MAX_IMAGE_PIXELS (108 megapixels) and refuses past twice that (200):
    scaled down here to a 1200-pixel photo among 120-pixel ones."""
    path, _ = write_pair(dataset, 2, "huge", image=_image(0, size=(40, 30)),
                         mask=_mask(0, size=(40, 30)))
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    with pytest.warns(UserWarning, match=re.escape(str(path)) + "' has 0 megapixels.*mogrify"):
        _prepare(dataset, tmp_path)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 500)
    message = _refused(dataset, tmp_path / "again", r"1 problem\(s\)")
    assert f"Image '{path}' is too large to read safely" in message and "mogrify" in message


# --- names and folders that break -----------------------------------------------------------

def test_names_that_are_not_utf8_are_named_without_a_traceback(dataset, tmp_path, capsys,
                                                               monkeypatch):
    for folder in ("Images", "Masks"):  # "café" as unzip writes a cp437 name
        with open(os.fsencode(dataset / folder / "1") + b"/caf\x82.png", "wb") as handle:
            handle.write((dataset / folder / "1" / "img0.png").read_bytes())
    message = _refused(dataset, tmp_path, r"1 name\(s\) in .* are not UTF-8")
    assert "Images/1/caf\\x82.png" in message and "convmv -f cp437" in message
    message.encode("utf-8")  # printable as it is
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(SystemExit, match="not UTF-8"):
        main(["--profile", "smoke", "--data-root", str(dataset)])
    for folder in ("Images", "Masks"):  # renamed as the message says: prepared as it is
        os.rename(os.fsencode(dataset / folder / "1") + b"/caf\x82.png",
                  dataset / folder / "1" / "café.png")
    main(["--profile", "smoke", "--data-root", str(dataset)])
    assert "11 pairs" in capsys.readouterr().out


def test_type_folders_named_none_and_na_stay_text(tmp_path):
    root = tmp_path / "raw"
    for kind in ("None", "NA", "1"):
        for i in range(3):
            write_pair(root, kind, f"img{i}")
    with pytest.warns(UserWarning, match="Images/NA, Images/None .* are taken as nail types"):
        _prepare(root, tmp_path)
    location = DataLocation(raw=root, prepared=tmp_path / "prepared", synthetic=False)
    types = sorted(map(str, read_split(location, "train")["type"]))
    assert types == ["1", "1", "NA", "NA", "None", "None"]
    assert set(dataset_table(location)["type"]) == {1, "NA", "None"}
    assert re.search(r"\nNA +2 +1\nNone +2 +1", summary(location))


def test_a_zip_or_a_file_as_data_root_says_what_it_is(dataset, tmp_path):
    archive = tmp_path / "nails.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.write(dataset / "Images" / "1" / "img0.png", "Images/1/img0.png")
    with pytest.raises(DataError, match=f"{re.escape(str(archive))} is a zip archive: unzip it "
                                        "first") as error:
        _prepare(archive, tmp_path)
    assert "does not exist" not in str(error.value)
    text = tmp_path / "notes.txt"
    text.write_text("not a dataset")
    with pytest.raises(DataError, match=f"{re.escape(str(text))} is a file, not a folder"):
        _prepare(text, tmp_path)


@pytest.mark.parametrize("seed", ["-1", "-1e3", "1.5"])
def test_a_seed_of_the_wrong_sign_or_kind_is_refused_before_anything_is_written(
        tmp_path, monkeypatch, capsys, seed):
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("NAILSEG_DATA_ROOT", raising=False)
    with pytest.raises(SystemExit) as stop:
        prepare.main(["--profile", "smoke", "--seed", seed])
    assert stop.value.code == 2
    assert f"error: --seed {seed}: " in capsys.readouterr().err
    with pytest.raises(DataError, match="seed must be a whole number"):
        ensure_prepared(select_profile("smoke"), seed=1.5, progress=False)
    assert not (tmp_path / "data").exists()


# --- data folders that refuse ---------------------------------------------------------------

def test_a_data_dir_that_is_a_file_is_named_and_works_once_moved(dataset, tmp_path, monkeypatch,
                                                                 capsys):
    data = tmp_path / "data"
    data.write_text("oops")
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(data))
    for root in (str(dataset), ""):  # a real set, and the synthetic one
        with pytest.raises(SystemExit, match=f"error: {re.escape(str(data))} is a file, but the "
                                             "course needs a folder there.*NAILSEG_DATA_DIR"):
            main(["--profile", "smoke", "--data-root", root])
    data.unlink()
    main(["--profile", "smoke", "--data-root", str(dataset)])
    assert "10 pairs" in capsys.readouterr().out


def _refusing_mkdir(monkeypatch, error):
    """``mkdir`` fails under the data folder as a read-only one (or one without execute
    permission, or on a read-only file system) makes it fail; root ignores permissions."""
    mkdir = Path.mkdir

    def refuse(self, *args, **kwargs):
        if "data" in self.parts:
            raise OSError(error, os.strerror(error), str(self))
        return mkdir(self, *args, **kwargs)
    monkeypatch.setattr(Path, "mkdir", refuse)


@pytest.mark.parametrize("error,says", [(errno.EACCES, "permission denied .*chmod u\\+rwx"),
                                        (errno.EROFS, "the file system is read-only")])
def test_an_unwritable_data_dir_is_named(dataset, tmp_path, monkeypatch, error, says):
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path / "data"))
    _refusing_mkdir(monkeypatch, error)
    with pytest.raises(SystemExit, match=f"error: Cannot write to {re.escape(str(tmp_path))}"
                                         f"/data.*: {says}.*NAILSEG_DATA_DIR"):
        main(["--profile", "smoke", "--data-root", str(dataset)])
    monkeypatch.undo()
    location = ensure_prepared(select_profile("smoke"), dataset, progress=False)
    assert len(read_split(location, "train")) == 8


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
@pytest.mark.parametrize("mode", [0o500, 0o600])  # read-only; without execute permission
def test_a_data_dir_without_write_or_execute_permission_is_named(dataset, tmp_path,
                                                                  monkeypatch, mode):
    data = tmp_path / "data"
    data.mkdir(mode=mode)
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(data))
    try:
        with pytest.raises(SystemExit, match="permission denied"):
            main(["--profile", "smoke", "--data-root", str(dataset)])
    finally:
        data.chmod(0o700)


@pytest.mark.parametrize("error", [
    OSError(errno.ENOSPC, "No space left on device"),
    OSError("unknown error when writing image file")],  # Pillow's, without an errno
    ids=["ENOSPC", "pillow without errno"])
def test_a_full_disk_leaves_nothing_behind_and_a_second_run_works(dataset, tmp_path,
                                                                  monkeypatch, error):
    prepared = _prepare(dataset, tmp_path)
    before = {p: p.read_bytes() for p in prepared.rglob("*") if p.is_file()}
    write_pair(dataset, 1, "added")
    save = Image.Image.save  # how preparation writes a label

    def full(image, path, *args, **kwargs):
        if "added" in str(path):
            monkeypatch.setattr(files, "free_bytes", lambda path: 2048)
            raise error
        return save(image, path, *args, **kwargs)
    monkeypatch.setattr(Image.Image, "save", full)
    with pytest.raises(DataError, match=f"Cannot write to {re.escape(str(prepared))}: the disk "
                                        f"holding {re.escape(str(prepared))} is full \\(2048 "
                                        "bytes free\\): free some space, or set NAILSEG_DATA_DIR"
                                        ".*nothing half-written was kept"):
        _prepare(dataset, tmp_path)
    assert {p: p.read_bytes() for p in prepared.rglob("*") if p.is_file()} == before
    assert _leftovers(tmp_path) == []
    monkeypatch.undo()
    _prepare(dataset, tmp_path)
    assert (prepared / label_of("1", "added")).is_file()


# --- what a user can type: one line, no traceback --------------------------------------------

def _command_line(*args, env=None):
    """``python -m nailseg_common.commands.prepare ARGS`` in a fresh process: (exit status, stderr)."""
    done = subprocess.run([sys.executable, "-m", "nailseg_common.commands.prepare", *args],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})},
                          cwd=Path(__file__).resolve().parents[1])
    return done.returncode, done.stderr


def test_an_unknown_profile_or_a_gpu_profile_without_a_gpu_is_one_line(tmp_path, monkeypatch):
    code, err = _command_line("--profile", "laptop", env={"NAILSEG_DATA_DIR": str(tmp_path)})
    assert code == 2 and err.startswith("error: Unknown profile 'laptop'") and err.count("\n") == 1
    monkeypatch.setenv("NAILSEG_PROFILE", "gpu")
    monkeypatch.setattr(profiles, "gpu_available", lambda: False)
    with pytest.raises(SystemExit, match=r"^error: Profile 'gpu' needs a CUDA GPU.*profile 'cpu'"):
        main([])


def test_ctrl_c_during_preparation_is_one_line_and_keeps_nothing(dataset, tmp_path, monkeypatch):
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path / "data"))
    save = Image.Image.save  # how preparation writes a label

    def interrupted(image, path, *args, **kwargs):
        save(image, path, *args, **kwargs)
        raise KeyboardInterrupt
    monkeypatch.setattr(Image.Image, "save", interrupted)
    with pytest.raises(SystemExit, match=r"^stopped \(Ctrl-C\): nothing half-written was kept"):
        main(["--profile", "smoke", "--data-root", str(dataset)])
    assert not any((tmp_path / "data").rglob("*.png"))  # no label kept


def _denied(monkeypatch, folder, method):
    """``Path.<method>`` fails inside ``folder`` as it does without read (``iterdir``) or
    execute (``is_symlink``, ``is_dir``: a stat) permission; root ignores permissions."""
    real = getattr(Path, method)

    def refuse(self, *args, **kwargs):
        if self == folder or folder in self.parents:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)
    monkeypatch.setattr(Path, method, refuse)


@pytest.mark.parametrize("method", ["iterdir", "is_symlink", "is_dir"])
def test_a_dataset_folder_that_cannot_be_read_is_named(dataset, tmp_path, monkeypatch, method):
    folder = dataset / "Masks" / "2"
    _denied(monkeypatch, folder, method)
    message = _refused(dataset, tmp_path, "permission denied")
    assert str(folder) in message and f"chmod -R u+rX {dataset}" in message


def test_a_set_whose_masks_are_all_inverted_is_refused_by_folder(tmp_path):
    root = tmp_path / "raw"
    for i in range(6):
        write_pair(root, 1, f"img{i}", mask=Image.fromarray(255 - np.asarray(_mask(i))))
    message = _refused(root, tmp_path, r"6 of 6 masks in .*Masks/1 are mostly nail \(83% median\)")
    assert "the set looks inverted" in message and f"mogrify -negate {root}/Masks/1/*.png" in message


def test_a_set_of_large_nails_is_prepared(tmp_path):
    """Close-ups: nails cover most of each photo, with background along part of the border."""
    root = tmp_path / "raw"
    for i in range(6):
        pixels = np.zeros((10, 12), np.uint8)
        pixels[i % 2:, 2:11] = 255  # 75 % or 68 % nail, crossing two or three edges
        write_pair(root, 1, f"img{i}", mask=Image.fromarray(pixels))
    _prepare(root, tmp_path)
    assert _label(tmp_path, 1, "img1").mean() > 0.6


def test_notebook_06_lowers_its_folds_to_the_photos_and_refuses_fewer_than_two():
    from nailseg_common.training.fine_tuning import k_folds

    cell = (Path(__file__).resolve().parents[1] / "notebooks" / "06_your_own_photos.py").read_text()
    assert "fold_sets = k_folds(len(frame), min(folds, len(frame)))" in cell
    for photos in (2, 3):  # folds=5 on 2 or 3 photos: one photo held out per fold
        assert [len(held) for _, held in k_folds(photos, min(5, photos))] == [1] * photos
    for photos, folds in ((1, 1), (4, 1)):
        with pytest.raises(DataError, match=f"folds={folds} for {photos} photos: choose folds "):
            k_folds(photos, folds)


def test_a_fingertip_filling_the_frame_is_not_taken_for_an_inverted_mask(dataset, tmp_path):
    """Mostly nail, far above the set's share, but with finger and background along its border."""
    pixels = np.zeros_like(TRUTH)
    h, w = pixels.shape
    pixels[h // 8: -h // 8, w // 10: -w // 10] = 1  # about 60 % nail, none on the border
    write_pair(dataset, 1, "fingertip", mask=Image.fromarray((pixels * 255).astype(np.uint8)))
    _prepare(dataset, tmp_path)
    np.testing.assert_array_equal(_label(tmp_path, 1, "fingertip"), pixels)
