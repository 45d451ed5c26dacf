"""Depthwise convolutions computed in float32, so a GPU's first step skips cuDNN compiling them."""

from __future__ import annotations

import torch
from torch import nn


class Float32Depthwise(nn.Conv2d):
    """A depthwise convolution computed in float32 outside autocast, in the input's layout,
    returned in the input's dtype. cuDNN 9.10 and later compile a half-precision channels-last
    depthwise kernel at run time for each new shape (NVIDIA/cudnn-frontend#1066): on an H100
    a mobilenet_v2 U-Net's first step took 7.3-10.4 s, against 4.4-5.9 s in float32, for
    1.2 ms more per step (``lab/fine_tune_step/depthwise_first_step_h100.json``)."""

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        with torch.autocast(image.device.type, enabled=False):
            return super().forward(image.float()).to(image.dtype)


def run_depthwise_as(model: nn.Module, layer_class: type[nn.Conv2d] = Float32Depthwise) -> int:
    """Make every depthwise ``nn.Conv2d`` of ``model`` (one filter per input channel) an
    instance of ``layer_class``, a subclass that keeps its weights (checkpoints stay as they
    are); returns how many changed."""
    changed = 0
    for layer in model.modules():
        if type(layer) is nn.Conv2d and layer.groups > 1 and layer.groups == layer.in_channels:
            layer.__class__ = layer_class
            changed += 1
    return changed
