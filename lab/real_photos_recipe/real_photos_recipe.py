"""Which fine-tuning recipe does best on real photos? Notebook 06's fine-tuning, cross-validated.

    python -m lab.real_photos_recipe.real_photos_recipe --data-root PHOTOS --profile gpu \\
        --recipes r384_s120,r384_s600 --out runs.jsonl

Every recipe fine-tunes the same start (the checkpoint notebook 06 takes: the shipped model
where no local one is better) with 06's own functions (``start_model``, ``PhotosOnDevice``,
``fine_tune``), on k folds that keep the shots of one hand together (photos named
``<hand>_1``, ``<hand>_2``), and scores every held-out photo: hard Dice and IoU at
threshold 0.5, per photo, at the recipe's side; ``_flips``: the same models, each held-out
logit the mean of the photo's and its mirror's (test-time flip averaging). One JSON line per
recipe, with the zero-shot score of the start at the same side, device, versions and date.
``--profile smoke`` checks the code path in seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gc
import json
import re
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from nailseg_common.pipelines.kornia_pipeline import POLICY
from nailseg_common.setup.course import start
from nailseg_common.setup.environment import device_description, library_versions
from nailseg_common.training.fast_training import predict_at_half_resolution
from nailseg_common.training.finetune import (
    PhotosOnDevice,
    fine_tune,
    photos_on_device,
    predict_logits,
    score_photos,
    start_model,
)
from nailseg_common.training.run_logs import checkpoint_hparams, resolve_checkpoint

RECIPES = {  # name: side, optimizer steps, peak learning rate, keep BatchNorm statistics (batch:
    # images a step, else --batch; crop: the side of the random window a training step sees;
    # freeze_encoder: train the decoder and head only; freeze_modules: N, the encoder's first N
    # modules kept as they are; augment False: no augmentation, so what frozen modules compute
    # of each photo could be computed once; half_head: notebook 07's half-resolution head, its
    # convolution new)
    "r384_s120": {"side": 384, "steps": 120, "lr": 7e-4, "keep": False},
    "r384_s120_lr1.4e-3": {"side": 384, "steps": 120, "lr": 1.4e-3, "keep": False},
    "r384_s120_lr2e-3": {"side": 384, "steps": 120, "lr": 2e-3, "keep": False},
    "r384_s240_lr2e-3": {"side": 384, "steps": 240, "lr": 2e-3, "keep": False},
    "r384_s600": {"side": 384, "steps": 600, "lr": 7e-4, "keep": False},
    "r384_s600_lr3e-4": {"side": 384, "steps": 600, "lr": 3e-4, "keep": False},
    "r384_s600_lr2e-3": {"side": 384, "steps": 600, "lr": 2e-3, "keep": False},
    "r384_s600_keep": {"side": 384, "steps": 600, "lr": 7e-4, "keep": True},
    "r384_s1500": {"side": 384, "steps": 1500, "lr": 7e-4, "keep": False},
    "r384_s1200_lr2e-3": {"side": 384, "steps": 1200, "lr": 2e-3, "keep": False},
    "r512_s600": {"side": 512, "steps": 600, "lr": 7e-4, "keep": False},
    "r256_s600": {"side": 256, "steps": 600, "lr": 7e-4, "keep": False},
    "cpu160_s40": {"side": 160, "steps": 40, "lr": 1e-4, "keep": True},
    "cpu160_s40_lr3e-4": {"side": 160, "steps": 40, "lr": 3e-4, "keep": True},
    "cpu160_s40_lr1e-3": {"side": 160, "steps": 40, "lr": 1e-3, "keep": True},
    "cpu192_s40_lr3e-4": {"side": 192, "steps": 40, "lr": 3e-4, "keep": True},
    "cpu160_s80_lr3e-4": {"side": 160, "steps": 80, "lr": 3e-4, "keep": True},
    "cpu160_s80_lr1e-3": {"side": 160, "steps": 80, "lr": 1e-3, "keep": True},
    "cpu160_s80_lr1e-3_relearn": {"side": 160, "steps": 80, "lr": 1e-3, "keep": False},
    "cpu160_s160_lr1e-3": {"side": 160, "steps": 160, "lr": 1e-3, "keep": True},
    "cpu160_s80_lr3e-4_bf16": {"side": 160, "steps": 80, "lr": 3e-4, "keep": True, "precision": "bf16-mixed"},
    "cpu160_s80_lr3e-4_bf16_cl": {"side": 160, "steps": 80, "lr": 3e-4, "keep": True, "precision": "bf16-mixed",
                                  "channels_last": True},
    "cpu160_s160_lr1e-3_bf16_cl": {"side": 160, "steps": 160, "lr": 1e-3, "keep": True, "precision": "bf16-mixed",
                                   "channels_last": True},
    "cpu192_s160_lr1e-3_bf16_cl": {"side": 192, "steps": 160, "lr": 1e-3, "keep": True, "precision": "bf16-mixed",
                                   "channels_last": True},
    "r192_s160_lr1e-3_b8": {"side": 192, "steps": 160, "lr": 1e-3, "keep": True, "batch": 8},
    "r192_s640_lr1e-3_b8": {"side": 192, "steps": 640, "lr": 1e-3, "keep": True, "batch": 8},
    "r192_s320_lr1e-3_b8": {"side": 192, "steps": 320, "lr": 1e-3, "keep": True, "batch": 8},
    "r256_s160_lr1e-3_b8": {"side": 256, "steps": 160, "lr": 1e-3, "keep": True, "batch": 8},
    "r160_s1200_lr2e-3": {"side": 160, "steps": 1200, "lr": 2e-3, "keep": False, "batch": 32},
    "r192_s1200_lr2e-3": {"side": 192, "steps": 1200, "lr": 2e-3, "keep": False, "batch": 32},
    "r256_s1200_lr2e-3": {"side": 256, "steps": 1200, "lr": 2e-3, "keep": False, "batch": 32},
    "r384_s1200_lr2e-3_plain": {"side": 384, "steps": 1200, "lr": 2e-3, "keep": False, "batch": 32,
                                "augment": False},
    "r256_s1200_lr2e-3_plain": {"side": 256, "steps": 1200, "lr": 2e-3, "keep": False, "batch": 32,
                                "augment": False},
    "r512_s600_lr2e-3": {"side": 512, "steps": 600, "lr": 2e-3, "keep": False, "batch": 32},
    "r192_s640_lr1e-3_b8_crop96": {"side": 192, "steps": 640, "lr": 1e-3, "keep": True, "batch": 8,
                                   "crop": 96},
    "r192_s640_lr1e-3_b8_crop128": {"side": 192, "steps": 640, "lr": 1e-3, "keep": True,
                                    "batch": 8, "crop": 128},
    "r192_s1280_lr1e-3_b8_crop96": {"side": 192, "steps": 1280, "lr": 1e-3, "keep": True,
                                    "batch": 8, "crop": 96},
    "r192_s640_lr1e-3_b8_plain": {"side": 192, "steps": 640, "lr": 1e-3, "keep": True, "batch": 8,
                                  "augment": False},
    "r192_s640_lr1e-3_b8_frozen": {"side": 192, "steps": 640, "lr": 1e-3, "keep": True, "batch": 8,
                                   "freeze_encoder": True},
    "r192_s640_lr1e-3_b8_frozen_plain": {"side": 192, "steps": 640, "lr": 1e-3, "keep": True,
                                         "batch": 8, "freeze_encoder": True, "augment": False},
    "r192_s1280_lr1e-3_b8_frozen_plain": {"side": 192, "steps": 1280, "lr": 1e-3, "keep": True,
                                          "batch": 8, "freeze_encoder": True, "augment": False},
    "r192_s640_lr3e-3_b8_frozen_plain": {"side": 192, "steps": 640, "lr": 3e-3, "keep": True,
                                         "batch": 8, "freeze_encoder": True, "augment": False},
    "r192_s640_lr1e-3_b8_plain_freeze7": {"side": 192, "steps": 640, "lr": 1e-3, "keep": True,
                                          "batch": 8, "augment": False, "freeze_modules": 7},
    "r192_s640_lr1e-3_b8_plain_half": {"side": 192, "steps": 640, "lr": 1e-3, "keep": True,
                                       "batch": 8, "augment": False, "half_head": True},
    "r192_s640_lr1e-3_b8_plain_half_freeze7": {"side": 192, "steps": 640, "lr": 1e-3, "keep": True,
                                               "batch": 8, "augment": False, "half_head": True,
                                               "freeze_modules": 7},
    "r192_s1280_lr1e-3_b8_plain_half_freeze7": {"side": 192, "steps": 1280, "lr": 1e-3,
                                                "keep": True, "batch": 8, "augment": False,
                                                "half_head": True, "freeze_modules": 7},
    "smoke": {"side": 64, "steps": 2, "lr": 1e-3, "keep": True},
    "smoke_crop": {"side": 64, "steps": 2, "lr": 1e-3, "keep": True, "crop": 32},
    "smoke_half_freeze7": {"side": 64, "steps": 2, "lr": 1e-3, "keep": True, "augment": False,
                           "half_head": True, "freeze_modules": 7},
    "smoke_frozen_plain": {"side": 64, "steps": 2, "lr": 1e-3, "keep": True, "freeze_encoder": True,
                           "augment": False},
}


class Windows(Dataset):
    """Batches of ``photos`` cut to one random ``crop``×``crop`` window each (one window for the
    whole batch, drawn from ``seed``): a step on a quarter of the pixels costs about a quarter."""

    def __init__(self, photos: Dataset, crop: int, seed: int):
        self.photos, self.crop = photos, crop
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return len(self.photos)

    def __getitem__(self, rows) -> dict[str, torch.Tensor]:
        batch = self.photos[rows]
        top, left = (int(torch.randint(0, side - self.crop + 1, (1,), generator=self.generator))
                     for side in batch["image"].shape[-2:])
        return {key: value[..., top:top + self.crop, left:left + self.crop].contiguous()
                for key, value in batch.items()}


class PhotosInWindows(PhotosOnDevice):
    """:class:`PhotosOnDevice` whose training batches are :class:`Windows` of ``crop`` pixels;
    validation sees whole photos."""

    def __init__(self, *args, crop: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.crop = crop

    def train_dataloader(self) -> DataLoader:
        whole = super().train_dataloader()
        return DataLoader(Windows(whole.dataset, self.crop, self.seed), sampler=whole.sampler,
                          batch_size=None)


def hand_of(name: str) -> str:
    """The hand a photo ``<hand>_<n>`` (any folder, any suffix) shows."""
    return re.sub(r"_\d+$", "", Path(name).stem)


def hand_folds(names: list[str], folds: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(training, held_out)`` indices of each fold; the shots of one hand (``<hand>_<n>``)
    share a fold."""
    hands = [hand_of(name) for name in names]
    groups = sorted(set(hands))
    order = np.random.default_rng(seed).permutation(len(groups))
    fold_of = {groups[g]: i % folds for i, g in enumerate(order)}
    index = np.arange(len(names))
    held = [index[[fold_of[h] == fold for h in hands]] for fold in range(folds)]
    return [(np.random.default_rng(seed + k).permutation(index[~np.isin(index, h)]), h)
            for k, h in enumerate(held)]


