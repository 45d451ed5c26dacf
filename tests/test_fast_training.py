"""Notebook 07's faster training: the warm-up leaves no trace, the validation shapes it
warms up, and the clock that stops a run at its target."""

import dataclasses

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from nailseg_common.fast_training import (
    AccuracyClock,
    FastNailSegmentation,
    loss_of,
    reuse,
    validation_batch_sizes,
    warm_up,
)
from nailseg_common.profiles import select_profile
from nailseg_common.training import make_trainer

SMOKE = dataclasses.replace(select_profile("smoke"), encoder="resnet18", image_size=64,
                            batch_size=4, max_train_batches=None, max_valid_batches=None)


def smoke_model(max_steps: int = 10) -> FastNailSegmentation:
    torch.manual_seed(0)
    return FastNailSegmentation(encoder=SMOKE.encoder, lr=1e-2, max_steps=max_steps)


def test_warm_up_restores_every_weight_and_buffer_exactly():
    model = smoke_model()
    before = {key: value.clone() for key, value in model.state_dict().items()}
    assert any("running_mean" in key for key in before), "batch norm statistics are checked too"
    seconds = warm_up(model, SMOKE, valid_samples=6)
    after = model.state_dict()
    assert seconds > 0 and after.keys() == before.keys()
    changed = [key for key in before if not torch.equal(before[key], after[key])]
    assert changed == []
    assert all(p.grad is None for p in model.parameters()) and model.training


@pytest.mark.parametrize(("samples", "batch_size", "sizes"), [
    (240, 64, [64, 48]), (240, 60, [60]), (240, 120, [120]), (5, 8, [5]), (8, 8, [8]),
    (17, 8, [8, 1]), (120, 64, [64, 56]),
])
def test_validation_batch_sizes(samples, batch_size, sizes):
    assert validation_batch_sizes(samples, batch_size) == sizes


class RandomBatches(Dataset):
    """``count`` image/mask pairs of the batch contract (uint8 CHW), fixed by a seed."""

    def __init__(self, count: int, size: int):
        generator = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (count, 3, size, size), dtype=torch.uint8,
                                    generator=generator)
        self.labels = (torch.rand(count, 1, size, size, generator=generator) > 0.5).to(torch.uint8)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> dict:
        return {"image": self.images[index], "label": self.labels[index]}


@pytest.mark.parametrize(("target", "steps", "validations"), [(0.0, 2, 1), (1.1, 6, 3)])
def test_accuracy_clock_stops_at_the_first_validation_that_reaches_the_target(
        tmp_path, monkeypatch, target, steps, validations):
    """Two batches per epoch, validation every epoch, six steps at most: a target of 0 stops
    the fit after the first validation, an unreachable one lets it run to the end."""
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(tmp_path))
    profile = dataclasses.replace(SMOKE, max_steps=6)
    loader = DataLoader(RandomBatches(8, profile.image_size), batch_size=4)
    clock = AccuracyClock(target)
    trainer = make_trainer(profile, "clock", enable_checkpointing=False,
                           enable_progress_bar=False, callbacks=[clock])
    trainer.fit(smoke_model(profile.max_steps), train_dataloaders=loader, val_dataloaders=loader)
    assert trainer.global_step == steps and len(clock.history) == validations
    assert clock.fit_s >= clock.history[-1]["seconds"] > 0
    assert [row["step"] for row in clock.history] == [2, 4, 6][:validations]
    if target <= 0:
        assert clock.reached == clock.history[0]
    else:
        assert clock.reached is None


def test_reuse_hands_back_the_same_model_with_the_pipelines_augmentation():
    model = smoke_model()
    make_model = reuse(model)
    augmentation = torch.nn.Identity()
    assert make_model(encoder="ignored", lr=1.0, max_steps=1, gpu_augmentation=augmentation) is model
    assert model.gpu_augmentation is augmentation
    assert make_model(gpu_augmentation=None) is model and model.gpu_augmentation is None


def test_the_loss_outside_lightning_is_the_training_steps():
    model = smoke_model()
    image = torch.rand(2, 3, SMOKE.image_size, SMOKE.image_size)
    label = (torch.rand(2, 1, SMOKE.image_size, SMOKE.image_size) > 0.5).float()
    torch.manual_seed(0)
    loss = loss_of(model, image, label)
    torch.manual_seed(0)
    assert torch.allclose(loss, model.training_step({"image": image, "label": label}, 0))


@pytest.mark.parametrize("name", ["smoke", "cpu", "gpu"])
def test_every_profile_holds_the_faster_recipe(name, monkeypatch):
    monkeypatch.setattr("nailseg_common.profiles.gpu_available", lambda: True)
    profile = select_profile(name)
    assert profile.fast_batch_size >= 1 and profile.fast_lr > 0 and profile.fast_max_steps >= 1
    assert 0 <= profile.warmup_steps < profile.fast_max_steps or profile.warmup_steps == 0
    assert profile.val_every_n_epochs >= 1 and profile.ddp_max_steps >= 1
    assert profile.compile_model == (profile.accelerator == "gpu")
