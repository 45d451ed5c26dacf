"""Notebook 02's plumbing: flat pairs, split paths, photo/label pairs, its report lines."""

import albumentations as A
import pandas as pd
import pytest
import torch
from PIL import Image

from nailseg_common.data.preparation import read_pair, read_split, split_paths
from nailseg_common.pipelines.gallery import dataset_labels, loaders_summary, ready_draws
from nailseg_common.setup.paths import data_location
from nailseg_common.setup.profiles import select_profile
from nailseg_common.training.imagenet import load_encoder_weights
from nailseg_common.training.scores import flat_pair


def test_flat_pair_flattens_each_image_to_float32_and_refuses_other_shapes():
    logits, targets = flat_pair(torch.zeros(2, 1, 3, 4, dtype=torch.bfloat16),
                                torch.ones(2, 1, 3, 4, dtype=torch.uint8))
    assert logits.shape == targets.shape == (2, 12) and logits.dtype == targets.dtype == torch.float32
    with pytest.raises(ValueError, match="same shape"):
        flat_pair(torch.zeros(2, 1, 4, 4), torch.zeros(2, 4, 4))


def test_split_paths_needs_image_and_label_columns():
    frame = pd.DataFrame({"image": ["a.jpg"], "label": ["a.png"], "type": [1]})
    assert split_paths(frame) == (["a.jpg"], ["a.png"])
    with pytest.raises(ValueError, match="read_split"):
        split_paths(frame.drop(columns="label"))


def test_read_pair_refuses_a_label_of_another_size(tmp_path):
    Image.new("RGB", (8, 6)).save(tmp_path / "photo.png")
    Image.new("L", (8, 6), 255).save(tmp_path / "label.png")
    Image.new("L", (6, 8)).save(tmp_path / "other.png")
    photo, label = read_pair(tmp_path / "photo.png", tmp_path / "label.png")
    assert photo.shape == (6, 8, 3) and label.shape == (6, 8) and label.max() == 1
    with pytest.raises(ValueError, match="its mask"):
        read_pair(tmp_path / "photo.png", tmp_path / "other.png")


def test_ready_draws_counts_resized_normalised_outputs(prepared, monkeypatch):
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(prepared / "data"))
    location = data_location(select_profile("smoke").num_images)
    ready = A.Compose([A.Resize(16, 16), A.Normalize()])
    assert ready_draws(ready, location, 16, draws=3) == "100.0% of 3 draws resized and normalised"
    assert ready_draws(A.Compose([A.Resize(16, 16)]), location, 16, draws=3).startswith("0.0%")
    assert len(read_split(location, "train")) > 0


def test_loaders_summary_and_dataset_labels():
    samples = [{"image": torch.full((3, 2, 2), i, dtype=torch.uint8),
                "label": torch.full((1, 2, 2), i % 2, dtype=torch.uint8)} for i in range(3)]
    module = type("Module", (), {"train_set": samples[:2], "valid_set": samples[2:]})()
    batch = {"image": torch.stack([s["image"] for s in samples])}
    assert loaders_summary(module, batch) == ("2 training, 1 validation images; a batch: "
                                              "{'image': '(3, 3, 2, 2) torch.uint8 0..2'}")
    labels = dataset_labels(samples)
    assert labels.shape == (3, 1, 2, 2) and labels[:, 0, 0, 0].tolist() == [0, 1, 0]


def test_load_encoder_weights_keeps_random_weights_for_none_and_names_a_bad_choice():
    encoder = torch.nn.Linear(2, 2)
    before = encoder.weight.clone()
    load_encoder_weights(encoder, "tu-efficientnet_lite0", None)
    assert torch.equal(encoder.weight, before)
    with pytest.raises(ValueError, match="'imagenet' or None"):
        load_encoder_weights(encoder, "tu-efficientnet_lite0", "random")
