"""``nailseg-predict``: masks and overlays for new photos, mirrored folders,
EXIF orientation, and one clear line for each input it cannot use. A tiny model (the course's U-Net,
one step at 32 px) saved as notebook 02's best checkpoint."""

import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader

from nailseg_common.commands import predict as predict_module
from nailseg_common.commands.predict import MARKER, main, predict_mask
from nailseg_common.setup.paths import shown
from nailseg_common.setup.profiles import select_profile
from nailseg_common.training import checkpoints
from nailseg_common.training.checkpoints import (
    SHIPPED_MODEL,
    build_model,
    read_checkpoint,
    save_weights,
)
from nailseg_common.training.trainer import make_trainer
from nailseg_common.training.unet import LitNailSegmentation

ENCODER, SIZE = "tu-efficientnet_lite0", 32
ORIENTATION = 0x0112


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A one-step run logged as notebook 02's in the smoke profile: its best checkpoint."""
    runs = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NAILSEG_RUNS_DIR", str(runs))
        profile = select_profile("smoke", image_size=SIZE, encoder=ENCODER, max_steps=1,
                                 max_train_batches=1, max_valid_batches=1)
        batch = {"image": torch.randint(0, 256, (2, 3, SIZE, SIZE), dtype=torch.uint8),
                 "label": torch.zeros(2, 1, SIZE, SIZE, dtype=torch.uint8)}
        loader = DataLoader([batch], batch_size=None)
        trainer = make_trainer(profile, "02_lightning_baseline")
        trainer.fit(LitNailSegmentation(ENCODER, max_steps=1), loader, loader)
    best = Path(trainer.checkpoint_callback.best_model_path)
    assert best.name.startswith("best-")
    return SimpleNamespace(runs=runs, checkpoint=best)


