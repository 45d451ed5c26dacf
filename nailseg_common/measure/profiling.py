"""Where the time goes: the GPU and CPU utilisation while it runs, profiles of training steps with
their kernels named, and the GPU's bf16 peak, measured and from the datasheet (notebook 07).
"""

from __future__ import annotations

import re
import statistics
import threading
import time

import torch
from pytorch_lightning.callbacks import Callback
from torch.profiler import ProfilerActivity

from nailseg_common.core.clock import synchronized_now

DATASHEET_BF16_TFLOPS = {"H100": 989.4, "H200": 989.4}  # dense, SXM, without sparsity


def datasheet_tflops(device: torch.device) -> float | None:
    """The datasheet's dense bf16 TFLOP/s of a GPU of :data:`DATASHEET_BF16_TFLOPS`, else None."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((value for key, value in DATASHEET_BF16_TFLOPS.items() if key in name), None)


def matmul_peak_tflops(device: torch.device, size: int = 8192, repeats: int = 10) -> float | None:
    """bf16 TFLOP/s of a ``size``³ matrix product on a CUDA ``device`` (None elsewhere)."""
    if device.type != "cuda":
        return None
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    start = synchronized_now(device)
    for _ in range(repeats):
        a @ b
    return 2 * size**3 * repeats / (synchronized_now(device) - start) / 1e12


class UtilisationSampler:
    """GPU utilisation (NVML) sampled every ``interval`` s in a thread, on a ``cuda`` device.

    NVML reports, for its last sampling period, the share of time the GPU ran a kernel. On
    other devices nothing is sampled and :meth:`gpu_percent` returns ``None``.
    """

    def __init__(self, device: torch.device, interval: float = 0.1):
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = None
        self._nvml = None
        if device.type == "cuda":
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = self._nvml_handle(device)
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()

    def _nvml_handle(self, device: torch.device):
        """NVML's handle of the CUDA device, matched by UUID (NVML numbers its GPUs on its
        own, ignoring CUDA_VISIBLE_DEVICES)."""
        uuid = str(torch.cuda.get_device_properties(device).uuid)
        try:
            return self._nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        except self._nvml.NVMLError:  # UUID not understood: same numbering when nothing is hidden
            return self._nvml.nvmlDeviceGetHandleByIndex(device.index or 0)

    def _sample(self) -> None:
        while not self._stop.is_set():
            util = self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu
            self.samples.append((time.perf_counter(), util))
            self._stop.wait(self.interval)

    def gpu_percent(self, start: float, end: float) -> float | None:
        """Mean GPU utilisation (%) of the samples taken between ``start`` and ``end``
        (``time.perf_counter`` readings)."""
        if self._nvml is None:
            return None
        inside = [u for t, u in list(self.samples) if start <= t <= end]
        return statistics.fmean(inside) if inside else None

    def close(self) -> None:
        """Stop the sampling thread and NVML."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._nvml.nvmlShutdown()


def cpu_busy_percent(before, after) -> float:
    """Share (%) of all cores' time spent busy between two ``psutil.cpu_times()``."""
    idle = (after.idle - before.idle) + (getattr(after, "iowait", 0) - getattr(before, "iowait", 0))
    total = sum(a - b for a, b in zip(after, before))
    # The counters are rounded floats: an idle window can read a hair below 0 % or above 100 %.
    return min(100.0, max(0.0, 100.0 * (1 - idle / total))) if total > 0 else 0.0


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
        self.on_gpu = on_gpu
        self.profiler = torch.profiler.profile(
            activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else []))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == 1:
            self.profiler.start()

    def on_train_end(self, trainer, pl_module) -> None:
        synchronized_now(pl_module.device)
        self.profiler.stop()

    def ms_per_group(self, steps: int):
        """A DataFrame of milliseconds per step by :func:`kernel_group`, slowest first: the
        self time of kernels on a GPU (of operators on a CPU), so that none counts twice; named
        ranges (Lightning's optimizer step) are not kernels and are left out."""
        import pandas as pd

        def self_us(event) -> float:
            if event.is_user_annotation:
                return 0.0
            if self.on_gpu:
                return event.self_device_time_total if event.device_type.name == "CUDA" else 0.0
            return event.self_cpu_time_total

        frame = pd.DataFrame([{"group": kernel_group(e.key), "ms per step": self_us(e) / 1e3 / steps}
                              for e in self.profiler.key_averages() if self_us(e) > 0])
        return frame.groupby("group")["ms per step"].sum().sort_values(ascending=False).to_frame()


def busy_in_words(kernels, wall_ms: float, step_flops: float, peak_tflops: float | None,
                  processor: str) -> list[str]:
    """What a profile (``ms_per_group``'s ``kernels``) says of a step of ``wall_ms``: how
    long the ``processor`` was busy, how much of it convolutions and matrix products took,
    and, given ``peak_tflops``, how long the step's ``step_flops`` would take at that peak."""
    busy_ms = kernels["ms per step"].sum()
    conv_ms = kernels["ms per step"].get("convolutions and matrix products", 0.0)
    lines = [(f"{processor} busy {busy_ms:.1f} ms of a {wall_ms:.1f} ms step; "
              f"convolutions and matrix products {conv_ms:.1f} ms of it")]
    if peak_tflops:
        lines.append(f"at the measured peak they would take {1e3 * step_flops / (peak_tflops * 1e12):.1f} ms")
    return lines
