"""Does pretraining on the generator's wide style transfer better to real photos, zero-shot?

    python -m lab.wide_pretraining.wide_pretraining PHOTOS --model before=OLD.pt \\
        --model wide_seed0=A.ckpt --model wide_seed1=B.ckpt --out wide_pretraining_cpu.json

Every model runs through ``predict``'s own ``predict_mask`` (the photo resized to each of
``--sides``, test-time flips on, as ``predict`` does by default, the probabilities upsampled
to the photo's size) on every photo under ``PHOTOS/Images`` with its mask under
``PHOTOS/Masks``; hard Dice per photo, mean ± standard error over photos, and each model
against the first on the same photos (``paired_gain``: mean difference, its standard error,
photos won and lost); with the nail pixels' precision (predicted nail that is nail) and
recall (nail that is predicted), mean ± standard error over photos, to tell missed nails
from skin taken for nail.
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from lab.wide_pretraining.helpers import mean_se, named_models, photo_dice, photos_with_masks
from nailseg_common.predict import load_model, predict_mask
from nailseg_common.setup.environment import device_description, library_versions
from nailseg_common.setup.files import write_json
from nailseg_common.training.finetune import paired_gain


def scores(predicted: np.ndarray, mask: np.ndarray) -> dict[str, float]:
    """Hard Dice, precision and recall of a 0/255 predicted mask against a {0, 1} mask (an
    empty prediction has precision 1, an empty mask recall 1)."""
    nail, truth = predicted > 127, mask > 0
    hits = float((nail & truth).sum())
    return {"dice": photo_dice(predicted, mask), "precision": hits / nail.sum() if nail.any() else 1.0,
            "recall": hits / truth.sum() if truth.any() else 1.0}


def per_photo_scores(models: dict[str, Path], photos: Path, sides: list[int]) -> pd.DataFrame:
    """Scores of every photo (rows) for every model and side (columns ``name@side:score``)."""
    loaded = {name: load_model(path) for name, path in models.items()}
    rows = {}
    with torch.inference_mode():
        for name, photo, mask in photos_with_masks(photos):
            rows[name] = {
                f"{name}@{side}:{score}": value
                for name, model in loaded.items() for side in sides
                for score, value in scores(predict_mask(model, photo, side, torch.device("cpu"),
                                                        True), mask).items()}
    return pd.DataFrame.from_dict(rows, orient="index")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("photos", type=Path, help="a folder with Images/ and Masks/")
    parser.add_argument("--model", action="append", required=True,
                        help="NAME=PATH, repeatable; the first is the baseline")
    parser.add_argument("--sides", default="192,384")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    models, sides = named_models(args.model), [int(side) for side in args.sides.split(",")]
    table = per_photo_scores(models, args.photos, sides)
    baseline = next(iter(models))
    rows = []
    for name in models:
        for side in sides:
            column = table[f"{name}@{side}:dice"]
            row = {"model": name, "side": side, "dice": mean_se(column),
                   **{score: mean_se(table[f"{name}@{side}:{score}"])
                      for score in ("precision", "recall")}}
            if name != baseline:
                gain = paired_gain(column, table[f"{baseline}@{side}:dice"])
                row["minus_" + baseline] = {key: float(value) for key, value in gain.items()}
            rows.append(row)
            print(f"{name:12s} {side:4d} px: hard Dice {row['dice']['mean']:.3f} ± "
                  f"{row['dice']['se']:.3f}, precision {row['precision']['mean']:.3f}, "
                  f"recall {row['recall']['mean']:.3f}")
    write_json(args.out, {"models": {name: path.name for name, path in models.items()},
                          "photos": len(table), "flips": True, "rows": rows,
                          "device": device_description(), "versions": library_versions(),
                          "date": datetime.date.today().isoformat()})


if __name__ == "__main__":
    main()
