"""The whole input pipeline in NVIDIA DALI: read npy, resize, augment, hand batches to Lightning.

Notebook 04 teaches it; notebook 05 measures it. The graph (:func:`nail_pipeline`) reads
the ``.npy`` files of notebook 01 with two numpy readers that share one file order, moves
the arrays to the GPU, resizes them to ``image_size`` and applies :data:`policy.POLICY`
with DALI operators. :class:`DALILoader` turns it into the batch contract
(``{"image": B×3×H×W uint8, "label": B×1×H×W uint8}``) with a correct ``len()``, and
:class:`DALINailDataModule` gives Lightning its train and validation loaders.

Without a CUDA GPU the same graph runs on the CPU (``device_id=None``). Without DALI
(macOS, Windows) :func:`dali_available` is False and :func:`dali_status` says why.

Differences from the Albumentations/Kornia builders of the same policy:

* "with probability p" is a per-sample parameter that is the identity when the coin
  says no (identity matrix, noise stddev 0, blur sigma ~0, contrast 1), so every
  operator runs once per batch without splitting it;
* both flips and the affine are one matrix per sample and one ``warp_affine`` on the GPU;
* the affine scale is isotropic (one factor for both axes, as Kornia's) and contrast
  scales around 0 (``x * c + b``, as Albumentations and Kornia do).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, Sequence

import pytorch_lightning as pl

from .policy import POLICY, PolicyOp
from .profiles import Profile

try:
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    from nvidia.dali.plugin.pytorch import DALIGenericIterator
except ImportError as error:  # macOS, Windows, or a Linux environment without the wheel
    _IMPORT_ERROR: ImportError | None = error
else:
    _IMPORT_ERROR = None

READER_NAME = "images"  # the reader whose epoch the iterator follows
OUTPUT_MAP = ["image", "label"]
SHUFFLE_SEED = 1234  # the same on every rank: one global permutation per epoch, split in shards


def dali_available() -> bool:
    """True when ``nvidia.dali`` imports (Linux x86_64/aarch64 with the wheel installed)."""
    return _IMPORT_ERROR is None


def dali_status() -> str:
    """One line: the DALI version in use, or why it is missing and what to do."""
    if _IMPORT_ERROR is None:
        import nvidia.dali

        return f"NVIDIA DALI {nvidia.dali.__version__} is available."
    system = platform.system()
    where = (f"DALI has no wheels for {system}" if system in ("Darwin", "Windows")
             else "DALI is not installed in this environment")
    return (f"{where} ({_IMPORT_ERROR}). DALI ships Linux wheels only: run this notebook on "
            "Linux, WSL2 or Colab, or `pip install nvidia-dali-cuda120` on Linux.")


def require_dali() -> None:
    """Raise a RuntimeError with :func:`dali_status` when DALI is missing."""
    if _IMPORT_ERROR is not None:
        raise RuntimeError(dali_status()) from _IMPORT_ERROR


def resolve_device(device: str = "auto") -> str:
    """``"gpu"`` or ``"cpu"``; ``"auto"`` picks the GPU when PyTorch sees one."""
    if device == "auto":
        import torch

        return "gpu" if torch.cuda.is_available() else "cpu"
    if device not in ("gpu", "cpu"):
        raise ValueError(f"device must be 'auto', 'gpu' or 'cpu', not {device!r}")
    return device


def default_num_threads(device: str) -> int:
    """CPU threads for DALI: all cores when everything runs on the CPU, a few for the reader."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, cores) if device == "cpu" else max(1, min(4, cores))


def _pipeline_def(graph):
    """``pipeline_def`` when DALI is importable; else a stand-in that raises :func:`dali_status`."""
    if _IMPORT_ERROR is None:
        return pipeline_def(graph)

    def unavailable(*args, **kwargs):
        require_dali()

    return unavailable


# How each row of the policy table is built here (notebook 04 shows this table).
DALI_OPERATORS = {
    "horizontal_flip": "fn.transforms.scale(scale=[-1, 1]), part of the warp matrix",
    "vertical_flip": "fn.transforms.scale(scale=[1, -1]), part of the warp matrix",
    "affine": "fn.transforms.scale/rotation/translation, then fn.warp_affine "
              "(image bilinear, mask nearest, fill 0)",
    "brightness_contrast": "fn.brightness_contrast (contrast around 0)",
    "gaussian_noise": "fn.noise.gaussian (stddev x 255 on uint8)",
    "gaussian_blur": "fn.gaussian_blur (window 5)",
}


