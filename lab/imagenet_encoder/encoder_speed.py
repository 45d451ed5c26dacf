"""Which ImageNet encoder for the course? Training-step speed of smp U-Nets, random weights.

One training step (forward, loss, backward, AdamW) of ``smp.Unet(encoder)`` on a resident
batch, timed after warm-up: median and range over windows. On a GPU: the gpu profile's
shape (batch 32, 384 px, bf16 autocast, channels-last); on a CPU: the cpu profile's
(batch 8, 96 and 128 px, float32, 2 threads).

    python lab/imagenet_encoder/encoder_speed.py OUT.json
"""

import json
import platform
import statistics
import sys
import time

import segmentation_models_pytorch as smp
import torch

ENCODERS = ["tu-efficientnet_lite0", "tu-efficientnet_lite1", "tu-efficientnet_lite2", "resnet34", "resnet18"]


def step_seconds(encoder: str, batch: int, side: int, device: str, windows: int, steps: int) -> list[float]:
    model = smp.Unet(encoder, encoder_weights=None, classes=1).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gpu = device == "cuda"
    if gpu:
        model = model.to(memory_format=torch.channels_last)
    image = torch.randn(batch, 3, side, side, device=device)
    if gpu:
        image = image.contiguous(memory_format=torch.channels_last)
    label = (torch.rand(batch, 1, side, side, device=device) > 0.5).float()

    def step():
        with torch.autocast(device, torch.bfloat16, enabled=gpu):
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(image).float(), label)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(5):
        step()
    times = []
    for _ in range(windows):
        if gpu:
            torch.cuda.synchronize()
        began = time.perf_counter()
        for _ in range(steps):
            step()
        if gpu:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - began) / steps)
    return times


def main(out: str) -> None:
    gpu = torch.cuda.is_available()
    device = "cuda" if gpu else "cpu"
    if gpu:
        torch.backends.cudnn.benchmark = True
    else:
        torch.set_num_threads(2)
    shapes = [(32, 384)] if gpu else [(8, 96), (8, 128)]
    rows = []
    for encoder in ENCODERS:
        for batch, side in shapes:
            times = step_seconds(encoder, batch, side, device, windows=5 if gpu else 3, steps=20 if gpu else 4)
            row = {"encoder": encoder, "batch": batch, "side": side,
                   "images_per_s": {"median": batch / statistics.median(times),
                                    "min": batch / max(times), "max": batch / min(times)},
                   "windows": len(times)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    about = {"device": torch.cuda.get_device_name() if gpu else platform.processor() or platform.machine(),
             "torch": torch.__version__, "smp": smp.__version__, "date": time.strftime("%Y-%m-%d")}
    with open(out, "w") as file:
        json.dump({**about, "rows": rows}, file, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
