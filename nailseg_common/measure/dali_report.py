"""Notebook 04's report of its DALI batches: the original series' two mistakes measured
(masks resized with linear interpolation, validation batches padded with duplicates), the
epochs of its loaders, the check of three shards, and its run against the bound and
notebook 02's logged run."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sized

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from IPython.display import display

from nailseg_common.measure.plots import plot_training_curves
from nailseg_common.pipelines.dali_pipeline import sample_names
from nailseg_common.pipelines.gallery import fingerprints
from nailseg_common.setup.profiles import Profile
from nailseg_common.training import run_logs
from nailseg_common.training.trainer import TrainingSpeed, bound_speed
from nailseg_common.training.unet import LitNailSegmentation, per_image_dice


def interpolation_table(resized: Callable[[str, bool], np.ndarray],
                        names: Iterable[str] = ("INTERP_LINEAR", "INTERP_NN"),
                        nearest: str = "INTERP_NN") -> pd.DataFrame:
    """``resized(name, as_float)`` (the masks resized with DALI's interpolation ``name``, as
    floats in [0, 1] or as 0/255 uint8) for each of ``names``: the pixels that are neither
    label, their share, and the pixels unlike the ``nearest`` resize."""
    rows = []
    for as_float in (True, False):
        reference, top = resized(nearest, as_float), 1 if as_float else 255
        for name in names:
            masks = resized(name, as_float)
            other = int(((masks != 0) & (masks != top)).sum())
            rows.append({"mask dtype": "float32" if as_float else "uint8", "interpolation": name,
                         "pixels neither label": other, "share": f"{other / masks.size:.2%}",
                         "pixels unlike nearest": int((masks != reference).sum())})
    return pd.DataFrame(rows)


def epochs_line(train_loader, valid_loader, train_images: Sized, valid_images: Sized) -> str:
    """One line: the sizes of the batches of one epoch of ``valid_loader`` (a ``DALILoader``),
    and the number of full batches of ``train_loader``; ``*_images``: the photos of each split."""
    sizes = [len(b["image"]) for b in valid_loader]
    return (f"validation: {len(valid_images)} images, batch {valid_loader.batch_size}: {len(valid_loader)} "
            f"batches of {sizes}; training: {len(train_images)} images, {len(train_loader)} full batches")


def shard_check(loaders: Iterable[Iterable[dict]], count: int) -> str:
    """One line: the images in one epoch of each shard's loader (batches with ``sample_id``;
    each loader is read to its end before the next is taken), and whether together they are
    the ``count`` images of the set, each once."""
    shards = [[name for batch in loader for name in sample_names(batch["sample_id"])] for loader in loaders]
    each_once = len(set().union(*shards)) == sum(len(s) for s in shards) == count
    return f"images per shard: {[len(s) for s in shards]} | together the validation set, each image once: {each_once}"


def bound_of(profile: Profile, loader: Iterable[dict], steps: int, count: int = 4) -> TrainingSpeed:
    """Notebook 02's bound (``bound_speed``): ``steps`` steps of a fresh ``LitNailSegmentation``
    of ``profile`` on the first ``count`` batches of ``loader``, moved to the device first."""
    resident = [{k: v.to(profile.device) for k, v in b.items()} for b, _ in zip(loader, range(count))]
    return bound_speed(
        profile, lambda: LitNailSegmentation(profile.encoder, profile.lr, profile.max_steps), resident, steps)


def batch_not_dividing(count: int, largest: int) -> int:
    """The largest batch size from ``min(largest, count)`` down to 2 that does not divide
    ``count``, so that the last batch is partial; ``count + 1`` when every one divides it."""
    return next((size for size in range(min(largest, count), 1, -1) if count % size), count + 1)


def last_batch_table(model: torch.nn.Module, epochs: Mapping[str, Iterable[dict]],
                     device: torch.device) -> pd.DataFrame:
    """The batches of one validation epoch under each last-batch policy (``epochs``: policy
    name to batches), scored by ``model`` in eval mode on ``device``: the images scored, how
    many are copies of another, and the mean hard Dice per image over what the loader
    yielded (as ``val_dice`` averages)."""
    model.to(device).eval()
    rows = {}
    for name, batches in epochs.items():
        batches = list(batches)
        with torch.no_grad():
            scores = torch.cat([per_image_dice(model(b["image"].to(device)).float().cpu(), b["label"].cpu())
                                for b in batches])
        samples = fingerprints(batches)
        rows[name] = {"images scored": len(samples), "duplicates": len(samples) - len(set(samples)),
                      "hard Dice": scores.mean().item()}
    return pd.DataFrame.from_dict(rows, orient="index")


def against_baseline(profile: Profile, runs: dict[str, pd.DataFrame], dice_per_image=None) -> None:
    """``runs`` beside notebook 02's logged run (``run_logs.runs_with_baseline``): their
    curves, ``run_logs.runs_table`` and, given the per-image hard Dice of the run in ``runs``,
    ``run_logs.baseline_verdict``; nothing but a line when there is no run at all."""
    runs = run_logs.runs_with_baseline(profile, runs)
    if not runs:
        return
    plot_training_curves(runs)
    plt.show()
    display((table := run_logs.runs_table(runs)).round(3))
    if dice_per_image is not None and run_logs.BASELINE_LABEL in runs:
        print(run_logs.baseline_verdict(dice_per_image, table))
