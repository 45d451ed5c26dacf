"""The decode-once uint8 cache: built once, reused, faithful to the photos resized as notebook
02 resizes them (its validation transform)."""

import dataclasses
import json

import numpy as np
import pytest
import torch
from PIL import Image

from nailseg_common.data.decoded import cache_cost, cache_dir, ensure_cache, load_cache
from nailseg_common.data.images import read_rgb
from nailseg_common.data.preparation import prepare_dataset, read_label, read_split
from nailseg_common.pipelines.albumentations_pipeline import valid_transform
from nailseg_common.pipelines.cached_pipeline import CachedNailDataModule
from nailseg_common.setup.paths import DataLocation
from nailseg_common.setup.profiles import select_profile

SIZE = 24


@pytest.fixture(scope="module")
def location(tmp_path_factory):
    """A tiny real-layout dataset (12 non-square images, 3 per type), prepared."""
    root = tmp_path_factory.mktemp("cache")
    raw = root / "raw"
    rng = np.random.default_rng(0)
    for i in range(12):
        kind = str(1 + i % 4)
        (raw / "Images" / kind).mkdir(parents=True, exist_ok=True)
        (raw / "Masks" / kind).mkdir(parents=True, exist_ok=True)
        image = rng.integers(0, 256, (30 + i, 40, 3), dtype=np.uint8)
        mask = np.zeros((30 + i, 40), np.uint8)
        mask[5:20, 3 + i:15 + i] = 255
        Image.fromarray(image).save(raw / "Images" / kind / f"img{i}.png")
        Image.fromarray(mask).save(raw / "Masks" / kind / f"img{i}.png")
    prepare_dataset(raw, root / "prepared", progress=False)
    return DataLocation(raw=raw, prepared=root / "prepared", synthetic=False)


def profile(**overrides):
    return dataclasses.replace(select_profile("smoke"), image_size=SIZE, batch_size=4, **overrides)


def test_cache_matches_the_resized_originals(location):
    folder = ensure_cache(location, SIZE)
    assert folder == cache_dir(location, SIZE) == location.prepared / f"cache_{SIZE}"
    transform = valid_transform(SIZE)
    for split in ("train", "valid"):
        frame = read_split(location, split)
        images, labels = load_cache(location, SIZE, split)
        assert images.dtype == labels.dtype == torch.uint8
        assert images.shape == (len(frame), 3, SIZE, SIZE) and labels.shape == (len(frame), 1, SIZE, SIZE)
        assert set(labels.unique().tolist()) == {0, 1}
        for i, (image_file, label_file) in enumerate(zip(frame["image"], frame["label"])):
            out = transform(image=read_rgb(image_file), mask=read_label(label_file))
            assert np.array_equal(images[i].numpy(), out["image"].transpose(2, 0, 1))
            assert np.array_equal(labels[i, 0].numpy(), out["mask"])


def test_cache_cost_counts_the_disk_it_keeps(location):
    cost = cache_cost(location, SIZE)  # built by the test above: its build as recorded then
    assert cost.build_seconds > 0 and cost.build_cores >= 1
    assert cost.cache_mb * 1e6 > 12 * 4 * SIZE * SIZE  # 3 + 1 bytes a pixel, 12 pairs
    assert cost.photos_mb > 0


def test_cache_is_built_once_and_reused(location):
    folder = ensure_cache(location, SIZE)
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert set(before) == {"manifest.json", "built.json", "train_images.npy", "train_labels.npy",
                           "valid_images.npy", "valid_labels.npy"}
    assert ensure_cache(location, SIZE) == folder
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before
    assert not [p for p in folder.parent.iterdir() if ".tmp-" in p.name]


def test_a_stale_cache_is_rebuilt(location):
    folder = ensure_cache(location, SIZE)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["sources"]["train"] = manifest["sources"]["train"][::-1]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "train_images.npy").write_bytes(b"broken")
    ensure_cache(location, SIZE)
    images, _ = load_cache(location, SIZE, "train")
    assert images.shape[1:] == (3, SIZE, SIZE)


@pytest.mark.parametrize("num_workers", [0, 1])
def test_datamodule_serves_whole_uint8_batches(location, num_workers):
    data = CachedNailDataModule(location, profile(), num_workers=num_workers)
    data.prepare_data()
    data.setup("fit")
    images, labels = load_cache(location, SIZE, "train")
    batches = list(data.train_dataloader())
    assert len(batches) == len(images) // 4  # drop_last: every batch has the full size
    seen = []
    for batch in batches:
        assert set(batch) == {"image", "label"}
        assert batch["image"].dtype == batch["label"].dtype == torch.uint8
        assert batch["image"].shape == (4, 3, SIZE, SIZE) and batch["label"].shape == (4, 1, SIZE, SIZE)
        for image, label in zip(batch["image"], batch["label"]):
            index = next(i for i in range(len(images)) if torch.equal(images[i], image))
            assert torch.equal(labels[index], label)
            seen.append(index)
    assert len(set(seen)) == len(seen)  # an epoch draws without replacement


def test_training_order_is_shuffled_per_epoch_and_validation_is_in_order(location):
    data = CachedNailDataModule(location, profile(), num_workers=0)
    data.setup("fit")
    loader = data.train_dataloader()
    first, second = ([b["image"] for b in loader] for _ in range(2))
    assert not all(torch.equal(a, b) for a, b in zip(first, second))
    images, labels = load_cache(location, SIZE, "valid")
    valid = list(data.val_dataloader())
    assert torch.equal(torch.cat([b["image"] for b in valid]), images)
    assert torch.equal(torch.cat([b["label"] for b in valid]), labels)


def test_bad_split_is_named(location):
    with pytest.raises(ValueError, match="split"):
        load_cache(location, SIZE, "test")


@pytest.mark.parametrize("damage", ["truncate", "delete", "reshape"])
def test_a_damaged_cache_file_is_noticed_and_rebuilt(location, damage):
    folder = ensure_cache(location, SIZE)
    target = folder / "valid_labels.npy"
    expected = np.load(target)
    if damage == "truncate":
        target.write_bytes(target.read_bytes()[:-10])
    elif damage == "delete":
        target.unlink()
    else:
        np.save(target, expected[:1])
    ensure_cache(location, SIZE)
    assert np.array_equal(np.load(target), expected)
