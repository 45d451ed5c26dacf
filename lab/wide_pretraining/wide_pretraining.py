"""Does pretraining on the generator's wide style transfer better to real photos, zero-shot?

    python -m lab.wide_pretraining.wide_pretraining PHOTOS --model before=OLD.pt \\
        --model wide_seed0=A.ckpt --model wide_seed1=B.ckpt --out wide_pretraining_cpu.json

Every model runs through ``predict``'s own ``predict_mask`` (the photo resized to each of
``--sides``, test-time flips on, as ``predict`` does by default, the probabilities upsampled
to the photo's size) on every photo under ``PHOTOS/Images`` with its mask under
``PHOTOS/Masks``; hard Dice per photo, mean ± standard error over photos, and each model
against the first on the same photos (``paired_gain``: mean difference, its standard error,
photos won and lost).
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

import pandas as pd
import torch

from lab.real_photos_recipe.real_photos_recipe import mean_se
from lab.transfer_held_out_style.transfer_held_out_style import named_models
from lab.zero_shot_by_side.zero_shot_by_side import photo_dice
from nailseg_common.data.images import read_binary_mask, read_rgb
from nailseg_common.predict import load_model, predict_mask
from nailseg_common.setup.environment import device_description, library_versions
from nailseg_common.setup.files import write_json
from nailseg_common.training.finetune import paired_gain


def per_photo_dice(models: dict[str, Path], photos: Path, sides: list[int]) -> pd.DataFrame:
    """Hard Dice of every photo (rows) for every model and side (columns ``name@side``)."""
    loaded = {name: load_model(path) for name, path in models.items()}
    rows = {}
    with torch.inference_mode():
        for image in sorted((photos / "Images").rglob("*.*")):
            relative = image.relative_to(photos / "Images")
            photo = read_rgb(image)
            mask = read_binary_mask(photos / "Masks" / relative.with_suffix(".png"))
            rows[str(relative)] = {
                f"{name}@{side}": photo_dice(predict_mask(model, photo, side, torch.device("cpu"),
                                                          True), mask)
                for name, model in loaded.items() for side in sides}
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
    table = per_photo_dice(models, args.photos, sides)
    baseline = next(iter(models))
    rows = []
    for name in models:
        for side in sides:
            column = table[f"{name}@{side}"]
            row = {"model": name, "side": side, "dice": mean_se(column)}
            if name != baseline:
                gain = paired_gain(column, table[f"{baseline}@{side}"])
                row["minus_" + baseline] = {key: float(value) for key, value in gain.items()}
            rows.append(row)
            print(f"{name:12s} {side:4d} px: hard Dice {row['dice']['mean']:.3f} ± "
                  f"{row['dice']['se']:.3f}")
    write_json(args.out, {"models": {name: path.name for name, path in models.items()},
                          "photos": len(table), "flips": True, "rows": rows,
                          "device": device_description(), "versions": library_versions(),
                          "date": datetime.date.today().isoformat()})


if __name__ == "__main__":
    main()
