"""Run profiles shared by every notebook: ``smoke`` (CI), ``cpu`` (a laptop), ``gpu`` (full size).

A notebook's ``parameters`` cell names a profile (or leaves it empty) and may override
single fields; :func:`select_profile` fills the rest from ``NAILSEG_PROFILE`` and the
hardware, so papermill, nbmake and a student clicking "Run all" all get a sensible run.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass

import torch

from nailseg_common.core.errors import DataError


@dataclass(frozen=True)
class Profile:
    """Every size knob of a course run."""

    name: str
    accelerator: str  # "cpu" or "gpu" (Lightning's names)
    num_images: int  # synthetic images generated when no real dataset is given
    photo_side: int  # the long side of those photos (JPEG, as a phone writes them), pixels
    image_size: int  # square side the models see
    batch_size: int
    max_steps: int  # optimizer steps: the training length, whatever the dataset's size
    encoder: str  # smp encoder name; ImageNet weights ship for tu-efficientnet_lite0
    num_workers: int  # CPU DataLoader workers
    precision: str  # Lightning precision string
    lr: float
    max_train_batches: int | None = None  # cap per epoch (None: the whole set)
    max_valid_batches: int | None = None
    bench_repeats: int = 3
    bench_steps: int = 20
    fine_tune_steps: int = 240  # optimizer steps of each fine-tuning run of notebook 06
    fine_tune_image_size: int = 64  # the side notebook 06 fine-tunes at
    fine_tune_lr: float = 1e-3  # its peak learning rate (the weights start trained)
    curve_folds: int = 1  # folds of notebook 06's learning curve (the first ones)
    fine_tune_keep_statistics: bool = True  # a trained start keeps its BatchNorm statistics
    # nailseg-fine-tune's recipe of the model you keep: no sitting to fit, so as long as a
    # laptop allows (notebook 06's recipe is the same where the two agree)
    keep_steps: int = 240  # optimizer steps of each run
    keep_image_size: int = 64  # the side it fine-tunes at (predict then runs the model there)
    keep_lr: float = 1e-3  # its peak learning rate
    keep_folds: int = 5  # folds of the cross-validation that decides whether it beat the start
    # notebook 07's faster recipe (08 trains it on several devices)
    compile_model: bool = False  # torch.compile the U-Net (worth it on a GPU only)
    fast_batch_size: int = 8  # the faster step's batch
    fast_lr: float = 1e-3  # its peak learning rate
    warmup_steps: int = 0  # linear warm-up steps before the cosine decay
    fast_max_steps: int = 2  # the schedule of notebook 07's timed run
    fast_half_resolution_head: bool = True  # its U-Net predicts at half resolution, then upsamples
    fast_ema_decay: float = 0.98  # its validations score an average of the weights (decay a step; 0: off)
    fast_flip_average: bool = True  # its validations average each image's logits with its mirror image's
    val_every_n_epochs: int = 1  # validate (and checkpoint) every n epochs, in every training
    # notebook 08: the same recipe as a script on several devices
    ddp_devices: int = 2  # processes of the multi-device runs: GPUs, else gloo CPU processes
    ddp_batch_size: int = 8  # per device
    ddp_max_steps: int = 8  # steps of the one-device run (the N-device run scales them)
    ddp_profile_epoch: int = 1  # the epoch whose steps are profiled
    ddp_seeds: int = 1  # seeds of the one- and N-device runs (the first seed's are profiled)

    @property
    def device(self) -> torch.device:
        """The one device this run uses, decided by ``accelerator`` (checked by :func:`select_profile`)."""
        return torch.device("cuda" if self.accelerator == "gpu" else "cpu")


SETTABLE_FIELDS = tuple(f.name for f in dataclasses.fields(Profile) if f.name != "name")
"""The fields a notebook's parameters or a command's options may set."""

PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke", accelerator="cpu", num_images=48, photo_side=256, image_size=64, batch_size=8,
        max_steps=2, encoder="tu-efficientnet_lite0", num_workers=0, precision="32-true", lr=1e-3,
        max_train_batches=2, max_valid_batches=1, bench_repeats=3, bench_steps=2,
        fine_tune_steps=2, fine_tune_image_size=64, fine_tune_lr=1e-3, curve_folds=1,
        fine_tune_keep_statistics=True, keep_steps=2, keep_image_size=64, keep_lr=1e-3,
        keep_folds=5, compile_model=False, fast_batch_size=8, fast_lr=1e-3,
        warmup_steps=0, fast_max_steps=2,
        val_every_n_epochs=1, ddp_devices=2, ddp_batch_size=8, ddp_max_steps=15,
        ddp_profile_epoch=1,
    ),
    "cpu": Profile(
        # 192 px, 240 steps at lr 2e-3: on the JPEG photos, on 2 AMD EPYC cores, notebook 02
        # ended at hard Dice 0.775 after 160 steps and 0.806 after 240 (115 s and 146 s of
        # papermill time), 03 at 0.808 after 240 (lab/laptop_steps_jpeg); 3 steps a timing
        # window and 07's 20 steps keep the lessons' notebooks short too (08 keeps 40: fewer
        # leave its one-device run without a validation)
        name="cpu", accelerator="cpu", num_images=400, photo_side=512, image_size=192, batch_size=8,
        max_steps=240, encoder="tu-efficientnet_lite0", num_workers=2, precision="32-true",
        lr=2e-3, bench_repeats=3, bench_steps=3, fine_tune_steps=20, fine_tune_image_size=128,
        fine_tune_lr=3e-4, curve_folds=1, fine_tune_keep_statistics=True,
        # the model to keep: 160 steps at 192 px, lr 1e-3, 3 folds (4 runs) fit 10 minutes for
        # 192 real photos on 2 cores; 5 folds scored them 0.936 ± 0.006 through predict's path
        # in 13.7 min, against 0.867 with notebook 06's recipe (lab/finetune_as_predicted)
        keep_steps=160, keep_image_size=192, keep_lr=1e-3, keep_folds=3,
        compile_model=False, fast_batch_size=16, fast_lr=3e-3, warmup_steps=10,
        fast_max_steps=20, val_every_n_epochs=1, ddp_devices=2, ddp_batch_size=8,
        ddp_max_steps=40, ddp_profile_epoch=1,
    ),
    "gpu": Profile(
        name="gpu", accelerator="gpu", num_images=1200, photo_side=1024, image_size=384, batch_size=32,
        # lr 7e-4: the best final hard Dice of 5e-4, 7e-4, 1e-3 and 2e-3 over two seeds each
        # on an H100, for a random-start resnet34 (lab/course_recipe_lr). 600 steps: from
        # ImageNet, notebook 02 was at hard Dice 0.934 after 600 of 1200 steps and 0.947 after
        # 1200 (H200, 2026-11-29), far past its target (0.858), in half the time
        max_steps=600, encoder="tu-efficientnet_lite0", num_workers=15, precision="bf16-mixed", lr=7e-4,
        bench_repeats=3, bench_steps=20, fine_tune_steps=120, fine_tune_image_size=384,
        # one fold of learning curve, as on a laptop: each fold more is 6 fine-tuning runs
        # (about 20 s on an H200) that a 12-minute edition cannot spare
        fine_tune_lr=7e-4, curve_folds=1,
        # relearned BatchNorm statistics: 0.934 ± 0.010, kept 0.926 ± 0.011 on an H100
        # (lab/fine_tune_batchnorm/fine_tune_batchnorm_h100.json)
        fine_tune_keep_statistics=False,
        keep_steps=120, keep_image_size=384, keep_lr=7e-4, keep_folds=5,  # notebook 06's recipe
        compile_model=True, fast_batch_size=60, fast_lr=2e-3, warmup_steps=50,
        fast_max_steps=1500, val_every_n_epochs=3, ddp_devices=2, ddp_batch_size=60,
        # 07's schedule: 1000 steps ended at IoU 0.817 on one device and 800 at 0.831 on two
        # (notebook 08 on two H200s, 2026-11-26, synthetic set of generator version 4)
        ddp_max_steps=1500, ddp_profile_epoch=3, ddp_seeds=3,
    ),
}


def gpu_available() -> bool:
    """True when PyTorch sees a CUDA device."""
    return torch.cuda.is_available()


def set_matmul_precision(profile: Profile) -> None:
    """Float32 matrix products in TF32 when ``profile`` trains on a GPU (``"high"``), in full
    float32 on a CPU (``"highest"``, torch's default). The setting is process-wide, and
    compiled code is guarded on it, so a process sets it once, where it starts: ``start`` in
    a notebook, ``main`` in a command."""
    torch.set_float32_matmul_precision("high" if profile.accelerator == "gpu" else "highest")


def default_profile_name() -> str:
    """``NAILSEG_PROFILE`` if set, else ``gpu`` with a CUDA device and ``cpu`` without."""
    name = os.environ.get("NAILSEG_PROFILE", "").strip()
    if name:
        return name
    return "gpu" if gpu_available() else "cpu"


def profile_name(name: str | None = None) -> str:
    """``name``, or when empty :func:`default_profile_name`; DataError when it is no profile."""
    name = (name or "").strip() or default_profile_name()
    if name not in PROFILES:
        raise DataError(f"Unknown profile {name!r}: choose one of {sorted(PROFILES)} "
                        "(set NAILSEG_PROFILE, the notebook's `profile` parameter or --profile).")
    return name


def add_profile_option(parser: argparse.ArgumentParser, decides: str = "") -> None:
    """``--profile``, declared here for every command line of the package (the commands, the
    benchmark); ``decides``: what it chooses there."""
    parser.add_argument("--profile", default="", help=f"smoke, cpu or gpu{': ' + decides if decides else ''} "
                        "(default: $NAILSEG_PROFILE, else chosen from the hardware)")


def select_profile(name: str | None = None, **overrides) -> Profile:
    """The profile called ``name`` (empty: :func:`default_profile_name`), with overrides.

    Overrides whose value is ``None`` are ignored, so a ``parameters`` cell can list
    every knob as ``None`` and let the profile decide. A wrong name, field or accelerator is
    a :class:`~nailseg_common.core.errors.DataError` (a ``ValueError``), which the command lines
    print as one line and a notebook shows without a traceback.
    """
    name = profile_name(name)
    profile = PROFILES[name]
    fields = {*SETTABLE_FIELDS, "name"}
    unknown = set(overrides) - fields
    if unknown:
        raise DataError(f"Unknown profile fields {sorted(unknown)}; known: {sorted(fields)}")
    profile = dataclasses.replace(profile, **{k: v for k, v in overrides.items() if v is not None})
    if profile.accelerator not in ("cpu", "gpu"):
        raise DataError(f"accelerator must be 'cpu' or 'gpu', not {profile.accelerator!r}.")
    if profile.accelerator == "gpu" and not gpu_available():
        raise DataError(f"Profile {name!r} needs a CUDA GPU and none was found: "
                           "use profile 'cpu' (or 'smoke'), or accelerator='cpu', on this machine.")
    return profile
