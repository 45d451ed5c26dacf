"""Where a fine-tuning step of notebook 06 spends its time, on the machine it runs on.

    python -m tools.profile_fine_tune --out fine_tune_profile.json [--no-cudnn-benchmark]

The shipped model fine-tuned on notebook 06's stand-in (``--photos`` photos, a fifth held
out) with notebook 06's ``PhotosOnDevice`` and Kornia policy, no validation: the first run
(cuDNN's kernel search included when the Trainer asks for it), then ``--steps`` steps timed
as they are, without the augmentation, and with a batch ``--batch-scale`` times larger. The
full run is also timed hook by hook by Lightning's ``SimpleProfiler`` (host time: when the
host is the bottleneck it is the step's time). ``--profile smoke`` checks the code path on
a CPU. One process is one setting of ``--no-cudnn-benchmark``: cuDNN keeps its choices.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import pytorch_lightning as pl
import torch
from pytorch_lightning.profilers import SimpleProfiler

from nailseg_common.course import start
from nailseg_common.environment import device_description, library_versions
from nailseg_common.finetune import SHIPPED_MODEL, PhotosOnDevice, checkpoint_hparams, start_model
from nailseg_common.gpu_augmentation import KorniaAugmentation
from nailseg_common.photos import photos_or_standin
from nailseg_common.training import make_trainer


def timed_fit(cfg, data, steps: int, augment: bool, benchmark: bool, profiler=None) -> dict:
    """``steps`` steps of the shipped start, no validation: seconds and ms a step."""
    pl.seed_everything(0, verbose=False)
    model = start_model("synthetic", cfg.encoder, cfg.lr, steps, SHIPPED_MODEL)
    model.gpu_augmentation = KorniaAugmentation(seed=0) if augment else None
    trainer = make_trainer(dataclasses.replace(cfg, max_steps=steps), "profile_fine_tune",
                           enable_checkpointing=False, enable_progress_bar=False,
                           limit_val_batches=0, benchmark=benchmark and cfg.accelerator == "gpu",
                           profiler=profiler)
    if cfg.device.type == "cuda":
        torch.cuda.synchronize()
    began = time.perf_counter()
    trainer.fit(model, datamodule=PhotosOnDevice(data, cfg, steps))
    if cfg.device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - began
    return {"steps": trainer.global_step, "batch": cfg.batch_size, "augment": augment,
            "seconds": round(seconds, 2), "ms_per_step": round(1000 * seconds / steps, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.profile_fine_tune",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="gpu")
    parser.add_argument("--photos", type=int, default=50)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-scale", type=int, default=3)
    parser.add_argument("--no-cudnn-benchmark", action="store_true")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    benchmark = not args.no_cudnn_benchmark
    photos = photos_or_standin(args.profile, num_images=args.photos)
    cfg, data = start(args.profile, photos, encoder=checkpoint_hparams(SHIPPED_MODEL)["encoder"])
    runs = {"first run": timed_fit(cfg, data, args.steps, True, benchmark)}
    profiler = SimpleProfiler(dirpath=args.out.parent, filename=args.out.stem + "_hooks")
    runs["as in notebook 06"] = timed_fit(cfg, data, args.steps, True, benchmark, profiler)
    runs["without augmentation"] = timed_fit(cfg, data, args.steps, False, benchmark)
    larger = dataclasses.replace(cfg, batch_size=args.batch_scale * cfg.batch_size)
    runs[f"batch x{args.batch_scale}"] = timed_fit(larger, data, args.steps, True, benchmark)
    result = {"device": device_description(), "versions": library_versions(),
              "date": time.strftime("%Y-%m-%d"), "model": SHIPPED_MODEL.name,
              "image_size": cfg.image_size, "cudnn_benchmark": benchmark, "runs": runs}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
