"""Recipe experiments for notebook 07's time to accuracy and the course recipe, on a GPU.

One JSON line per run (``--out``): the knobs, the seed, every validation (step, seconds,
hard IoU and Dice), whether IoU 0.85 was reached. The data is the course's uint8 cache held
on the GPU, augmented by notebook 03's fused Kornia policy in the step. Several of these
processes may share one GPU to compare *accuracy* (steps to a target, final scores); their
seconds are then not comparable. How the committed results were made (each process one
config and seed, up to four at once, on a lent H100):

    python -m lab.time_to_accuracy_recipes.sweep_time_to_accuracy --configs c256,c256_s800 --out sweep.jsonl
    python -m lab.time_to_accuracy_recipes.sweep_time_to_accuracy --configs course_lr7e-4 --seeds 1 --out lr.jsonl
    python -m lab.time_to_accuracy_recipes.sweep_time_to_accuracy --step-rates default --out rates.jsonl  # compiled img/s

``--profile smoke --configs test`` checks the code path on a CPU in seconds.
Results: ``lab/time_to_accuracy_recipes/time_to_accuracy_sweep_h100.json``, ``lab/course_recipe_lr/course_recipe_lr_h100.json``,
``lab/time_to_accuracy_recipes/time_to_accuracy_lr_v4_h100.json``, ``lab/time_to_accuracy_recipes/time_to_accuracy_ceiling_h100.json``,
``lab/time_to_accuracy_recipes/time_to_accuracy_recipes_v4_h100.json``, ``lab/time_to_accuracy_recipes/time_to_accuracy_longer_v4_h100.json``,
``lab/time_to_accuracy_recipes/time_to_accuracy_bilinear_h100.json``: all made on the cache of format 2, whose masks
sat half a pixel off their images (``lab/mask_alignment/mask_alignment``; format 3 puts them on the grid);
``lab/time_to_accuracy_recipes/time_to_accuracy_progressive_h100.json`` (progressive resizing: ``side``,
``side_until``) on format 3; ``time_to_accuracy_t83_seeds_h100.json`` and
``time_to_accuracy_t83_levers_h100.json``, ``time_to_accuracy_t83_policy_h100.json`` and
``time_to_accuracy_t83_ema_h100.json`` (each run alone on its GPU, stopped at IoU 0.83),
their summaries written by ``--summarise FILE`` from their runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import statistics
import time

import pytorch_lightning as pl
import segmentation_models_pytorch as smp
import torch
import torch.nn.functional as F
from pytorch_lightning.callbacks import Callback

from nailseg_common.data.preparation import ensure_prepared
from nailseg_common.pipelines.kornia_pipeline import KorniaAugmentation, ensure_cache, load_cache
from nailseg_common.pipelines.policy import POLICY
from nailseg_common.setup.files import write_json
from nailseg_common.setup.profiles import select_profile, set_matmul_precision
from nailseg_common.training.fast_training import (
    AccuracyClock,
    AverageWeights,
    FastNailSegmentation,
    predict_at_half_resolution,
    warm_up,
)
from nailseg_common.training.trainer import make_trainer
from nailseg_common.training.unet import soft_dice_loss, to_unit_float


def spread(values: list[float]) -> dict:
    """Median and range (as ``tools/time_to_accuracy_seeds.py`` reports them)."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}



class GpuBatches:
    """Batches drawn from uint8 tensors on the GPU; random crops of ``crop`` px if given."""

    def __init__(self, images, labels, batch, shuffle, seed=0, crop=None, crop_until=None):
        self.images, self.labels, self.batch, self.shuffle = images, labels, batch, shuffle
        self.crop, self.crop_until = crop, crop_until
        self.generator = torch.Generator(images.device).manual_seed(seed)
        self.steps_done = 0

    def __len__(self):
        n = self.images.shape[0]
        return n // self.batch if self.shuffle else math.ceil(n / self.batch)

    def __iter__(self):
        n = self.images.shape[0]
        order = (torch.randperm(n, device=self.images.device, generator=self.generator)
                 if self.shuffle else torch.arange(n, device=self.images.device))
        for i in range(len(self)):
            index = order[i * self.batch:(i + 1) * self.batch]
            image, label = self.images[index], self.labels[index]
            cropping = self.crop and (self.crop_until is None or self.steps_done < self.crop_until)
            if self.shuffle and cropping:
                image, label = self.random_crop(image, label)
            self.steps_done += self.shuffle
            yield {"image": image, "label": label}

    def random_crop(self, image, label):
        b, _, h, w = image.shape
        c = self.crop
        oy = torch.randint(0, h - c + 1, (b,), device=image.device, generator=self.generator)
        ox = torch.randint(0, w - c + 1, (b,), device=image.device, generator=self.generator)
        r = torch.arange(c, device=image.device)
        ys = (oy[:, None] + r)[:, None, :, None]
        xs = (ox[:, None] + r)[:, None, None, :]
        bi = torch.arange(b, device=image.device)[:, None, None, None]
        return (image[bi, torch.arange(3, device=image.device)[None, :, None, None], ys, xs],
                label[bi, torch.zeros(1, 1, 1, 1, dtype=torch.long, device=image.device), ys, xs])


