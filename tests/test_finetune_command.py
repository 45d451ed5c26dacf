"""``nailseg-fine-tune``: notebook 06's scores and recipe in one command, the
model it writes read by predict, and one clear line for each input it cannot use. Six tiny
photos in the flat layout, the smoke profile (2 steps a run) at 32 px, from the shipped model."""

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from nailseg_common.commands import command_line, fine_tune, predict
from nailseg_common.commands.fine_tune import MODEL, SCORES, STOPPED, SUMMARY, main
from nailseg_common.core import files
from nailseg_common.data.images import read_rgb
from nailseg_common.data.synthetic import generate_synthetic_dataset
from nailseg_common.setup.paths import REPO_ROOT
from nailseg_common.training.checkpoints import SHIPPED_MODEL, build_model, read_checkpoint
from nailseg_common.training.fine_tuning import PhotosOnDevice

OPTIONS = ["--profile", "smoke", "--image-size", "32", "--device", "cpu"]


def write_photos(root: Path, count: int) -> Path:
    """``count`` photos (JPEG) with their masks (PNG, a 0/255 nail) in the flat layout."""
    for folder in ("Images", "Masks"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for index in range(count):
        mask = np.zeros((48, 40), np.uint8)
        mask[10 + index:30 + index, 8:24] = 255
        photo = rng.integers(0, 120, (48, 40, 3), dtype=np.uint8)
        photo[mask > 0] = (220, 120, 140)
        Image.fromarray(photo).save(root / "Images" / f"nail{index}.jpg")
        Image.fromarray(mask).save(root / "Masks" / f"nail{index}.png")
    return root


def run(*args) -> SimpleNamespace:
    """``main``'s exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(arg) for arg in args])
    return SimpleNamespace(code=code, out=out.getvalue(), err=err.getvalue())


@pytest.fixture(scope="module")
def fine_tuned(tmp_path_factory):
    """One run on six photos, two folds; data and runs in a fresh folder (no local checkpoint:
    the start is the shipped model)."""
    root = tmp_path_factory.mktemp("fine_tune_command")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NAILSEG_DATA_DIR", str(root / "data"))
        patch.setenv("NAILSEG_RUNS_DIR", str(root / "runs"))
        photos, out = write_photos(root / "nails", 6), root / "out"
        result = run(photos, out, *OPTIONS, "--folds", "2", "--lr", "2e-3", "--write-anyway")
        yield SimpleNamespace(root=root, photos=photos, out=out, result=result)


@pytest.fixture
def folders(fine_tuned, monkeypatch, tmp_path):
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(fine_tuned.root / "data"))
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path


def test_the_scores_the_model_and_the_run_are_written_and_predict_takes_the_model(
        fine_tuned, tmp_path):
    result, out = fine_tuned.result, fine_tuned.out
    assert result.code == 0, result.err
    assert result.err == ""
    assert "fine-tuning runs: 100%" in result.out and "3/3" in result.out  # 2 folds, all photos
    assert "fine-tuning gain in hard Dice" in result.out
    scores = pd.read_csv(out / SCORES)
    assert list(scores.columns) == ["image", "type", "zero-shot dice", "zero-shot iou",
                                    "fine-tuned dice", "fine-tuned iou"]
    assert list(scores["image"]) == [f"Images/nail{index}.jpg" for index in range(6)]
    assert scores.drop(columns=["image", "type"]).apply(lambda c: c.between(0, 1)).all().all()
    summary = json.loads((out / SUMMARY).read_text())
    assert summary["profile"] == "smoke" and summary["device"].startswith("CPU only")
    assert summary["recipe"]["steps"] == 2 and summary["recipe"]["folds"] == 2
    assert summary["recipe"]["lr"] == 2e-3
    assert summary["recipe"]["image_size"] == 32 and summary["photos"] == 6
    assert summary["scores"]["fine-tuned"]["photos"] == 6
    assert summary["scores"]["fine-tuned"]["hard_dice"] == pytest.approx(
        scores["fine-tuned dice"].mean())
    assert "torch" in summary["versions"] and summary["python"] and summary["date"]  # provenance()
    assert torch.load(out / MODEL, weights_only=True)["image_size"] == 32
    assert not [path for path in out.iterdir() if path.name.startswith(".")]  # no staging left

    masks = tmp_path / "masks"
    with contextlib.redirect_stdout(io.StringIO()):
        code = predict.main([str(fine_tuned.photos / "Images"), str(masks), "--checkpoint",
                             str(out / MODEL), "--device", "cpu"])
    assert code == 0
    mask = np.asarray(Image.open(masks / "nail0.png"))
    assert mask.shape == (48, 40) and set(np.unique(mask)) <= {0, 255}


def drawn_by_the_start(root: Path) -> Path:
    """Three synthetic photos (flat layout) whose masks are the shipped model's own, as
    predict draws them (at its side, 384 px): the start scores 1, fine-tuning cannot beat it."""
    generated = generate_synthetic_dataset(root / "generated", 8, progress=False)
    start = build_model(read_checkpoint(SHIPPED_MODEL))
    for folder in ("Images", "Masks"):
        (root / folder).mkdir(parents=True)
    photos = sorted((generated / "Images").rglob("*.jpg"))[:3]  # 00000, 00004, 00001: two on their side (EXIF 6)
    assert len(photos) == 3
    for image in photos:
        (root / "Images" / image.name).write_bytes(image.read_bytes())
        mask = predict.predict_mask(start, read_rgb(image), 384, torch.device("cpu"))
        Image.fromarray(mask).save(root / "Masks" / f"{image.stem}.png")
    return root


def test_a_fine_tuned_model_that_does_not_beat_the_start_is_not_handed_back(folders):
    """Both scored as predict runs each (the start at 384 px, the fine-tuned model at 32)."""
    photos, out = drawn_by_the_start(folders / "nails"), folders / "out"
    out.mkdir()
    (out / MODEL).write_bytes(b"an earlier run's model")
    result = run(photos, out, *OPTIONS, "--folds", "2", "--force")
    assert result.code == 0, result.err
    last = result.out.strip().splitlines()[-1]
    assert last.startswith("fine-tuning did not beat the start as nailseg-predict runs each (")
    assert f"--checkpoint {SHIPPED_MODEL}; {MODEL} not written (--write-anyway" in last
    assert sorted(path.name for path in out.iterdir()) == [SCORES, SUMMARY]
    summary = json.loads((out / SUMMARY).read_text())
    assert summary["image_sides"] == {"zero-shot": 384, "fine-tuned": 32}
    assert summary["scores"]["zero-shot"]["hard_dice"] == 1.0
    assert summary["scores"]["fine-tuned"]["hard_dice"] < 1.0
    assert summary["verdict"] != "met" and summary["model_written"] is False


def test_model_pt_is_kept_without_force_and_replaced_with_it(fine_tuned, folders):
    out = folders / "out"
    out.mkdir()
    (out / MODEL).write_bytes(b"an earlier model")
    refused = run(fine_tuned.photos, out, *OPTIONS)
    assert refused.code == 2 and refused.out == ""
    assert refused.err == (f"error: {out / MODEL} exists: pass --force to overwrite it, or "
                           "another OUT.\n")
    assert (out / MODEL).read_bytes() == b"an earlier model"

    (out / f".{MODEL}.tmp-999999999").write_bytes(b"")  # what killed runs left
    (out / ".nailseg-fine-tune.tmp-999999999").mkdir()
    forced = run(fine_tuned.photos, out, *OPTIONS, "--no-cross-validation", "--force")
    assert forced.code == 0, forced.err
    assert not [path for path in out.iterdir() if path.name.startswith(".")]
    assert "1/1" in forced.out and "gain" not in forced.out
    assert list(pd.read_csv(out / SCORES).columns) == ["image", "type", "zero-shot dice",
                                                       "zero-shot iou"]
    assert torch.load(out / MODEL, weights_only=True)["image_size"] == 32


def _missing_masks(root: Path) -> Path:
    photos = write_photos(root / "no_masks", 4)
    (photos / "Masks" / "nail2.png").unlink()
    return photos


@pytest.mark.parametrize("photos, options, message", [
    (lambda root: root / "absent", [], "absent does not exist"),
    (_missing_masks, [], "1 image(s) without a mask of the same name: Images/nail2.jpg"),
    (lambda root: write_photos(root / "one", 1), [], "has only 1 image(s)"),
    (lambda root: write_photos(root / "two", 2), ["--profile", "laptop"],
     "Unknown profile 'laptop'"),
    pytest.param(lambda root: write_photos(root / "two", 2),
                 ["--profile", "gpu", "--device", "auto"], "Profile 'gpu' needs a CUDA GPU",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")),
], ids=["missing folder", "missing masks", "too few photos", "bad profile", "gpu without a GPU"])
def test_a_mistake_ends_in_one_line_and_writes_nothing(folders, photos, options, message):
    out = folders / "out"
    result = run(photos(folders), out, *OPTIONS, *options)
    assert result.code == 2
    assert result.err.startswith("error: ") and result.err.count("\n") == 1
    assert message in result.err
    assert not out.exists()


def test_ctrl_c_in_a_run_ends_in_one_line(fine_tuned, folders, monkeypatch):
    def interrupt(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(PhotosOnDevice, "train_dataloader", interrupt)
    handler = signal.getsignal(signal.SIGINT)
    result = run(fine_tuned.photos, folders / "out", *OPTIONS)
    assert (result.code, result.err) == (130, f"stopped (Ctrl-C): {STOPPED}\n")
    assert signal.getsignal(signal.SIGINT) is handler  # Lightning ignores Ctrl-C after its own
    assert not (folders / "out" / MODEL).exists()


def test_sigterm_in_a_run_exits_143_and_leaves_the_earlier_model(fine_tuned, folders,
                                                                  monkeypatch):
    def terminate(self):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises here

    out = folders / "out"
    out.mkdir()
    (out / MODEL).write_bytes(b"an earlier run's model")
    monkeypatch.setattr(PhotosOnDevice, "train_dataloader", terminate)
    handler = signal.getsignal(signal.SIGTERM)
    result = run(fine_tuned.photos, out, *OPTIONS, "--force")
    assert (result.code, result.err) == (143, f"stopped (SIGTERM): {STOPPED}\n")
    assert sorted(path.name for path in out.iterdir()) == [MODEL]
    assert (out / MODEL).read_bytes() == b"an earlier run's model"
    assert signal.getsignal(signal.SIGTERM) is handler


@pytest.mark.parametrize("option, message", [
    (["--steps", "0"], "--steps 0: a run needs at least 1 step"),
    (["--steps", "2.5"], "--steps 2.5: not a whole number; a run needs at least 1 step"),
    (["--lr", "0"], "between 0 and 1"),
    (["--lr", "-1e-3"], "--lr -0.001: choose a peak learning rate between 0 and 1"),
    (["--lr", "fast"], "--lr fast: not a number; choose a peak learning rate"),
    (["--image-size", "100"], "multiple of 32"),
    (["--image-size", "-64"], "--image-size -64: the U-Net needs a positive multiple of 32"),
    (["--folds", "-2"], "--folds -2: choose 2 or more")])
def test_a_wrong_number_exits_2_naming_the_option(tmp_path, capsys, option, message):
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path / "photos"), str(tmp_path / "out"), *option])
    assert stop.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_checkpoint_of_another_model_is_refused_before_any_training(folders):
    checkpoint = folders / "other.ckpt"
    torch.save({"hyper_parameters": {"encoder": "mobilenet_v2"},
                "state_dict": torch.nn.Conv2d(3, 1, 3).state_dict()}, checkpoint)
    out = folders / "out"
    result = run(write_photos(folders / "two", 2), out, *OPTIONS, "--checkpoint", str(checkpoint))
    assert result.code == 2 and result.err.count("\n") == 1
    assert f"{checkpoint} is not a checkpoint of this course's U-Net" in result.err
    assert not out.exists()


@pytest.mark.parametrize("name", [SCORES, SUMMARY])
def test_the_users_scores_or_summary_are_kept_without_force(fine_tuned, folders, name):
    out = folders / "out"
    out.mkdir()
    (out / name).write_text("the user's own")
    result = run(fine_tuned.photos, out, *OPTIONS)
    assert result.code == 2 and result.out == ""
    assert result.err == f"error: {out / name} exists: pass --force to overwrite it, or " \
                         "another OUT.\n"
    assert [path.name for path in out.iterdir()] == [name]
    assert (out / name).read_text() == "the user's own"


def test_an_out_inside_photos_root_is_refused(fine_tuned, folders):
    result = run(fine_tuned.photos, fine_tuned.photos / "out", *OPTIONS)
    assert result.code == 2
    assert result.err == (f"error: OUT {fine_tuned.photos / 'out'} lies inside PHOTOS_ROOT "
                          f"{fine_tuned.photos}, which is only read: pass an OUT outside it.\n")
    assert not (fine_tuned.photos / "out").exists()


def test_an_out_without_room_for_the_model_is_refused_before_the_runs(fine_tuned, folders,
                                                                       monkeypatch):
    monkeypatch.setattr(fine_tune, "free_bytes", lambda path: 1000)
    monkeypatch.setattr(files, "free_bytes", lambda path: 1000)
    result = run(fine_tuned.photos, folders / "out", *OPTIONS)
    assert result.code == 2 and "fine-tuning runs" not in result.out
    assert result.err.startswith(f"error: Cannot write to OUT {folders / 'out'}: the disk "
                                 f"holding {folders / 'out'} is full (1000 bytes free), the "
                                 "model needs about ")
    assert result.err.count("\n") == 1


def test_a_disk_full_while_saving_ends_in_one_line_and_keeps_the_users_files(
        fine_tuned, folders, monkeypatch):
    """torch.save's RuntimeError on a full disk (its C++ writer gives no errno)."""
    out = folders / "out"
    out.mkdir()
    earlier = {name: f"earlier {name}" for name in (MODEL, SCORES, SUMMARY)}
    for name, text in earlier.items():
        (out / name).write_text(text)

    def full(*args, **kwargs):
        monkeypatch.setattr(files, "free_bytes", lambda path: 512)  # what the writes left
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")
    monkeypatch.setattr(torch, "save", full)
    result = run(fine_tuned.photos, out, *OPTIONS, "--no-cross-validation", "--force")
    assert result.code == 2
    assert result.err == (f"error: Cannot write {MODEL}, {SCORES} and {SUMMARY} to {out}: the "
                          f"disk holding {out} is full (512 bytes free): free some space, or "
                          "pass an OUT folder on another disk; nothing was written.\n")
    assert {path.name: path.read_text() for path in out.iterdir()} == earlier


KILLED_WHILE_SAVING = """
import sys, time
from pathlib import Path
import pandas as pd
from nailseg_common.commands import fine_tune

def stalled(model, path, image_size):  # half a model written, and then the kill
    Path(path).write_bytes(b"half a model")
    Path(sys.argv[2]).touch()
    time.sleep(120)

fine_tune.save_weights = stalled
fine_tune.write_outputs(Path(sys.argv[1]), pd.DataFrame({"image": ["a.jpg"]}), {}, object(), 32)
"""


def test_a_kill_while_saving_keeps_the_users_files_and_the_next_run_clears_what_it_left(
        fine_tuned, folders):
    """A real SIGKILL, which no handler sees, in the middle of writing the model."""
    out, ready = folders / "out", folders / "ready"
    out.mkdir()
    earlier = {name: f"earlier {name}" for name in (MODEL, SCORES, SUMMARY)}
    for name, text in earlier.items():
        (out / name).write_text(text)
    process = subprocess.Popen([sys.executable, "-c", KILLED_WHILE_SAVING, str(out), str(ready)],
                               cwd=REPO_ROOT)
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert process.poll() is None and time.monotonic() < deadline, "never reached the save"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL
    staging = out / f".nailseg-fine-tune.tmp-{process.pid}"
    assert sorted(path.name for path in staging.iterdir()) == [MODEL, SCORES, SUMMARY]
    assert {path.name: path.read_text() for path in out.iterdir() if path != staging} == earlier

    again = run(fine_tuned.photos, out, *OPTIONS, "--no-cross-validation", "--force")
    assert again.code == 0, again.err
    assert sorted(path.name for path in out.iterdir()) == sorted([MODEL, SCORES, SUMMARY])
    assert torch.load(out / MODEL, weights_only=True)["image_size"] == 32


def test_ctrl_c_while_starting_ends_in_one_line(monkeypatch, capsys):
    def interrupt(name):
        raise KeyboardInterrupt
    monkeypatch.setattr(command_line.importlib, "import_module", interrupt)
    assert (command_line.fine_tune() == command_line.predict() == command_line.prepare()
            == command_line.train() == 130)
    assert capsys.readouterr().err == f"stopped (Ctrl-C) while starting: {command_line.STARTING}\n" * 4
    with pytest.raises(SystemExit) as stop, command_line.starting("__main__"):
        raise KeyboardInterrupt
    assert stop.value.code == 130
    with pytest.raises(KeyboardInterrupt), command_line.starting("nailseg_common.commands.x"):
        raise KeyboardInterrupt


def test_the_command_lines_start_without_torch():
    """What runs before the heavy imports (Ctrl-C there is one line) imports no torch."""
    code = ("import sys; import nailseg_common.commands.command_line; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT,
                   env={**os.environ, "NO_ALBUMENTATIONS_UPDATE": "1"})
