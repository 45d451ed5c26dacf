"""Notebook 06's batches on the stand-in, copied from ``tools/ship_model.py`` so that this
folder imports no other lab folder and nothing from ``tools/``."""

from __future__ import annotations

from nailseg_common.data.preparation import read_split
from nailseg_common.training.finetune import PhotosOnDevice, photos_on_device


def stand_in(cfg, data, steps: int, datamodule=PhotosOnDevice, seed: int = 0) -> PhotosOnDevice:
    """Notebook 06's batches: the stand-in's training split on the device, its validation
    split held out."""
    frame, photos = photos_on_device(data, cfg)
    trained = len(read_split(data, "train"))
    return datamodule(photos, range(trained), range(trained, len(frame)), cfg.batch_size, steps,
                      seed=seed)
