"""Notebook 07's recipe, its compiled model and its fastest step, copied from
``tools/time_to_accuracy_seeds.py`` so that this folder imports no other lab folder and
nothing from ``tools/``."""

from __future__ import annotations

import pytorch_lightning as pl

from nailseg_common.data.preparation import ensure_prepared
from nailseg_common.measure.benchmark import reuse, train_loader_of, training_datamodule
from nailseg_common.measure.timing import measure_training, resident_batches
from nailseg_common.setup.paths import DataLocation
from nailseg_common.setup.profiles import Profile, select_profile
from nailseg_common.training.fast_training import (
    FastNailSegmentation,
    faster_recipe,
    recipe_model,
    warm_up,
)


def recipe_of(profile_name: str) -> tuple[Profile, DataLocation, Profile]:
    """The profile, its prepared data and 07's faster recipe of it."""
    cfg = select_profile(profile_name)
    data = ensure_prepared(cfg, None, progress=False)
    return cfg, data, faster_recipe(cfg, data)


def warmed_up_model(cfg: Profile, fast: Profile, data: DataLocation,
                    seed: int) -> tuple[FastNailSegmentation, float]:
    """07's model from the weights of ``seed``, compiled and autotuned by ``warm_up`` on the
    batches of ``seed``, and the seconds that took."""
    pl.seed_everything(seed, workers=True, verbose=False)
    model = recipe_model(fast)
    return model, warm_up(model, training_datamodule(data, fast, seed), fast)


def fastest_step(fast: Profile, data: DataLocation, model: FastNailSegmentation, windows: int) -> dict:
    """07's last row of the step ladder: ``model`` (compiled) on resident batches, in img/s."""
    batches = resident_batches(train_loader_of(training_datamodule(data, fast)), fast.device)
    steps = fast.bench_steps
    return measure_training(batches, fast, steps // 3, steps, windows, make_model=reuse(model))
