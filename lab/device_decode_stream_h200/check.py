"""Does notebook 03's decode on a CUDA stream of its own keep training finite where decoding on
the training stream does not, and what does torchvision's CUDA decode cost a baseline and a
progressive JPEG? Run from the repository root on a GPU, after notebook 01 made the data:
NAILSEG_PROFILE=gpu python -m lab.device_decode_stream_h200.check STEPS"""
import statistics
import sys
import time

import numpy as np
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torchvision.io import ImageReadMode, decode_jpeg

from nailseg_common.core.clock import synchronized_now
from nailseg_common.course import start
from nailseg_common.data.images import read_header
from nailseg_common.data.preparation import read_split
from nailseg_common.pipelines import kornia_pipeline
from nailseg_common.pipelines.kornia_pipeline import (
    DeviceDecodedNailDataModule,
    KorniaAugmentation,
    upright,
)
from nailseg_common.training.trainer import TrainingSpeed, make_trainer
from nailseg_common.training.unet import LitNailSegmentation


def decode_costs(location, device, count=32, repeats=5):
    """Median ms a photo of one ``decode_jpeg`` call on ``count`` baseline, then progressive, RGB JPEGs."""
    files = {False: [], True: []}
    for path in read_split(location, "train")["image"]:
        header = read_header(path)
        if header.format == "JPEG" and header.mode == "RGB":
            files[header.progressive].append(path)
    for progressive, paths in files.items():
        data = [torch.from_numpy(np.fromfile(p, dtype=np.uint8)) for p in paths[:count]]
        decode_jpeg(data, mode=ImageReadMode.RGB, device=device)  # warm-up
        times = []
        for _ in range(repeats):
            began = synchronized_now(device)
            decode_jpeg(data, mode=ImageReadMode.RGB, device=device)
            times.append((synchronized_now(device) - began) * 1e3 / len(data))
        print(f"{'progressive' if progressive else 'baseline'} JPEGs, {len(data)} in one call: "
              f"{statistics.median(times):.2f} ms a photo (median of {repeats}; "
              f"{min(times):.2f}-{max(times):.2f})", flush=True)


def on_training_stream(items, image_size, device):
    """03's decode_on without its stream: decoded, turned and resized on the caller's stream."""
    coded = [item for item in items if "data" in item]
    data = [torch.from_numpy(item["data"]) for item in coded]
    decoded = iter(decode_jpeg(data, mode=ImageReadMode.RGB, device=device) if data else [])
    size, images, labels = (image_size, image_size), [], []
    for item in items:
        image = (upright(next(decoded), item["orientation"]) if "data" in item
                 else torch.from_numpy(item["pixels"]).permute(2, 0, 1).to(device))
        image = F.interpolate(image[None].float(), size=size, mode="bilinear", align_corners=False)
        images.append(image.round_().clamp_(0, 255).to(torch.uint8))
        label = torch.from_numpy(item["label"]).to(device)[None, None].float()
        labels.append(F.interpolate(label, size=size, mode="nearest-exact").to(torch.uint8))
    return {"image": torch.cat(images), "label": torch.cat(labels)}


def train(cfg, location, label):
    pl.seed_everything(0, verbose=False)
    model = LitNailSegmentation(cfg.encoder, cfg.lr, cfg.max_steps, gpu_augmentation=KorniaAugmentation())
    speed = TrainingSpeed()
    trainer = make_trainer(cfg, f"check_{label.replace(' ', '_')}", callbacks=[speed],
                           enable_checkpointing=False, enable_progress_bar=False)
    began = time.perf_counter()
    trainer.fit(model, DeviceDecodedNailDataModule(location, cfg))
    metrics = {k: round(float(v), 4) for k, v in trainer.callback_metrics.items()}
    print(f"{label}: {trainer.global_step} steps in {time.perf_counter() - began:.1f} s, "
          f"{speed.images_per_second():.1f} training img/s (median of {len(speed.rates())} epochs), "
          f"{metrics}", flush=True)


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 120
    cfg, location = start(max_steps=steps)
    decode_costs(location, cfg.device)
    train(cfg, location, "on a stream of its own")
    kornia_pipeline.decode_on = on_training_stream  # what EncodedBatch.to calls
    train(cfg, location, "on the training stream")


if __name__ == "__main__":
    main()
