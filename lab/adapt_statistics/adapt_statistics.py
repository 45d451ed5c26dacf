"""Does re-estimating BatchNorm statistics on the unlabeled photos help the shipped model?

    python -m lab.adapt_statistics.adapt_statistics PHOTOS --model M.pt --sides 192,384 --out result.json

The model's BatchNorm running statistics are replaced by the mean and variance of its
activations over photos resized as ``predict`` resizes them (no masks used; "AdaBN"), then
every photo runs through ``predict``'s own ``predict_mask`` (test-time flips on). Two ways:
statistics from all the photos, and from half the hands (``hand_folds``: photos
``<hand>_<shot>``), scored on the other half. Hard Dice, precision and recall per photo,
mean ± standard error, paired against the model as it is on the same photos.
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from lab.adapt_statistics.helpers import hand_folds, hand_of, mean_se, photos_with_masks, scores
from nailseg_common.pipelines.albumentations_pipeline import valid_transform
from nailseg_common.predict import load_model, predict_mask
from nailseg_common.setup.environment import device_description, library_versions
from nailseg_common.setup.files import write_json
from nailseg_common.training.finetune import paired_gain


def adapt_statistics(model: torch.nn.Module, photos: list[np.ndarray], side: int) -> torch.nn.Module:
    """``model`` with every BatchNorm's running statistics averaged over ``photos`` at ``side``."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average over every batch
        norm.train()
    with torch.no_grad():
        for start in range(0, len(photos), 16):
            batch = np.stack([valid_transform(side)(image=photo)["image"].transpose(2, 0, 1)
                              for photo in photos[start:start + 16]])
            model(torch.from_numpy(batch))
    return model.eval()


def score(model, photos, masks, side) -> list[dict]:
    return [scores(predict_mask(model, photo, side, torch.device("cpu"), True), mask)
            for photo, mask in zip(photos, masks)]


def summary(rows: list[dict], baseline: list[dict]) -> dict:
    return {**{key: mean_se([row[key] for row in rows]) for key in ("dice", "precision", "recall")},
            "minus_as_is": paired_gain(pd.Series([row["dice"] for row in rows]),
                                       pd.Series([row["dice"] for row in baseline]))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("photos", type=Path, help="a folder with Images/ and Masks/")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--sides", default="192,384")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    names, photos, masks = zip(*photos_with_masks(args.photos))
    fitted, held = hand_folds(list(names), 2)[0]  # half the hands each way
    hands = len({hand_of(name) for name in names})
    rows = []
    for side in (int(side) for side in args.sides.split(",")):
        as_is = score(load_model(args.model), photos, masks, side)
        everywhere = score(adapt_statistics(load_model(args.model), photos, side), photos, masks, side)
        halves = score(adapt_statistics(load_model(args.model), [photos[i] for i in fitted], side),
                       [photos[i] for i in held], [masks[i] for i in held], side)
        rows.append({"side": side, "as_is": summary(as_is, as_is),
                     "statistics_of_all_photos": summary(everywhere, as_is),
                     "statistics_of_other_hands": summary(halves, [as_is[i] for i in held])})
        print(side, {name: round(row["dice"]["mean"], 3) for name, row in rows[-1].items()
                     if name != "side"}, flush=True)
    write_json(args.out, {"model": args.model.name, "photos": len(names), "hands": hands,
                          "rows": rows, "device": device_description(),
                          "versions": library_versions(), "date": datetime.date.today().isoformat()})


if __name__ == "__main__":
    main()
