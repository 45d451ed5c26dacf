"""What a course run leaves in its CSV log, and how later notebooks read it back.

``training.make_trainer`` gives every Trainer :func:`course_logging`: the callbacks of
:func:`course_callbacks` (a checkpoint of the best ``val_dice``, :class:`EpochClock`
(``epoch_s``: the wall time of each epoch, validation included), ``ProgressLines``), a CSV
logger and Lightning's own output turned off; :func:`read_metrics` turns a run's
``metrics.csv`` into one row per epoch (validation columns empty in epochs without a
validation), :func:`steady_epoch_seconds` gives its typical epoch time, :func:`run_summary`
its last scores and :func:`latest_run_metrics` finds the newest finished run of a name, so
notebooks 03 and 04 can compare against notebook 02's logged run. :class:`EpochRates`
reports the rates of ``TrainingSpeed``; :func:`runs_with_baseline`, :func:`runs_table` and
:func:`baseline_verdict` are the comparison plumbing of notebooks 03 and 04,
:func:`speeds_table` sets rates beside their bound (notebook 03), and :func:`outline_verdict`
judges a run against the course's accuracy target (notebook 02;
:func:`outline_verdict_from_cache` with the cached validation labels).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time

import pandas as pd
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback, ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger

from nailseg_common.core.statistics import Verdict, difference_spread, mean_spread, ratio_spread
from nailseg_common.setup.paths import runs_dir, shown
from nailseg_common.setup.profiles import Profile
from nailseg_common.training.progress_lines import ProgressLines, quiet_lightning
from nailseg_common.training.unet import outline_levels


class EpochClock(Callback):
    """Logs ``epoch_s``: the wall time of each training epoch, its validation included."""

    def on_train_start(self, trainer, pl_module) -> None:  # also a run resumed mid-epoch
        self._start = time.perf_counter()

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._start = time.perf_counter()

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        pl_module.log("epoch_s", time.perf_counter() - self._start, on_epoch=True)


class EpochRates:
    """The report of ``training.trainer.TrainingSpeed``: its ``epochs`` (dicts with ``img_s``)
    as rates, their median, and their ratio to a bound with a spread."""

    def __init__(self) -> None:
        self.epochs: list[dict] = []

    def rates(self) -> list[float]:
        """Training images/s of the timed epochs: all but the first when there are several."""
        if not self.epochs:
            raise ValueError("TrainingSpeed timed no epoch: pass it in the trainer's callbacks.")
        speeds = [epoch["img_s"] for epoch in self.epochs]
        return speeds[1:] if len(speeds) > 1 else speeds

    def images_per_second(self) -> float:
        return statistics.median(self.rates())

    def summary(self) -> dict:
        """The median rate (``img/s``), the rates' ``min`` and ``max``, and their count (``epochs``)."""
        rates = self.rates()
        return {"img/s": self.images_per_second(), "min": min(rates), "max": max(rates), "epochs": len(rates)}

    def ratio_to(self, bound: EpochRates) -> tuple[float, float]:
        """The median rate over ``bound``'s and the ratio's 95 % interval from both sides'
        epochs (``ratio_spread``); inf when a side timed one epoch."""
        return (self.images_per_second() / bound.images_per_second(),
                ratio_spread(self.rates(), bound.rates()))

    def report(self, bound: EpochRates, name: str) -> str:
        """One line: the median rate, how many epochs, the bound, the ratio and its spread."""
        (ratio, spread), rates = self.ratio_to(bound), self.rates()
        return (f"{name}: {self.images_per_second():.1f} training images/s (median of {len(rates)} "
                f"epochs), bound {bound.images_per_second():.1f} (median of {len(bound.rates())}): "
                f"ratio {ratio:.2f} ± {spread:.2f}")


def course_callbacks(profile: Profile, run_name: str,
                     overrides: dict) -> tuple[list[Callback], CSVLogger]:
    """The callbacks and the logger of a course Trainer; takes ``callbacks`` (added to the
    course's own) and ``enable_progress_bar`` out of ``overrides``.

    A checkpoint of the best ``val_dice``, full state so that a run can resume from it
    (unless ``enable_checkpointing=False``), :class:`EpochClock`, about ten progress lines (unless
    ``enable_progress_bar=False``) and a ``CSVLogger`` under
    ``runs_dir()/profile.name/run_name`` that records the profile. Lightning's hardware
    lines are silenced (the environment report names the device).
    """
    quiet_lightning()
    callbacks = [EpochClock(), *overrides.pop("callbacks", [])]
    if overrides.pop("enable_progress_bar", True):
        callbacks.append(ProgressLines())
    if overrides.get("enable_checkpointing", True):
        callbacks.insert(0, ModelCheckpoint(monitor="val_dice", mode="max",
                                            filename="best-{epoch}-{val_dice:.3f}"))
    logger = CSVLogger(runs_dir() / profile.name, name=run_name)
    logger.log_hyperparams({"profile": dataclasses.asdict(profile)})
    return callbacks, logger


def course_logging(profile: Profile, run_name: str, overrides: dict) -> dict:
    """The ``pl.Trainer`` options of a course run's logging: :func:`course_callbacks`, the
    CSV logger and its folder, and Lightning's own output off (no sanity check, summary or
    progress bar; the epoch metrics logged every step, which avoids the "few batches" hint)."""
    callbacks, logger = course_callbacks(profile, run_name, overrides)
    return {"callbacks": callbacks, "logger": logger,
            "default_root_dir": runs_dir() / profile.name / run_name, "log_every_n_steps": 1,
            "num_sanity_val_steps": 0, "enable_model_summary": False, "enable_progress_bar": False}


