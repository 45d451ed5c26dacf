"""What a fine-tuning step costs on a CPU when parts of the U-Net are kept and cached.

    python -m lab.real_photos_recipe.cpu_step_cost --out cpu_step_cost.json

The shipped model's architecture (smp U-Net, MobileNetV2 encoder), a batch of 8 at 192 px,
bf16 autocast and channels-last, AdamW: seconds per step (forward, loss, backward, update)
when the encoder's first ``cached`` modules are kept as they are and what they compute is
computed once (possible without augmentation: ``real_photos_recipe``'s ``augment`` False),
with the full U-Net head and with notebook 07's half-resolution head. The variants take turns
for ``--rounds`` rounds (this CPU's speed drifts), each round warm-up steps first; median and
range of all timed steps of a variant.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from nailseg_common.setup.environment import device_description, library_versions
from nailseg_common.training.fast_training import predict_at_half_resolution
from nailseg_common.training.unet import create_model

CACHED = (0, 7, 19)  # none; the modules up to stride 8; the whole encoder


def returned_modules(encoder: torch.nn.Module, image: torch.Tensor) -> set[int]:
    """Indexes of the ``encoder.features`` modules whose outputs the encoder returns as the
    U-Net's skip features, found by running it once."""
    made_by = {}

    def record(index: int):
        def hook(module, inputs, output) -> None:  # None: the output stays as it is
            made_by[id(output)] = index
        return hook

    hooks = [module.register_forward_hook(record(index))
             for index, module in enumerate(encoder.features)]
    with torch.no_grad():
        features = encoder(image)
    for hook in hooks:
        hook.remove()
    return {made_by[id(feature)] for feature in features[1:]}


def run_modules(modules, start: int, x: torch.Tensor, returned: set[int],
                features: list[torch.Tensor]) -> torch.Tensor:
    """``x`` through ``modules`` (numbered from ``start``), the outputs of the ``returned``
    ones appended to ``features``; the last output."""
    for index, module in enumerate(modules, start=start):
        x = module(x)
        if index in returned:
            features.append(x)
    return x


def step_seconds(unet: torch.nn.Module, returned: set[int], cached: int, batch: int, side: int,
                 steps: int, warmup: int) -> list[float]:
    """Seconds of each timed step that trains all but the encoder's first ``cached`` modules
    (``returned``: :func:`returned_modules`)."""
    modules = unet.encoder.features
    image = torch.rand(batch, 3, side, side).to(memory_format=torch.channels_last)
    label = (torch.rand(batch, 1, side, side) > 0.9).float()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):  # computed once
        kept = [image]
        x = run_modules(modules[:cached], 0, image, returned, kept)
    trained = [*modules[cached:].parameters(), *unet.decoder.parameters(),
               *unet.segmentation_head.parameters()]
    optimizer = torch.optim.AdamW(trained, lr=1e-3)
    seconds = []
    for _ in range(warmup + steps):
        began = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            features = list(kept)
            run_modules(modules[cached:], cached, x, returned, features)
            logits = unet.segmentation_head(unet.decoder(features))
        loss = F.binary_cross_entropy_with_logits(logits.float(), label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seconds.append(time.perf_counter() - began)
    return seconds[warmup:]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--side", type=int, default=192)
    parser.add_argument("--steps", type=int, default=10, help="timed steps a round")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    variants = {}
    for head in ("full", "half"):
        for cached in CACHED:
            unet = create_model("mobilenet_v2")
            if head == "half":
                predict_at_half_resolution(unet)
            variants[head, cached] = (unet.to(memory_format=torch.channels_last).train(), [])
    encoder = next(iter(variants.values()))[0].encoder  # the same in every variant
    returned = returned_modules(encoder, torch.rand(1, 3, args.side, args.side))
    for _ in range(args.rounds):
        for (head, cached), (unet, seconds) in variants.items():
            seconds += step_seconds(unet, returned, cached, args.batch, args.side, args.steps,
                                    args.warmup)
    rows = [{"head": head, "cached_modules": cached, "median_s": statistics.median(seconds),
             "min_s": min(seconds), "max_s": max(seconds), "steps": len(seconds)}
            for (head, cached), (_, seconds) in variants.items()]
    for row in rows:
        print(json.dumps(row))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "batch": args.batch, "side": args.side, "rounds": args.rounds,
        "precision": "bf16 autocast, channels-last",
        "rows": rows, "device": device_description(), "versions": library_versions(),
        "date": datetime.date.today().isoformat()}, indent=1) + "\n")


if __name__ == "__main__":
    main()
