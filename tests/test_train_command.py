"""``nailseg-train`` as a user runs it: one line and exit 2 for each mistake, before anything
trains; 130 after Ctrl-C and 143 after SIGTERM with no result written; no earlier run replaced
in silence. The smoke profile, data and runs in a fresh folder."""

import contextlib
import io
import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image
from pytorch_lightning.callbacks import Callback
from pytorch_lightning.utilities.exceptions import SIGTERMException

from nailseg_common.commands import command_line, train
from nailseg_common.commands.train import CHECKPOINT, RESULT, STOPPED, main
from nailseg_common.training import multi_gpu
from nailseg_common.training.checkpoints import SHIPPED_MODEL


def run(*args) -> SimpleNamespace:
    """``main``'s exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--profile", "smoke", *map(str, args)])
    return SimpleNamespace(code=code, out=out.getvalue(), err=err.getvalue())


@pytest.fixture
def runs(prepared, monkeypatch, tmp_path):
    """The run folders' root, fresh for each test; ``run`` (the training) fails the test if
    it is reached, unless the test replaces it."""
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(prepared / "data"))
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(tmp_path / "runs"))

    def trains(args, profile):
        raise AssertionError("the run started")

    monkeypatch.setattr(train, "run", trains)
    return tmp_path / "runs" / "smoke"


def same_names(root: Path) -> Path:
    """Three photos in each of two type folders, with the same three names in both."""
    rng = np.random.default_rng(0)
    for kind in ("1", "2"):
        for folder in ("Images", "Masks"):
            (root / folder / kind).mkdir(parents=True)
        for index in range(3):
            mask = np.zeros((48, 40), np.uint8)
            mask[10 + index:30, 8:24] = 255
            photo = rng.integers(0, 120, (48, 40, 3), dtype=np.uint8)
            photo[mask > 0] = (220, 120, 140)
            Image.fromarray(photo).save(root / "Images" / kind / f"nail{index}.jpg")
            Image.fromarray(mask).save(root / "Masks" / kind / f"nail{index}.png")
    return root


def without_a_mask(root: Path) -> Path:
    (root / "Masks" / "1" / "nail0.png").unlink()
    return root


@pytest.mark.parametrize(("options", "message"), [
    (lambda tmp: ["--data-root", tmp / "none"], "does not exist"),
    (lambda tmp: ["--num-images", "1"], "has only 1 image(s)"),
    (lambda tmp: ["--batch-size", "100"], ("--batch-size 100 on 1 device(s): the train split "
                                          "holds 40 images, 40 a device: pass --batch-size 40")),
    (lambda tmp: ["--devices", "50", "--accelerator", "cpu"], "pass fewer --devices"),
    (lambda tmp: ["--num-nodes", "25", "--devices", "2", "--accelerator", "cpu"],
     ("on 50 device(s): the train split holds 40 images, 0 a device: pass fewer --devices or "
      "--num-nodes")),
    (lambda tmp: ["--validate", tmp.joinpath("a.ckpt").write_text("no") and tmp / "a.ckpt"],
     "is not a checkpoint of this course's U-Net"),
    (lambda tmp: ["--validate", SHIPPED_MODEL], "is a weights file"),
    (lambda tmp: ["--record-samples", "--batch-size", "2", "--data-root",
                  same_names(tmp / "nails")], "share one: rename one of them"),
    (lambda tmp: ["--out", tmp], "is a folder: pass a file name"),
    (lambda tmp: ["--data-root", without_a_mask(same_names(tmp / "nails"))],
     "image(s) without a mask"),
], ids=["missing data root", "one image", "batch above the set", "more devices than images",
        "more devices on all nodes than images", "not a checkpoint", "a weights file to validate",
        "names repeated across types", "out is a folder", "a photo without a mask"])
def test_a_mistake_ends_in_one_line_before_anything_trains(runs, tmp_path, options, message):
    result = run(*options(tmp_path))
    assert result.code == 2, result.err
    assert result.err.startswith("error: ") and result.err.count("\n") == 1
    assert message in result.err


@pytest.mark.parametrize("where", ["run folder", "--out"])
def test_an_unwritable_run_folder_or_out_is_named_before_training(runs, tmp_path, monkeypatch,
                                                                   where):
    blocked = runs / "ddp_1" if where == "run folder" else tmp_path / "results"
    real_access = os.access
    monkeypatch.setattr(command_line.os, "access",
                        lambda path, mode: Path(path) != blocked and real_access(path, mode))
    result = run("--out", tmp_path / "results" / "r.json")
    assert result.code == 2 and result.err.count("\n") == 1
    assert "(permission denied)" in result.err and str(blocked.name) in result.err


def test_an_earlier_run_is_kept_without_force_and_replaced_with_it_said_so(runs, monkeypatch):
    folder = runs / "mine"
    folder.mkdir(parents=True)
    for name in (CHECKPOINT, RESULT):
        (folder / name).write_text("earlier")
    refused = run("--run-name", "mine")
    assert refused.code == 2 and "hold an earlier run: pass --force" in refused.err
    assert (folder / CHECKPOINT).read_text() == (folder / RESULT).read_text() == "earlier"
    started = []
    monkeypatch.setattr(train, "run", lambda args, profile: started.append(args.run_name))
    replaced = run("--run-name", "mine", "--force")
    assert (replaced.code, started) == (0, ["mine"])
    assert "replacing the earlier run's" in replaced.out and CHECKPOINT in replaced.out
    assert not (folder / CHECKPOINT).exists() and not (folder / RESULT).exists()


def stop_with(error: BaseException):
    def stops(args, profile):
        raise error
    return stops


@pytest.mark.parametrize(("stop", "code", "name"), [
    (KeyboardInterrupt(), 130, "Ctrl-C"),
    (SystemExit(1), 130, "Ctrl-C"),  # Lightning's end of a fit stopped by Ctrl-C
    (SIGTERMException(), 143, "SIGTERM"),  # Lightning's, a SystemExit without a code
    (command_line.Terminated(), 143, "SIGTERM"),
], ids=["ctrl-c", "lightning's exit after ctrl-c", "lightning's sigterm", "sigterm"])
def test_a_stop_while_training_is_one_line_and_never_exit_0(runs, monkeypatch, stop, code, name):
    monkeypatch.setattr(train, "run", stop_with(stop))
    result = run()
    assert (result.code, result.err) == (code, f"stopped ({name}): {STOPPED}\n")


class Terminate(Callback):
    """Send this process SIGTERM after the first training batch."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises here


