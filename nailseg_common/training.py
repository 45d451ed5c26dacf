"""The Trainer every course run uses, its per-epoch metrics, and a data-wait timer.

:func:`make_trainer` keeps notebook output to what a reader needs: Lightning's
hardware lines ("GPU available: ...", "LOCAL_RANK ...") and its few-workers hint are
silenced here (the environment report already names the device, and the course picks
worker counts on purpose); warnings about anything else still show.
"""

from __future__ import annotations

import logging
import sys
import time

import pandas as pd
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback, ModelCheckpoint, TQDMProgressBar
from pytorch_lightning.callbacks.progress.tqdm_progress import Tqdm
from pytorch_lightning.loggers import CSVLogger

from .paths import runs_dir
from .profiles import Profile

_CHATTY_LOGGERS = ("pytorch_lightning.utilities.rank_zero", "pytorch_lightning.accelerators.cuda")


class EpochProgressBar(TQDMProgressBar):
    """Lightning's tqdm bar, one line kept per epoch, without the nested validation bar.

    Validation results still appear at the end of each epoch's line (``val_dice``); text
    output (a notebook without widgets, a rendered post) stays one line per epoch.
    """

    def __init__(self) -> None:
        super().__init__(leave=True)

    def init_validation_tqdm(self) -> Tqdm:
        if self.trainer.state.fn != "fit":
            return super().init_validation_tqdm()
        return Tqdm(disable=True, file=sys.stdout)

    def get_metrics(self, trainer, pl_module) -> dict:
        metrics = super().get_metrics(trainer, pl_module)
        metrics.pop("v_num", None)
        return metrics


def make_trainer(profile: Profile, run_name: str, **overrides) -> pl.Trainer:
    """A ``pl.Trainer`` for ``profile``: CSV logs and checkpoints under ``runs_dir()/run_name``.

    Keeps the best ``val_dice`` checkpoint and ``last.ckpt`` (resume with
    ``trainer.fit(model, data, ckpt_path=...)``). ``overrides`` go to ``pl.Trainer``;
    ``callbacks`` are added to the checkpoint callback rather than replacing it.
    """
    for name in _CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    if profile.accelerator == "gpu":
        torch.set_float32_matmul_precision("high")  # TF32 for the float32 parts
    callbacks = list(overrides.pop("callbacks", []))
    if overrides.get("enable_progress_bar", True):
        callbacks.append(EpochProgressBar())
    if overrides.get("enable_checkpointing", True):
        callbacks.insert(0, ModelCheckpoint(monitor="val_dice", mode="max", save_last=True,
                                            filename="best-{epoch}-{val_dice:.3f}"))
    options = {
        "accelerator": profile.accelerator, "devices": 1, "precision": profile.precision,
        "max_epochs": profile.num_epochs,
        "limit_train_batches": profile.max_train_batches or 1.0,
        "limit_val_batches": profile.max_valid_batches or 1.0,
        "default_root_dir": runs_dir() / run_name,
        "logger": CSVLogger(runs_dir(), name=run_name),
        "log_every_n_steps": 1,  # only epoch metrics are logged; avoids the "few batches" hint
        "num_sanity_val_steps": 0, "enable_model_summary": False,
        "benchmark": profile.accelerator == "gpu",  # fixed input size: let cuDNN pick kernels
    }
    options.update(overrides)
    return pl.Trainer(callbacks=callbacks, **options)


def read_metrics(trainer: pl.Trainer) -> pd.DataFrame:
    """Per-epoch metrics from the trainer's CSV log, one row per epoch (index ``epoch``)."""
    logger = trainer.logger
    if not isinstance(logger, CSVLogger):
        raise TypeError("read_metrics needs a trainer from make_trainer (a CSVLogger); "
                         f"this one logs with {type(logger).__name__}.")
    logger.save()
    frame = pd.read_csv(logger.experiment.metrics_file_path)
    return frame.groupby("epoch").max().drop(columns="step", errors="ignore")


class DataWaitTimer(Callback):
    """Per training step: how long the loop waited for its batch, and how long the step took.

    *wait* runs from the end of one step to the start of the next (fetching the batch,
    copying it to the device, ``on_after_batch_transfer``); *step* is forward, backward
    and optimizer step. On a GPU the timer synchronises at both ends so the clocks see
    finished work; that removes some overlap, so use it to explain, not to benchmark.
    The first step of each epoch includes starting the workers and is kept apart.
    """

    def __init__(self) -> None:
        self.records: list[dict] = []
        self._end = self._start = self._wait = 0.0

    @staticmethod
    def _now(pl_module: pl.LightningModule) -> float:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)
        return time.perf_counter()

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._end = self._now(pl_module)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._start = self._now(pl_module)
        self._wait = self._start - self._end

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._end = self._now(pl_module)
        self.records.append({"epoch": trainer.current_epoch, "batch": batch_idx,
                             "wait_s": self._wait, "step_s": self._end - self._start})

    def frame(self) -> pd.DataFrame:
        """One row per step: ``epoch``, ``batch``, ``wait_s``, ``step_s``."""
        return pd.DataFrame(self.records, columns=["epoch", "batch", "wait_s", "step_s"])

    def summary(self) -> dict:
        """Medians in ms and the share of time spent waiting, first steps of epochs apart."""
        frame = self.frame()
        if frame.empty:
            raise ValueError("DataWaitTimer saw no training step: "
                             "pass it in the trainer's callbacks.")
        first = frame["batch"] == 0
        steady = frame[~first] if (~first).any() else frame
        return {
            "steps": len(steady),
            "median_wait_ms": 1e3 * steady["wait_s"].median(),
            "median_step_ms": 1e3 * steady["step_s"].median(),
            "wait_share": steady["wait_s"].sum() / (steady["wait_s"] + steady["step_s"]).sum(),
            "first_batch_wait_s": frame.loc[first, "wait_s"].mean(),
        }
