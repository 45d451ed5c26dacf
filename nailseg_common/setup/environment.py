"""What this machine is and can do: the environment report every notebook prints, whether
the Hugging Face Hub answers (so an offline machine does not wait), depthwise convolutions
in float32, whether NVIDIA DALI runs here (this module imports without it, and says why
not), and which of notebook 06's starts this machine can fine-tune.
"""

from __future__ import annotations

import contextlib
import os
import platform
import socket
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import torch
from huggingface_hub import constants as hub_constants
from torch import nn

if TYPE_CHECKING:
    from nailseg_common.setup.profiles import Profile

DATASHEET_BF16_TFLOPS = {"H100": 989.4, "H200": 989.4}  # dense, SXM, without sparsity
LIBRARIES = ("torch", "torchvision", "pytorch-lightning", "segmentation-models-pytorch",
             "albumentations", "kornia", "nvidia-dali-cuda120", "numpy")


def library_versions() -> dict[str, str]:
    """Installed version of each course library ("not installed" when missing)."""
    versions = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity where the system has one)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, cores or 1)


def device_description() -> str:
    """The GPU's name, or a CPU description with the core count."""
    import torch

    if torch.cuda.is_available():
        return f"GPU: {torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda})"
    return f"CPU only: {platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def environment_report(profile: Profile | None = None) -> str:
    """A short text: Python, library versions, device and the chosen profile."""
    lines = [f"python  {platform.python_version()} on {platform.system()} {platform.machine()}"]
    lines += [f"{name:<30}{version}" for name, version in library_versions().items()]
    lines.append(f"device  {device_description()}")
    if profile is not None:
        lines.append(f"profile {profile.name}: image {profile.image_size}px, batch "
                     f"{profile.batch_size}, {profile.max_steps} steps, encoder "
                     f"{profile.encoder}, precision {profile.precision}")
    return "\n".join(lines)


def datasheet_tflops(device: torch.device) -> float | None:
    """The datasheet's dense bf16 TFLOP/s of a GPU of :data:`DATASHEET_BF16_TFLOPS`, else None."""
    import torch

    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((value for key, value in DATASHEET_BF16_TFLOPS.items() if key in name), None)


