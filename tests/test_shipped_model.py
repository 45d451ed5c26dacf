"""The model the course ships: its provenance describes the very file, it loads offline on a
CPU, and it finds the nails of course-style synthetic photos it has never seen."""

import hashlib
import json

import numpy as np
import pytest
import torch

from nailseg_common.commands.predict import predict_mask
from nailseg_common.data.images import read_binary_mask, read_rgb
from nailseg_common.data.preparation import find_pairs
from nailseg_common.data.synthetic import generate_synthetic_dataset
from nailseg_common.training.checkpoints import SHIPPED_MODEL, build_model, read_checkpoint

PROVENANCE = SHIPPED_MODEL.with_suffix(".json")


@pytest.fixture(scope="module")
def provenance():
    return json.loads(PROVENANCE.read_text())


def test_the_file_is_small_and_its_provenance_describes_it(provenance):
    data = SHIPPED_MODEL.read_bytes()
    assert len(data) <= 16 * 2**20 and provenance["bytes"] == len(data)
    assert provenance["sha256"] == hashlib.sha256(data).hexdigest()
    assert provenance["file"] == SHIPPED_MODEL.name
    shipped = read_checkpoint(SHIPPED_MODEL)
    assert provenance["encoder"] == shipped.encoder
    assert provenance["image_size"] == shipped.image_size == 384
    for key in ("commit", "device", "versions", "date", "trained_steps", "trained_by"):
        assert provenance[key], key
    assert 0.85 <= provenance["synthetic_valid"]["dice"] <= 1
    assert provenance["synthetic_valid"]["images"] >= 240  # the gpu profile's split or more


def test_it_loads_offline_on_a_cpu_and_finds_the_nails_of_new_synthetic_photos(
        tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = build_model(read_checkpoint(SHIPPED_MODEL))
    assert next(model.parameters()).dtype == torch.float32  # stored in half precision
    photos = generate_synthetic_dataset(tmp_path / "photos", 12, seed=2026, progress=False)
    dice = []
    with torch.inference_mode():
        for pair in find_pairs(photos):
            nail = read_binary_mask(pair.mask) > 0
            found = predict_mask(model, read_rgb(pair.image), 384, torch.device("cpu")) > 0
            dice.append(2 * (found & nail).sum() / max(1, found.sum() + nail.sum()))
    assert np.mean(dice) >= 0.8, [round(float(d), 3) for d in dice]