def dali_policy_table():
    """:func:`policy.policy_table` with the DALI operators that implement each row."""
    from .policy import policy_table

    table = policy_table()
    table["DALI"] = table["op"].map(DALI_OPERATORS)
    return table


def _coin(policy: Mapping[str, PolicyOp], name: str):
    """A per-sample 0/1 draw that is 1 with the probability of op ``name`` (0 if absent)."""
    op = policy.get(name)
    return fn.random.coin_flip(probability=op.probability if op else 0.0)


def _uniform(bounds, shape=None):
    low, high = (float(b) for b in bounds)
    return fn.random.uniform(range=[low, high], shape=shape)


def _geometry(image_size: int, policy: Mapping[str, PolicyOp]):
    """One 2×3 matrix per sample: the flips, then the affine, of the resized image.

    Every geometric op is a matrix, so DALI multiplies them on the CPU (tiny per-sample
    work) and the GPU warps each image and mask once. A flip maps pixel centres onto
    pixel centres, so a flip alone copies pixels exactly.
    """
    size = float(image_size)
    center = [size / 2.0, size / 2.0]
    flip_x = 1.0 - 2.0 * _coin(policy, "horizontal_flip")  # -1 mirrors about the center
    flip_y = 1.0 - 2.0 * _coin(policy, "vertical_flip")
    matrix = fn.transforms.scale(scale=fn.stack(flip_x, flip_y), center=center)
    op = policy.get("affine")
    if op:
        apply, p = _coin(policy, "affine"), op.params
        zoom = 1.0 + (_uniform(p["scale"]) - 1.0) * apply
        matrix = fn.transforms.scale(matrix, scale=fn.stack(zoom, zoom), center=center)
        angle = _uniform((-p["rotate_deg"], p["rotate_deg"])) * apply
        matrix = fn.transforms.rotation(matrix, angle=angle, center=center)
        offset = _uniform((-p["translate"], p["translate"]), shape=[2]) * (size * apply)
        matrix = fn.transforms.translation(matrix, offset=offset)
    return matrix


def _photometric(image, policy: Mapping[str, PolicyOp]):
    """Brightness/contrast, noise and blur on the image (never the mask)."""
    op = policy.get("brightness_contrast")
    if op:  # x * contrast + shift * 255, contrast around 0 as Albumentations and Kornia do
        apply, b, c = _coin(policy, op.op), op.params["brightness"], op.params["contrast"]
        image = fn.brightness_contrast(image, brightness_shift=_uniform((-b, b)) * apply,
                                       contrast=1.0 + _uniform((-c, c)) * apply,
                                       contrast_center=0.0)
    op = policy.get("gaussian_noise")
    if op:  # the policy's stddev is in [0, 1] units; on uint8 DALI works in 0..255
        image = fn.noise.gaussian(image, stddev=_uniform(op.params["std"])
                                  * (255.0 * _coin(policy, op.op)))
    op = policy.get("gaussian_blur")
    if op:  # sigma 1e-3 makes the 5-tap kernel exactly [0, 0, 1, 0, 0]: the identity
        apply = _coin(policy, op.op)
        sigma = _uniform(op.params["sigma"]) * apply + 1e-3 * (1 - apply)
        image = fn.gaussian_blur(image, window_size=op.params["kernel"], sigma=sigma)
    return image


