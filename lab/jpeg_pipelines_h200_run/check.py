"""Does waiting for the caller's stream before torchvision's CUDA decode keep notebook 03's
training finite? Trains 03's U-Net (fused Kornia) from JPEG bytes decoded on the device, once
without the wait and once with it, and prints each run's losses and hard Dice. Run from the
repository root with NAILSEG_PROFILE set: python -m lab.jpeg_pipelines_h200_run.check STEPS"""
import sys
import time

import pytorch_lightning as pl
import torch

from nailseg_common.course import start
from nailseg_common.pipelines import kornia_pipeline
from nailseg_common.pipelines.kornia_pipeline import DeviceDecodedNailDataModule, KorniaAugmentation
from nailseg_common.training.trainer import TrainingSpeed, make_trainer
from nailseg_common.training.unet import LitNailSegmentation


def without_wait(items, device):
    """03's _decode_jpegs as it was before the wait: the batch straight to nvJPEG."""
    data = [torch.from_numpy(item["data"]) for item in items]
    return kornia_pipeline.decode_jpeg(data, mode=kornia_pipeline.ImageReadMode.RGB, device=device) if data else []


def run(cfg, data, label):
    pl.seed_everything(0, verbose=False)
    model = LitNailSegmentation(cfg.encoder, cfg.lr, cfg.max_steps, gpu_augmentation=KorniaAugmentation())
    speed = TrainingSpeed()
    trainer = make_trainer(cfg, f"check_{label}", callbacks=[speed], enable_checkpointing=False)
    started = time.perf_counter()
    trainer.fit(model, DeviceDecodedNailDataModule(data, cfg))
    metrics = {k: round(float(v), 4) for k, v in trainer.callback_metrics.items()}
    print(f"{label}: {time.perf_counter() - started:.1f} s, {metrics}", flush=True)


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 120
    cfg, data = start(max_steps=steps)
    with_wait = kornia_pipeline._decode_jpegs
    kornia_pipeline._decode_jpegs = without_wait
    run(cfg, data, "without the wait")
    kornia_pipeline._decode_jpegs = with_wait
    run(cfg, data, "with the wait")


if __name__ == "__main__":
    main()
