"""NailDataset and NailDataModule on a handful of tiny PNG files."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from nailseg_common.pipelines.albumentations_pipeline import (
    NailDataModule,
    NailDataset,
    seed_worker_transform,
    train_transform,
    valid_transform,
)
from nailseg_common.setup.paths import DataLocation
from nailseg_common.setup.profiles import PROFILES


def write_pairs(folder, count=4, size=(40, 56)):
    """``count`` identical RGB images with a 0/255 label (as preparation writes it); returns
    the split frame."""
    folder.mkdir(parents=True, exist_ok=True)
    mask = np.zeros(size, np.uint8)
    mask[5:25, 8:30] = 255
    image = np.full((*size, 3), 60, np.uint8)
    image[..., 1] = mask
    rows = []
    for index in range(count):
        rows.append({"image": str(folder / f"{index}.png"), "label": str(folder / f"{index}_label.png")})
        Image.fromarray(image).save(rows[-1]["image"])
        Image.fromarray(mask).save(rows[-1]["label"])
    return pd.DataFrame(rows)


def test_items_follow_the_batch_contract(tmp_path):
    item = NailDataset(write_pairs(tmp_path, 1), valid_transform(32))[0]
    assert item["image"].shape == (3, 32, 32) and item["image"].dtype == torch.uint8
    assert item["label"].shape == (1, 32, 32) and item["label"].dtype == torch.uint8
    assert set(item["label"].unique().tolist()) == {0, 1}
    # the green channel carries the mask: still aligned after resizing (edges interpolate)
    assert ((item["image"][1] > 128) == (item["label"][0] == 1)).float().mean() > 0.95


def test_frame_without_paths_is_rejected():
    with pytest.raises(ValueError, match="read_split"):
        NailDataset(pd.DataFrame({"path": []}))
    with pytest.raises(ValueError, match="read_split"):  # the raw mask is not what it reads
        NailDataset(pd.DataFrame({"image": [], "mask": []}))


def test_workers_augment_independently(tmp_path):
    dataset = NailDataset(write_pairs(tmp_path, 8), train_transform(32, seed=0))
    loader = DataLoader(dataset, batch_size=4, num_workers=2, worker_init_fn=seed_worker_transform)
    first, second = list(loader)  # one batch from each worker, from identical files
    assert not torch.equal(first["image"], second["image"])


def test_data_module_yields_uint8_batches(tmp_path, monkeypatch):
    frame = write_pairs(tmp_path / "raw", 6)
    splits = {"train": frame.iloc[:4], "valid": frame.iloc[4:]}
    monkeypatch.setattr("nailseg_common.pipelines.albumentations_pipeline.read_split", lambda location, split: splits[split])
    profile = dataclasses.replace(PROFILES["smoke"], image_size=32, batch_size=2, num_workers=0)
    module = NailDataModule(DataLocation(tmp_path / "raw", tmp_path / "prepared", True), profile)
    module.setup("fit")
    batch = next(iter(module.train_dataloader()))
    assert batch["image"].shape == (2, 3, 32, 32) and batch["image"].dtype == torch.uint8
    assert batch["label"].shape == (2, 1, 32, 32) and batch["label"].dtype == torch.uint8
    assert len(module.train_dataloader()) == 2 and len(module.val_dataloader()) == 1