@_pipeline_def
def nail_pipeline(image_files: Sequence[str], mask_files: Sequence[str], image_size: int,
                  augment: bool, on_gpu: bool, shard_id: int = 0, num_shards: int = 1,
                  policy: Mapping[str, PolicyOp] = POLICY, shuffle: bool | None = None):
    """The DALI graph: read image and mask npy, resize (and augment) on the GPU, CHW out.

    Two numpy readers with the same files, shard and shuffle settings read images and
    masks in the same order. Training (``shuffle=None`` follows ``augment``) reshuffles
    the whole set every epoch with a seed shared by all ranks (so the shards stay
    disjoint); validation keeps the file order.
    Both pad the last batch of a shard so that the iterator can cut it to real samples.
    Images are interpolated bilinearly, masks by nearest neighbour, as in notebook 02.
    """
    reader = {"shard_id": shard_id, "num_shards": num_shards, "pad_last_batch": True,
              "prefetch_queue_depth": 2}
    if shuffle is None:
        shuffle = augment
    if shuffle:
        reader.update(shuffle_after_epoch=True, shuffle_after_epoch_seed=SHUFFLE_SEED)
    image = fn.readers.numpy(files=list(image_files), name=READER_NAME, **reader)
    mask = fn.readers.numpy(files=list(mask_files), **reader)
    image = fn.reshape(image, layout="HWC")  # npy carries no layout; ops need one
    mask = fn.reshape(mask, layout="HWC")
    if on_gpu:  # CPU stage ends here: one host-to-device copy of the original uint8 arrays
        image, mask = image.gpu(), mask.gpu()
    image = fn.resize(image, size=[image_size, image_size], interp_type=types.INTERP_LINEAR,
                      antialias=False)
    mask = fn.resize(mask, size=[image_size, image_size], interp_type=types.INTERP_NN,
                     antialias=False)
    if augment:
        warp = {"matrix": _geometry(image_size, policy), "inverse_map": False, "fill_value": 0}
        image = fn.warp_affine(image, interp_type=types.INTERP_LINEAR, **warp)
        mask = fn.warp_affine(mask, interp_type=types.INTERP_NN, **warp)
        image = _photometric(image, policy)
    return fn.transpose(image, perm=[2, 0, 1]), fn.transpose(mask, perm=[2, 0, 1])


def build_pipeline(image_files: Sequence[str], mask_files: Sequence[str], *, image_size: int,
                   batch_size: int, augment: bool, device: str = "auto",
                   device_id: int | None = None, shard_id: int = 0, num_shards: int = 1,
                   num_threads: int | None = None, seed: int = 42, prefetch_queue_depth: int = 2,
                   policy: Mapping[str, PolicyOp] = POLICY, shuffle: bool | None = None):
    """A built :func:`nail_pipeline` on ``device`` ("auto", "gpu" or "cpu").

    On the GPU ``device_id`` defaults to 0; on the CPU the pipeline gets ``device_id=None``.
    ``seed`` drives the augmentations: give every rank its own (``seed + rank``).
    """
    require_dali()
    if len(image_files) != len(mask_files):
        raise ValueError(f"{len(image_files)} image files but {len(mask_files)} mask files: "
                         "images and masks must pair up one to one.")
    if not image_files:
        raise ValueError("No npy files to read: run preparation.ensure_prepared first.")
    if not 0 <= shard_id < num_shards:
        raise ValueError(f"shard_id {shard_id} is outside 0..{num_shards - 1}")
    device = resolve_device(device)
    pipe = nail_pipeline(
        list(map(str, image_files)), list(map(str, mask_files)), image_size, augment,
        device == "gpu", shard_id, num_shards, policy, shuffle,
        batch_size=batch_size, num_threads=num_threads or default_num_threads(device),
        device_id=(device_id or 0) if device == "gpu" else None, seed=seed,
        prefetch_queue_depth=prefetch_queue_depth)
    pipe.build()
    return pipe


class DALILoader:
    """Batches ``{"image", "label"}`` from a DALI pipeline, with ``len()`` = batches per epoch.

    ``drop_last=False`` (validation) uses ``LastBatchPolicy.PARTIAL``: the padded last
    batch is cut to the real samples, so every sample of the shard comes exactly once.
    ``drop_last=True`` (training) uses ``DROP``: every step sees a full batch (steady
    shapes, BatchNorm statistics of ``batch_size`` samples) and, as the set is reshuffled
    each epoch, a different remainder is left out each time. ``FILL`` would instead repeat
    samples inside an epoch.

    An epoch Lightning stops early (``limit_*_batches``, sanity check) is finished before
    the next one when ``finish_partial_epochs`` is True (validation: always the same
    samples); otherwise the next pass continues where the last one stopped (training).
    """

    def __init__(self, pipeline, *, drop_last: bool, finish_partial_epochs: bool):
        require_dali()
        policy = LastBatchPolicy.DROP if drop_last else LastBatchPolicy.PARTIAL
        self._iterator = DALIGenericIterator([pipeline], OUTPUT_MAP, reader_name=READER_NAME,
                                             last_batch_policy=policy, auto_reset=True)
        self._finish_partial_epochs = finish_partial_epochs
        self._served = 0  # batches handed out in the current epoch
        self.batch_size = pipeline.max_batch_size

    def __len__(self) -> int:
        return len(self._iterator)

    def __iter__(self) -> DALILoader:
        if self._served and (self._finish_partial_epochs or self._served >= len(self)):
            try:  # DALI cannot reset mid-epoch: run the epoch to its end instead
                while True:
                    next(self._iterator)
            except StopIteration:
                self._served = 0  # auto_reset has rewound the reader
        return self

    def __next__(self) -> dict:
        try:
            outputs = next(self._iterator)  # one pipeline: a list with one dict
        except StopIteration:
            self._served = 0
            raise
        self._served += 1
        return outputs[0]


