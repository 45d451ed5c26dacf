"""What a fresh process's first training steps of the U-Net cost, by encoder and memory layout.

    python -m lab.fine_tune_step.first_step_by_layout ENCODER CHANNELS_LAST [--depthwise WAY] [--trace]

One process per call, so that its first step is the process's first: the U-Net of notebook
06's fine-tuning (``FastNailSegmentation``, fused AdamW) at batch 10 and 384 px, bf16
autocast on a GPU, cuDNN's kernel search off; 25 eager steps on one random batch. Prints one
JSON line: seconds of the first steps' forward, backward and whole step, the median of the
later steps in ms, the GPU kernels' time of a later step (what a CUDA graph replays), and the
first eval-mode forward of a new batch shape; ``--depthwise WAY`` runs the depthwise
convolutions in float32 (``nailseg_common.setup.environment``, as notebook 06 does), in the ordinary
layout, or both (:data:`WAYS`); ``--trace`` adds a
``torch.profiler`` table of the first step's host time. Results:
``lab/fine_tune_step/fine_tune_graphs_h100.json`` (``first_step_by_layout``). ``--device cpu
--size 32`` checks the code path.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile

from nailseg_common.measure.profiling import synchronized_now
from nailseg_common.setup.environment import Float32Depthwise, run_depthwise_as
from nailseg_common.training.fast_training import FastNailSegmentation
from nailseg_common.training.unet import segmentation_loss


class OrdinaryLayoutDepthwise(nn.Conv2d):
    """A depthwise convolution computed in the ordinary (NCHW) layout, returned channels-last."""

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        output = F.conv2d(image.contiguous(), self.weight.contiguous(), self.bias, self.stride,
                          self.padding, self.dilation, self.groups)
        return output.contiguous(memory_format=torch.channels_last)


class Float32OrdinaryDepthwise(nn.Conv2d):
    """In float32 outside autocast and in the ordinary layout, returned channels-last."""

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        with torch.autocast(image.device.type, enabled=False):
            output = F.conv2d(image.float().contiguous(), self.weight.contiguous(), self.bias,
                              self.stride, self.padding, self.dilation, self.groups)
        return output.to(image.dtype).contiguous(memory_format=torch.channels_last)


WAYS = {"float32": Float32Depthwise, "ordinary": OrdinaryLayoutDepthwise,
        "float32-ordinary": Float32OrdinaryDepthwise}


def first_steps(encoder: str, channels_last: bool, device: torch.device, size: int = 384,
                batch: int = 10, steps: int = 25, trace: bool = False,
                depthwise: str | None = None) -> dict:
    """Seconds of the first steps ``[forward, backward, step]`` and the later steps' median."""
    torch.backends.cudnn.benchmark = False
    model = FastNailSegmentation(encoder=encoder, fused_optimizer=device.type == "cuda",
                                 channels_last=channels_last).to(device)
    if channels_last:
        model.model.to(memory_format=torch.channels_last)
    changed = run_depthwise_as(model.model, WAYS[depthwise]) if depthwise else 0
    optimizer = model.configure_optimizers()["optimizer"]
    image = torch.randint(0, 255, (batch, 3, size, size), dtype=torch.uint8, device=device)
    label = (torch.rand(batch, 1, size, size, device=device) > 0.5).float()
    autocast = torch.autocast(device.type, torch.bfloat16, enabled=device.type == "cuda")

    def timed_step() -> list[float]:
        """One training step: seconds of its forward, backward and whole step."""
        began = synchronized_now(device)
        with autocast:
            loss = segmentation_loss(model(image), label)
        forward = synchronized_now(device)
        loss.backward()
        backward = synchronized_now(device)
        optimizer.step()
        optimizer.zero_grad()
        return [round(forward - began, 3), round(backward - forward, 3),
                round(synchronized_now(device) - began, 3)]

    tracer = profile(activities=[ProfilerActivity.CPU]) if trace else None
    with tracer or contextlib.nullcontext():
        rows = [timed_step()]
    rows += [timed_step() for _ in range(steps - 1)]
    kernels = profile(activities=[ProfilerActivity.CUDA]) if device.type == "cuda" else None
    if kernels:
        with kernels:
            for _ in range(5):
                timed_step()
    model.eval()
    began = synchronized_now(device)
    with torch.no_grad(), autocast:
        model(image[:batch - 3])
    result = {"encoder": encoder, "channels_last": channels_last, "depthwise": depthwise,
              "depthwise_layers": changed, "first_steps_s": rows[:3],
              "median_later_ms": round(1000 * statistics.median(r[2] for r in rows[5:]), 1),
              "first_eval_new_shape_s": round(synchronized_now(device) - began, 3)}
    if kernels:
        kernel_us = sum(event.self_device_time_total for event in kernels.key_averages())
        result["kernel_ms_per_step"] = round(kernel_us / 5 / 1000, 2)
    if tracer:
        result["first_step_host_time"] = tracer.key_averages().table(
            sort_by="self_cpu_time_total", row_limit=12)
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m lab.fine_tune_step.first_step_by_layout",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("encoder")
    parser.add_argument("channels_last", type=int, choices=(0, 1))
    parser.add_argument("--depthwise", choices=sorted(WAYS))
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", type=int, default=384)
    parser.add_argument("--steps", type=int, default=25)
    args = parser.parse_args(argv)
    result = first_steps(args.encoder, bool(args.channels_last), torch.device(args.device),
                         args.size, steps=args.steps, trace=args.trace,
                         depthwise=args.depthwise)
    print(json.dumps({key: value for key, value in result.items()
                      if key != "first_step_host_time"}), flush=True)
    if args.trace:
        print(result["first_step_host_time"])
    return result


if __name__ == "__main__":
    main()
