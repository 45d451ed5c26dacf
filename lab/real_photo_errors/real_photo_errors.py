"""Where does the shipped model lose hard Dice on real photos: outlines, missed nails, or skin?

    python -m lab.real_photo_errors.real_photo_errors PHOTOS --out real_photo_errors_cpu.json

Every photo under ``PHOTOS/Images`` (its mask under ``PHOTOS/Masks``) runs through
``predict``'s own ``predict_mask`` at each of ``--sides`` (test-time flips on), at the
photo's size. Per photo: the true nails (connected components of the mask) the prediction
covers less than half of ("missed"); the predicted blobs that touch no true nail ("extra"),
and their share of the wrongly predicted nail pixels; hard Dice; hard Dice with the object
errors corrected (missed nails filled, extra blobs removed: the outline errors of the nails
it found are left) and with the outline errors corrected (the mask, less the missed nails,
plus the extra blobs: the object errors are left); hard Dice of the prediction shrunk and
grown by one pixel (a systematic offset of the outline would favour one); for every nail
found, how much further than the mask the prediction reaches at the top, at the bottom and
sideways (``outline_reach``). Mean ± standard error over photos, and the
counts summed.
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path
from typing import NamedTuple

import cv2
import numpy as np
import torch

from lab.real_photo_errors.helpers import mean_se, photo_dice, photos_with_masks
from nailseg_common.predict import load_model, predict_mask
from nailseg_common.setup.environment import device_description, library_versions
from nailseg_common.setup.files import write_json
from nailseg_common.training.run_logs import SHIPPED_MODEL

NEIGHBOURS = np.ones((3, 3), np.uint8)  # a prediction shrunk or grown by one pixel


class Match(NamedTuple):
    """A 0/255 prediction against its {0, 1} mask, as connected components."""

    predicted: np.ndarray
    mask: np.ndarray
    nails: np.ndarray  # the mask's components, labelled 1..count - 1
    count: int
    found: np.ndarray  # the prediction's components
    missed: list[int]  # nails the prediction covers less than half of


def match(predicted: np.ndarray, mask: np.ndarray) -> Match:
    nail = predicted > 127
    count, nails = cv2.connectedComponents((mask > 0).astype(np.uint8))
    _, found = cv2.connectedComponents(nail.astype(np.uint8))
    return Match(predicted, mask, nails, count, found,
                 [k for k in range(1, count) if nail[nails == k].mean() < 0.5])


def errors(m: Match) -> dict[str, float]:
    """The error split of one prediction (see the module)."""
    nail, truth = m.predicted > 127, m.mask > 0
    extra = [k for k in range(1, m.found.max() + 1) if not truth[m.found == k].any()]
    missed_pixels, extra_pixels = np.isin(m.nails, m.missed), np.isin(m.found, extra)
    objects_fixed = (nail & ~extra_pixels) | missed_pixels  # only outline errors left
    outline_fixed = (truth & ~missed_pixels) | extra_pixels  # only object errors left
    wrong_nail = (nail & ~truth).sum()
    return {"dice": photo_dice(m.predicted, m.mask),
            "dice_outline_fixed": photo_dice(outline_fixed.astype(np.uint8) * 255, m.mask),
            "dice_objects_fixed": photo_dice(objects_fixed.astype(np.uint8) * 255, m.mask),
            "dice_shrunk": photo_dice(cv2.erode(m.predicted, NEIGHBOURS), m.mask),
            "dice_grown": photo_dice(cv2.dilate(m.predicted, NEIGHBOURS), m.mask),
            "nails": m.count - 1, "missed": len(m.missed), "extra": len(extra),
            "extra_share": float(extra_pixels.sum() / wrong_nail) if wrong_nail else 0.0}


def outline_reach(m: Match) -> list[dict[str, int]]:
    """For every nail found (not missed), in pixels, how much further than the mask the
    prediction reaches towards the top (``tip``, the fingertip in photos of fingers pointing
    up), towards the bottom (``base``, the cuticle) and how much wider it is (``width``, mean
    over rows): the predicted blobs that overlap the nail, within its box grown by half its
    height up and down and a quarter of its width sideways."""
    nail = m.predicted > 127
    reach = []
    for k in set(range(1, m.count)) - set(m.missed):  # a missed nail is an object error
        own = m.nails == k
        rows, cols = np.flatnonzero(own.any(1)), np.flatnonzero(own.any(0))
        height, width = rows[-1] - rows[0] + 1, cols[-1] - cols[0] + 1
        box = np.zeros_like(own)
        box[max(0, rows[0] - height // 2):rows[-1] + height // 2 + 1,
            max(0, cols[0] - width // 4):cols[-1] + width // 4 + 1] = True
        drawn = np.isin(m.found, np.unique(m.found[own & nail])) & box
        drawn_rows = np.flatnonzero(drawn.any(1))
        reach.append({"tip": int(rows[0] - drawn_rows[0]), "base": int(drawn_rows[-1] - rows[-1]),
                      "width": float(drawn.sum() / len(drawn_rows) - own.sum() / len(rows))})
    return reach


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("photos", type=Path, help="a folder with Images/ and Masks/")
    parser.add_argument("--checkpoint", type=Path, default=SHIPPED_MODEL)
    parser.add_argument("--sides", default="192,384")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    model, rows = load_model(args.checkpoint), []
    photos = photos_with_masks(args.photos)
    for side in (int(side) for side in args.sides.split(",")):
        found, reach = [], []
        with torch.inference_mode():
            for _, photo, mask in photos:
                matched = match(predict_mask(model, photo, side, torch.device("cpu"), True), mask)
                found.append(errors(matched))
                reach += outline_reach(matched)
        row = {"side": side, **{key: mean_se([f[key] for f in found]) for key in
                                ("dice", "dice_outline_fixed", "dice_objects_fixed", "dice_shrunk",
                                            "dice_grown", "extra_share")},
               **{key: int(sum(f[key] for f in found)) for key in ("nails", "missed", "extra")},
               "reach": {key: {**mean_se([r[key] for r in reach]),
                               "median": float(np.median([r[key] for r in reach]))}
                         for key in ("tip", "base", "width")}}
        rows.append(row)
        print(side, {key: value for key, value in row.items() if key != "reach"}, "reach (median):",
              {key: value["median"] for key, value in row["reach"].items()}, flush=True)
    write_json(args.out, {"checkpoint": args.checkpoint.name, "photos": len(photos),
                          "rows": rows, "device": device_description(),
                          "versions": library_versions(), "date": datetime.date.today().isoformat()})


if __name__ == "__main__":
    main()
