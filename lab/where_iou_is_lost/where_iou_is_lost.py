"""Where notebook 07's recipe loses hard IoU on the validation set: by type, nail size and kind of error.

One seed of 07's recipe trains over its whole schedule (07's ``time_to_accuracy`` with no
target to stop at), then predicts the validation images of notebook 03's uint8 cache (resized
as every validation is). Each image's error pixels are split into those within ``--band``
pixels of the true nail outline (an outline drawn slightly off) and the rest (a nail missed,
or found where there is none), and its IoU is recomputed with either kind corrected: which
one caps the IoU says what a better recipe has to fix. Beside it, the IoU that a prediction
one pixel too large or too small (the true mask dilated or eroded by one pixel) would score:
how hard each image's outline is to get right at this size. Horizontal-flip averaging of
the logits (test-time augmentation) is scored too.

    python -m lab.where_iou_is_lost.where_iou_is_lost --seed 0 --out lab/where_iou_is_lost/where_iou_is_lost_h100.json \\
        --predictions lab/where_iou_is_lost/where_iou_is_lost_predictions_h100.npz
    python -m lab.where_iou_is_lost.where_iou_is_lost --rescore lab/where_iou_is_lost/where_iou_is_lost_predictions_h100.npz \\
        --out lab/where_iou_is_lost/where_iou_is_lost_rescored_cpu.json   # against the cache's masks of today

``--profile smoke`` runs the same code on a CPU in a minute.
"""

from __future__ import annotations

import argparse
import datetime
import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from lab.where_iou_is_lost.helpers import recipe_of, warmed_up_model
from nailseg_common.data.preparation import read_split
from nailseg_common.measure.benchmark import training_datamodule
from nailseg_common.pipelines.kornia_pipeline import CACHE_FORMAT, load_cache
from nailseg_common.setup.environment import device_description, library_versions
from nailseg_common.setup.files import write_json
from nailseg_common.setup.paths import data_location
from nailseg_common.setup.profiles import PROFILES
from nailseg_common.training.fast_training import mask_iou, time_to_accuracy
from nailseg_common.training.unet import grown

HERE = Path(__file__).parent  # where this question's results are kept

SIZE_GROUPS = 4  # nail-share quartiles of the validation images
FLIPPED = {"plain": False, "flip_averaged": True}  # each kind of prediction: averaged with the flip?


def error_split(predicted: torch.Tensor, label: torch.Tensor, band: int) -> dict[str, torch.Tensor]:
    """Per image: the IoU, and the IoU with the errors near the outline (within ``band``
    pixels of it) or away from it corrected, and the share of error pixels near it."""
    near = grown(label, band) - grown(label, -band)  # the band around the true outline
    wrong = (predicted != label).float()
    outline_fixed = torch.where(near.bool(), label, predicted)
    objects_fixed = torch.where(near.bool(), predicted, label)
    errors = wrong.flatten(1).sum(1)
    return {"iou": mask_iou(predicted, label), "iou_outline_fixed": mask_iou(outline_fixed, label),
            "iou_objects_fixed": mask_iou(objects_fixed, label),
            "outline_error_share": torch.where(errors > 0, (wrong * near).flatten(1).sum(1)
                                               / errors.clamp_min(1), torch.zeros_like(errors))}


@torch.no_grad()
def predict(model: torch.nn.Module, images: torch.Tensor, batch: int, precision: str,
            flip: bool) -> torch.Tensor:
    """{0, 1} predictions (float, on the CPU) of uint8 ``images`` by 07's module; ``flip``:
    its ``flip_average`` (the logits averaged with the mirror image's)."""
    model.eval()
    model.hparams.flip_average = flip
    device, out = model.device, []
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision.startswith("bf16"))
    for start in range(0, len(images), batch):
        with autocast:
            logits = model(images[start:start + batch].to(device)).float()
        out.append((logits > 0).float().cpu())
    return torch.cat(out)


def scores_table(predicted: torch.Tensor, labels: torch.Tensor, types: list, band: int) -> pd.DataFrame:
    """One row per validation image: its type, nail share, :func:`error_split` and the IoU
    of its true mask grown and shrunk by one pixel."""
    frame = pd.DataFrame({key: value.numpy() for key, value in error_split(predicted, labels, band).items()})
    frame["type"] = types
    frame["nail_share"] = labels.flatten(1).mean(1).numpy()
    frame["iou_one_pixel_larger"] = mask_iou(grown(labels, 1), labels).numpy()
    frame["iou_one_pixel_smaller"] = mask_iou(grown(labels, -1), labels).numpy()
    frame["size_group"] = pd.qcut(frame["nail_share"].rank(method="first"), SIZE_GROUPS,
                                  labels=[f"Q{q + 1}" for q in range(SIZE_GROUPS)])
    return frame