class Resident(pl.LightningDataModule):
    def __init__(self, tensors, batch, seed, crop=None, crop_until=None):
        super().__init__()
        self.tensors, self.batch, self.seed, self.crop, self.crop_until = tensors, batch, seed, crop, crop_until

    def train_dataloader(self):
        return GpuBatches(*self.tensors["train"], self.batch, True, self.seed, self.crop, self.crop_until)

    def val_dataloader(self):
        return GpuBatches(*self.tensors["valid"], 60, False)


class Recipe(FastNailSegmentation):
    """07's module with the sweep's knobs; ``decoder_interpolation`` and ``decoder_channels``
    rebuild the U-Net with smp's upsampling mode and decoder widths (before compiling it);
    ``side``: training batches resized to that
    side (image area-averaged, label area-averaged and thresholded at 0.5) for the first
    ``side_until`` steps (progressive resizing; validation stays at full size);
    ``positive_fraction``: the head's bias starts at its logit and each residual block's last
    batch norm at zero (the block starts as its shortcut); ``half_resolution_head``: 07's
    :func:`predict_at_half_resolution`."""

    def __init__(self, *, lovasz=True, decoder_interpolation="nearest",
                 decoder_channels=None, compile_model=False, side=None, side_until=None,
                 positive_fraction=None, half_resolution_head=False, **kwargs):
        super().__init__(**kwargs)
        if decoder_interpolation != "nearest" or decoder_channels:
            widths = {"decoder_channels": tuple(decoder_channels)} if decoder_channels else {}
            self.model = smp.Unet(encoder_name=self.hparams.encoder, encoder_weights=None, in_channels=3,
                                  classes=1, decoder_interpolation=decoder_interpolation, **widths)
        if half_resolution_head:
            predict_at_half_resolution(self.model)
        if positive_fraction is not None:
            with torch.no_grad():
                for block in self.model.encoder.modules():
                    if hasattr(block, "bn2") and hasattr(block, "conv2"):  # torchvision BasicBlock
                        block.bn2.weight.zero_()
                head = [m for m in self.model.segmentation_head.modules() if isinstance(m, torch.nn.Conv2d)][-1]
                head.bias.fill_(math.log(positive_fraction / (1 - positive_fraction)))
        if compile_model:
            self.model.compile()

    def on_after_batch_transfer(self, batch, dataloader_idx):
        out = super().on_after_batch_transfer(batch, dataloader_idx)
        side, until = self.hparams.side, self.hparams.side_until
        if side and self.trainer.training and (until is None or self.trainer.global_step < until):
            out["image"] = F.interpolate(out["image"], size=(side, side), mode="area")
            out["label"] = (F.interpolate(out["label"], size=(side, side), mode="area") >= 0.5).float()
        return out

    def _loss(self, logits, label):
        if self.hparams.lovasz:
            return super()._loss(logits, label)
        return F.binary_cross_entropy_with_logits(logits.float(), label.float()) + soft_dice_loss(logits, label)


