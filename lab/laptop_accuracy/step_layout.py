"""One training step of the course's U-Net on this CPU, in the default memory layout and in
channels-last, at 128 and 160 px: batch 8, AdamW, the course's loss; the median of 7 steps
after 3 of warm-up. Run from the repository root: python -m lab.laptop_accuracy.step_layout"""

import time

import torch

from nailseg_common.training.unet import create_model, segmentation_loss


def median_step(side: int, channels_last: bool, steps: int = 10, warmup: int = 3) -> float:
    model = create_model("tu-efficientnet_lite0", "imagenet")
    optimizer = torch.optim.AdamW(model.parameters(), 1e-3)
    image = torch.randn(8, 3, side, side)
    label = (torch.rand(8, 1, side, side) > 0.9).float()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        image = image.contiguous(memory_format=torch.channels_last)
    seconds = []
    for _ in range(steps):
        start = time.perf_counter()
        loss = segmentation_loss(model(image), label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seconds.append(time.perf_counter() - start)
    later = sorted(seconds[warmup:])
    return later[len(later) // 2]


if __name__ == "__main__":
    torch.manual_seed(0)
    for side in (128, 160):
        for channels_last in (False, True):
            print(side, "channels-last" if channels_last else "default",
                  f"step {median_step(side, channels_last):.3f} s", flush=True)