def photo(path: Path, width: int = 40, height: int = 30, orientation: int | None = None) -> Path:
    """A random RGB photo saved by its suffix, with an EXIF orientation when given."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)
    exif = Image.Exif()
    if orientation:
        exif[ORIENTATION] = orientation
    Image.fromarray(pixels).save(path, exif=exif)
    return path


def predict(capsys, images, out, *options, checkpoint=None):
    """``main``'s exit status, stdout and stderr for one run on ``images``."""
    extra = [] if checkpoint is None else ["--checkpoint", str(checkpoint)]
    code = main([str(images), str(out), "--profile", "smoke", "--image-size", str(SIZE),
                 "--device", "cpu", *extra, *options])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def files(folder: Path) -> set[str]:
    """The files under ``folder``, the marker of predict's OUT aside."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {MARKER}


def test_nested_folders_are_mirrored_with_one_mask_and_one_overlay_per_photo(
        model, tmp_path, capsys):
    images, out = tmp_path / "photos", tmp_path / "out"
    for name in ("a.jpg", "left/b.PNG", "left/deep/c.JPEG", "right/d.png"):
        photo(images / name)
    (images / "notes.txt").write_text("not a photo")
    photo(images / ".hidden.jpg")
    photo(images / ".thumbnails" / "e.jpg")
    code, stdout, err = predict(capsys, images, out, checkpoint=model.checkpoint)
    assert code == 0, err
    assert files(out) == {"a.png", "a_overlay.jpg", "left/b.png", "left/b_overlay.jpg",
                          "left/deep/c.png", "left/deep/c_overlay.jpg", "right/d.png",
                          "right/d_overlay.jpg"}, "no temporary file left, nothing else read"
    assert "4 of 4 photos" in stdout and shown(out) in stdout
    mask = Image.open(out / "left/deep/c.png")
    assert mask.mode == "L" and mask.size == (40, 30)
    assert Image.open(out / "left/deep/c_overlay.jpg").size == (40, 30)


def test_the_mask_has_the_displayed_size_of_an_exif_rotated_photo(model, tmp_path, capsys):
    rotated = photo(tmp_path / "phone.jpg", width=48, height=32, orientation=6)
    assert Image.open(rotated).size == (48, 32), "stored sideways"
    out = tmp_path / "out"
    code, _, err = predict(capsys, rotated, out, checkpoint=model.checkpoint)  # one file
    assert code == 0, err
    mask = np.asarray(Image.open(out / "phone.png"))
    assert mask.shape == (48, 32), "height and width swapped, as a viewer shows it"
    assert set(np.unique(mask)) <= {0, 255}
    assert Image.open(out / "phone_overlay.jpg").size == (32, 48)


class LeftHalf(nn.Module):
    """Logits of a nail on the left half of the square the model sees."""

    def forward(self, image):
        assert image.shape == (1, 3, SIZE, SIZE) and image.dtype == torch.uint8
        logits = torch.full((1, 1, SIZE, SIZE), -20.0)
        logits[..., : SIZE // 2] = 20.0
        return logits


def test_probabilities_are_upsampled_bilinearly_to_the_photo_then_thresholded():
    rgb = np.zeros((50, 70, 3), np.uint8)
    mask = predict_mask(LeftHalf(), rgb, SIZE, torch.device("cpu"), flips=False)
    assert mask.shape == (50, 70) and mask.dtype == np.uint8
    # 0.5 falls half-way between input columns 15 and 16: output column 34.5 of 70
    assert (mask[:, :35] == 255).all() and (mask[:, 35:] == 0).all()


def test_test_time_flips_cancel_a_model_that_only_sees_the_left_half():
    mask = predict_mask(LeftHalf(), np.zeros((50, 70, 3), np.uint8), SIZE, torch.device("cpu"))
    assert (mask == 0).all()  # its mirror's answer says right half: logits 0, probability 0.5


def test_a_corrupt_photo_is_named_and_skipped_and_the_others_are_written(
        model, tmp_path, capsys):
    images, out = tmp_path / "photos", tmp_path / "out"
    photo(images / "good.jpg")
    (images / "sub").mkdir()
    (images / "sub" / "broken.jpg").write_bytes(b"\xff\xd8 not really a JPEG")
    photo(images / "sub" / "fine.png")
    code, stdout, err = predict(capsys, images, out, checkpoint=model.checkpoint)
    assert code == 1
    assert "broken.jpg" in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("error: 1 unreadable photos skipped")
    assert files(out) == {"good.png", "good_overlay.jpg", "sub/fine.png", "sub/fine_overlay.jpg"}
    assert "2 of 3 photos" in stdout


def foreign_state_dict(path: Path) -> Path:
    torch.save(nn.Linear(3, 1).state_dict(), path)
    return path


def other_lightning_module(path: Path) -> Path:
    """What Lightning saves for another module that also has an ``encoder`` hyperparameter."""
    torch.save({"pytorch-lightning_version": "2.6.6", "hyper_parameters": {"encoder": ENCODER},
                "state_dict": nn.Conv2d(3, 1, 3).state_dict()}, path)
    return path


def text_file(path: Path) -> Path:
    path.write_text("not a checkpoint")
    return path


@pytest.mark.parametrize("make", [foreign_state_dict, other_lightning_module, text_file])
def test_a_checkpoint_of_another_model_is_refused_in_one_line(make, model, tmp_path, capsys):
    photo(tmp_path / "photos" / "a.jpg")
    checkpoint = make(tmp_path / "other.ckpt")
    code, _, err = predict(capsys, tmp_path / "photos", tmp_path / "out", checkpoint=checkpoint)
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(checkpoint) in err and "notebook 02 or 04" in err
    assert not (tmp_path / "out").exists()


def test_missing_folder_empty_folder_and_missing_checkpoint_say_which_path(
        model, tmp_path, capsys):
    missing, empty, out = tmp_path / "nowhere", tmp_path / "empty", tmp_path / "out"
    (empty / "sub").mkdir(parents=True)
    (empty / "sub" / "notes.txt").write_text("no photo here")
    photo(tmp_path / "photos" / "a.jpg")
    cases = [(missing, model.checkpoint, missing, "does not exist"),
             (empty, model.checkpoint, empty, ".jpg, .jpeg"),
             (tmp_path / "photos", tmp_path / "missing.ckpt", tmp_path / "missing.ckpt",
              "not a file")]
    for images, checkpoint, named, says in cases:
        code, _, err = predict(capsys, images, out, checkpoint=checkpoint)
        assert code == 2, err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert str(named) in err and says in err
    assert not out.exists()


def test_without_a_checkpoint_the_newest_of_the_profile_is_used_else_the_shipped_model(
        model, tmp_path, capsys, monkeypatch):
    photo(tmp_path / "photos" / "a.jpg")
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(tmp_path / "no_runs"))
    code, stdout, err = predict(capsys, tmp_path / "photos", tmp_path / "shipped")
    assert code == 0, err
    assert f"model {shown(SHIPPED_MODEL)} at {SIZE}x{SIZE}" in stdout
    for module in (checkpoints, predict_module):
        monkeypatch.setattr(module, "SHIPPED_MODEL", tmp_path / "not_shipped.pt")
    code, _, err = predict(capsys, tmp_path / "photos", tmp_path / "out")
    assert code == 2 and err.count("\n") == 1
    assert "run notebook 02" in err and "--checkpoint" in err
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(model.runs))
    code, stdout, err = predict(capsys, tmp_path / "photos", tmp_path / "out")
    assert code == 0, err
    assert shown(model.checkpoint) in stdout and (tmp_path / "out" / "a.png").is_file()


def test_out_inside_images_is_not_read_again(model, tmp_path, capsys):
    images = tmp_path / "photos"
    photo(images / "a.jpg")
    photo(images / "sub" / "b.png")
    out = images / "masks"
    for _ in range(2):
        code, stdout, err = predict(capsys, images, out, checkpoint=model.checkpoint)
        assert code == 0, err
        assert "2 of 2 photos" in stdout
    assert files(out) == {"a.png", "a_overlay.jpg", "sub/b.png", "sub/b_overlay.jpg"}
    code, _, err = predict(capsys, images, images, checkpoint=model.checkpoint)
    assert code == 2 and "IMAGES itself" in err


def test_an_interrupted_write_leaves_no_half_written_file(model, tmp_path, capsys, monkeypatch):
    photo(tmp_path / "photos" / "a.jpg")

    write_bytes = Path.write_bytes

    def interrupted(path, data):
        write_bytes(path, data[:len(data) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_bytes", interrupted)
    code, _, err = predict(capsys, tmp_path / "photos", tmp_path / "out",
                           checkpoint=model.checkpoint)
    assert code == 130 and err.startswith("stopped (Ctrl-C)") and err.count("\n") == 1
    assert files(tmp_path / "out") == set() and (tmp_path / "out" / MARKER).is_file()


def test_what_a_killed_run_left_is_cleared_by_the_next(model, tmp_path, capsys):
    photo(tmp_path / "photos" / "deep" / "a.jpg")
    out = tmp_path / "out"
    assert predict(capsys, tmp_path / "photos", out, checkpoint=model.checkpoint)[0] == 0
    left = [out / ".a.png.tmp-999999999", out / "deep" / ".a_overlay.jpg.tmp-999999999"]
    for path in left:  # a SIGKILL while writing: no handler runs
        path.write_bytes(b"half")
    running = out / ".b.png.tmp-1"  # pid 1 is alive: maybe another run's, kept
    running.write_bytes(b"")
    assert predict(capsys, tmp_path / "photos", out, checkpoint=model.checkpoint)[0] == 0
    assert not any(path.exists() for path in left) and running.exists()
    assert files(out) == {"deep/a.png", "deep/a_overlay.jpg", running.name}


def test_the_side_the_run_was_trained_at_is_read_from_its_log_unless_given(
        model, tmp_path, capsys):
    """The fixture's run logged a 32 px profile; the smoke profile says 64."""
    images = tmp_path / "photos"
    photo(images / "a.jpg")
    code = main([str(images), str(tmp_path / "out"), "--profile", "smoke", "--device", "cpu",
                 "--checkpoint", str(model.checkpoint)])
    assert code == 0 and f"at {SIZE}x{SIZE} on cpu" in capsys.readouterr().out
    copied = tmp_path / "elsewhere" / "best.ckpt"  # out of its run folder: no log beside it
    copied.parent.mkdir()
    copied.write_bytes(model.checkpoint.read_bytes())
    code = main([str(images), str(tmp_path / "out2"), "--profile", "smoke", "--device", "cpu",
                 "--checkpoint", str(copied)])
    assert code == 0 and "at 64x64 on cpu" in capsys.readouterr().out
    code = main([str(images), str(tmp_path / "out3"), "--profile", "smoke", "--device", "cpu",
                 "--checkpoint", str(copied), "--image-size", "96"])
    assert code == 0 and "at 96x96 on cpu" in capsys.readouterr().out