def hub_reachable(timeout: float = 3.0) -> bool:
    """True when a connection to the Hugging Face Hub (``HF_ENDPOINT``) opens within ``timeout``."""
    url = urlparse(hub_constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
    except OSError:
        return False
    return True


@contextlib.contextmanager
def cache_only_when_offline() -> Iterator[bool]:
    """Inside, downloads from the Hub use the local cache only when the Hub cannot be reached
    (``huggingface_hub``'s ``HF_HUB_OFFLINE`` switch, put back on the way out): offline, the
    client would retry each file for half a minute or more. Yields whether it was reachable."""
    if hub_reachable():
        yield True
        return
    offline = hub_constants.HF_HUB_OFFLINE
    hub_constants.HF_HUB_OFFLINE = True
    try:
        yield False
    finally:
        hub_constants.HF_HUB_OFFLINE = offline


@contextmanager
def offline_hint(encoder: str, encoder_weights: str | None) -> Iterator[None]:
    """Turn an ``OSError`` raised while building a model with ``encoder_weights`` (DNS,
    connection, "not in the local cache") into a ``RuntimeError`` that says what to do."""
    try:
        yield
    except OSError as error:
        raise RuntimeError(
            f"Could not download the {encoder_weights!r} weights of encoder {encoder!r}: this "
            f"machine looks offline ({type(error).__name__}). Use encoder_weights=None (random "
            "initialisation, the course default), or download the weights once on a connected "
            "machine so they are in the Hugging Face cache."
        ) from error


class Float32Depthwise(nn.Conv2d):
    """A depthwise convolution computed in float32 outside autocast, in the input's layout,
    returned in the input's dtype. cuDNN 9.10 and later compile a half-precision channels-last
    depthwise kernel at run time for each new shape (NVIDIA/cudnn-frontend#1066): on an H100
    a mobilenet_v2 U-Net's first step took 7.3-10.4 s, against 4.4-5.9 s in float32, for
    1.2 ms more per step (``results/depthwise_first_step_h100.json``)."""

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


try:
    import nvidia.dali
    from nvidia.dali import fn, types
    from nvidia.dali import pipeline_def as _pipeline_def
    from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    from nvidia.dali.plugin.pytorch import DALIGenericIterator
except ImportError as error:  # macOS, Windows, or a Linux environment without the wheel
    IMPORT_ERROR: ImportError | None = error
    fn = types = LastBatchPolicy = DALIGenericIterator = _pipeline_def = None
else:
    IMPORT_ERROR = None

__all__ = [
    "DALIGenericIterator",
    "LastBatchPolicy",
    "dali_available",
    "dali_status",
    "default_num_threads",
    "fn",
    "pipeline_def",
    "require_dali",
    "types",
    "where_dali_runs",
]


def dali_available() -> bool:
    """True when ``nvidia.dali`` imports (Linux x86_64/aarch64 with the wheel installed)."""
    return IMPORT_ERROR is None


def dali_status() -> str:
    """One line: the DALI version in use, or why it is missing and what to do."""
    if IMPORT_ERROR is None:
        return f"NVIDIA DALI {nvidia.dali.__version__} is available."
    system = platform.system()
    where = (f"DALI has no wheels for {system}" if system in ("Darwin", "Windows")
             else "DALI is not installed in this environment")
    return (f"{where} ({IMPORT_ERROR}). DALI ships Linux wheels only: run this notebook on "
            "Linux, WSL2 or Colab, or `pip install nvidia-dali-cuda120` on Linux.")


def where_dali_runs(device: str) -> str:
    """One line for notebook 04: DALI's version and where its operators run (``device``:
    "gpu" or "cpu"), or why DALI is missing and what the notebook skips then."""
    if IMPORT_ERROR is not None:
        return (f"{dali_status()} The cells under `if HAVE_DALI:` are skipped: the code is "
                "still defined, and the committed H100 results still print.")
    where = {"gpu": "the GPU", "cpu": "the CPU (CPU-only mode: device_id=None)"}[device]
    return f"{dali_status()} Its operators run on {where}."


def require_dali() -> None:
    """Raise a RuntimeError with :func:`dali_status` when DALI is missing."""
    if IMPORT_ERROR is not None:
        raise RuntimeError(dali_status()) from IMPORT_ERROR


def pipeline_def(graph):
    """DALI's ``pipeline_def`` when DALI imports; else a stand-in that raises :func:`dali_status`."""
    if IMPORT_ERROR is None:
        return _pipeline_def(graph)

    def unavailable(*args, **kwargs):
        require_dali()

    return unavailable


def default_num_threads(device: str) -> int:
    """CPU threads for DALI: all cores when everything runs on the CPU, a few for the reader."""
    cores = usable_cores()
    return cores if device == "cpu" else min(4, cores)


def available_starts(starts: Iterable[str], make_start: Callable[[str], object],
                     checkpoint: Path | None, try_imagenet: bool) -> tuple[list[str], dict[str, str]]:
    """The ``starts`` that can be fine-tuned here, and for each other one the reason: the
    ``"synthetic"`` start needs ``checkpoint``; the ``"imagenet"`` start needs ``try_imagenet``
    and its weights, which ``make_start("imagenet")`` fetches once (its ``RuntimeError`` says
    why it could not)."""
    available, skipped = [], {}
    for start in starts:
        if start == "synthetic" and checkpoint is None:
            skipped[start] = "no checkpoint (see above)"
        elif start == "imagenet" and not try_imagenet:
            skipped[start] = "try_imagenet=False"
        elif start == "imagenet":
            try:
                make_start(start)
                available.append(start)
            except RuntimeError as error:
                skipped[start] = str(error)
        else:
            available.append(start)
    return available, skipped


def advice_in_words(advice: dict, tables: dict, zero_shot: str) -> list[str]:
    """Notebook 06's ``recommend_start`` ``advice`` over ``tables`` (start -> per-photo scores
    with ``dice`` and ``iou``) as lines to print: the best start, its paired lead over the
    runner-up, and a verdict (clear when the lead is more than two standard errors);
    ``zero_shot`` names the start that is the checkpoint without fine-tuning."""
    best, photos = advice["best"], advice["photos"]
    dice, iou = tables[best]["dice"], tables[best]["iou"]
    best_line = (f"best over these {photos} photos, each held out once: {best} (hard Dice "
                 f"{dice.mean():.3f} ± {dice.sem():.3f}, IoU {iou.mean():.3f})")
    if advice["runner_up"] is None:
        return [best_line, ("-> only one start could be measured here, so there is nothing to "
                "choose between: run notebook 02 in this profile (synthetic start) or allow "
                "the ImageNet download.")]
    runner_up, lead_se = advice["runner_up"], advice["lead_se"]
    lead = (f"ahead of {runner_up} by {advice['gain']:+.3f} Dice ± {advice['gain_se']:.3f} "
            f"(standard error over {photos} photos), better on {advice['wins']}, "
            f"worse on {advice['loses']}")
    if lead_se > 2:
        verdict = f"use the {best} start: its lead is {lead_se:.1f} standard errors, more than two"
    else:
        verdict = (f"{best} and {runner_up} are within the noise: the lead is {lead_se:.1f} "
                   "standard errors, not more than two; either will do, and more photos "
                   "would tell them apart")
    if best == zero_shot:
        verdict += ("; fine-tuning did not beat the checkpoint as it is, so use it unchanged "
                    "or fine-tune longer (finetune_steps)")
    return [best_line, lead, f"-> {verdict}"]
