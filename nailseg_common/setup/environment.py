"""What this machine is: the environment report every notebook prints, its libraries and cores."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from nailseg_common.setup.profiles import Profile

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


def cpu_model() -> str:
    """The CPU's model name (Linux's ``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_description() -> str:
    """The GPU's name, or the CPU's model with the core count."""
    if torch.cuda.is_available():
        return f"GPU: {torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda})"
    return f"CPU only: {cpu_model()} ({platform.machine()}), {os.cpu_count()} cores"


def provenance() -> dict:
    """The head of every results file the course writes: when (UTC, to the second), on what
    (:func:`device_description`), with which Python and which library versions."""
    return {"date": datetime.now(UTC).isoformat(timespec="seconds"), "device": device_description(),
            "python": platform.python_version(), "versions": library_versions()}


def environment_report(profile: Profile | None = None) -> str:
    """A short text: Python, library versions, device and the chosen profile."""
    lines = [f"python  {platform.python_version()} on {platform.system()} {platform.machine()}"]
    lines += [f"{name:<30}{version}" for name, version in library_versions().items()]
    lines.append(f"device  {device_description()}")
    if profile is not None:
        lines.append(f"profile {profile.name}: image {profile.image_size}px, batch "
                     f"{profile.batch_size}, encoder {profile.encoder}, precision "
                     f"{profile.precision} (each notebook prints its steps where it trains)")
    return "\n".join(lines)
