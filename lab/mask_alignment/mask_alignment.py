"""How far a resized mask sits from its image: OpenCV's two nearest-neighbour resizes against
sampling at each output pixel's centre (the grid of the bilinear image resize), on the
validation masks of the course's set at one side.

For each validation mask (its prepared ``.npy``), resized to ``--image-size`` by
``cv2.INTER_NEAREST``, by ``cv2.INTER_NEAREST_EXACT`` (notebook 02's resize) and, where DALI
runs, by notebook 04's graph: the shift of the mask's centre of mass from the centre-sampled
mask's (output pixels, down and right positive) and the IoU between the two masks.

    python -m lab.mask_alignment.mask_alignment --out lab/mask_alignment/mask_alignment_cpu.json
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

import cv2
import numpy as np
import torch

from nailseg_common.data.preparation import ensure_prepared, read_split
from nailseg_common.setup.environment import device_description, library_versions
from nailseg_common.setup.files import write_json
from nailseg_common.setup.profiles import PROFILES, select_profile
from nailseg_common.training.fast_training import mask_iou

HERE = Path(__file__).parent  # where this question's results are kept


def centre_sampled(mask: np.ndarray, side: int) -> np.ndarray:
    """``mask`` (H×W) sampled at the centre of each pixel of a ``side × side`` grid."""
    h, w = mask.shape
    rows = np.minimum(((np.arange(side) + 0.5) * h / side).astype(int), h - 1)
    cols = np.minimum(((np.arange(side) + 0.5) * w / side).astype(int), w - 1)
    return mask[rows][:, cols]


def centre_of_mass(masks: torch.Tensor) -> torch.Tensor:
    """``N×2`` (row, column) centres of mass of ``N×1×H×W`` {0, 1} masks."""
    flat = masks[:, 0]
    rows = torch.arange(flat.shape[1], dtype=torch.float32)[None, :, None]
    cols = torch.arange(flat.shape[2], dtype=torch.float32)[None, None, :]
    total = flat.flatten(1).sum(1).clamp_min(1)
    return torch.stack([(flat * rows).flatten(1).sum(1) / total,
                        (flat * cols).flatten(1).sum(1) / total], 1)


def against_centre(masks: torch.Tensor, reference: torch.Tensor) -> dict:
    """Mean and range of the centre shift (rows, columns) and of the IoU to ``reference``."""
    shift, iou = centre_of_mass(masks) - centre_of_mass(reference), mask_iou(masks, reference)
    return {"shift_down_px": {"mean": float(shift[:, 0].mean()), "min": float(shift[:, 0].min()),
                              "max": float(shift[:, 0].max())},
            "shift_right_px": {"mean": float(shift[:, 1].mean()), "min": float(shift[:, 1].min()),
                               "max": float(shift[:, 1].max())},
            "iou_to_centre_sampled": {"mean": float(iou.mean()), "min": float(iou.min())}}


def as_tensor(masks: list[np.ndarray]) -> torch.Tensor:
    """Equal-sized H×W masks as one ``N×1×H×W`` {0, 1} float tensor."""
    return torch.from_numpy(np.stack(masks)[:, None] > 0).float()


def dali_masks(frame, side: int) -> torch.Tensor | None:
    """The validation masks as notebook 04's graph resizes them (None where DALI does not run)."""
    from nailseg_common.pipelines.dali_pipeline import build_pipeline
    from nailseg_common.setup.environment import dali_available

    if not dali_available():
        return None
    pipeline = build_pipeline(list(frame["npy_image"]), list(frame["npy_mask"]), image_size=side,
                              batch_size=len(frame), augment=False, device="cpu")
    pipeline.build()
    masks = pipeline.run()[1]
    return as_tensor([np.array(masks[i])[0] for i in range(len(frame))])  # each 1×H×W (CHW)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "mask_alignment_local.json",
                        help="the JSON report (default: in this folder)")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--num-images", type=int, default=PROFILES["gpu"].num_images,
                        help="size of the synthetic set")
    parser.add_argument("--image-size", type=int, default=384)
    args = parser.parse_args(argv)
    cfg = select_profile(args.profile, num_images=args.num_images)
    frame = read_split(ensure_prepared(cfg, None, progress=False), "valid")
    side = args.image_size
    sources = [np.load(path)[..., 0] for path in frame["npy_mask"]]
    reference = as_tensor([centre_sampled(mask, side) for mask in sources])
    resized = {name: as_tensor([cv2.resize(mask, (side, side), interpolation=flag) for mask in sources])
               for name, flag in (("cv2.INTER_NEAREST", cv2.INTER_NEAREST),
                                  ("cv2.INTER_NEAREST_EXACT", cv2.INTER_NEAREST_EXACT))}
    dali = dali_masks(frame, side)
    if dali is not None:
        resized["DALI fn.resize INTERP_NN (notebook 04)"] = dali
    results = {"what": __doc__.splitlines()[0], "device": device_description(),
               "versions": {**library_versions(), "opencv": cv2.__version__},
               "date": datetime.date.today().isoformat(), "images": len(frame), "image_size": side,
               "source_sides": {"min": int(min(min(m.shape) for m in sources)),
                                "max": int(max(max(m.shape) for m in sources))},
               "resizes": {name: against_centre(masks, reference) for name, masks in resized.items()}}
    write_json(args.out, results)
    for name, row in results["resizes"].items():
        print(f"{name}: centre {row['shift_down_px']['mean']:+.3f} px down, "
              f"{row['shift_right_px']['mean']:+.3f} px right; IoU to the centre-sampled mask "
              f"{row['iou_to_centre_sampled']['mean']:.4f} (min {row['iou_to_centre_sampled']['min']:.4f})")
    return results


if __name__ == "__main__":
    main()
