"""The model factory, the LightningModule and the trainer on tiny in-memory batches (CPU)."""

import dataclasses
import math
from pathlib import Path

import pandas as pd
import pytest
import segmentation_models_pytorch as smp
import torch
from torch import nn
from torch.utils.data import DataLoader

from nailseg_common.setup.profiles import PROFILES, set_matmul_precision
from nailseg_common.training import run_logs
from nailseg_common.training import trainer as trainer_module
from nailseg_common.training.run_logs import read_metrics
from nailseg_common.training.trainer import (
    TrainingSpeed,
    bound_speed,
    make_trainer,
)
from nailseg_common.training.unet import (
    LitNailSegmentation,
    create_model,
    segmentation_loss,
    symmetric_lovasz,
)

SIZE = 64
ENCODER = "tu-efficientnet_lite0"  # the course's encoder: small, fast on a CPU
PROFILE = dataclasses.replace(PROFILES["smoke"], encoder=ENCODER, image_size=SIZE, batch_size=4, max_steps=2,
                              max_train_batches=2, max_valid_batches=1)


class Batches(torch.utils.data.Dataset):
    """Random uint8 images whose label is a bright square: the batch contract, in memory."""

    def __init__(self, count: int):
        generator = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 100, (count, 3, SIZE, SIZE), dtype=torch.uint8, generator=generator)
        self.labels = torch.zeros(count, 1, SIZE, SIZE, dtype=torch.uint8)
        self.labels[:, :, 16:40, 20:44] = 1
        self.images[:, :, 16:40, 20:44] = 220

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        return {"image": self.images[index], "label": self.labels[index]}


def loaders():
    return DataLoader(Batches(8), batch_size=4), DataLoader(Batches(4), batch_size=4)


@pytest.fixture(autouse=True)
def runs_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(tmp_path / "runs"))


def test_create_model_returns_one_logit_channel():
    model = create_model(ENCODER)
    assert isinstance(model, smp.Unet)
    assert model(torch.randn(2, 3, SIZE, SIZE)).shape == (2, 1, SIZE, SIZE)


def test_forward_takes_uint8_and_unit_float_alike():
    module = LitNailSegmentation(ENCODER).eval()
    image = torch.randint(0, 256, (2, 3, SIZE, SIZE), dtype=torch.uint8)
    with torch.no_grad():
        from_uint8 = module(image)
        from_float = module(image.float() / 255)
    assert from_uint8.shape == (2, 1, SIZE, SIZE) and from_uint8.dtype == torch.float32
    assert torch.allclose(from_uint8, from_float, atol=1e-5)


def test_two_step_fit_then_resume_continues_the_global_step():
    train, valid = loaders()
    module = LitNailSegmentation(ENCODER, lr=1e-3, max_steps=4)
    before = [p.detach().clone() for p in module.parameters()]
    trainer = make_trainer(PROFILE, "fit", enable_progress_bar=False)
    trainer.fit(module, train, valid)
    assert trainer.global_step == 2
    assert any(not torch.equal(a, b) for a, b in zip(before, module.parameters()))
    metrics = read_metrics(trainer)
    assert list(metrics.index) == [0]
    assert {"train_loss", "val_loss", "val_dice", "val_iou"} <= set(metrics.columns)
    assert metrics.notna().all().all()
    assert 0.0 <= metrics.loc[0, "val_dice"] <= 1.0
    last = trainer.checkpoint_callback.best_model_path
    assert Path(last).name.startswith("best-") and not list(Path(last).parent.glob("last*.ckpt"))

    resumed = make_trainer(dataclasses.replace(PROFILE, max_steps=4), "fit", enable_progress_bar=False)
    resumed.fit(LitNailSegmentation(ENCODER, lr=1e-3, max_steps=4), train, valid, ckpt_path=last)
    assert resumed.current_epoch == 2 and resumed.global_step == 4
    assert list(read_metrics(resumed).index)[-1] == 1  # the step budget went on into epoch 1


