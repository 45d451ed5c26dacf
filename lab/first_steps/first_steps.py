"""What a fresh process's first training steps of notebook 02's U-Net cost, by how its
depthwise convolutions run.

    python lab/first_steps/first_steps.py WAY [--benchmark 0] [--device cpu --size 64 --batch 4]

One process per call, so that its first step is the process's first: notebook 02's module
(``LitNailSegmentation``, EfficientNet-Lite0 from ImageNet, channels-last on a GPU, AdamW)
at batch 32 and 384 px under bf16 autocast, cuDNN's kernel search (``--benchmark``) on as the
course's Trainer sets it, or off, 25 eager steps on one
random batch, then eval-mode forwards of the training batch and of a new batch shape (the
partial last batch of a validation). WAY: ``default``; ``float32`` (depthwise layers in
float32 outside autocast); ``native`` (depthwise layers with cuDNN off: PyTorch's own
kernel); ``nchw`` (the whole U-Net in the ordinary layout). Environment variables that
change cuDNN's engines are set by the caller (``gpu.sh``). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
from torch import nn

from nailseg_common.training.unet import LitNailSegmentation, segmentation_loss


class Float32Depthwise(nn.Conv2d):
    """Computed in float32 outside autocast, returned in the input's dtype."""

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        with torch.autocast(image.device.type, enabled=False):
            return super().forward(image.float()).to(image.dtype)


class NativeDepthwise(nn.Conv2d):
    """Computed by PyTorch's own depthwise kernel (cuDNN off for this layer)."""

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        with torch.backends.cudnn.flags(enabled=False):
            return super().forward(image)


WAYS = {"float32": Float32Depthwise, "native": NativeDepthwise}


def now(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def run(way: str, device: torch.device, size: int, batch: int, benchmark: bool, steps: int = 25) -> dict:
    torch.backends.cudnn.benchmark = benchmark
    torch.set_float32_matmul_precision("high")
    model = LitNailSegmentation(channels_last=device.type == "cuda" and way != "nchw").to(device)
    model.on_fit_start()  # channels-last, as Lightning's fit does
    changed = 0
    for layer in model.model.modules():
        if way in WAYS and type(layer) is nn.Conv2d and layer.groups > 1 and layer.groups == layer.in_channels:
            layer.__class__ = WAYS[way]
            changed += 1
    optimizer = model.configure_optimizers()["optimizer"]
    image = torch.randint(0, 255, (batch, 3, size, size), dtype=torch.uint8, device=device)
    label = (torch.rand(batch, 1, size, size, device=device) > 0.5).float()
    autocast = torch.autocast(device.type, torch.bfloat16, enabled=device.type == "cuda")

    def timed_step() -> list[float]:
        began = now(device)
        with autocast:
            loss = segmentation_loss(model(image), label)
        forward = now(device)
        loss.backward()
        backward = now(device)
        optimizer.step()
        optimizer.zero_grad()
        return [round(forward - began, 3), round(backward - forward, 3), round(now(device) - began, 3)]

    rows = [timed_step() for _ in range(steps)]
    model.eval()
    evals = []
    for count in (batch, batch, batch // 2, batch // 2):
        began = now(device)
        with torch.no_grad(), autocast:
            model(image[:count])
        evals.append(round(now(device) - began, 3))
    return {"way": way, "benchmark": benchmark, "env": {k: v for k, v in os.environ.items() if k.startswith(("TORCH_CUDNN", "CUDNN"))},
            "cudnn": torch.backends.cudnn.version() if device.type == "cuda" else None,
            "depthwise_layers_changed": changed, "first_steps_s": rows[:3],
            "median_later_ms": round(1000 * statistics.median(r[2] for r in rows[5:]), 1),
            "eval_s_batch_batch_half_half": evals}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("way", choices=["default", "float32", "native", "nchw"])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", type=int, default=384)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--benchmark", type=int, choices=(0, 1), default=1)
    args = parser.parse_args()
    print(json.dumps(run(args.way, torch.device(args.device), args.size, args.batch,
                         bool(args.benchmark))), flush=True)
