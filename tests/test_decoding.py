"""Photos decoded every epoch: every pipeline agrees with the reference decode (Pillow, EXIF
applied, resized as notebook 02 resizes: the decode-once cache) on small phone-like JPEGs:
RGB, grayscale and CMYK, baseline and progressive, stored turned with an EXIF orientation;
labels stay paired with their photos; a file no decoder can read is named.

One prepared layout (``Images/1/*.jpg`` and one PNG photo, ``Masks/1/*.png``) serves every
test; each pipeline decodes both splits in CSV order: validation through its DataModule's
validation loader, training through the same dataset (or DALI graph) without shuffling or
augmentation, so that every kind of photo is decoded by every pipeline whatever the split.
"""

import dataclasses
import functools
import io
import json
import warnings

import cv2
import numpy as np
import pytest
import torch
from PIL import Image, ImageOps
from torch.utils.data import DataLoader

from nailseg_common.core.errors import DataError
from nailseg_common.data.decoded import load_cache, resized_pair
from nailseg_common.data.images import read_header, read_rgb
from nailseg_common.data.preparation import SPLITS, prepare_dataset, read_label, read_split
from nailseg_common.data.scenes import LOOKS
from nailseg_common.data.synthetic import generate_synthetic_dataset, jpeg_kind
from nailseg_common.measure.timing import to_device
from nailseg_common.pipelines.albumentations_pipeline import NailDataModule
from nailseg_common.pipelines.kornia_pipeline import (
    DeviceDecodedNailDataModule,
    EncodedBatch,
    EncodedPhotos,
    upright,
)
from nailseg_common.setup import dali
from nailseg_common.setup.paths import DataLocation
from nailseg_common.setup.profiles import select_profile

SIZE = 32
PROFILE = dataclasses.replace(select_profile("smoke"), image_size=SIZE, batch_size=4, num_workers=0)
HEIGHT, WIDTH = 60, 80  # every photo as it is shown (upright), landscape
TOLERANCE = 2.0  # mean absolute difference in levels: one JPEG decoder against another
ORIENTATION = 0x0112
STORED_TURN = {3: Image.Transpose.ROTATE_180, 6: Image.Transpose.ROTATE_90,  # the inverse of
               8: Image.Transpose.ROTATE_270}  # what a viewer does for the tag (exif_transpose)

# name: (format, mode, progressive, EXIF orientation)
PHOTOS = {
    "p00": ("JPEG", "RGB", False, 1),
    "p01": ("JPEG", "RGB", True, 1),
    "p02": ("JPEG", "L", False, 1),
    "p03": ("JPEG", "L", True, 6),
    "p04": ("JPEG", "CMYK", False, 1),
    "p05": ("JPEG", "CMYK", True, 8),
    "p06": ("JPEG", "RGB", False, 6),
    "p07": ("JPEG", "RGB", True, 8),
    "p08": ("JPEG", "RGB", False, 3),
    "p09": ("PNG", "RGB", False, 1),
    "p10": ("JPEG", "RGB", True, 3),
    "p11": ("JPEG", "CMYK", False, 6),
}
PIPELINES = ["albumentations", "kornia",
             pytest.param("dali", marks=pytest.mark.skipif(not dali.dali_available(),
                                                          reason=dali.dali_status()))]


