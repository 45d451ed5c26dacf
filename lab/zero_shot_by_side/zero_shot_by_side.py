"""At which side does a model see real photos best? Zero-shot masks through ``predict``'s path.

    python -m lab.zero_shot_by_side.zero_shot_by_side PHOTOS --out zero_shot_by_side_cpu.json

For every photo under ``PHOTOS/Images`` with its mask under ``PHOTOS/Masks`` (same relative
path, ``.png``), ``predict_mask`` (the ``predict`` command's own function) resizes the photo
to each of ``--sides``, runs the model, with and without test-time flips, and upsamples the
probabilities to the photo's size; hard Dice per photo against the mask at that size, mean ±
standard error over photos. Default model: the one the course ships.
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

import numpy as np
import torch

from nailseg_common.data.images import read_binary_mask, read_rgb
from nailseg_common.data.preparation import find_pairs
from nailseg_common.predict import load_model, predict_mask
from nailseg_common.setup.environment import device_description, library_versions
from nailseg_common.setup.files import write_json
from nailseg_common.training.run_logs import SHIPPED_MODEL
from nailseg_common.training.unet import per_image_dice


def photo_dice(predicted: np.ndarray, mask: np.ndarray) -> float:
    """Hard Dice of a 0/255 predicted mask against a {0, 1} mask of the same size."""
    as_logits = torch.from_numpy(predicted.astype(np.float32) / 127.5 - 1.0)[None, None]
    return float(per_image_dice(as_logits, torch.from_numpy(mask.astype(np.float32))[None, None]))


def photos_with_masks(folder: Path) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Every photo of ``folder`` (the layouts ``find_pairs`` takes) with its {0, 1} mask, each
    read once: ``(type/name, HxWx3 uint8, HxW uint8)``."""
    return [(f"{pair.type}/{pair.name}", read_rgb(pair.image), read_binary_mask(pair.mask))
            for pair in find_pairs(folder)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("photos", type=Path, help="a folder with Images/ and Masks/")
    parser.add_argument("--sides", default="128,160,192,224,256,320,384")
    parser.add_argument("--checkpoint", type=Path, default=SHIPPED_MODEL)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    sides = [int(side) for side in args.sides.split(",")]
    model, device = load_model(args.checkpoint), torch.device("cpu")
    dice = {(side, flips): [] for side in sides for flips in (False, True)}
    with torch.inference_mode():
        for _, photo, mask in photos_with_masks(args.photos):
            for (side, flips), values in dice.items():
                values.append(photo_dice(predict_mask(model, photo, side, device, flips), mask))
    rows = [{"side": side, "flips": flips, "dice": float(np.mean(values)),
             "se": float(np.std(values, ddof=1) / np.sqrt(len(values))), "photos": len(values)}
            for (side, flips), values in dice.items()]
    for row in rows:
        print(f"{row['side']:4d} px, flips {row['flips']!s:5}: hard Dice {row['dice']:.3f} ± "
              f"{row['se']:.3f}")
    write_json(args.out, {"checkpoint": args.checkpoint.name, "rows": rows,
                          "device": device_description(), "versions": library_versions(),
                          "date": datetime.date.today().isoformat()})


if __name__ == "__main__":
    main()
