"""What a fresh process's first fit of a course model costs, and where compilation time goes.

    python lab/first_steps/warm_up_time.py MODEL [--benchmark 0] [--static] [--profile smoke]

MODEL ``fast``: notebook 07's compiled recipe model on its DALI pipeline; ``baseline``:
notebook 02's module on its Albumentations DataModule. Runs 07's ``warm_up`` (a fit of two
training steps and one whole validation through the course's Trainer) twice in one process:
the first pays every one-time cost (cuDNN's kernel search and run-time compilation,
``torch.compile``, the loaders' start), the second only the loaders' start and the work.
``--benchmark 0`` turns cuDNN's kernel search off (the Trainer turns it on on a GPU);
``--static`` turns off Dynamo's automatic dynamic shapes. Prints one JSON line with Dynamo's
and Inductor's own timers. Give each run its own ``TORCHINDUCTOR_CACHE_DIR``.
"""

from __future__ import annotations

import argparse
import json

import torch

from nailseg_common.course import start
from nailseg_common.measure.benchmark import training_datamodule
from nailseg_common.pipelines.albumentations_pipeline import NailDataModule
from nailseg_common.training.fast_training import faster_recipe, recipe_model, warm_up
from nailseg_common.training.unet import LitNailSegmentation

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=["fast", "baseline"])
    parser.add_argument("--benchmark", type=int, choices=(0, 1), default=1)
    parser.add_argument("--static", action="store_true")
    parser.add_argument("--profile", default="gpu")
    args = parser.parse_args()
    if args.static:
        torch._dynamo.config.automatic_dynamic_shapes = False
    cfg, data = start(args.profile)
    torch.manual_seed(0)
    if args.model == "fast":
        cfg = faster_recipe(cfg, data)
        model, datamodule = recipe_model(cfg), training_datamodule(data, cfg)
    else:
        model = LitNailSegmentation(encoder=cfg.encoder, lr=cfg.lr, max_steps=cfg.max_steps)
        datamodule = NailDataModule(data, cfg)
    benchmark = {"benchmark": bool(args.benchmark)}
    seconds = [round(warm_up(model, datamodule, cfg, **benchmark), 1) for _ in range(2)]
    from torch._dynamo.utils import compile_times
    print(json.dumps({"model": args.model, **benchmark, "static": args.static, "batch": cfg.batch_size,
                      "warm_up_s": seconds, "cudnn": torch.backends.cudnn.version(),
                      "compile_times": compile_times(repr="str", aggregate=True)}), flush=True)