def test_a_model_saved_by_notebook_06_is_read_at_the_side_it_stores(model, tmp_path, capsys):
    images = tmp_path / "photos"
    photo(images / "a.jpg")
    saved = save_weights(build_model(read_checkpoint(model.checkpoint)), tmp_path / "saved" / "best.pt", 96)
    code = main([str(images), str(tmp_path / "out"), "--profile", "smoke", "--device", "cpu",
                 "--checkpoint", str(saved)])
    assert code == 0 and "at 96x96 on cpu" in capsys.readouterr().out
    assert files(tmp_path / "out") == {"a.png", "a_overlay.jpg"}


# --- no photo destroyed, none read twice, nothing skipped in silence --------------------------

def test_a_photo_is_never_overwritten_by_its_mask(model, tmp_path, capsys):
    folder = tmp_path / "photos"
    target = photo(folder / "c.png")
    before = target.read_bytes()
    for images, out in ((target, folder), (folder, tmp_path)):  # OUT holds photos, or IMAGES
        code, _, err = predict(capsys, images, out, checkpoint=model.checkpoint)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert f"OUT {out}" in err and "new or empty folder" in err
    assert target.read_bytes() == before and files(folder) == {"c.png"}
    code, _, err = predict(capsys, target, folder / "masks", checkpoint=model.checkpoint)
    assert code == 0, err
    code, _, err = predict(capsys, folder / "masks", tmp_path / "again",
                           checkpoint=model.checkpoint)
    assert code == 2 and "an earlier run" in err and "folder of your photos" in err


