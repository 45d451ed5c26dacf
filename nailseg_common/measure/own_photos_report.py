"""Notebook 06's report: the checkpoint found and which starts this machine can fine-tune,
the learning curve's table, and its measurements in words."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from nailseg_common.core.statistics import mean_spread
from nailseg_common.setup.paths import shown
from nailseg_common.training.checkpoints import CHECKPOINT_RUNS, SHIPPED_MODEL, Checkpoint


def checkpoint_in_words(checkpoint: Checkpoint | None, profile_name: str, encoder: str) -> str:
    """The synthetic ``checkpoint`` found (None: none, and how to get one), with the hard
    Dice it recorded and the ``encoder`` every start uses."""
    if checkpoint is None:
        return (f"no checkpoint of {CHECKPOINT_RUNS} in profile {profile_name!r} and no "
                f"{shown(SHIPPED_MODEL)}: going on without the synthetic start (run notebook 02 first, "
                "or pass checkpoint=...)")
    return (f"synthetic checkpoint: {shown(checkpoint.path)} (synthetic validation hard "
            f"Dice {checkpoint.recorded_dice:.3f}); every start's encoder: {encoder}")


def available_starts(starts: Iterable[str], checkpoint: Path | None) -> tuple[list[str], dict[str, str]]:
    """The ``starts`` that can be fine-tuned here, and for each other one the reason: the
    ``"synthetic"`` start needs ``checkpoint``."""
    skipped = {"synthetic": "no checkpoint (see above)"} if checkpoint is None else {}
    return [start for start in starts if start not in skipped], skipped


def scores_in_words(label: str, table: pd.DataFrame) -> str:
    """The mean hard Dice and IoU of a per-photo ``table`` (``dice``, ``iou``), one line."""
    means = table[["dice", "iou"]].mean()
    return (f"{label}, mean over all {len(table)} photos: hard Dice {means['dice']:.3f}, "
            f"IoU {means['iou']:.3f}")


def learning_curve(by_size: dict[int, dict[str, pd.DataFrame]]) -> pd.DataFrame:
    """A row per training size and start (``{size: {start: per-photo table}}``): the mean
    ``dice`` and its spread ``±`` (``mean_spread``)."""
    return pd.DataFrame([{"start": name, "photos": size, "dice": table.dice.mean(),
                          "±": mean_spread(table.dice)}
                         for size, part in by_size.items() for name, table in part.items()])


def advice_in_words(advice: dict, tables: dict, zero_shot: str) -> list[str]:
    """Notebook 06's ``recommend_start`` ``advice`` over ``tables`` (start -> per-photo scores
    with ``dice`` and ``iou``) as lines to print: the best start, its paired lead over the
    runner-up, and a verdict (clear when the lead's 95 % interval leaves out zero);
    ``zero_shot`` names the start that is the checkpoint without fine-tuning."""
    best, photos = advice["best"], advice["photos"]
    dice, iou = tables[best]["dice"], tables[best]["iou"]
    best_line = (f"best over these {photos} photos, each held out once: {best} (hard Dice "
                 f"{dice.mean():.3f} ± {mean_spread(dice):.3f}, IoU {iou.mean():.3f})")
    if advice["runner_up"] is None:
        return [best_line, ("-> only one start could be measured here, so there is nothing to "
                "choose between: run notebook 02 in this profile (synthetic start).")]
    runner_up, lead_se = advice["runner_up"], advice["lead_se"]
    lead = (f"ahead of {runner_up} by {advice['gain']:+.3f} Dice ± {advice['gain_spread']:.3f} "
            f"(over {photos} photos), better on {advice['wins']}, "
            f"worse on {advice['loses']}")
    if advice["gain"] > advice["gain_spread"]:
        verdict = (f"use the {best} start: its lead is {lead_se:.1f} standard errors, clear of "
                   "its 95 % interval")
    else:
        verdict = (f"{best} and {runner_up} are within the noise: the lead is {lead_se:.1f} "
                   "standard errors, inside its 95 % interval; either will do, and more "
                   "photos would tell them apart")
    if best == zero_shot:
        verdict += ("; fine-tuning did not beat the checkpoint as it is, so use it unchanged "
                    "or fine-tune longer (fine_tune_steps)")
    return [best_line, lead, f"-> {verdict}"]


def fine_tune_gain_in_words(outcome: str, standin: bool) -> list[str]:
    """What notebook 06's verdict on fine-tuning against the start as it is (``outcome``:
    met, missed or within noise) means, and what to try, as lines to print; ``standin``:
    the photos are the synthetic stand-in."""
    if outcome == "met":
        return ["-> fine-tuning pays on these photos: use a fine-tuned start (see the advice below)."]
    if outcome == "missed":
        return ["-> fine-tuning made these photos worse: too many steps or too high a learning",
                "   rate for a few dozen photos; try fewer fine_tune_steps or a lower fine_tune_lr."]
    where = ("the stand-in resembles what the start was trained on" if standin
             else "your photos resemble what the start was trained on")
    return ["-> no gain beyond the noise: the start already handles photos like these",
            f"   ({where}). On photos unlike the synthetic set fine-tuning is where the gain",
            "   comes from; to get more, try more fine_tune_steps first (on real photos the",
            "   steps mattered more than the learning rate), then more photos."]
