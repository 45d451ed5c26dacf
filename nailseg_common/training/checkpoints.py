"""Checkpoints of the course's U-Net, in one place: finding one, reading it once, loading its
weights into a model and saving a model's weights.

A checkpoint is a ``best-*.ckpt`` that notebook 02 or 04 kept (Lightning's: hyperparameters,
weights, the ``ModelCheckpoint``'s best score), notebook 08's ``final.ckpt``, or a file that
:func:`save_weights` wrote (notebook 06, ``nailseg-fine-tune``, the model the course ships:
hyperparameters, weights and the side it was trained at). :func:`read_checkpoint` reads any
of them once into a :class:`Checkpoint`, which every reader takes.
"""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path
from typing import NamedTuple

import torch
import yaml

from nailseg_common.core.errors import DataError
from nailseg_common.setup.paths import runs_dir
from nailseg_common.training.unet import LitNailSegmentation

CHECKPOINT_RUNS = ("02_lightning_baseline", "04_dali")
"""The runs whose best checkpoint is the course's synthetic-pretrained model."""
SHIPPED_MODEL = Path(__file__).parents[1] / "pretrained" / "unet-tu-efficientnet_lite0.pt"
"""The synthetic-pretrained model the course ships; its provenance is the ``.json`` beside it."""
NOT_A_CHECKPOINT = (LookupError, EOFError, RuntimeError, TypeError, ValueError, AttributeError,
                    pickle.UnpicklingError)
"""What reading a file that is not a course checkpoint raises (no pickle, no
``hyper_parameters`` or ``encoder``, other layers)."""
WHAT_TO_PASS = ("a best-*.ckpt written by notebook 02 or 04, notebook 08's final.ckpt, or a "
                "model.pt written by nailseg-fine-tune or notebook 06")


class Checkpoint(NamedTuple):
    """A checkpoint as read once: where it is, its module's hyperparameters and weights, the
    image side it was trained at (None when it does not say), the hard Dice it recorded on
    synthetic validation images (NaN when it recorded none) and the optimizer steps it was
    written at (None in a weights file)."""

    path: Path
    hyper_parameters: dict
    state_dict: dict
    image_size: int | None
    recorded_dice: float
    trained_steps: int | None

    @property
    def encoder(self) -> str:
        return self.hyper_parameters["encoder"]


def trained_side(saved: dict, path: Path) -> int | None:
    """The side ``saved`` (read from ``path``) was trained at: its own ``image_size``, else
    the profile its run's CSV log recorded (``version_N/hparams.yaml`` beside ``checkpoints/``)."""
    size = saved.get("image_size")
    if size is None:
        try:
            logged = yaml.safe_load((path.parent.parent / "hparams.yaml").read_text()) or {}
            size = logged.get("profile", {}).get("image_size")
        except (OSError, yaml.YAMLError, AttributeError):
            return None
    return size if isinstance(size, int) and size > 0 else None


def best_score(saved: dict, path: Path) -> float:
    """The synthetic validation hard Dice ``saved`` recorded: its ``ModelCheckpoint``'s best
    score, or for the shipped model its provenance; NaN when neither."""
    if path == SHIPPED_MODEL:
        return json.loads(SHIPPED_MODEL.with_suffix(".json").read_text())["synthetic_valid"]["dice"]
    scores = [state["best_model_score"] for name, state in saved.get("callbacks", {}).items()
              if name.startswith("ModelCheckpoint") and state.get("best_model_score") is not None]
    return float(scores[0]) if scores else math.nan


def read_checkpoint(path: str | Path, what_to_pass: str = WHAT_TO_PASS) -> Checkpoint:
    """``path`` read once; DataError naming the file, and saying to pass ``what_to_pass``,
    when it cannot be read or is not a checkpoint of the course's U-Net."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"checkpoint {path} is not a file: pass {what_to_pass}.")
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        checkpoint = Checkpoint(path, dict(saved["hyper_parameters"]), saved["state_dict"],
                                trained_side(saved, path), best_score(saved, path),
                                saved.get("global_step"))
        checkpoint.encoder  # noqa: B018  (a file without one is not a course checkpoint)
    except OSError as error:
        raise DataError(f"Cannot read checkpoint {path} ({error.strerror or error}).") from None
    except NOT_A_CHECKPOINT as error:
        raise DataError(f"{path} is not a checkpoint of this course's U-Net "
                        f"({type(error).__name__}): pass {what_to_pass}.") from None
    return checkpoint


def find_checkpoint(profile_name: str, runs: tuple[str, ...] = CHECKPOINT_RUNS) -> Path | None:
    """The newest ``best-*.ckpt`` of ``runs`` in the profile ``profile_name``
    (``runs_dir()/<profile>/<run>/version_*/checkpoints/``); ``None`` when there is none."""
    found = [path for run in runs
             for path in (runs_dir() / profile_name / run).glob("*/checkpoints/best-*.ckpt")]
    return max(found, key=lambda path: path.stat().st_mtime, default=None)


def choose_checkpoint(checkpoint: str | Path, profile_name: str) -> Checkpoint | None:
    """``checkpoint`` when given; else of :func:`find_checkpoint` and :data:`SHIPPED_MODEL`,
    the one with the better recorded hard Dice, each read once; ``None`` when there is neither."""
    if checkpoint:
        return read_checkpoint(checkpoint)
    found = [read_checkpoint(path) for path in (find_checkpoint(profile_name), SHIPPED_MODEL)
             if path is not None and path.is_file()]
    return max(found, default=None,
               key=lambda read: -1.0 if math.isnan(read.recorded_dice) else read.recorded_dice)


def load_weights(model: LitNailSegmentation, checkpoint: Checkpoint | str | Path) -> LitNailSegmentation:
    """Copy every weight of ``checkpoint`` (read, or a path to read) into ``model``; one of
    another encoder raises ``ValueError``."""
    if not isinstance(checkpoint, Checkpoint):
        checkpoint = read_checkpoint(checkpoint)
    if checkpoint.encoder != model.hparams.encoder:
        raise ValueError(f"{checkpoint.path} holds a U-Net with a {checkpoint.encoder!r} encoder, "
                         f"the model has {model.hparams.encoder!r}: build the model with "
                         f"encoder={checkpoint.encoder!r}.")
    model.load_state_dict(checkpoint.state_dict)
    return model


def build_model(checkpoint: Checkpoint) -> LitNailSegmentation:
    """The course's U-Net with every weight of ``checkpoint``, in eval mode; DataError naming
    the file when its weights do not fit that U-Net."""
    try:
        model = LitNailSegmentation(checkpoint.encoder, encoder_weights=None)  # all weights follow
        return load_weights(model, checkpoint).eval()
    except NOT_A_CHECKPOINT as error:
        raise DataError(f"{checkpoint.path} is not a checkpoint of this course's U-Net "
                        f"({type(error).__name__}): pass {WHAT_TO_PASS}.") from None


def save_weights(model: LitNailSegmentation, path: str | Path, image_size: int) -> Path:
    """``model``'s weights as :func:`read_checkpoint` reads them, with the ``image_size`` it
    was trained at; returns ``path``. A failed write is an ``OSError`` (``torch.save`` raises
    ``RuntimeError`` from its C++ writer: ``unexpected pos``, ``iostream error``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        torch.save({"hyper_parameters": dict(model.hparams), "state_dict": model.state_dict(),
                    "image_size": image_size}, path)
    except RuntimeError as error:
        raise OSError(f"torch.save could not write {path}") from error
    return path