def test_outputs_of_an_earlier_run_are_never_read_as_photos(model, tmp_path, capsys):
    images = tmp_path / "photos"
    photo(images / "a.jpg")
    photo(images / "sub" / "c.png")
    code, _, err = predict(capsys, images, images / "masks", checkpoint=model.checkpoint)
    assert code == 0, err
    code, stdout, err = predict(capsys, images, images / "masks_v2", checkpoint=model.checkpoint)
    assert code == 0, err
    assert "2 of 2 photos" in stdout and "masks (the outputs of an earlier run)" in err
    assert files(images / "masks_v2") == {"a.png", "a_overlay.jpg", "sub/c.png",
                                          "sub/c_overlay.jpg"}


def test_photos_in_other_formats_and_other_files_are_named(model, tmp_path, capsys):
    images, out = tmp_path / "photos", tmp_path / "out"
    photo(images / "a.jpg")
    photo(images / "b.JPG")
    for name in ("c.heic", "d.gif", "e.bmp", "f.webp", "g.tif"):
        (images / name).write_bytes(b"a photo in another format")
    (images / "notes.txt").write_text("not a photo")
    code, stdout, err = predict(capsys, images, out, checkpoint=model.checkpoint)
    assert code == 1 and "2 of 2 photos" in stdout and "Traceback" not in err
    assert "note: not read: notes.txt (not photos)" in err
    assert ("error: 5 photos not in JPEG or PNG were not read: c.heic, d.gif, e.bmp, f.webp, "
            "g.tif: convert them to JPEG or PNG") in err and "heif-convert" in err
    for name in ("c.heic", "d.gif"):
        (images / name).unlink()
    (images / "a.jpg").unlink()
    (images / "b.JPG").unlink()
    code, _, err = predict(capsys, images, tmp_path / "out2", checkpoint=model.checkpoint)
    assert code == 2 and err.count("\n") == 1 and "not read: e.bmp, f.webp, g.tif" in err


