"""What a training run prints: one progress line per epoch, without Lightning's hardware chatter.

The environment report already names the device and the course picks worker counts on
purpose, so Lightning's "GPU available: ...", "LOCAL_RANK ..." lines and its few-workers
hint are silenced; warnings about anything else still show.
"""

from __future__ import annotations

import logging
import sys

from pytorch_lightning.callbacks import TQDMProgressBar
from pytorch_lightning.callbacks.progress.tqdm_progress import Tqdm

CHATTY_LOGGERS = ("pytorch_lightning.utilities.rank_zero", "pytorch_lightning.accelerators.cuda")


def quiet_lightning() -> None:
    """Silence Lightning's hardware and rank lines (warnings still show)."""
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


class EpochProgressBar(TQDMProgressBar):
    """Lightning's tqdm bar, one line kept per epoch, without the nested validation bar.

    Validation results still appear at the end of each epoch's line; text output (a
    notebook without widgets, a rendered post) stays one line per epoch.
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
