"""The augmentation policy built with Albumentations 2.x, run on CPU DataLoader workers.

Every number comes from :data:`nailseg_common.policy.POLICY`; Kornia (notebook 03) and
DALI (notebook 04) build the same table. Images are resized to ``image_size`` first,
then the ops run in the table's order. Geometric ops move the mask with the image
(nearest-neighbour interpolation, so the mask stays binary); areas that an affine
moves in from outside the image are filled with 0 in both.
"""

from __future__ import annotations

import albumentations as A
import cv2
import numpy as np

from .policy import POLICY


def resize(image_size: int) -> A.Resize:
    """Resize image (bilinear) and mask (nearest) to ``image_size × image_size``."""
    return A.Resize(image_size, image_size, interpolation=cv2.INTER_LINEAR,
                    mask_interpolation=cv2.INTER_NEAREST)


def policy_transforms() -> list[A.BasicTransform]:
    """The policy ops, in table order, as Albumentations transforms."""
    ops = POLICY
    affine = ops["affine"].params
    shift = affine["translate"]
    brightness = ops["brightness_contrast"].params
    blur = ops["gaussian_blur"].params
    return [
        A.HorizontalFlip(p=ops["horizontal_flip"].probability),
        A.VerticalFlip(p=ops["vertical_flip"].probability),
        A.Affine(scale=affine["scale"], translate_percent=(-shift, shift),
                 rotate=(-affine["rotate_deg"], affine["rotate_deg"]),
                 interpolation=cv2.INTER_LINEAR, mask_interpolation=cv2.INTER_NEAREST,
                 border_mode=cv2.BORDER_CONSTANT, fill=0, fill_mask=0,
                 p=ops["affine"].probability),
        A.RandomBrightnessContrast(brightness_limit=brightness["brightness"],
                                   contrast_limit=brightness["contrast"],
                                   p=ops["brightness_contrast"].probability),
        # std_range is a fraction of the maximum value (255 for uint8), as in the table.
        A.GaussNoise(std_range=ops["gaussian_noise"].params["std"],
                     p=ops["gaussian_noise"].probability),
        A.GaussianBlur(blur_limit=(blur["kernel"], blur["kernel"]), sigma_limit=blur["sigma"],
                       p=ops["gaussian_blur"].probability),
    ]


def train_transform(image_size: int, seed: int | None = None) -> A.Compose:
    """Resize, then the whole policy: the training transform."""
    return A.Compose([resize(image_size), *policy_transforms()], seed=seed)


def valid_transform(image_size: int) -> A.Compose:
    """Resize only: the validation transform."""
    return A.Compose([resize(image_size)])


def augment_pairs(transform: A.Compose, images, masks) -> tuple[np.ndarray, np.ndarray]:
    """``transform`` on each HxWx3 uint8 image and HxW mask: (N×S×S×3 floats in [0, 1], N×S×S)."""
    pairs = [transform(image=image, mask=mask) for image, mask in zip(images, masks, strict=True)]
    return np.stack([p["image"] for p in pairs]) / 255.0, np.stack([p["mask"] for p in pairs])


def gallery_panels(images: list[np.ndarray], masks: list[np.ndarray], image_size: int,
                   draws: int = 3, seed: int = 0) -> dict:
    """Each image resized, then ``draws`` random passes of the training transform.

    ``images`` are ``HxWx3 uint8``, ``masks`` ``HxW`` {0, 1}. Returns ``{name: (N×S×S×3
    float images in [0, 1], N×S×S masks)}`` for ``plots.plot_augmentation_gallery``.
    """
    panels = {"resized": augment_pairs(valid_transform(image_size), images, masks)}
    augment = train_transform(image_size, seed=seed)
    for draw in range(1, draws + 1):
        panels[f"augmented #{draw}"] = augment_pairs(augment, images, masks)
    return panels
