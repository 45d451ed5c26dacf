"""What a Lightning training prints: about ten lines, without the hardware chatter.

An executed notebook keeps every refresh of a live bar as an output; :class:`ProgressLines`
prints evenly spaced summary lines instead. The environment report already names the
device, so :func:`quiet_lightning` silences Lightning's "GPU available: ...", "LOCAL_RANK
..." lines; its warnings still show.
"""

from __future__ import annotations

import logging
import time

import pytorch_lightning as pl

CHATTY_LOGGERS = ("pytorch_lightning.utilities.rank_zero", "pytorch_lightning.accelerators.cuda")


def quiet_lightning() -> None:
    """Silence Lightning's hardware and rank lines (warnings still show)."""
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


class ProgressLines(pl.Callback):
    """About ``lines`` evenly spaced lines per training: step, epoch, time and logged metrics."""

    def __init__(self, lines: int = 10) -> None:
        self.lines = lines
        self.start = 0.0
        self.next_step = 0
        self.printed_step = -1

    def on_train_start(self, trainer, pl_module) -> None:
        self.start = time.perf_counter()
        self.next_step = trainer.global_step + self.interval(trainer)

    def interval(self, trainer) -> int:
        return max(1, trainer.max_steps // self.lines) if trainer.max_steps > 0 else 1

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if trainer.global_step >= self.next_step:
            while self.next_step <= trainer.global_step:
                self.next_step += self.interval(trainer)
            self.print_line(trainer)

    def on_train_end(self, trainer, pl_module) -> None:
        if self.printed_step != trainer.global_step:
            self.print_line(trainer)

    def print_line(self, trainer) -> None:
        metrics = {name: float(value) for name, value in trainer.callback_metrics.items()
                   if name in ("train_loss", "val_dice", "val_iou")}
        shown = ", ".join(f"{name} {value:.3f}" for name, value in sorted(metrics.items()))
        of = f"/{trainer.max_steps}" if trainer.max_steps > 0 else ""
        print(f"step {trainer.global_step}{of}, epoch {trainer.current_epoch}, "
              f"{time.perf_counter() - self.start:.0f} s: {shown}", flush=True)
        self.printed_step = trainer.global_step
