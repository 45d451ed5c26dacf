"""What this machine is: the environment report every notebook prints, its libraries and
cores, and whether the Hugging Face Hub answers (so an offline machine does not wait)."""

from __future__ import annotations

import contextlib
import os
import platform
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import torch
from huggingface_hub import constants as hub_constants

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


def device_description() -> str:
    """The GPU's name, or a CPU description with the core count."""

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
