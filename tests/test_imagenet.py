"""The ImageNet weights the course installs with pip are ImageNet's, and reach the U-Net's encoder.

The check that can fail: the classifier built from the package's file, through our mapping of
its tensor names onto timm's, must name the ImageNet class of matplotlib's bundled sample
photo of Grace Hopper in uniform (class 652, "military uniform"). Tensors in a wrong order,
or weights that are not ImageNet's, give another class.
"""

import matplotlib.cbook
import numpy as np
import pytest
import torch
from PIL import Image

from nailseg_common.training import imagenet
from nailseg_common.training.unet import create_model

MILITARY_UNIFORM = 652


def sample_photo(side: int = 224) -> torch.Tensor:
    """Grace Hopper's portrait, 1×3×side×side, scaled to [-1, 1] as the weights were trained."""
    with Image.open(matplotlib.cbook.get_sample_data("grace_hopper.jpg")) as photo:
        pixels = np.array(photo.convert("RGB").resize((side, side), Image.BICUBIC))
    return torch.from_numpy(pixels).permute(2, 0, 1)[None].float() / 127.5 - 1.0


@pytest.fixture(scope="module")
def classifier():
    return imagenet.imagenet_classifier("tu-efficientnet_lite0")


def test_the_shipped_weights_name_the_sample_photos_imagenet_class(classifier):
    with torch.no_grad():
        probabilities = classifier(sample_photo()).softmax(dim=1)[0]
    assert int(probabilities.argmax()) == MILITARY_UNIFORM
    assert float(probabilities[MILITARY_UNIFORM]) > 0.2


def test_a_wrong_mapping_is_caught_by_that_check(classifier):
    """The same check fails when every convolution's filters sit one channel off."""
    shuffled = imagenet.imagenet_classifier("tu-efficientnet_lite0")
    with torch.no_grad():
        for tensor in shuffled.state_dict().values():
            if tensor.ndim == 4 and tensor.shape[0] > 1:
                tensor.copy_(tensor.roll(1, dims=0))
        top = int(shuffled(sample_photo()).softmax(dim=1)[0].argmax())
    assert top != MILITARY_UNIFORM


def test_the_unet_encoder_holds_exactly_the_classifiers_tensors(classifier):
    model = create_model("tu-efficientnet_lite0", "imagenet")
    reference = classifier.state_dict()
    encoder = model.encoder.model.state_dict()
    assert len(encoder) > 200
    for name, tensor in encoder.items():
        assert torch.equal(tensor, reference[name]), name
    random = create_model("tu-efficientnet_lite0", None).encoder.model.state_dict()
    assert not torch.equal(random["conv_stem.weight"], reference["conv_stem.weight"])


def test_encoders_without_shipped_weights_and_unknown_weights_are_named():
    with pytest.raises(ValueError, match="No ImageNet weights ship.*'resnet18'.*encoder_weights=None"):
        create_model("resnet18", "imagenet")
    with pytest.raises(ValueError, match="'imagenet' or None"):
        create_model("tu-efficientnet_lite0", "instagram")


def test_a_missing_package_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(imagenet.SHIPPED_WEIGHTS, "tu-efficientnet_lite0",
                        ("no_such_weights_package", "models/x.pth", "efficientnet_lite0"))
    with pytest.raises(RuntimeError, match="no-such-weights-package.*make env"):
        imagenet.imagenet_classifier("tu-efficientnet_lite0")