def test_links_to_folders_are_followed_once_and_unreadable_folders_named(
        model, tmp_path, capsys, monkeypatch):
    images, elsewhere = tmp_path / "photos", tmp_path / "elsewhere"
    photo(images / "a.jpg")
    photo(elsewhere / "b.jpg")
    photo(images / "locked" / "c.jpg")
    (images / "linked").symlink_to(elsewhere, target_is_directory=True)
    (images / "loop").symlink_to(images, target_is_directory=True)
    scandir = os.scandir

    def denied(path="."):  # a folder without read permission (root reads them all)
        if Path(path) == images / "locked":
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)
    monkeypatch.setattr(os, "scandir", denied)
    code, stdout, err = predict(capsys, images, tmp_path / "out", checkpoint=model.checkpoint)
    assert code == 1 and "2 of 2 photos" in stdout
    assert files(tmp_path / "out") == {"a.png", "a_overlay.jpg", "linked/b.png",
                                       "linked/b_overlay.jpg"}
    assert f"error: 1 folders could not be read: locked: give your user read access " \
           f"(chmod -R u+rX {images})" in err


def test_links_that_lead_nowhere_are_named_and_the_other_photos_written(model, tmp_path, capsys):
    images = tmp_path / "photos"
    photo(images / "a.jpg")
    (images / "loop.jpg").symlink_to("loop.jpg")
    (images / "gone.jpg").symlink_to(tmp_path / "deleted.jpg")
    code, stdout, err = predict(capsys, images, tmp_path / "out", checkpoint=model.checkpoint)
    assert code == 1 and "1 of 1 photos" in stdout
    assert files(tmp_path / "out") == {"a.png", "a_overlay.jpg"}
    assert ("error: 2 links lead nowhere (a loop, or a missing target): gone.jpg, loop.jpg: "
            "point them at a photo, or remove them.") in err


def test_a_write_that_lands_short_leaves_no_file_under_its_name(model, tmp_path, capsys,
                                                               monkeypatch):
    """An encoder or file system that drops part of a write without an error: the size on
    disk is checked before the file is renamed into place."""
    photo(tmp_path / "photos" / "a.jpg")
    write_bytes = Path.write_bytes
    monkeypatch.setattr(Path, "write_bytes", lambda path, data: write_bytes(path, data[:10]))
    code, _, err = predict(capsys, tmp_path / "photos", tmp_path / "out",
                           checkpoint=model.checkpoint)
    assert code == 2 and err.count("\n") == 1
    assert f"Cannot write {tmp_path / 'out' / 'a.png'}" in err and "bytes landed" in err
    assert files(tmp_path / "out") == set()


def test_an_unwritable_out_is_named_not_a_temporary_file(model, tmp_path, capsys, monkeypatch):
    photo(tmp_path / "photos" / "a.jpg")
    out = tmp_path / "out"

    def full(image, target, *args, **kwargs):
        raise OSError(28, "No space left on device", str(target))
    monkeypatch.setattr(Image.Image, "save", full)
    code, _, err = predict(capsys, tmp_path / "photos", out, checkpoint=model.checkpoint)
    assert code == 2 and err.startswith(f"error: Cannot write {out / 'a.png'}: the disk holding "
                                        f"{out} is full (")
    assert err.endswith(" bytes free): free some space, or pass an OUT folder on another disk.\n")
    monkeypatch.undo()
    (out / MARKER).unlink()
    out.rmdir()

    def read_only(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))
    monkeypatch.setattr(Path, "mkdir", read_only)
    code, _, err = predict(capsys, tmp_path / "photos", out, checkpoint=model.checkpoint)
    assert code == 2 and err.startswith(f"error: Cannot write to OUT {out} (Permission denied)")
    monkeypatch.undo()
    out.write_text("a file")
    code, _, err = predict(capsys, tmp_path / "photos", out, checkpoint=model.checkpoint)
    assert code == 2 and f"OUT {out} is a file" in err
