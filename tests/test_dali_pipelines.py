"""DALI pipelines: pairing, exact epochs, shards, alignment under augmentation, CPU-only mode."""

import dataclasses

import numpy as np
import pytest
import torch
from PIL import Image

from nailseg_common.pipelines import dali_pipeline as dp
from nailseg_common.pipelines.policy import POLICY
from nailseg_common.setup import dali
from nailseg_common.setup.profiles import select_profile

needs_dali = pytest.mark.skipif(not dali.dali_available(), reason=dali.dali_status())

SIZE = 32
DEVICES = ["cpu"] + (["gpu"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    """Every test runs CPU-only; on a machine with CUDA also on the GPU."""
    if not dali.dali_available():
        pytest.skip(dali.dali_status())
    return request.param


def test_without_dali_the_module_explains_and_refuses(monkeypatch, tmp_path):
    monkeypatch.setattr(dali, "IMPORT_ERROR", ImportError("No module named 'nvidia.dali'"))
    assert not dali.dali_available()
    assert "Linux" in dali.dali_status()
    with pytest.raises(RuntimeError, match="Linux"):
        dp.build_pipeline(["a.png"], ["b.png"], image_size=SIZE, batch_size=1, augment=False)


def write_pair(folder, name, image, mask):
    """``image`` (HxWx3) as a lossless PNG photo and ``mask`` (HxW, 0/1) as a 0/255 PNG label,
    as preparation writes it; returns both paths."""
    photo, label = folder / f"image_{name}.png", folder / f"label_{name}.png"
    Image.fromarray(image).save(photo)
    Image.fromarray(mask * np.uint8(255)).save(label)
    return str(photo), str(label)


def write_identity_set(folder, count):
    """Images whose every pixel carries the sample index (channel 0) and mask = index parity."""
    images, masks = [], []
    for index in range(count):
        h, w = 20 + index % 5, 24 + 3 * (index % 4)  # original, uneven sizes
        image = np.zeros((h, w, 3), np.uint8)
        image[..., 0] = index
        image[..., 1] = 255 - index
        mask = np.full((h, w), index % 2, np.uint8)
        photo, label = write_pair(folder, f"{index:03d}", image, mask)
        images.append(photo)
        masks.append(label)
    return images, masks


def write_pattern_set(folder, count):
    """An asymmetric L-shaped block; the mask is exactly channel 0 > 127 of the image."""
    images, masks = [], []
    for index in range(count):
        image = np.full((48, 40, 3), 30, np.uint8)
        image[6:30, 4 + 3 * index:12 + 3 * index, 0] = 220  # vertical bar, moved per sample
        image[22:30, 4 + 3 * index:36, 0] = 220  # foot of the L
        image[..., 2] = np.arange(40, dtype=np.uint8)[None, :] * 3  # a horizontal ramp
        mask = (image[..., 0] > 127).astype(np.uint8)
        photo, label = write_pair(folder, f"{index:03d}", image, mask)
        images.append(photo)
        masks.append(label)
    return images, masks


def host(batch):
    return {key: value.cpu().numpy() for key, value in batch.items()}


def sample_ids(batch):
    """Sample index of every item (channel 0 is constant) and a check of the mask pairing."""
    image, label = batch["image"], batch["label"]
    ids = image[:, 0, 0, 0].astype(int)
    assert (image[:, 0] == ids[:, None, None]).all(), "identity image changed"
    assert (label[:, 0] == (ids % 2)[:, None, None]).all(), "mask does not belong to image"
    return ids.tolist()


def only(**probabilities):
    """POLICY with the given probabilities and every other op switched off."""
    return {name: dataclasses.replace(op, probability=probabilities.get(name, 0.0))
            for name, op in POLICY.items()}


def run_epoch(loader):
    """One epoch of batches, moved to host numpy arrays."""
    return [host(batch) for batch in loader]


def test_batches_follow_the_batch_contract(tmp_path, device):
    images, masks = write_identity_set(tmp_path, 10)
    loader = dp.make_loader(images, masks, image_size=SIZE, batch_size=4, train=True,
                            device=device)
    batch = next(iter(loader))
    assert set(batch) == {"image", "label"}
    assert batch["image"].shape == (4, 3, SIZE, SIZE) and batch["image"].dtype == torch.uint8
    assert batch["label"].shape == (4, 1, SIZE, SIZE) and batch["label"].dtype == torch.uint8
    expected = "cuda" if device == "gpu" else "cpu"  # GPU batches are CUDA tensors already
    assert batch["image"].device.type == expected and batch["label"].device.type == expected


def test_the_profile_decides_where_dali_runs():
    cpu = select_profile("smoke")
    assert dp.dali_device(cpu) == "cpu"  # CPU-only mode
    assert dp.dali_device(dataclasses.replace(cpu, accelerator="gpu")) == "gpu"
    assert dp.default_num_threads("cpu") >= 1


@needs_dali
def test_unknown_devices_are_rejected(tmp_path):
    images, masks = write_identity_set(tmp_path, 2)
    with pytest.raises(ValueError, match="device must be"):
        dp.make_loader(images, masks, image_size=SIZE, batch_size=2, train=False, device="tpu")


def test_datamodule_runs_where_the_profile_says(tmp_path, device):
    profile = dataclasses.replace(select_profile("smoke"), accelerator=device)
    assert dp.DALINailDataModule(tmp_path, profile).device == device


def test_validation_sees_every_sample_exactly_once_per_epoch(tmp_path, device):
    images, masks = write_identity_set(tmp_path, 10)
    loader = dp.make_loader(images, masks, image_size=SIZE, batch_size=4, train=False,
                            device=device)
    assert len(loader) == 3
    for _ in range(3):
        batches = run_epoch(loader)
        assert [len(b["image"]) for b in batches] == [4, 4, 2]
        assert [i for b in batches for i in sample_ids(b)] == list(range(10))  # file order


def test_fill_repeats_the_padded_last_sample_and_partial_does_not(tmp_path, device):
    images, masks = write_identity_set(tmp_path, 10)
    seen = {}
    for policy in (dp.LastBatchPolicy.FILL, dp.LastBatchPolicy.PARTIAL):
        loader = dp.make_loader(images, masks, image_size=SIZE, batch_size=4, train=False,
                                device=device, last_batch_policy=policy)
        assert len(loader) == 3
        seen[policy.name] = [i for b in run_epoch(loader) for i in sample_ids(b)]
    assert seen["PARTIAL"] == list(range(10))
    assert seen["FILL"] == list(range(10)) + [9, 9]  # the reader pads with the last sample


def test_masks_are_resized_by_nearest_neighbour_and_stay_binary(tmp_path, device):
    rng = np.random.default_rng(0)
    images, masks, originals = [], [], []
    for index, (h, w) in enumerate([(37, 29), (50, 61), (20, 24), (33, 33)]):
        mask = (rng.random((h, w)) > 0.5).astype(np.uint8)  # a linear resize would blur it
        photo, label = write_pair(tmp_path, str(index), np.repeat(mask[:, :, None] * 200, 3, axis=2),
                                  mask)
        images.append(photo)
        masks.append(label)
        originals.append(mask)
    _, labels = plain_batch(images, masks, 4, device)

    def nearest(mask):  # the source pixel whose centre is nearest to each output pixel's centre
        rows = np.minimum(((np.arange(SIZE) + 0.5) * mask.shape[0] / SIZE).astype(int),
                          mask.shape[0] - 1)
        cols = np.minimum(((np.arange(SIZE) + 0.5) * mask.shape[1] / SIZE).astype(int),
                          mask.shape[1] - 1)
        return mask[rows][:, cols]

    for original, label in zip(originals, labels):
        assert set(np.unique(label)) <= {0, 1}
        np.testing.assert_array_equal(label[0], nearest(original))


def test_validation_restarts_after_an_epoch_stopped_early(tmp_path, device):
    images, masks = write_identity_set(tmp_path, 10)
    loader = dp.make_loader(images, masks, image_size=SIZE, batch_size=4, train=False,
                            device=device)
    first = host(next(iter(loader)))  # like Lightning's sanity check: one batch, then stop
    assert sample_ids(first) == [0, 1, 2, 3]
    assert [i for b in run_epoch(loader) for i in sample_ids(b)] == list(range(10))


def test_training_epochs_drop_the_remainder_and_reshuffle(tmp_path, device):
    images, masks = write_identity_set(tmp_path, 10)
    loader = dp.make_loader(images, masks, image_size=SIZE, batch_size=4, train=True,
                            device=device, policy=only())
    assert len(loader) == 2
    epochs = []
    for _ in range(3):
        batches = run_epoch(loader)
        assert len(batches) == 2 and all(len(b["image"]) == 4 for b in batches)
        ids = [i for b in batches for i in sample_ids(b)]
        assert len(set(ids)) == 8 and set(ids) <= set(range(10))
        epochs.append(ids)
    assert len({tuple(e) for e in epochs}) == 3, "the order should change every epoch"


def test_training_continues_an_epoch_stopped_early(tmp_path, device):
    images, masks = write_identity_set(tmp_path, 12)
    loader = dp.make_loader(images, masks, image_size=SIZE, batch_size=4, train=True,
                            device=device, policy=only())
    first = sample_ids(host(next(iter(loader))))  # like limit_train_batches=1
    rest = [i for b in run_epoch(loader) for i in sample_ids(b)]
    assert len(rest) == 8 and sorted(first + rest) == list(range(12))
    batches = iter(loader)
    for _ in range(len(loader)):  # a whole epoch without reaching StopIteration
        next(batches)
    assert len(run_epoch(loader)) == 3, "the next pass must be a whole new epoch"


@pytest.mark.parametrize("train", [False, True])
def test_shards_are_disjoint_and_complete(tmp_path, train, device):
    count, shards, batch_size = 12, 3, 2
    images, masks = write_identity_set(tmp_path, count)
    seen = []
    for shard_id in range(shards):
        loader = dp.make_loader(images, masks, image_size=SIZE, batch_size=batch_size,
                                train=train, device=device, shard_id=shard_id, num_shards=shards,
                                policy=only(), seed=7 + shard_id)
        assert len(loader) == 2
        seen.append([i for b in run_epoch(loader) for i in sample_ids(b)])
    assert sum(len(s) for s in seen) == count
    assert sorted(i for s in seen for i in s) == list(range(count))


def test_uneven_shards_cover_the_validation_set_once(tmp_path, device):
    images, masks = write_identity_set(tmp_path, 11)
    seen = []
    for shard_id in range(2):
        loader = dp.make_loader(images, masks, image_size=SIZE, batch_size=4, train=False,
                                device=device, shard_id=shard_id, num_shards=2)
        seen += [i for b in run_epoch(loader) for i in sample_ids(b)]
    assert sorted(seen) == list(range(11))


def matching_sample(image, label, candidates):
    """Index of the one candidate (image, label) pair equal to ``image``, ``label``."""
    hits = [i for i, (c_image, c_label) in enumerate(candidates)
            if np.array_equal(image, c_image) and np.array_equal(label, c_label)]
    assert len(hits) == 1, f"expected exactly one matching sample, found {len(hits)}"
    return hits[0]


def plain_batch(images, masks, batch_size, device):
    batch = run_epoch(dp.make_loader(images, masks, image_size=SIZE, batch_size=batch_size,
                                     train=False, device=device))[0]
    return batch["image"], batch["label"]


def test_flips_move_image_and_mask_exactly(tmp_path, device):
    images, masks = write_pattern_set(tmp_path, 4)
    plain_images, plain_labels = plain_batch(images, masks, 4, device)
    flipped = [(np.flip(i, (1, 2)), np.flip(m, (1, 2))) for i, m in zip(plain_images, plain_labels)]
    loader = dp.make_loader(images, masks, image_size=SIZE, batch_size=4, train=True,
                            device=device, policy=only(horizontal_flip=1.0, vertical_flip=1.0))
    batch = run_epoch(loader)[0]
    found = [matching_sample(i, m, flipped)
             for i, m in zip(batch["image"], batch["label"])]
    assert sorted(found) == [0, 1, 2, 3]


def test_affine_keeps_mask_on_the_pattern_and_masks_binary(tmp_path, device):
    images, masks = write_pattern_set(tmp_path, 8)
    loader = dp.make_loader(images, masks, image_size=SIZE, batch_size=8, train=True,
                            device=device, policy=only(horizontal_flip=0.5, vertical_flip=0.5,
                                                      affine=1.0))
    _, plain_labels = plain_batch(images, masks, 8, device)
    moved = 0
    for _ in range(2):
        batch = run_epoch(loader)[0]
        image, label = batch["image"], batch["label"]
        assert set(np.unique(label)) <= {0, 1}
        for sample, mask in zip(image, label):
            from_image = sample[0] > 127
            agree = (from_image == mask[0].astype(bool)).mean()
            iou = (from_image & mask[0].astype(bool)).sum() / (from_image | mask[0].astype(bool)).sum()
            assert agree > 0.97 and iou > 0.8, (agree, iou)
            moved += not any(np.array_equal(mask, m) for m in plain_labels)
    assert moved >= 12, "the affine should move (nearly) every mask"


def test_photometric_ops_change_the_image_only(tmp_path, device):
    images, masks = write_pattern_set(tmp_path, 6)
    plain_images, plain_labels = plain_batch(images, masks, 6, device)
    photometric = only(brightness_contrast=1.0, gaussian_noise=1.0, gaussian_blur=1.0)
    batch = run_epoch(dp.make_loader(images, masks, image_size=SIZE, batch_size=6, train=True,
                                     device=device, policy=photometric))[0]
    for image, label in zip(batch["image"], batch["label"]):
        matches = [i for i, m in enumerate(plain_labels) if np.array_equal(m, label)]
        assert len(matches) == 1, "each mask is one of the unaugmented masks, untouched"
        assert not np.array_equal(image, plain_images[matches[0]])


def test_disabled_ops_are_exact_identities(tmp_path, device):
    images, masks = write_pattern_set(tmp_path, 4)
    plain = list(zip(*plain_batch(images, masks, 4, device)))
    batch = run_epoch(dp.make_loader(images, masks, image_size=SIZE, batch_size=4, train=True,
                                     device=device, policy=only()))[0]
    found = [matching_sample(i, m, plain)
             for i, m in zip(batch["image"], batch["label"])]
    assert sorted(found) == [0, 1, 2, 3]


@needs_dali
def test_mismatched_file_lists_are_rejected(tmp_path):
    images, masks = write_identity_set(tmp_path, 3)
    with pytest.raises(ValueError, match="pair up"):
        dp.make_loader(images, masks[:2], image_size=SIZE, batch_size=2, train=False,
                       device="cpu")