class BilinearLabelPolicy(torch.nn.Module):
    """The policy with the label resampled bilinearly and thresholded at 0.5 by the flips and
    the affine (notebook 03's fused module resamples it to the nearest pixel), then the
    policy's photometric ops by that module."""

    def __init__(self, seed):
        super().__init__()
        self.seed, self.generators = seed, {}
        self.photometric = KorniaAugmentation({k: v for k, v in POLICY.items() if not v.geometric},
                                              seed=seed + 1)

    @torch.no_grad()
    def forward(self, image, label):
        image, label = to_unit_float(image), label.float()
        device = str(image.device)
        if device not in self.generators:
            self.generators[device] = torch.Generator(image.device).manual_seed(self.seed)
        u = torch.rand(image.shape[0], 7, device=image.device, generator=self.generators[device])
        q, flips = POLICY["affine"].params, [POLICY["horizontal_flip"], POLICY["vertical_flip"]]
        flip_x, flip_y = (torch.where(u[:, i] < op.probability, -1.0, 1.0) for i, op in enumerate(flips))
        on = u[:, 2] < POLICY["affine"].probability
        angle = torch.where(on, torch.deg2rad((2 * u[:, 3] - 1) * q["rotate_deg"]), 0.0)
        scale = torch.where(on, q["scale"][0] + (q["scale"][1] - q["scale"][0]) * u[:, 4], 1.0)
        shift_x, shift_y = (torch.where(on, (2 * u[:, i] - 1) * 2 * q["translate"], 0.0) for i in (5, 6))
        cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale  # square images: p_in =
        a, b, c, d = flip_x * cos, flip_x * sin, -flip_y * sin, flip_y * cos  # F·R(-angle)/scale·(p_out - shift)
        theta = torch.stack([torch.stack([a, b, -(a * shift_x + b * shift_y)], -1),
                             torch.stack([c, d, -(c * shift_x + d * shift_y)], -1)], -2)
        grid = F.affine_grid(theta, list(label.shape), align_corners=False)
        image = F.grid_sample(image, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        label = (F.grid_sample(label, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
                 > 0.5).float()
        return self.photometric(image, label)


class ValidationLog(Callback):
    """Prints each validation as a JSON line, so that a run cut short still leaves its curve,
    and adds up its seconds in ``validation_s`` (CUDA synchronized at both ends)."""

    def __init__(self, name, seed):
        self.name, self.seed = name, seed
        self.validation_s, self._start = 0.0, None

    def on_validation_start(self, trainer, pl_module):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self._start = time.perf_counter()

    def on_validation_end(self, trainer, pl_module):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.validation_s += time.perf_counter() - self._start
        print(json.dumps({"name": self.name, "seed": self.seed, "step": trainer.global_step,
                          "val_iou": round(float(trainer.callback_metrics["val_iou"]), 4)}), flush=True)


BASE = {"crop": None, "batch": 60, "lr": 2e-3, "warmup": 50, "steps": 1500, "val_every": 3, "ema": None, "tta": False,
            "policy": "full", "lovasz": True, "crop_until": None, "target": 0.85,
            "decoder_interpolation": "nearest", "label_resample": "nearest", "side": None, "side_until": None,
            "init": False, "encoder": None, "decoder_channels": None,
            "half_resolution_head": False}
CONFIGS = {
    "base384": {},
    "c256": {"crop": 256},
    "c256_s800": {"crop": 256, "steps": 800, "lr": 3e-3},
    "c256_s800_ema": {"crop": 256, "steps": 800, "lr": 3e-3, "ema": 0.98},
    "c256_s800_tta": {"crop": 256, "steps": 800, "lr": 3e-3, "tta": True},
    "c256_s800_geo": {"crop": 256, "steps": 800, "lr": 3e-3, "policy": "geometric"},
    "c256_s600_all": {"crop": 256, "steps": 600, "lr": 4e-3, "ema": 0.98, "tta": True},
    "c256_b96_s500": {"crop": 256, "batch": 96, "steps": 500, "lr": 4e-3, "warmup": 30},
    "c192_s800": {"crop": 192, "steps": 800, "lr": 3e-3},
    "c256to384_s800": {"crop": 256, "steps": 800, "lr": 3e-3, "crop_until": 600},
    "c256_s800_nolovasz": {"crop": 256, "steps": 800, "lr": 3e-3, "lovasz": False},
    "s800_ema": {"steps": 800, "lr": 3e-3, "ema": 0.98},
    "c256_s800_v2": {"crop": 256, "steps": 800, "lr": 3e-3, "val_every": 2},
    "c256_s500_all": {"crop": 256, "steps": 500, "lr": 4e-3, "ema": 0.98, "tta": True},
    "c256_s600_all_geo": {"crop": 256, "steps": 600, "lr": 4e-3, "ema": 0.98, "tta": True, "policy": "geometric"},
    "c224_s600_all": {"crop": 224, "steps": 600, "lr": 4e-3, "ema": 0.98, "tta": True},
    "v4_lr3e-3": {"lr": 3e-3},
    "v4_lr4e-3": {"lr": 4e-3},
    "tta_ema384": {"ema": 0.99, "tta": True},
    "b30_s3000": {"batch": 30, "lr": 1.4e-3, "steps": 3000, "warmup": 100},
    "b120_s750": {"batch": 120, "lr": 3e-3, "steps": 750, "warmup": 25},
    "c256_s2500": {"crop": 256, "steps": 2500},
    "s2000": {"steps": 2000},
    "bilinear_decoder": {"decoder_interpolation": "bilinear"},
    "bilinear_labels": {"label_resample": "bilinear"},
    "bilinear_both": {"decoder_interpolation": "bilinear", "label_resample": "bilinear"},
    "ceiling_lr2e-3": {"steps": 3000, "target": None},
    "ceiling_lr1e-3": {"steps": 3000, "lr": 1e-3, "target": None},
    "course_lr1e-3": {"batch": 32, "lr": 1e-3, "warmup": 0, "steps": 1800, "target": None},
    "course_lr2e-3": {"batch": 32, "lr": 2e-3, "warmup": 0, "steps": 1800, "target": None},
    "course_lr5e-4": {"batch": 32, "lr": 5e-4, "warmup": 0, "steps": 1800, "target": None},
    "course_lr7e-4": {"batch": 32, "lr": 7e-4, "warmup": 0, "steps": 1800, "target": None},
    "r192_s1500": {"side": 192, "side_until": 1300},
    "r192_s1200": {"steps": 1200, "side": 192, "side_until": 1050},
    "r192_s1200_early": {"steps": 1200, "side": 192, "side_until": 900},
    "r192_s1200_init": {"steps": 1200, "side": 192, "side_until": 1050, "init": True},
    "r256_s1500": {"side": 256, "side_until": 1300},
    "test_side": {"batch": 8, "steps": 4, "warmup": 1, "val_every": 1, "side": 32, "side_until": 2, "init": True},
    # the level every seed reaches (IoU 0.83), each change alone, then together
    "t83_base": {"target": 0.83},
    "t83_init": {"target": 0.83, "init": True},
    "t83_r18": {"target": 0.83, "encoder": "resnet18"},
    "t83_dec_half": {"target": 0.83, "decoder_channels": (128, 64, 32, 16, 8)},
    "t83_r18_half_init": {"target": 0.83, "encoder": "resnet18", "decoder_channels": (128, 64, 32, 16, 8),
                          "init": True},
    "t83_crop256": {"target": 0.83, "crop": 256},
    "t83_crop256_r18_half_init": {"target": 0.83, "crop": 256, "encoder": "resnet18",
                                  "decoder_channels": (128, 64, 32, 16, 8), "init": True},
    "t83_dec_half_init": {"target": 0.83, "decoder_channels": (128, 64, 32, 16, 8), "init": True},
    "t83_dec_half_up2": {"target": 0.83, "decoder_channels": (128, 64, 32, 16, 8), "half_resolution_head": True},
    "t83_up2": {"target": 0.83, "half_resolution_head": True},
    "t83_up2_s1200": {"target": 0.83, "half_resolution_head": True, "steps": 1200},
    "t83_up2_s1000": {"target": 0.83, "half_resolution_head": True, "steps": 1000},
    "t83_up2_s800": {"target": 0.83, "half_resolution_head": True, "steps": 800},
    "t83_up2_s1000_lr3": {"target": 0.83, "half_resolution_head": True, "steps": 1000, "lr": 3e-3},
    "t83_up2_ema98": {"target": 0.83, "half_resolution_head": True, "ema": 0.98},
    "t83_up2_ema99": {"target": 0.83, "half_resolution_head": True, "ema": 0.99},
    "t83_up2_ema98_tta": {"target": 0.83, "half_resolution_head": True, "ema": 0.98, "tta": True},
    "t83_up2_lr3": {"target": 0.83, "half_resolution_head": True, "lr": 3e-3},
    "t83_up2_tta": {"target": 0.83, "half_resolution_head": True, "tta": True},
    "t83_up2_ema98_tta_s1200": {"target": 0.83, "half_resolution_head": True, "ema": 0.98, "tta": True,
                                "steps": 1200},
    "t83_up2_ema98_tta_flips": {"target": 0.83, "half_resolution_head": True, "ema": 0.98, "tta": True,
                                "policy": "flips"},
    "t83_up2_ema98_tta_geometric": {"target": 0.83, "half_resolution_head": True, "ema": 0.98, "tta": True,
                                    "policy": "geometric"},
    "t83_up2_ema98_tta_bilinear": {"target": 0.83, "half_resolution_head": True, "ema": 0.98, "tta": True,
                                   "decoder_interpolation": "bilinear"},
    "t83_up2_ema97_tta": {"target": 0.83, "half_resolution_head": True, "ema": 0.97, "tta": True},
    "t83_up2_ema985_tta": {"target": 0.83, "half_resolution_head": True, "ema": 0.985, "tta": True},
    "t83_up2_ema98_tta_lr25": {"target": 0.83, "half_resolution_head": True, "ema": 0.98, "tta": True,
                               "lr": 2.5e-3},
    "test_up2": {"batch": 8, "steps": 4, "warmup": 1, "val_every": 1, "encoder": "resnet18",
                 "decoder_channels": (32, 16, 8, 8, 4), "half_resolution_head": True},
    "test_widths": {"batch": 8, "steps": 4, "warmup": 1, "val_every": 1, "encoder": "resnet18",
                    "decoder_channels": (32, 16, 8, 8, 4), "init": True},
    "test": {"crop": 48, "batch": 8, "steps": 4, "warmup": 1, "ema": 0.9, "tta": True, "val_every": 1, "lovasz": False},
    "test_bilinear": {"batch": 8, "steps": 4, "warmup": 1, "val_every": 1, "decoder_interpolation": "bilinear",
                      "label_resample": "bilinear"},
}


def policy_of(name):
    if name == "full":
        return POLICY
    if name == "geometric":
        return {k: v for k, v in POLICY.items() if v.geometric}
    if name == "flips":
        return {k: v for k, v in POLICY.items() if "flip" in k}
    raise ValueError(name)


def load_tensors(cfg, data):
    return {split: [t.to(cfg.device) for t in load_cache(data, cfg.image_size, split)]
            for split in ("train", "valid")}


def run(cfg, tensors, name, knobs, seed, compile_model):
    k = {**BASE, **knobs}
    target = k["target"] or 2.0  # None: train the whole schedule
    prof = dataclasses.replace(cfg, batch_size=k["batch"], max_steps=k["steps"],
                               val_every_n_epochs=k["val_every"], num_workers=0)
    pl.seed_everything(seed, workers=True, verbose=False)
    positive_fraction = float(tensors["train"][1].float().mean()) if k["init"] else None
    model = Recipe(encoder=k["encoder"] or cfg.encoder, decoder_channels=k["decoder_channels"],
                   lr=k["lr"], max_steps=k["steps"], warmup_steps=k["warmup"],
                   compile_model=compile_model, fused_optimizer=True, flip_average=k["tta"],
                   lovasz=k["lovasz"], decoder_interpolation=k["decoder_interpolation"],
                   side=k["side"], side_until=k["side_until"], positive_fraction=positive_fraction,
                   half_resolution_head=k["half_resolution_head"])
    model.gpu_augmentation = (BilinearLabelPolicy(seed) if k["label_resample"] == "bilinear"
                              else KorniaAugmentation(policy_of(k["policy"]), seed=seed))
    dm = Resident(tensors, k["batch"], seed, k["crop"], k["crop_until"])
    clock = AccuracyClock(target)
    validations = ValidationLog(name, seed)
    callbacks = [clock, validations] + ([AverageWeights(k["ema"])] if k["ema"] else [])
    compile_s = (warm_up(model, Resident(tensors, k["batch"], seed + 999, k["crop"], k["crop_until"]),
                         prof) if compile_model else None)
    trainer = make_trainer(prof, "sweep", enable_checkpointing=False, enable_progress_bar=False,
                           logger=False, callbacks=callbacks)
    trainer.fit(model, datamodule=dm)
    r = clock.reached
    return {"name": name, "knobs": k, "seed": seed, "compiled": compile_model, "compile_s": compile_s,
            "reached": r is not None, "seconds": r and r["seconds"], "steps": r and r["step"],
            "best_iou": max(h["val_iou"] for h in clock.history), "fit_s": clock.fit_s,
            "validation_s": validations.validation_s,
            "history": clock.history}


def step_rates(cfg, tensors, out, modes, shapes, configs=("base384",)):
    from nailseg_common.measure.timing import ResidentBatches, measure_training
    for mode, name, (batch, crop) in itertools.product(modes, configs, shapes):
        k = {**BASE, **CONFIGS[name]}
        torch._dynamo.reset()
        pl.seed_everything(0, verbose=False)
        model = Recipe(encoder=k["encoder"] or cfg.encoder, decoder_channels=k["decoder_channels"],
                       half_resolution_head=k["half_resolution_head"], lr=2e-3, max_steps=10_000,
                       fused_optimizer=True)
        if mode != "eager":
            model.model.compile(mode=None if mode == "default" else mode)
        loader = GpuBatches(*tensors["train"], batch, True, 0, crop)
        batches = ResidentBatches([b for _, b in zip(range(8), loader)], 1000)
        prof = dataclasses.replace(cfg, batch_size=batch)
        t0 = time.perf_counter()
        try:
            res = measure_training(batches, prof, 10, 30, 3, make_model=lambda _model=model, **_: _model)
            rec = {"mode": mode, "config": name, "batch": batch, "side": crop or cfg.image_size,
                   "img_s": res["img_s"],
                   "img_s_min": res["img_s_min"], "img_s_max": res["img_s_max"],
                   "total_s": time.perf_counter() - t0}
        except Exception as error:  # noqa: BLE001  (exploration: record and go on)
            rec = {"mode": mode, "batch": batch, "crop": crop, "error": repr(error)[:300]}
        print(json.dumps(rec), flush=True)
        with open(out, "a") as f:
            f.write(json.dumps(rec) + "\n")


def seeds_summary(runs: list[dict]) -> dict:
    """Per config of ``runs`` (stopped at their level): the seeds, how many reached the level,
    the run's milliseconds a step (validations included), seconds and steps to the level of
    those that reached it, the best IoU of those that did not and the validations' seconds."""
    summary = {}
    for name in dict.fromkeys(run["name"] for run in runs):
        mine = [run for run in runs if run["name"] == name]
        reached = [run for run in mine if run["reached"]]
        missed = [run for run in mine if not run["reached"]]
        row = {"seeds": sorted(run["seed"] for run in mine), "reached": len(reached),
               "ms_per_step_in_run": round(statistics.median(
                   1000 * run["history"][-1]["seconds"] / run["history"][-1]["step"] for run in mine), 1)}
        if reached:
            row["seconds_to_level"] = spread([run["seconds"] for run in reached])
            row["steps_to_level"] = spread([run["steps"] for run in reached])
        if missed:
            row["best_iou_of_seeds_that_missed"] = spread([run["best_iou"] for run in missed])
        if all("validation_s" in run for run in mine):
            row["validation_s"] = spread([run["validation_s"] for run in mine])
        summary[name] = row
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", default="")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--out", help="the JSON-lines file the runs are appended to (all but --prepare-only)")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--step-rates", default="", help="compile modes: eager, default, max-autotune...")
    parser.add_argument("--shapes", default="60x384", help="BATCHxSIDE,... of --step-rates (SIDE < image: crops)")
    parser.add_argument("--prepare-only", action="store_true")
    parser.add_argument("--profile", default="gpu")
    parser.add_argument("--summarise", help="a results file: its summary written anew from its runs")
    args = parser.parse_args(argv)
    if args.summarise:
        with open(args.summarise) as file:
            results = json.load(file)
        for name, row in seeds_summary(results["runs"]).items():  # step rates measured apart stay
            results["summary"][name] = {**row, **{key: value for key, value in results["summary"].get(name, {}).items()
                                                  if key == "step_img_s_alone"}}
        write_json(args.summarise, results)
        return
    if not args.prepare_only and not args.out:
        parser.error("--out is required (except with --prepare-only)")
    cfg = select_profile(args.profile)
    set_matmul_precision(cfg)
    data = ensure_prepared(cfg, None, progress=False)
    if args.prepare_only:
        ensure_cache(data, cfg.image_size)
        return
    tensors = load_tensors(cfg, data)
    if args.step_rates:
        shapes = [tuple(map(int, shape.split("x"))) for shape in args.shapes.split(",")]
        shapes = [(batch, side if side < cfg.image_size else None) for batch, side in shapes]
        step_rates(cfg, tensors, args.out, args.step_rates.split(","), shapes,
                   args.configs.split(",") if args.configs else ("base384",))
        return
    for name in args.configs.split(","):
        for seed in map(int, args.seeds.split(",")):
            t0 = time.perf_counter()
            try:
                rec = run(cfg, tensors, name, CONFIGS[name], seed, args.compile)
            except Exception as error:  # noqa: BLE001
                rec = {"name": name, "seed": seed, "error": repr(error)[:500]}
            rec["wall_s"] = time.perf_counter() - t0
            short = {k: v for k, v in rec.items() if k != "history"}
            print(json.dumps(short), flush=True)
            with open(args.out, "a") as f:
                f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
