"""How the fine-tuning tools report: per-photo hard Dice as a mean with its standard error, a
paired gain, and the report as a JSON file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from nailseg_common.atomic import write_json


def summary(dice: pd.Series) -> dict:
    """Mean hard Dice, its standard error and the number of photos."""
    return {"dice": round(float(dice.mean()), 4), "se": round(float(dice.sem()), 4),
            "photos": len(dice)}


def paired_gain(better: pd.Series, worse: pd.Series) -> dict:
    """``better - worse`` on the same photos: mean, standard error, photos better and worse."""
    gain = better - worse
    return {"dice": round(float(gain.mean()), 4),
            "se": round(float(gain.std(ddof=1) / math.sqrt(len(gain))), 4),
            "better": int((gain > 0).sum()), "worse": int((gain < 0).sum())}


def write_report(report: dict, out: Path) -> None:
    """``report`` as JSON in ``out`` (written whole, its folder made if needed), and on the
    screen."""
    write_json(out, report)
    print(json.dumps(report, indent=1))
