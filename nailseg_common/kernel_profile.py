"""Recording a profile of training steps and naming its kernels by what they do (notebook 07)."""

from __future__ import annotations

import re

import torch
from pytorch_lightning.callbacks import Callback
from torch.profiler import ProfilerActivity

from nailseg_common.clock import synchronized_now

KERNEL_GROUPS = [  # first match wins; names of CUDA kernels and of CPU operators
    ("generated fused kernels (torch.compile)", r"triton"),
    ("sort (Lovász hinge)", r"sort|radix"),
    ("optimizer", r"adam|multi_tensor"),
    ("convolutions and matrix products", r"conv|gemm|xmma|cutlass|wgmma|cudnn|mm|sm90"),
]


def kernel_group(name: str) -> str:
    """The group of :data:`KERNEL_GROUPS` that a kernel or operator ``name`` belongs to."""
    return next((group for group, pattern in KERNEL_GROUPS if re.search(pattern, name, re.IGNORECASE)),
                "other elementwise, normalisation and copies")


class KernelProfile(Callback):
    """``torch.profiler`` over every training step of a ``fit`` but the first (``profiler``)."""

    def __init__(self, on_gpu: bool):
        self.profiler = torch.profiler.profile(
            activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else []))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == 1:
            self.profiler.start()

    def on_train_end(self, trainer, pl_module) -> None:
        synchronized_now(pl_module.device)
        self.profiler.stop()