def mean_se(values) -> dict:
    """Mean, standard error of the mean and count of ``values``."""
    values = np.asarray(values, dtype=float)
    return {"mean": float(values.mean()), "se": float(values.std(ddof=1) / np.sqrt(len(values))),
            "n": len(values)}


def run_recipe(name: str, recipe: dict, args, prepared: dict) -> dict:
    """The JSON line of ``recipe`` cross-validated on ``args.data_root``; ``prepared`` keeps
    the photos on the device at each side already read."""
    side = recipe["side"]
    if side not in prepared:
        cfg, data = start(args.profile, args.data_root, image_size=side, batch_size=args.batch)
        frame, photos = photos_on_device(data, cfg)
        prepared[side] = (cfg, frame, photos)
    cfg, frame, photos = prepared[side]
    cfg = dataclasses.replace(cfg, batch_size=recipe.get("batch", cfg.batch_size),
                              finetune_steps=recipe["steps"], finetune_lr=recipe["lr"],
                              finetune_keep_statistics=recipe["keep"],
                              precision=recipe.get("precision", cfg.precision))
    checkpoint = resolve_checkpoint(args.checkpoint, cfg)
    encoder = checkpoint_hparams(checkpoint)["encoder"]
    zero = start_model("synthetic", encoder, cfg.finetune_lr, cfg.finetune_steps, checkpoint)
    zero_scores = score_photos(predict_logits(zero, photos.images, flips=False), photos.labels,
                               frame)
    del zero
    dice = {flips: [] for flips in (False, True)}  # per seed, one score per photo
    iou = []
    began = time.perf_counter()
    for repeat in range(args.seeds):
        folds = hand_folds(list(frame["image"]), args.folds, seed=repeat)
        logits = {flips: torch.zeros(len(frame), 1, side, side) for flips in (False, True)}
        for fold, (train, held_out) in enumerate(folds):
            seed = repeat * len(folds) + fold
            model = start_model("synthetic", encoder, cfg.finetune_lr, cfg.finetune_steps,
                                checkpoint)
            model.hparams.channels_last = recipe.get("channels_last")  # None: on a GPU only
            batches = (photos, train, held_out, cfg.batch_size, cfg.finetune_steps)
            if "crop" in recipe:
                datamodule = PhotosInWindows(*batches, seed=seed, crop=recipe["crop"])
            else:
                datamodule = PhotosOnDevice(*batches, seed=seed)
            if recipe.get("half_head"):
                predict_at_half_resolution(model.model)
            if recipe.get("freeze_encoder"):
                model.model.encoder.requires_grad_(False)  # AdamW skips weights without gradients
            if recipe.get("freeze_modules"):  # a MobileNetV2 encoder's modules, in order
                model.model.encoder.features[:recipe["freeze_modules"]].requires_grad_(False)
            policy = POLICY if recipe.get("augment", True) else {}  # {}: floats only
            fine_tune(model, datamodule, cfg, f"lab_{name}", seed=seed, policy=policy)
            for flips, held_out_logits in logits.items():
                held_out_logits[held_out] = predict_logits(model, photos.images[held_out],
                                                              flips=flips)
            del model, datamodule  # with the CUDA graphs of the fold: gone before the next
            gc.collect()
            torch.cuda.empty_cache()
        tables = {flips: score_photos(logits[flips], photos.labels, frame) for flips in dice}
        for flips, by_seed in dice.items():
            by_seed.append(tables[flips]["dice"].to_numpy())
        iou.append(tables[True]["iou"].to_numpy())
    seconds = (time.perf_counter() - began) / args.seeds
    plain, flipped = (np.mean(dice[flips], axis=0) for flips in (False, True))
    return {"recipe": name, **recipe, "batch": cfg.batch_size, "encoder": encoder,
            "checkpoint": checkpoint.name, "folds": args.folds, "seeds": args.seeds,
            "photos": len(frame),
            "fine_tuned_dice": mean_se(plain), "fine_tuned_dice_flips": mean_se(flipped),
            "fine_tuned_iou_flips": mean_se(np.mean(iou, axis=0)),
            "seed_means": [round(float(d.mean()), 4) for d in dice[False]],
            "seed_means_flips": [round(float(d.mean()), 4) for d in dice[True]],
            "flips_gain": mean_se(flipped - plain),
            "zero_shot_dice": mean_se(zero_scores["dice"]),
            "gain": mean_se(plain - zero_scores["dice"]),
            "worst_dice": float(plain.min()), "seconds_all_folds": seconds,
            "photo_dice": [round(float(d), 4) for d in plain],
            "device": device_description(), "versions": library_versions(),
            "date": datetime.date.today().isoformat(), "profile": cfg.name}


def main(argv: list[str] | None = None) -> None:
    """Run each of ``--recipes`` and append its line to ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--profile", default="")
    parser.add_argument("--recipes", default="r384_s120,r384_s600")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=1,
                        help="repeats, each with its own folds and seeds; scores per photo "
                             "averaged over them")
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--checkpoint", default="")
    parser.add_argument("--out", type=Path, required=True, help="JSON lines, one per recipe")
    args = parser.parse_args(argv)
    prepared: dict = {}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    shown = ("recipe", "fine_tuned_dice", "fine_tuned_dice_flips", "zero_shot_dice",
             "seconds_all_folds")
    for name in args.recipes.split(","):
        row = run_recipe(name, RECIPES[name], args, prepared)
        print(json.dumps({key: row[key] for key in shown}), flush=True)
        with args.out.open("a") as lines:
            lines.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
