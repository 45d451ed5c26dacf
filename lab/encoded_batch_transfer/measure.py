"""How long does the main process take to receive one batch of notebook 03's items from
DataLoader workers, as they were at commit 1c8c4f6 (labels and worker-decoded photos at the
photo's size) and resized to the training side in the worker? Workers hand over prepared
items (no decoding), so the time is the hand-over alone: pickling, the pipe, unpickling.
python -m lab.encoded_batch_transfer.measure"""
import statistics
import time

import numpy as np
from torch.utils.data import DataLoader, Dataset

BATCH, SIDE, TRAIN, BYTES = 32, 1024, 384, 80_000  # the gpu profile's batch and sides


class Items(Dataset):
    """Notebook 03's items: a quarter decoded in the worker (progressive, CMYK), the rest bytes."""

    def __init__(self, height, width):
        rng = np.random.default_rng(0)
        self.label = rng.integers(0, 2, (height, width), np.uint8)
        self.pixels = rng.integers(0, 255, (height, width, 3), np.uint8)
        self.data = rng.integers(0, 255, BYTES, np.uint8)

    def __len__(self):
        return 40 * BATCH

    def __getitem__(self, index):
        item = {"file": f"Images/1/{index:05d}.jpg", "label": self.label.copy()}
        if index % 4 == 0:
            return {**item, "pixels": self.pixels.copy()}
        return {**item, "data": self.data.copy(), "orientation": 1}


def per_batch_ms(height, width, workers=2):
    """ms a batch over the batches after the prefetched ones (their arrivals come in bursts,
    one a worker, so the time of the whole run, not the gaps' median)."""
    loader = DataLoader(Items(height, width), batch_size=BATCH, num_workers=workers, collate_fn=list)
    for index, _ in enumerate(loader):
        if index == 4 * workers - 1:  # the buffer of prefetched batches first
            began = time.perf_counter()
    return (time.perf_counter() - began) * 1e3 / (index - 4 * workers + 1)


if __name__ == "__main__":
    for label, (height, width) in (("at the photo's size", (SIDE, SIDE * 3 // 4)),
                                   ("resized in the worker", (TRAIN, TRAIN))):
        runs = [per_batch_ms(height, width) for _ in range(3)]
        print(f"{label} ({height}×{width}): {statistics.median(runs):.1f} ms a batch of {BATCH} "
              f"(median of 3 runs of {40 - 8} batches; {min(runs):.1f}-{max(runs):.1f})", flush=True)
