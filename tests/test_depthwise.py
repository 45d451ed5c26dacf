"""Depthwise layers in float32 (``nailseg_common.training.depthwise``): the same layers, the same
weights, the same results in float32, and float32 arithmetic under autocast."""

import copy

import torch
from torch import nn

from nailseg_common.training.depthwise import Float32Depthwise, run_depthwise_as
from nailseg_common.training.fine_tuning import start_model
from nailseg_common.training.unet import create_model


def depthwise_layers(model: nn.Module) -> list[nn.Conv2d]:
    return [layer for layer in model.modules() if isinstance(layer, nn.Conv2d)
            and layer.groups > 1 and layer.groups == layer.in_channels]


def test_only_the_depthwise_layers_change_and_the_weights_and_outputs_stay():
    torch.manual_seed(0)
    model = create_model("tu-efficientnet_lite0").eval()
    before = copy.deepcopy(model)
    changed = run_depthwise_as(model)
    assert changed == len(depthwise_layers(model)) == 16  # one a block of EfficientNet-Lite0
    assert all(type(layer) is Float32Depthwise for layer in depthwise_layers(model))
    assert sum(type(layer) is nn.Conv2d for layer in model.modules()) == \
        sum(type(layer) is nn.Conv2d for layer in before.modules()) - changed
    assert model.state_dict().keys() == before.state_dict().keys()
    image = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        assert torch.equal(model(image), before(image))
    assert run_depthwise_as(model) == 0, "a second call finds nothing left to change"


def test_under_autocast_the_layer_computes_in_float32_and_returns_the_input_dtype():
    torch.manual_seed(0)
    layer = nn.Conv2d(8, 8, 3, padding=1, groups=8)
    plain = copy.deepcopy(layer)
    run_depthwise_as(nn.Sequential(layer))
    image = torch.rand(2, 8, 16, 16).bfloat16()
    with torch.no_grad(), torch.autocast("cpu", torch.bfloat16):
        output, in_half = layer(image), plain(image)
    with torch.no_grad():
        exact = plain(image.float())
    assert output.dtype == in_half.dtype == torch.bfloat16
    assert torch.equal(output, exact.bfloat16()), "float32 weights and arithmetic, rounded once"
    assert not torch.equal(in_half, exact.bfloat16()), "autocast would round the weights"


def test_notebook_06_starts_run_their_depthwise_layers_in_float32():
    model = start_model("random", "tu-efficientnet_lite0", 1e-3, 2)
    assert len(depthwise_layers(model)) == 16
    assert all(type(layer) is Float32Depthwise for layer in depthwise_layers(model))
