"""The course's accuracy target: masks grown by whole pixels, their Dice, and the per-image
validation scores the model keeps (notebook 02)."""

import dataclasses

import pytest
import torch
from torch.utils.data import DataLoader

from nailseg_common.core.statistics import Verdict
from nailseg_common.setup.profiles import select_profile
from nailseg_common.training.run_logs import outline_verdict
from nailseg_common.training.trainer import TrainingSpeed, make_trainer
from nailseg_common.training.unet import LitNailSegmentation, grown, outline_levels


def square(side: int, size: int = 16) -> torch.Tensor:
    mask = torch.zeros(1, 1, size, size)
    start = (size - side) // 2
    mask[..., start:start + side, start:start + side] = 1.0
    return mask


def test_grown_dilates_and_erodes_by_whole_pixels():
    nail = square(4)
    assert torch.equal(grown(nail, 1), square(6)) and torch.equal(grown(nail, 2), square(8))
    assert torch.equal(grown(nail, -1), square(2)) and torch.equal(grown(nail, 0), nail)


def test_outline_levels_score_the_grown_masks():
    levels = outline_levels(square(4).to(torch.uint8))
    assert levels.loc[0, "1 px larger"] == pytest.approx(2 * 16 / (16 + 36))
    assert levels.loc[0, "2 px larger"] == pytest.approx(2 * 16 / (16 + 64))
    assert levels.loc[0, "1 px smaller"] == pytest.approx(2 * 4 / (4 + 16))
    verdict = outline_verdict(torch.tensor([1.0, 1.0]), torch.cat([square(4), square(4)]), torch.device("cpu"))
    assert isinstance(verdict, Verdict) and verdict.target == pytest.approx(0.4)


def test_the_model_keeps_the_per_image_dice_of_its_last_validation():
    profile = dataclasses.replace(select_profile("smoke"), encoder="tu-efficientnet_lite0", max_steps=1)
    images = torch.randint(0, 255, (6, 3, 32, 32), dtype=torch.uint8)
    labels = torch.zeros(6, 1, 32, 32, dtype=torch.uint8)
    labels[:, :, 8:20, 8:20] = 1
    batches = [{"image": images[i:i + 3], "label": labels[i:i + 3]} for i in (0, 3)]
    model = LitNailSegmentation("tu-efficientnet_lite0", max_steps=1)
    trainer = make_trainer(profile, "test_outline", callbacks=[TrainingSpeed()], logger=False,
                           enable_checkpointing=False, limit_train_batches=1, limit_val_batches=2)
    scores = trainer.validate(model, DataLoader(batches, batch_size=None), verbose=False)[0]
    kept = model.val_dice_per_image
    assert kept.device.type == "cpu" and kept.shape == (6,)
    assert kept.mean().item() == pytest.approx(scores["val_dice"], abs=1e-6)
