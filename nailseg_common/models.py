"""The segmentation model: an smp U-Net and the LightningModule that trains it.

The module takes batches in the course's batch contract (``image`` uint8 or float in
[0, 1], ``label`` {0, 1}), converts them on the device, applies an optional GPU
augmentation to training batches only, and normalises with the ImageNet statistics
inside ``forward``, so the CPU side of every pipeline stays a cheap uint8 copy.
"""

from __future__ import annotations

import pytorch_lightning as pl
import segmentation_models_pytorch as smp
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MeanMetric

from .losses import soft_dice_loss, symmetric_lovasz
from .metrics import per_image_dice, per_image_iou

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def create_model(encoder: str = "resnet34", encoder_weights: str | None = None) -> nn.Module:
    """An ``smp.Unet`` with one output channel (logits).

    ``encoder_weights=None`` starts from random weights (nothing downloads, the course
    default); ``"imagenet"`` downloads pretrained weights once into the Hugging Face cache.
    """
    try:
        return smp.Unet(encoder_name=encoder, encoder_weights=encoder_weights, in_channels=3,
                        classes=1, activation=None)
    except OSError as error:  # DNS, connection and "not in the local cache" errors
        raise RuntimeError(
            f"Could not download the {encoder_weights!r} weights of encoder {encoder!r}: this "
            f"machine looks offline ({type(error).__name__}). Use encoder_weights=None (random "
            "initialisation, the course default), or download the weights once on a connected "
            "machine so they are in the Hugging Face cache."
        ) from error


def to_unit_float(image: torch.Tensor) -> torch.Tensor:
    """uint8 0..255 -> float32 0..1; float images pass through as float32."""
    return image.float() / 255.0 if image.dtype == torch.uint8 else image.float()


def segmentation_loss(logits: torch.Tensor, targets: torch.Tensor, bce_weight: float = 1.0,
                      dice_weight: float = 1.0) -> torch.Tensor:
    """``symmetric_lovasz + bce_weight · BCE + dice_weight · soft_dice_loss``, in float32.

    The Lovász hinge optimises IoU but only asks for a margin of 1 (a background logit of
    −1 is already "right", yet its probability is 0.27) and learns slowly from random
    weights. Cross-entropy gets training going; the soft-Dice term pushes the
    probabilities the validation Dice is computed on towards 0 and 1.
    ``bce_weight=dice_weight=0`` trains on the Lovász hinge alone.
    """
    loss = symmetric_lovasz(logits, targets)
    if bce_weight:
        loss = loss + bce_weight * F.binary_cross_entropy_with_logits(logits.float(), targets.float())
    if dice_weight:
        loss = loss + dice_weight * soft_dice_loss(logits, targets)
    return loss


class LitNailSegmentation(pl.LightningModule):
    """U-Net training with :func:`segmentation_loss`, AdamW and a per-step cosine schedule.

    ``num_epochs`` is the length of the cosine schedule. ``gpu_augmentation(image,
    label) -> (image, label)`` (float image in [0, 1], float label) runs on training
    batches after they reach the device; keep it stateless (no parameters or buffers) so
    checkpoints load with or without it. ``channels_last=None`` uses channels-last
    memory on CUDA, where convolutions in bf16 run faster with it, and not on the CPU.
    Logs ``train_loss``, ``val_loss``, ``val_dice`` and ``val_iou`` per epoch; the
    validation metrics are means over every validation image of the epoch.
    """

    def __init__(self, encoder: str = "resnet34", lr: float = 1e-3, num_epochs: int = 1,
                 gpu_augmentation: nn.Module | None = None, encoder_weights: str | None = None,
                 channels_last: bool | None = None, weight_decay: float = 1e-4,
                 bce_weight: float = 1.0, dice_weight: float = 1.0):
        super().__init__()
        self.save_hyperparameters(ignore=["gpu_augmentation"])
        self.model = create_model(encoder, encoder_weights)
        self.gpu_augmentation = gpu_augmentation
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)
        # Sums of per-image values on the device; no host sync until the epoch ends.
        self.val_dice = MeanMetric(nan_strategy="disable")
        self.val_iou = MeanMetric(nan_strategy="disable")

    @property
    def uses_channels_last(self) -> bool:
        if self.hparams.channels_last is None:
            return self.device.type == "cuda"
        return self.hparams.channels_last

    def on_fit_start(self) -> None:
        if self.uses_channels_last:
            self.model.to(memory_format=torch.channels_last)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        """Logits ``B×1×H×W`` for an image batch (uint8, or float in [0, 1])."""
        image = (to_unit_float(image) - self.mean) / self.std
        if self.uses_channels_last:
            image = image.contiguous(memory_format=torch.channels_last)
        return self.model(image)

    def on_after_batch_transfer(self, batch: dict, dataloader_idx: int) -> dict:
        image, label = to_unit_float(batch["image"]), batch["label"].float()
        if self.gpu_augmentation is not None and self.trainer.training:
            image, label = self.gpu_augmentation(image, label)
        return {"image": image, "label": label}

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        loss = segmentation_loss(self(batch["image"]), batch["label"], self.hparams.bce_weight,
                                 self.hparams.dice_weight)
        self.log("train_loss", loss, on_step=False, on_epoch=True,
                 batch_size=batch["image"].shape[0])
        return loss

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        logits = self(batch["image"])
        label = batch["label"]
        self.val_dice.update(per_image_dice(logits, label))
        self.val_iou.update(per_image_iou(logits, label))
        loss = segmentation_loss(logits, label, self.hparams.bce_weight, self.hparams.dice_weight)
        self.log("val_loss", loss, on_step=False, on_epoch=True, batch_size=label.shape[0])
        self.log("val_dice", self.val_dice, on_step=False, on_epoch=True, prog_bar=True)
        self.log("val_iou", self.val_iou, on_step=False, on_epoch=True)

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr,
                                      weight_decay=self.hparams.weight_decay)
        total = int(self.trainer.estimated_stepping_batches)
        max_epochs = self.trainer.max_epochs
        if max_epochs is not None and max_epochs > 0:  # step budget of num_epochs epochs
            total = max(1, total // max_epochs) * self.hparams.num_epochs
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(1, total))
        return {"optimizer": optimizer,
                "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
