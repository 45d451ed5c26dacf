"""gallery_panels: one gallery for every pipeline, NumPy or batch-contract tensors alike."""

import numpy as np
import torch

from nailseg_common.pipelines.gallery import gallery_panels


def test_numpy_and_tensor_batches_give_the_same_panels():
    images = np.random.default_rng(0).integers(0, 256, (2, 8, 8, 3), dtype=np.uint8)
    masks = (images[..., 0] > 127).astype(np.uint8)
    flip = lambda i, m: (i[:, :, ::-1], m[:, :, ::-1])
    from_numpy = gallery_panels(images, masks, flip, draws=2)
    tensors = torch.from_numpy(images).permute(0, 3, 1, 2), torch.from_numpy(masks)[:, None]
    from_tensors = gallery_panels(*tensors, lambda i, m: (i.flip(-1).float() / 255, m.flip(-1)))
    assert list(from_numpy) == ["resized", "augmented #1", "augmented #2"]
    assert list(from_tensors) == ["resized", "augmented #1", "augmented #2", "augmented #3"]
    for name in from_numpy:
        for ours, theirs in zip(from_numpy[name], from_tensors[name], strict=True):
            np.testing.assert_allclose(ours, theirs, atol=1e-6)
    image, mask = from_tensors["augmented #1"]
    assert image.shape == (2, 8, 8, 3) and 0 <= image.min() and image.max() <= 1
    assert mask.shape == (2, 8, 8)