def displayed(index: int) -> tuple[np.ndarray, np.ndarray]:
    """Photo ``index`` as shown, ``HxWx3``: two flat background halves with a little noise and
    a bright L-shaped block (no turn or flip maps it onto itself), placed per photo; its mask
    (0/255) is exactly the block."""
    rng = np.random.default_rng(index)
    photo = np.empty((HEIGHT, WIDTH, 3), np.uint8)
    photo[:, :WIDTH // 2] = (40, 90, 140)
    photo[:, WIDTH // 2:] = (110, 60, 30)
    photo += rng.integers(0, 12, photo.shape, dtype=np.uint8)
    mask = np.zeros((HEIGHT, WIDTH), np.uint8)
    top, left = 4 + 3 * (index % 4), 6 + 5 * index
    mask[top:top + 28, left:left + 8] = 255  # the bar
    mask[top + 20:top + 28, left:left + 22] = 255  # its foot, to the right
    photo[mask > 0] = (235, 230, 220)
    return photo, mask


def stored(photo: np.ndarray, mode: str, orientation: int) -> tuple[Image.Image, Image.Exif]:
    """``photo`` as a phone or an editor stores it: in ``mode``, turned back so that a viewer
    following the EXIF ``orientation`` shows it upright."""
    image, exif = Image.fromarray(photo), Image.Exif()
    if orientation != 1:
        image = image.transpose(STORED_TURN[orientation])
        exif[ORIENTATION] = orientation
    return image.convert(mode), exif


def write_layout(raw, photos=PHOTOS):
    """``Images/1/<name>.jpg`` (or ``.png``) and ``Masks/1/<name>.png``, the mask upright."""
    (raw / "Images" / "1").mkdir(parents=True)
    (raw / "Masks" / "1").mkdir(parents=True)
    for index, (name, (fmt, mode, progressive, orientation)) in enumerate(photos.items()):
        photo, mask = displayed(index)
        image, exif = stored(photo, mode, orientation)
        suffix = ".jpg" if fmt == "JPEG" else ".png"
        options = {"quality": 95, "progressive": progressive} if fmt == "JPEG" else {}
        image.save(raw / "Images" / "1" / f"{name}{suffix}", exif=exif, **options)
        Image.fromarray(mask).save(raw / "Masks" / "1" / f"{name}.png")
    return raw


def name_of(path: str) -> str:
    return path.rsplit("/", 1)[-1].rsplit(".", 1)[0]


@pytest.fixture(scope="module")
def location(tmp_path_factory):
    root = tmp_path_factory.mktemp("decoding")
    raw = write_layout(root / "raw")
    # Turned half-way round, a photo keeps its size: whether its mask was drawn turned is
    # doubtful, and said; turned a quarter, the mask's size says it was.
    with pytest.warns(UserWarning, match=r"EXIF orientation of 2 pair\(s\) differs") as caught:
        prepare_dataset(raw, root / "prepared", progress=False)
    assert all("p08" in str(w.message) and "p10" in str(w.message) for w in caught
               if "EXIF orientation" in str(w.message))
    return DataLocation(raw=raw, prepared=root / "prepared", synthetic=False)


@pytest.fixture(scope="module")
def reference(location):
    """Per split: the cache's images and labels (read_rgb, EXIF applied, resized as notebook
    02 resizes) and the photo names, in CSV order."""
    found = {}
    for split in SPLITS:
        images, labels = load_cache(location, SIZE, split)
        found[split] = images, labels, [name_of(p) for p in read_split(location, split)["image"]]
    assert sorted(n for split in SPLITS for n in found[split][2]) == sorted(PHOTOS)
    every = torch.cat([found[split][1] for split in SPLITS]).flatten(1)
    assert len({tuple(label.tolist()) for label in every}) == len(PHOTOS)  # distinct masks
    return found


def _cat(batches: list[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    for batch in batches:
        assert batch["image"].dtype == batch["label"].dtype == torch.uint8
        assert batch["image"].shape[1:] == (3, SIZE, SIZE) and batch["label"].shape[1:] == (1, SIZE, SIZE)
    return (torch.cat([b["image"].clone() for b in batches]),
            torch.cat([b["label"].clone() for b in batches]))


def albumentations_split(location, split):
    module = NailDataModule(location, PROFILE, augment=False)
    module.setup("fit")
    if split == "valid":
        return _cat(list(module.val_dataloader()))
    return _cat(list(DataLoader(module.train_set, batch_size=PROFILE.batch_size)))  # unshuffled


def kornia_split(location, split):
    module = DeviceDecodedNailDataModule(location, PROFILE)
    module.setup("fit")
    if split == "valid":
        loader = module.val_dataloader()
    else:
        loader = DataLoader(module.photos["train"], batch_size=PROFILE.batch_size,
                            collate_fn=functools.partial(EncodedBatch, image_size=SIZE))
    batches = list(loader)
    assert all(isinstance(batch, EncodedBatch) for batch in batches)  # decoded on the way
    return _cat([batch.to("cpu") for batch in batches])



@pytest.mark.parametrize("accelerator", ["cpu", "gpu"])
def test_the_photo_loaders_decode_ahead_exactly_when_training_on_a_gpu(location, accelerator):
    """pin_memory=True starts the thread that calls EncodedBatch.pin_memory (decoding ahead);
    without a GPU it would only warn."""
    module = DeviceDecodedNailDataModule(location, dataclasses.replace(PROFILE, accelerator=accelerator))
    module.setup("fit")
    assert module.train_dataloader().pin_memory is module.val_dataloader().pin_memory is (accelerator == "gpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="decoding ahead runs on a GPU")
def test_batches_decoded_ahead_by_the_pin_memory_thread_match_batches_decoded_on_transfer(location):
    module = DeviceDecodedNailDataModule(location, dataclasses.replace(PROFILE, accelerator="gpu"),
                                         num_workers=2)
    module.setup("fit")
    ahead = [batch.to("cuda") for batch in module.val_dataloader()]
    now = [EncodedBatch(batch.items, SIZE).to("cuda") for batch in
           DataLoader(module.photos["valid"], batch_size=PROFILE.batch_size,
                      collate_fn=functools.partial(EncodedBatch, image_size=SIZE))]
    assert len(ahead) == len(now) > 0
    for a, b in zip(ahead, now):
        assert torch.equal(a["image"], b["image"]) and torch.equal(a["label"], b["label"])

def dali_split(location, split):
    from nailseg_common.pipelines import dali_pipeline as dp

    if split == "valid":
        module = dp.DALINailDataModule(location, PROFILE)
        assert module.device == "cpu"
        return _cat(list(module.val_dataloader()))
    images, labels = dp.split_files(location, "train")
    loader = dp.make_loader(images, labels, image_size=SIZE, batch_size=PROFILE.batch_size,
                            train=False, device="cpu")  # the module's graph, unaugmented
    return _cat(list(loader))


SPLIT_OF = {"albumentations": albumentations_split, "kornia": kornia_split, "dali": dali_split}


@pytest.fixture(scope="module")
def decoded(location):
    """What each pipeline gives per split, decoded once for every test."""
    cached = {}

    def get(pipeline, split):
        if (pipeline, split) not in cached:
            cached[pipeline, split] = SPLIT_OF[pipeline](location, split)
        return cached[pipeline, split]
    return get


def _mean_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).abs().mean())


def _block_overlap(image: torch.Tensor, label: torch.Tensor) -> float:
    """Intersection over union of the bright pixels (the block) and the label's."""
    bright, nail = image.float().mean(0) > 170, label[0].bool()
    return float((bright & nail).sum() / (bright | nail).sum().clamp(min=1))


# --- every pipeline decodes as the reference does, labels paired -----------------------------

@pytest.mark.parametrize("pipeline", PIPELINES)
def test_decoded_pixels_agree_with_the_reference_decode(decoded, reference, pipeline):
    for split in SPLITS:
        images, _ = decoded(pipeline, split)
        expected, _, names = reference[split]
        assert images.shape == expected.shape
        for image, truth, name in zip(images, expected, names):
            difference = _mean_difference(image, truth)
            assert difference <= TOLERANCE, f"{pipeline} decodes {name} {difference:.2f} levels off"


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_labels_stay_paired_with_their_photos(decoded, reference, pipeline):
    for split in SPLITS:
        images, labels = decoded(pipeline, split)
        _, expected, names = reference[split]
        assert torch.equal(labels, expected), f"{pipeline}: the {split} labels, in CSV order"
        for image, label, name in zip(images, labels, names):  # and on their own photo
            assert _block_overlap(image, label) > 0.8, f"{pipeline}: {name}"


def test_the_reference_is_the_photo_read_upright_and_resized(location, reference):
    frame = read_split(location, "valid")
    images, labels, _ = reference["valid"]
    for index, (photo, label) in enumerate(zip(frame["image"], frame["label"])):
        image, mask = resized_pair(photo, label, SIZE)
        assert np.array_equal(images[index].numpy(), image)
        assert np.array_equal(labels[index, 0].numpy(), mask)


# --- a phone photo stored on its side comes out upright ---------------------------------------

@pytest.mark.parametrize("orientation", [6, 8, 3])
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_a_turned_phone_photo_lands_upright(location, decoded, reference, pipeline, orientation):
    turned = [name for name, (_, _, _, o) in PHOTOS.items() if o == orientation]
    checked = 0
    for split in SPLITS:
        images, labels = decoded(pipeline, split)
        frame = read_split(location, split)
        for image, label, path in zip(images, labels, frame["image"]):
            if name_of(path) not in turned:
                continue
            index = list(PHOTOS).index(name_of(path))
            drawn, mask = displayed(index)  # as drawn, before any file, in the stored mode
            truth = np.asarray(Image.fromarray(drawn).convert(PHOTOS[name_of(path)][1]).convert("RGB"))
            as_stored = cv2.resize(np.asarray(Image.open(path).convert("RGB")), (SIZE, SIZE))
            unturned = torch.from_numpy(as_stored.transpose(2, 0, 1))
            assert _block_overlap(unturned, label) < 0.3  # ignoring the tag would show
            assert _block_overlap(image, label) > 0.8  # the block where the mask says
            upright_truth = cv2.resize(truth, (SIZE, SIZE), interpolation=cv2.INTER_LINEAR)
            assert _mean_difference(image, torch.from_numpy(upright_truth.transpose(2, 0, 1))) < 6
            assert np.array_equal(label[0].numpy(), cv2.resize(
                mask // 255, (SIZE, SIZE), interpolation=cv2.INTER_NEAREST_EXACT))
            checked += 1
    assert checked == len(turned) >= 2


@pytest.mark.parametrize("orientation", range(1, 9))
def test_upright_turns_as_pillow_does_for_every_orientation(orientation):
    pixels = np.random.default_rng(orientation).integers(0, 256, (4, 7, 3), dtype=np.uint8)
    exif = Image.Exif()
    exif[ORIENTATION] = orientation
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG", exif=exif)  # lossless
    buffer.seek(0)
    expected = np.asarray(ImageOps.exif_transpose(Image.open(buffer)))
    turned = upright(torch.from_numpy(pixels).permute(2, 0, 1), orientation).permute(1, 2, 0)
    assert turned.shape == expected.shape
    assert np.array_equal(turned.numpy(), expected)


# --- grayscale, CMYK, progressive: what each reader is given ---------------------------------

def test_photos_go_to_the_decoder_that_reads_them(location):
    seen = set()
    for split in SPLITS:
        for item in EncodedPhotos(read_split(location, split), SIZE):
            name = name_of(item["file"])
            fmt, mode, progressive, orientation = PHOTOS[name]
            header = read_header(item["file"])
            assert header == (fmt, mode, orientation, progressive)
            # arrays, not tensors: a worker hands each tensor over as a file descriptor
            assert isinstance(item["label"], np.ndarray)  # resized in the worker
            assert item["label"].dtype == np.uint8 and item["label"].shape == (SIZE, SIZE)
            if fmt == "JPEG" and mode in ("RGB", "L") and not progressive:  # nvJPEG's batch
                assert "data" in item and "pixels" not in item, name
                assert isinstance(item["data"], np.ndarray) and item["data"].dtype == np.uint8
                assert item["orientation"] == orientation
            else:  # progressive and CMYK JPEGs, PNGs: decoded in the worker, upright
                assert "pixels" in item and "data" not in item, name
                assert item["pixels"].shape == (3, SIZE, SIZE) and item["pixels"].dtype == np.uint8
            seen.add((fmt, mode, progressive, "data" in item))
    assert seen >= {("JPEG", "RGB", False, True), ("JPEG", "RGB", True, False),
                    ("JPEG", "L", False, True), ("JPEG", "L", True, False),
                    ("JPEG", "CMYK", False, False), ("PNG", "RGB", False, False)}


@pytest.mark.parametrize("kind", ["L", "CMYK", "progressive"])
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_grayscale_cmyk_and_progressive_jpegs_decode(decoded, reference, pipeline, kind):
    wanted = {name for name, (fmt, mode, progressive, _) in PHOTOS.items()
              if fmt == "JPEG" and (progressive if kind == "progressive" else mode == kind)}
    checked = 0
    for split in SPLITS:
        images, labels = decoded(pipeline, split)
        expected, _, names = reference[split]
        for image, label, truth, name in zip(images, labels, expected, names):
            if name in wanted:
                assert _mean_difference(image, truth) <= TOLERANCE, name
                assert _block_overlap(image, label) > 0.8, name
                if kind == "L":  # gray stays gray, in three channels
                    assert (image.float().std(0).mean()) < 2, name
                checked += 1
    assert checked == len(wanted) >= 2


# --- moving a batch decodes it: Lightning's way and the benchmark's ----------------------------

def test_an_encoded_batch_decodes_when_lightning_or_the_benchmark_moves_it(location, reference):
    from lightning_fabric.utilities.apply_func import move_data_to_device

    module = DeviceDecodedNailDataModule(location, PROFILE)
    module.setup("fit")
    batch = next(iter(module.val_dataloader()))
    count = len(batch)
    expected_labels = reference["valid"][1][:count]
    for moved in (move_data_to_device(batch, torch.device("cpu")),
                  to_device(batch, torch.device("cpu"))):
        assert set(moved) == {"image", "label"}
        assert moved["image"].shape == (count, 3, SIZE, SIZE)
        assert torch.equal(moved["label"], expected_labels)


# --- a file nothing can read is named ---------------------------------------------------------

@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_an_unreadable_jpeg_is_named_by_preparation(tmp_path, damage):
    raw = write_layout(tmp_path / "raw", {name: PHOTOS[name] for name in ("p00", "p01", "p02")})
    bad = raw / "Images" / "1" / "p01.jpg"
    data = bad.read_bytes()
    bad.write_bytes(data[:len(data) // 2] if damage == "truncated" else b"not a photo" * 40)
    with pytest.raises(DataError, match="p01.jpg") as error:
        prepare_dataset(raw, tmp_path / "prepared", progress=False)
    assert str(bad) in str(error.value)
    assert not (tmp_path / "prepared").exists()


def test_a_photo_the_decoder_refuses_is_named(location):
    frame = read_split(location, "valid")
    items = [item for item in EncodedPhotos(frame, SIZE) if "data" in item]
    good = items[0]
    broken = {**good, "file": "/photos/Images/1/broken.jpg",
              "data": np.frombuffer(b"garbage, not a JPEG" * 8, dtype=np.uint8)}
    assert EncodedBatch([good], SIZE).to("cpu")["image"].shape == (1, 3, SIZE, SIZE)
    for batch in ([broken], [good, broken]):  # alone, or behind a good photo
        with pytest.raises(DataError, match="broken.jpg") as error:
            EncodedBatch(batch, SIZE).to("cpu")
        assert good["file"] not in str(error.value)
    truncated = {**good, "file": "/photos/Images/1/cut.jpg", "data": good["data"][:200].copy()}
    with pytest.raises(DataError, match="cut.jpg"):
        EncodedBatch([truncated, good], SIZE).to("cpu")


# --- the synthetic set is stored as phones store photos -----------------------------------------

def test_the_synthetic_set_writes_jpegs_of_each_kind_at_the_photo_side(tmp_path):
    assert LOOKS["course"].low_res == 0  # no small photos: every long side is photo_side
    root = generate_synthetic_dataset(tmp_path / "set", 24, photo_side=128, progress=False)
    assert json.loads((root / "manifest.json").read_text())["photo_side"] == 128
    photos = sorted((root / "Images").rglob("*"))
    photos = [p for p in photos if p.is_file()]
    masks = [p for p in (root / "Masks").rglob("*") if p.is_file()]
    assert len(photos) == len(masks) == 24
    assert all(p.suffix == ".jpg" for p in photos) and all(m.suffix == ".png" for m in masks)
    kinds = set()
    for path in photos:
        index, kind = int(path.stem), jpeg_kind(int(path.stem))
        mask = Image.open(root / "Masks" / path.parent.name / f"{path.stem}.png")
        with Image.open(path) as image:
            assert image.format == "JPEG" and image.mode == kind.mode, path
            assert bool(image.info.get("progressive")) == kind.progressive, path
            orientation = image.getexif().get(ORIENTATION, 1)
            assert orientation == (6 if kind.on_its_side else 1), path
            assert image.size == (mask.size[::-1] if kind.on_its_side else mask.size), path
            shown = ImageOps.exif_transpose(image)
            assert shown.size == mask.size and max(shown.size) == 128, path
        assert read_rgb(path).shape[:2] == (mask.size[1], mask.size[0])
        assert set(np.unique(np.asarray(mask))) == {0, 255}
        kinds.add((kind.mode, kind.progressive, kind.on_its_side))
        if index in (7, 13):  # the grayscale one and the CMYK one, both on their side
            assert kind.mode == {7: "L", 13: "CMYK"}[index] and kind.on_its_side
    assert {mode for mode, _, _ in kinds} == {"RGB", "L", "CMYK"}
    assert {(p, s) for _, p, s in kinds} >= {(True, False), (False, True), (False, False)}


def test_synthetic_photos_on_their_side_line_up_with_their_masks_once_prepared(tmp_path):
    """The block test on real scenes: the stored photo turned upright covers its mask's nail
    with the same content as the scene drawn (the drawn photo, before JPEG)."""
    from nailseg_common.data.scenes import synthetic_sample

    root = generate_synthetic_dataset(tmp_path / "set", 8, photo_side=128, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # masks upright at the displayed size: nothing doubtful
        prepare_dataset(root, tmp_path / "prepared", progress=False)
    location = DataLocation(raw=root, prepared=tmp_path / "prepared", synthetic=True)
    for split in SPLITS:
        frame = read_split(location, split)
        for photo, label in zip(frame["image"], frame["label"]):
            index = int(name_of(photo))
            _, drawn, mask = synthetic_sample(0, index, long_side=128)
            assert np.array_equal(read_label(label), mask)
            mode = jpeg_kind(index).mode  # what was stored of the drawn photo, shown as RGB
            truth = np.asarray(Image.fromarray(drawn).convert(mode).convert("RGB"), float)
            assert np.abs(read_rgb(photo) - truth).mean() < 8, photo  # JPEG, quality 90


@pytest.mark.skipif(not dali.dali_available(), reason=dali.dali_status())
def test_dali_refuses_photos_deeper_than_8_bits_by_name(tmp_path):
    from nailseg_common.pipelines.dali_pipeline import split_files

    raw = tmp_path / "raw"
    for folder in ("Images/1", "Masks/1"):
        (raw / folder).mkdir(parents=True)
    rng = np.random.default_rng(0)
    for index in range(4):
        mask = np.zeros((60, 80), np.uint8)
        mask[10:30, 10 + 5 * index:30 + 5 * index] = 255
        Image.fromarray(mask).save(raw / "Masks/1" / f"p{index}.png")
        photo = rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)
        Image.fromarray(photo).save(raw / "Images/1" / f"p{index}.png")
    deep = np.where(rng.random((60, 80)) < 0.5, 800, 3840).astype(np.uint16)  # 12-bit data
    Image.fromarray(deep).save(raw / "Images/1" / "p3.png")
    prepare_dataset(raw, tmp_path / "prepared", progress=False)
    location = DataLocation(raw=raw, prepared=tmp_path / "prepared", synthetic=False)
    assert read_rgb(raw / "Images/1" / "p3.png").max() > 200  # read by the bits it uses
    with pytest.raises(DataError, match="p3.png") as error:
        for split in SPLITS:
            split_files(location, split)
    assert "8 bits" in str(error.value)
