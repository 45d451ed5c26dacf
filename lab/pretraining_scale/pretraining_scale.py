"""Does pretraining on more synthetic images, or for longer, transfer better to real photos?

    python -m lab.pretraining_scale.pretraining_scale --sets 5 --steps 3600 --out DIR

Draws ``--sets`` sets of the generator's ``wide`` style (``--set-images`` each, generator
seeds 0, 1, ...; the shipped model was trained on the first 2400-image one), prepares each as
notebook 01 does, and trains the shipped model's U-Net (MobileNetV2 encoder) from random
weights on all their training photos with notebook 06's trainer (``start_model``,
``PhotosOnDevice``, ``fine_tune``: photos on the GPU, the course's Kornia augmentation, a
cosine schedule, the final weights kept; ``--seed``: weights, batches and augmentations).
Writes ``DIR/<name>.pt`` (``save_weights`` in half precision, as ``predict --checkpoint`` and
``tools/ship_model`` take them) and ``DIR/<name>.json`` (hard Dice on the first set's
validation photos, seconds, device, versions, date). Zero-shot on real photos:
``lab.wide_pretraining.wide_pretraining``.
"""

from __future__ import annotations

import argparse
import datetime
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch

from nailseg_common.data.preparation import ensure_prepared
from nailseg_common.data.synthetic import ensure_synthetic_dataset
from nailseg_common.pipelines.kornia_pipeline import BatchSlices, ensure_cache, load_cache
from nailseg_common.setup.course import start
from nailseg_common.setup.environment import device_description, library_versions
from nailseg_common.setup.files import write_json
from nailseg_common.setup.paths import data_dir
from nailseg_common.setup.profiles import select_profile
from nailseg_common.training.finetune import (
    PhotosOnDevice,
    fine_tune,
    predict_logits,
    save_weights,
    start_model,
)
from nailseg_common.training.unet import per_image_dice


def prepared_set(seed: int, images: int, profile: str, side: int):
    """The ``wide`` set of generator ``seed``, drawn, prepared (notebook 01's checks and
    split) and cached at ``side``; returns the data location. No environment report: the
    main process's ``start`` gives it once."""
    root = ensure_synthetic_dataset(data_dir() / f"wide-{images}-seed{seed}", images,
                                    seed=seed, progress=False, style="wide")
    data = ensure_prepared(select_profile(profile, image_size=side), root, progress=False)
    ensure_cache(data, side)
    return data


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=1, help="sets drawn, generator seeds 0..")
    parser.add_argument("--set-images", type=int, default=2400,
                        help="images a set (the shipped model's set: tools/train_wide.sh)")
    parser.add_argument("--steps", type=int, default=3600)
    parser.add_argument("--lr", type=float, default=7e-4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--side", type=int, default=384)
    parser.add_argument("--seed", type=int, default=0, help="training seed (not the generator's)")
    parser.add_argument("--profile", default="gpu")
    parser.add_argument("--prepare-only", action="store_true", help="draw and prepare, no training")
    parser.add_argument("--name", default="")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    with ProcessPoolExecutor(args.sets) as pool:  # the sets drawn side by side
        sets = list(pool.map(prepared_set, range(args.sets), [args.set_images] * args.sets,
                             [args.profile] * args.sets, [args.side] * args.sets))
    if args.prepare_only:
        return
    cfg = start(args.profile, sets[0].raw, image_size=args.side, batch_size=args.batch)[0]
    train = [load_cache(data, args.side, "train") for data in sets]
    valid = load_cache(sets[0], args.side, "valid")  # the first set's validation photos
    images, labels = (torch.cat([part[kind] for part in [*train, valid]]).to(cfg.device)
                      for kind in (0, 1))
    count = sum(len(part[0]) for part in train)
    name = args.name or f"sets{args.sets}_steps{args.steps}_seed{args.seed}"
    model = start_model("random", "mobilenet_v2", args.lr, args.steps, seed=args.seed)
    datamodule = PhotosOnDevice(BatchSlices(images, labels), np.arange(count),
                                np.arange(count, len(images)), args.batch, args.steps, args.seed)
    began = time.perf_counter()
    fine_tune(model, datamodule, cfg, f"lab_pretraining_{name}", seed=args.seed)
    seconds = time.perf_counter() - began
    logits = predict_logits(model, images[count:], flips=False)
    dice = per_image_dice(logits, labels[count:].cpu())
    save_weights(model.cpu().half(), args.out / f"{name}.pt", args.side)  # as the shipped model
    write_json(args.out / f"{name}.json", {
        "sets": args.sets, "set_images": args.set_images, "training_images": count,
        "steps": args.steps, "lr": args.lr, "batch": args.batch, "side": args.side,
        "style": "wide", "generator_seeds": list(range(args.sets)), "seed": args.seed,
        "training_seconds": round(seconds, 1),
        "synthetic_valid_dice": round(float(dice.mean()), 4), "valid_images": len(dice),
        "device": device_description(), "versions": library_versions(),
        "date": datetime.date.today().isoformat()})
    print(f"{name}: {count} images, {args.steps} steps in {seconds:.0f} s, synthetic "
          f"validation hard Dice {float(dice.mean()):.3f}")


if __name__ == "__main__":
    main()