def read_metrics(trainer_or_csv: pl.Trainer | str, by: str = "epoch") -> pd.DataFrame:
    """Metrics per ``epoch`` (or per ``step``: the index) from a trainer's CSV log or a
    ``metrics.csv`` path."""
    if isinstance(trainer_or_csv, pl.Trainer):
        logger = trainer_or_csv.logger
        if not isinstance(logger, CSVLogger):
            raise TypeError("read_metrics needs a trainer from make_trainer (a CSVLogger); "
                            f"this one logs with {type(logger).__name__}.")
        logger.save()
        trainer_or_csv = logger.experiment.metrics_file_path
    frame = pd.read_csv(trainer_or_csv)
    other = {"epoch": "step", "step": "epoch"}[by]
    return frame.groupby(by).max().drop(columns=other, errors="ignore")


def steady_epoch_seconds(metrics: pd.DataFrame) -> float:
    """Median wall time per epoch of a run's metrics, without the first epoch (starting
    workers, warming caches) when there are several."""
    seconds = metrics["epoch_s"].dropna()
    return float((seconds.iloc[1:] if len(seconds) > 1 else seconds).median())


def run_summary(metrics: pd.DataFrame) -> dict:
    """A run's training epochs, its last validation Dice and IoU (a ``validate`` after the
    fit included), and its :func:`steady_epoch_seconds`."""
    validated = metrics.dropna(subset=["val_dice"])
    return {"epochs": int(metrics["train_loss"].notna().sum()),
            "val_dice": validated["val_dice"].iloc[-1], "val_iou": validated["val_iou"].iloc[-1],
            "s / epoch": steady_epoch_seconds(metrics)}


def latest_run_metrics(profile: Profile, run_name: str) -> tuple[pd.DataFrame, str] | None:
    """The per-epoch metrics of the newest finished ``run_name`` run in ``profile``, with the
    path of its log; ``None`` when there is none (the notebook that makes it was not run)."""
    logs = sorted((runs_dir() / profile.name / run_name).glob("version_*/metrics.csv"),
                  key=lambda path: path.stat().st_mtime)
    for path in reversed(logs):
        metrics = read_metrics(str(path))
        if "val_dice" in metrics and metrics["val_dice"].notna().any():
            return metrics, str(path)
    return None


BASELINE_RUN, BASELINE_LABEL = "02_lightning_baseline", "Albumentations (notebook 02)"


def runs_with_baseline(profile: Profile, runs: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """``runs`` (name: per-epoch metrics) and, as ``BASELINE_LABEL``, notebook 02's newest
    logged run in ``profile``; prints where that log is, or that there is none."""
    baseline = latest_run_metrics(profile, BASELINE_RUN)
    if baseline is None:
        print(f"No finished run of notebook 02 in the {profile.name!r} profile under runs/: run "
              "notebook 02 with the same profile first to compare.")
        return dict(runs)
    print("notebook 02's log:", shown(baseline[1]))
    return {**runs, BASELINE_LABEL: baseline[0]}


def baseline_verdict(dice_per_image, table: pd.DataFrame) -> Verdict:
    """A run's mean per-image hard Dice against notebook 02's logged final ``val_dice`` (the
    :data:`BASELINE_LABEL` row of :func:`runs_table`). The log keeps only a mean, so the
    spread assumes its images vary as much as this run's: ``√2 · mean_spread``."""
    return Verdict("hard Dice", dice_per_image.mean().item(), table.loc[BASELINE_LABEL, "val_dice"],
                   math.sqrt(2) * mean_spread(dice_per_image), "notebook 02's run")


def runs_table(runs: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row of :func:`run_summary` per run."""
    return pd.DataFrame.from_dict({name: run_summary(m) for name, m in runs.items()}, orient="index")


def speeds_table(speeds: dict[str, EpochRates], bound: EpochRates) -> pd.DataFrame:
    """One row of :meth:`EpochRates.summary` per name, and its ``share of bound``: the median
    rate over ``bound``'s."""
    table = pd.DataFrame.from_dict({name: speed.summary() for name, speed in speeds.items()}, orient="index")
    table["share of bound"] = table["img/s"] / bound.images_per_second()
    return table


def outline_verdict(val_dice_per_image, labels, device: torch.device) -> Verdict:
    """The course's accuracy target (notebook 02): a model's per-image hard Dice against its
    ``labels`` drawn 2 px too large (``training.unet.outline_levels``). ``labels`` come in
    loader order, of which the first ``len(val_dice_per_image)`` (a capped validation) count.
    The max-pools run on ``device`` (on a GPU, hundreds of masks take far less than on a CPU)."""
    level = outline_levels(labels[: len(val_dice_per_image)].to(device))["2 px larger"]
    return Verdict("hard Dice", val_dice_per_image.mean().item(), level.mean(),
                   difference_spread(val_dice_per_image, level), "masks drawn 2 px too large")


def outline_verdict_from_cache(val_dice_per_image, location, profile: Profile) -> Verdict:
    """:func:`outline_verdict` against the validation labels of the uint8 cache at
    ``profile.image_size`` (``data.decoded``, built if needed; in the loaders' order), on
    ``profile.device``."""
    from nailseg_common.data.decoded import load_cache

    labels = load_cache(location, profile.image_size, "valid")[1]
    return outline_verdict(val_dice_per_image, labels, profile.device)
