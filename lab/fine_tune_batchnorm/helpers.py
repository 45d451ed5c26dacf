"""What the results hold of a start's mean score and of a paired gain between two starts,
copied from the lab's former shared ``lab/reports.py`` so that this folder imports no other
lab folder and nothing from ``tools/``."""

from __future__ import annotations

import pandas as pd

from nailseg_common.training.finetune import paired_gain


def summary(dice: pd.Series) -> dict:
    """Mean hard Dice, its standard error and the number of photos."""
    return {"dice": round(float(dice.mean()), 4), "se": round(float(dice.sem()), 4),
            "photos": len(dice)}


def gain_of(better: pd.Series, worse: pd.Series) -> dict:
    """``better - worse`` on the same photos (the package's ``paired_gain``), rounded."""
    gain = paired_gain(better, worse)
    return {"dice": round(float(gain["gain"]), 4), "se": round(float(gain["gain_se"]), 4),
            "better": gain["wins"], "worse": gain["loses"]}