class Recorder(nn.Module):
    """A stand-in GPU augmentation that records what it saw and inverts the image."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def forward(self, image, label):
        self.calls.append((image.dtype, image.max().item(), label.dtype))
        return 1.0 - image, label


def test_gpu_augmentation_runs_on_training_batches_only():
    train, valid = loaders()
    recorder = Recorder()
    module = LitNailSegmentation(ENCODER, gpu_augmentation=recorder)
    trainer = make_trainer(PROFILE, "augment", enable_progress_bar=False, enable_checkpointing=False)
    trainer.fit(module, train, valid)  # 2 training batches, 1 validation batch
    assert len(recorder.calls) == 2
    dtype, top, label_dtype = recorder.calls[0]
    assert dtype == torch.float32 and top <= 1.0 and label_dtype == torch.float32
    batch = {"image": torch.full((1, 3, 4, 4), 255, dtype=torch.uint8),
             "label": torch.ones(1, 1, 4, 4, dtype=torch.uint8)}
    trainer.state.stage = "validate"
    out = module.on_after_batch_transfer(batch, 0)
    assert len(recorder.calls) == 2 and torch.equal(out["image"], torch.ones(1, 3, 4, 4))


def test_training_speed_times_each_epoch_without_validation(monkeypatch):
    clock = {"now": 0.0}  # a fake clock: a training step takes 1 s (5 s in the first epoch), a validation 100 s
    monkeypatch.setattr(trainer_module, "synchronized_now", lambda device: clock["now"])

    class Timed(LitNailSegmentation):
        def training_step(self, batch, batch_idx):
            clock["now"] += 5.0 if self.current_epoch == 0 else 1.0
            return super().training_step(batch, batch_idx)

        def validation_step(self, batch, batch_idx):
            clock["now"] += 100.0
            return super().validation_step(batch, batch_idx)

    train, valid = loaders()
    speed = TrainingSpeed()
    profile = dataclasses.replace(PROFILE, max_steps=6)  # 3 epochs of 2 batches of 4
    trainer = make_trainer(profile, "speed", enable_progress_bar=False, enable_checkpointing=False,
                           callbacks=[speed])
    trainer.fit(Timed(ENCODER), train, valid)
    assert clock["now"] == 10 + 4 + 3 * 100  # validation ran after every epoch
    assert speed.epochs == [{"images": 8, "seconds": 10.0, "img_s": 0.8},
                            {"images": 8, "seconds": 2.0, "img_s": 4.0},
                            {"images": 8, "seconds": 2.0, "img_s": 4.0}]
    assert speed.images_per_second() == 4.0  # the first epoch excluded


def test_training_speed_without_epochs_says_how_to_use_it():
    with pytest.raises(ValueError, match="callbacks"):
        TrainingSpeed().images_per_second()


def test_the_bound_is_timed_in_windows_that_carry_into_the_ratio():
    batches = [next(iter(loaders()[0]))]
    bound = bound_speed(PROFILE, lambda: LitNailSegmentation(ENCODER), batches, steps=5)
    assert len(bound.rates()) == 4 and all(math.isfinite(r) and r > 0 for r in bound.rates())
    ratio, spread = bound.ratio_to(bound)
    assert ratio == 1.0 and math.isfinite(spread) and spread > 0  # both sides' windows count


def test_training_loss_is_lovasz_plus_cross_entropy_plus_soft_dice():
    logits, target = torch.zeros(2, 1, 4, 4), torch.zeros(2, 1, 4, 4)
    target[:, :, :2] = 1
    lovasz = symmetric_lovasz(logits, target)
    assert segmentation_loss(logits, target, bce_weight=0, dice_weight=0).item() == pytest.approx(lovasz.item())
    # zero logits: the cross-entropy is ln 2 for every pixel
    assert segmentation_loss(logits, target, dice_weight=0).item() == pytest.approx(
        lovasz.item() + math.log(2))
    # and p = 0.5 on 16 pixels, 8 of them nail: soft Dice (2·4 + 1) / (8 + 8 + 1) = 9/17
    assert segmentation_loss(logits, target).item() == pytest.approx(
        lovasz.item() + math.log(2) + 8 / 17)


def test_the_trainer_validates_every_val_every_n_epochs_of_the_profile():
    trainer = make_trainer(dataclasses.replace(PROFILE, val_every_n_epochs=3), "cadence",
                           enable_progress_bar=False)
    assert trainer.check_val_every_n_epoch == 3
    assert make_trainer(PROFILE, "cadence", check_val_every_n_epoch=1).check_val_every_n_epoch == 1


def test_the_matmul_precision_follows_the_profile_and_the_trainer_leaves_it_alone():
    before = torch.get_float32_matmul_precision()
    try:
        set_matmul_precision(dataclasses.replace(PROFILE, accelerator="gpu"))
        assert torch.get_float32_matmul_precision() == "high"  # TF32 on a GPU
        make_trainer(PROFILE, "precision", enable_progress_bar=False)
        assert torch.get_float32_matmul_precision() == "high"
        set_matmul_precision(PROFILE)
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        torch.set_float32_matmul_precision(before)


def test_run_summary_counts_training_epochs_and_takes_the_last_validation():
    metrics = pd.DataFrame({"train_loss": [1.0, 0.8, 0.6, None], "epoch_s": [3.0, 2.0, 2.2, None],
                            "val_dice": [None, None, 0.7, 0.75], "val_iou": [None, None, 0.5, 0.6]},
                           index=pd.Index([0, 1, 2, 3], name="epoch"))  # 3: validate() after fit
    summary = run_logs.run_summary(metrics)
    assert summary["epochs"] == 3 and summary["val_dice"] == 0.75 and summary["val_iou"] == 0.6
    assert summary["s / epoch"] == 2.1  # median of epochs 1 and 2, the first left out


def test_the_trainer_leaves_cudnns_kernel_search_off(tmp_path, monkeypatch):
    """The search compiles and times candidate kernels at each new shape: a 45 s first step
    against 9 s on an H200, no faster step after it (lab/first_steps)."""
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(tmp_path))
    monkeypatch.setattr(trainer_module.pl, "Trainer", lambda **options: options)
    for profile in PROFILES.values():
        assert make_trainer(profile, "search")["benchmark"] is False