def test_sigterm_in_a_real_fit_exits_143_and_writes_no_result(runs, monkeypatch):
    """Lightning's own SIGTERM handler runs, then the command's: no checkpoint, no result."""
    monkeypatch.setattr(train, "run", multi_gpu.run)
    monkeypatch.setattr(multi_gpu, "warm_up", lambda *args, **kwargs: 0.0)
    plain = multi_gpu.make_trainer
    monkeypatch.setattr(multi_gpu, "make_trainer", lambda profile, name, callbacks, **options:
                        plain(profile, name, callbacks=[*callbacks, Terminate()], **options))
    handler = signal.getsignal(signal.SIGTERM)
    result = run("--run-name", "stopped", "--no-compile")
    assert (result.code, result.err) == (143, f"stopped (SIGTERM): {STOPPED}\n")
    assert not (runs / "stopped" / RESULT).exists() and not (runs / "stopped" / CHECKPOINT).exists()
    assert signal.getsignal(signal.SIGTERM) is handler


def test_a_validation_shard_smaller_than_a_batch_is_no_mistake(runs, monkeypatch):
    """Validation keeps a shard's last partial batch: 8 images on 2 devices at batch 8 run."""
    started = []
    monkeypatch.setattr(train, "run", lambda args, profile: started.append(args.devices))
    result = run("--devices", "2", "--accelerator", "cpu", "--batch-size", "8")
    assert (result.code, started) == (0, [2]), result.err
