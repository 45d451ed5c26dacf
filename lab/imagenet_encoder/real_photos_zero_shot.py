"""The shipped model as ``predict`` uses it, on real photos with masks (kept out of the repository).

Every photo through ``predict_mask`` (test-time flips on) at each ``--side``; hard Dice per
photo, its mean ± standard error, on a CPU:

    python lab/imagenet_encoder/real_photos_zero_shot.py PHOTOS OUT.json --side 384 --side 192
"""

from __future__ import annotations

import argparse
import datetime
import json

import numpy as np
import torch

from nailseg_common.commands.predict import predict_mask
from nailseg_common.data.images import read_binary_mask, read_rgb
from nailseg_common.data.preparation import find_pairs
from nailseg_common.setup.environment import library_versions
from nailseg_common.training.checkpoints import SHIPPED_MODEL, build_model, read_checkpoint
from nailseg_common.training.unet import per_image_dice


def photo_dice(predicted: np.ndarray, mask: np.ndarray) -> float:
    """Hard Dice of a 0/255 predicted mask against a {0, 1} mask of the same size."""
    as_logits = torch.from_numpy(predicted.astype(np.float32) / 127.5 - 1.0)[None, None]
    return float(per_image_dice(as_logits, torch.from_numpy(mask.astype(np.float32))[None, None]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("photos")
    parser.add_argument("out")
    parser.add_argument("--side", type=int, action="append", required=True)
    args = parser.parse_args()
    checkpoint = read_checkpoint(SHIPPED_MODEL)
    model = build_model(checkpoint)
    per_side = {side: [] for side in args.side}
    with torch.inference_mode():
        for pair in find_pairs(args.photos):
            photo, mask = read_rgb(pair.image), read_binary_mask(pair.mask)
            for side in args.side:
                per_side[side].append(photo_dice(predict_mask(model, photo, side, torch.device("cpu")), mask))
    summary = {str(side): {"mean": float(np.mean(d)), "se": float(np.std(d, ddof=1) / np.sqrt(len(d))),
                           "photos": len(d)} for side, d in per_side.items()}
    result = {"model": SHIPPED_MODEL.name, "encoder": checkpoint.encoder, "device": "CPU, 2 cores",
              "versions": library_versions(), "date": datetime.date.today().isoformat(),
              "hard_dice": summary, "per_photo": {str(s): d for s, d in per_side.items()}}
    with open(args.out, "w") as file:
        json.dump(result, file, indent=1)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