def grouped(frame: pd.DataFrame, by: str) -> dict:
    """Mean of every score per group of ``by``, with the group's size and nail share range."""
    columns = [c for c in frame.columns if c.startswith("iou") or c == "outline_error_share"]
    table = frame.groupby(by, observed=True)[columns].mean()
    table["images"] = frame.groupby(by, observed=True).size()
    table["nail_share_min"] = frame.groupby(by, observed=True)["nail_share"].min()
    table["nail_share_max"] = frame.groupby(by, observed=True)["nail_share"].max()
    return {str(key): {name: int(value) if name == "images" else float(value)
                       for name, value in row.items()}
            for key, row in table.to_dict(orient="index").items()}


def scored(predictions: dict[str, torch.Tensor], labels: torch.Tensor, types: list, band: int) -> dict:
    """Per kind of prediction: the mean of every score, by type and by nail size."""
    results = {}
    for name, predicted in predictions.items():
        frame = scores_table(predicted, labels, types, band)
        results[name] = {**{column: float(frame[column].mean()) for column in
                            ("iou", "iou_outline_fixed", "iou_objects_fixed", "iou_one_pixel_larger",
                             "iou_one_pixel_smaller")},
                         "by_type": grouped(frame, "type"), "by_size": grouped(frame, "size_group")}
        print(f"{name}: IoU {results[name]['iou']:.4f}, with the outline fixed "
              f"{results[name]['iou_outline_fixed']:.4f}, with the objects fixed "
              f"{results[name]['iou_objects_fixed']:.4f}")
    return results


def rescored(saved: Path, num_images: int, band: int) -> dict:
    """The predictions of an earlier run (its ``--predictions`` file) scored against the
    validation masks of the cache as it is now, on this machine."""
    arrays = np.load(saved)
    shape = tuple(int(n) for n in arrays["shape"])
    unpacked = {name: torch.from_numpy(np.unpackbits(arrays[name])[:math.prod(shape)].reshape(shape)).float()
                for name in FLIPPED}
    location = data_location(num_images, None)
    labels = load_cache(location, shape[-1], "valid")[1].float()
    return {"what": "where_iou_is_lost's saved predictions scored against the current cache's masks",
            "predictions": saved.name, "cache_format": CACHE_FORMAT, "device": device_description(),
            "versions": library_versions(), "date": datetime.date.today().isoformat(), "band": band,
            **scored(unpacked, labels, read_split(location, "valid")["type"].tolist(), band)}


def main(argv: list[str] | None = None) -> dict:
    """Trains one seed (or reads saved predictions), scores the validation set; writes and
    returns the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "where_iou_is_lost_local.json",
                        help="the JSON report (default: in this folder)")
    parser.add_argument("--predictions", type=Path, help="also save the predictions (packed bits, npz)")
    parser.add_argument("--rescore", type=Path, help="score the saved predictions of an earlier run "
                        "against the current cache's masks instead of training (a CPU does)")
    parser.add_argument("--num-images", type=int, default=PROFILES["gpu"].num_images,
                        help="the synthetic set of --rescore")
    parser.add_argument("--profile", default="gpu")
    parser.add_argument("--band", type=int, default=2, help="pixels either side of the outline")
    args = parser.parse_args(argv)
    if args.rescore:
        results = rescored(args.rescore, args.num_images, args.band)
        write_json(args.out, results)
        return results
    cfg, data, fast = recipe_of(args.profile)
    model, compile_s = warmed_up_model(cfg, fast, data, args.seed)
    run = time_to_accuracy(model, training_datamodule(data, fast, args.seed), fast, math.inf)
    images, labels = load_cache(data, fast.image_size, "valid")
    types, labels = read_split(data, "valid")["type"].tolist(), labels.float()
    predictions = {name: predict(model, images, fast.batch_size, fast.precision, flip)
                   for name, flip in FLIPPED.items()}
    results = {"what": __doc__.splitlines()[0], "device": device_description(),
               "versions": library_versions(), "date": datetime.date.today().isoformat(),
               "profile": cfg.name, "seed": args.seed, "steps": run["steps"], "band": args.band,
               "cache_format": CACHE_FORMAT, "compile_s": compile_s, "fit_s": run["fit_s"],
               "history": run["history"], **scored(predictions, labels, types, args.band)}
    write_json(args.out, results)
    if args.predictions:
        args.predictions.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(args.predictions, labels=np.packbits(labels.numpy().astype(bool)),
                            shape=np.array(labels.shape), types=np.array(types, dtype=str),
                            **{name: np.packbits(p.numpy().astype(bool)) for name, p in predictions.items()})
    return results


if __name__ == "__main__":
    main()
