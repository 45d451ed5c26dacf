"""The course's one clock."""

from __future__ import annotations

import time

import torch


def synchronized_now(device: torch.device | str) -> float:
    """``time.perf_counter()`` once the work queued on ``device`` is done (CUDA runs ahead of
    Python, so an unsynchronised clock times the queueing, not the work)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()