def split_files(location, split: str) -> tuple[list[str], list[str]]:
    """Absolute image and mask npy paths of ``split`` ("train" or "valid"), in CSV order."""
    from .preparation import read_split

    frame = read_split(location, split)
    return frame["npy_image"].tolist(), frame["npy_mask"].tolist()


def gallery_panels(image_files: Sequence[str], mask_files: Sequence[str], image_size: int,
                   draws: int = 3, device: str = "auto", seed: int = 0) -> dict:
    """The images resized, then ``draws`` passes of the training graph over the same images.

    Returns ``{name: (N×S×S×3 float images in [0, 1], N×S×S masks)}`` for
    ``plots.plot_augmentation_gallery`` (the format notebooks 02 and 03 use).
    """
    def panel(batch: dict) -> tuple:
        image = batch["image"].permute(0, 2, 3, 1).float().div(255).cpu().numpy()
        return image, batch["label"][:, 0].cpu().numpy()

    options = {"image_size": image_size, "batch_size": len(image_files), "device": device,
               "seed": seed, "shuffle": False}
    plain = build_pipeline(image_files, mask_files, augment=False, **options)
    panels = {"resized": panel(next(iter(DALILoader(plain, drop_last=False,
                                                    finish_partial_epochs=True))))}
    augmented = DALILoader(build_pipeline(image_files, mask_files, augment=True, **options),
                           drop_last=False, finish_partial_epochs=True)
    for draw in range(1, draws + 1):
        panels[f"augmented #{draw}"] = panel(next(iter(augmented)))
    return panels


def make_loader(image_files: Sequence[str], mask_files: Sequence[str], *, image_size: int,
                batch_size: int, train: bool, **pipeline_options) -> DALILoader:
    """A :class:`DALILoader` for training (augmented, shuffled, DROP) or validation."""
    pipe = build_pipeline(image_files, mask_files, image_size=image_size, batch_size=batch_size,
                          augment=train, **pipeline_options)
    return DALILoader(pipe, drop_last=train, finish_partial_epochs=not train)


class DALINailDataModule(pl.LightningDataModule):
    """Train and validation :class:`DALILoader` s for Lightning.

    Under a multi-device strategy each rank reads shard ``global_rank`` of ``world_size``
    on its own GPU and augments with its own seed; on a GPU the batches are CUDA tensors
    already, so Lightning's transfer to the device is a no-op.
    """

    def __init__(self, location, profile: Profile, device: str = "auto", seed: int = 42,
                 num_threads: int | None = None):
        super().__init__()
        require_dali()
        self.location, self.profile, self.seed = location, profile, seed
        self.device = resolve_device(device)
        self.num_threads = num_threads
        self._loaders: dict[str, DALILoader] = {}

    def _rank(self) -> tuple[int, int, int | None]:
        """(shard_id, num_shards, CUDA device index) from the trainer, if one is attached."""
        trainer = self.trainer
        if trainer is None:
            return 0, 1, None
        root = trainer.strategy.root_device
        return trainer.global_rank, trainer.world_size, root.index if root.type == "cuda" else None

    def _loader(self, split: str) -> DALILoader:
        if split not in self._loaders:
            shard_id, num_shards, device_id = self._rank()
            images, masks = split_files(self.location, split)
            loader = make_loader(
                images, masks, image_size=self.profile.image_size,
                batch_size=self.profile.batch_size, train=split == "train", device=self.device,
                device_id=device_id, shard_id=shard_id, num_shards=num_shards,
                num_threads=self.num_threads, seed=self.seed + shard_id)
            if len(loader) == 0:
                raise ValueError(
                    f"The {split} split ({len(images)} samples, {num_shards} shard(s)) has fewer "
                    f"samples per shard than batch_size={self.profile.batch_size}: lower the "
                    "batch size or prepare more images.")
            self._loaders[split] = loader
        return self._loaders[split]

    def train_dataloader(self) -> DALILoader:
        return self._loader("train")

    def val_dataloader(self) -> DALILoader:
        return self._loader("valid")

    def teardown(self, stage: str) -> None:
        self._loaders.clear()

