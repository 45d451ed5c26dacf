"""Preprocessing alone (decode + EXIF orientation + resize to 384 + a random flip, batches of 64
landing on the GPU as uint8), from the same phone-sized JPEGs, by five pipelines: PIL in one
process, PIL in DataLoader workers on every CPU core, torchvision's nvJPEG batch decode, DALI's
mixed decoder without and with the hardware JPEG decoder, and DALI's CPU decoder.

Run on the GPU machine from the repository root (DALI, nvImageCodec and nvJPEG on the path):
``python -m lab.jpeg_decode_race.race --out OUT``. Self-contained: it imports nothing of the
package, so it runs as it ran."""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing
import os
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from PIL import Image, ImageOps
from scipy import stats

SIDE, BATCH = 384, 64
LONG_SIDES = (1024, 1536, 2048, 3024, 4032)  # 0.8 to 12.2 megapixels at 4:3
ORIENTATION = 0x0112


def photo(index: int, folder: str, long_sides: tuple[int, ...] = LONG_SIDES) -> dict:
    """One synthetic phone photo: smooth light, skin-coloured blobs, sensor noise (so that it
    compresses like a photo, not like a drawing); every fifth progressive, every twentieth
    grayscale, every twentieth (another) CMYK, every third stored on its side (EXIF 6)."""
    rng = np.random.default_rng(index)
    long = long_sides[index % len(long_sides)]
    width, height = long, long * 3 // 4
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = 90 + 60 * np.sin(x / width * rng.uniform(1, 4)) * np.cos(y / height * rng.uniform(1, 4))
    pixels = np.stack([base * c for c in rng.uniform(0.6, 1.2, 3)], axis=-1)
    for _ in range(6):
        cx, cy, r = rng.uniform(0, width), rng.uniform(0, height), rng.uniform(0.03, 0.12) * long
        inside = (x - cx) ** 2 + (y - cy) ** 2 * 2 < r ** 2
        pixels[inside] = rng.uniform(150, 240, 3)
    pixels += rng.normal(0, 6, pixels.shape)
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    kind = ("grayscale" if index % 20 == 7 else "cmyk" if index % 20 == 13 else "rgb")
    image = image.convert({"grayscale": "L", "cmyk": "CMYK", "rgb": "RGB"}[kind])
    exif = Image.Exif()
    turned = index % 3 == 1
    if turned:  # stored on its side; a viewer turns it upright
        image = image.transpose(Image.Transpose.ROTATE_90)
        exif[ORIENTATION] = 6
    progressive = index % 5 == 2
    path = Path(folder, f"photo{index:04d}.jpg")
    image.save(path, quality=90, progressive=progressive, exif=exif)
    return {"file": path.name, "megapixels": width * height / 1e6, "kind": kind,
            "progressive": progressive, "exif_turned": turned, "bytes": path.stat().st_size}


def pil_sample(path: str, flip: bool) -> torch.Tensor:
    """PIL: decode, turn as EXIF says, RGB, resize (bilinear), flip; 3xSxS uint8."""
    with Image.open(path) as image:
        image = ImageOps.exif_transpose(image).convert("RGB").resize((SIDE, SIDE),
                                                                    Image.Resampling.BILINEAR)
    array = np.array(image)
    if flip:
        array = array[:, ::-1]
    return torch.from_numpy(np.ascontiguousarray(array)).permute(2, 0, 1)


class PILSet(torch.utils.data.Dataset):
    def __init__(self, files: list[str], flips: bool):
        self.files, self.flips = files, flips

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> torch.Tensor:
        flip = self.flips and bool(np.random.default_rng().integers(2))
        return pil_sample(self.files[index], flip)


def pil_one_process(files: list[str], flips: bool = True):
    for start in range(0, len(files), BATCH):
        yield torch.stack([pil_sample(f, flips and bool(np.random.randint(2)))
                           for f in files[start:start + BATCH]]).cuda()


def pil_workers(files: list[str], flips: bool = True):
    loader = torch.utils.data.DataLoader(PILSet(files, flips), batch_size=BATCH,
                                         num_workers=os.cpu_count(), pin_memory=True,
                                         persistent_workers=False, prefetch_factor=4)
    for batch in loader:
        yield batch.cuda(non_blocking=True)


def header(data: bytes) -> tuple[int, str]:
    """The EXIF orientation (1 when none) and PIL's mode of a JPEG's bytes, read from its
    header without decoding pixels."""
    with Image.open(io.BytesIO(data)) as image:
        return image.getexif().get(ORIENTATION, 1), image.mode


TURNS = {1: lambda t: t, 3: lambda t: t.flip(-1, -2), 6: lambda t: t.transpose(-1, -2).flip(-1),
         8: lambda t: t.transpose(-1, -2).flip(-2)}


def torchvision_gpu(files: list[str], flips: bool = True):
    """The file bytes read on the CPU, nvJPEG batch decode on the GPU, turned, resized and
    flipped there. nvJPEG refuses CMYK: those photos (told by their header) are decoded on
    the CPU and counted."""
    rgb = torchvision.io.ImageReadMode.RGB
    for start in range(0, len(files), BATCH):
        raw = [Path(f).read_bytes() for f in files[start:start + BATCH]]
        heads = [header(b) for b in raw]
        datas = [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in raw]
        on_gpu = [i for i, (_, mode) in enumerate(heads) if mode != "CMYK"]
        images = dict(zip(on_gpu, torchvision.io.decode_jpeg([datas[i] for i in on_gpu],
                                                             mode=rgb, device="cuda"), strict=True))
        for i in sorted(set(range(len(raw))) - set(on_gpu)):
            torchvision_gpu.cpu_fallbacks += 1
            images[i] = torchvision.io.decode_jpeg(datas[i], mode=rgb).cuda()
        out = []
        for i, (turn, _) in enumerate(heads):
            image = TURNS.get(turn, TURNS[1])(images[i])
            image = F.interpolate(image[None].float(), size=(SIDE, SIDE), mode="bilinear",
                                  align_corners=False)[0]
            if flips and bool(torch.randint(2, ())):
                image = image.flip(-1)
            out.append(image.round_().clamp_(0, 255).to(torch.uint8))
        yield torch.stack(out)


torchvision_gpu.cpu_fallbacks = 0


def dali_pipeline(files: list[str], device: str, hw_load: float | None, flips: bool):
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=BATCH, num_threads=os.cpu_count(), device_id=0, seed=0,
                  prefetch_queue_depth=2)
    def preprocess():
        data, _ = fn.readers.file(files=files, labels=list(range(len(files))),
                                  random_shuffle=False, name="reader")
        options = {} if hw_load is None else {"hw_decoder_load": hw_load}
        image = fn.decoders.image(data, device=device, output_type=types.RGB, **options)
        image = fn.resize(image.gpu() if device == "cpu" else image, resize_x=SIDE,
                          resize_y=SIDE, interp_type=types.INTERP_LINEAR, antialias=False)
        flip = fn.random.coin_flip() if flips else 0
        return fn.transpose(fn.flip(image, horizontal=flip), perm=[2, 0, 1])

    pipe = preprocess()
    pipe.build()
    return pipe


def dali_run(files: list[str], device: str, hw_load: float | None, flips: bool = True):
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    pipe = dali_pipeline(files, device, hw_load, flips)
    loader = DALIGenericIterator([pipe], ["image"], reader_name="reader",
                                 last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)
    for batch in loader:
        yield batch[0]["image"]


PIPELINES = {
    "PIL, one process": pil_one_process,
    "PIL, DataLoader workers on every core": pil_workers,
    "torchvision nvJPEG batch decode (GPU)": torchvision_gpu,
    "DALI mixed, no hardware decoder": lambda f, flips=True: dali_run(f, "mixed", 0.0, flips),
    "DALI mixed, hardware decoder (default load)": lambda f, flips=True: dali_run(f, "mixed", None, flips),
    "DALI CPU decoder, resize on the GPU": lambda f, flips=True: dali_run(f, "cpu", None, flips),
}


def one_pass(pipeline, files: list[str]) -> tuple[float, int]:
    """Seconds for every batch of ``files`` to land on the GPU (synchronized), and images."""
    torch.cuda.synchronize()
    began = time.perf_counter()
    count = 0
    for batch in pipeline(files):
        count += len(batch)
    torch.cuda.synchronize()
    return time.perf_counter() - began, count


def interval(values: list[float]) -> list[float]:
    """The 95 % Student-t interval of the mean of ``values``."""
    mean, sem = statistics.mean(values), stats.sem(values)
    half = stats.t.ppf(0.975, len(values) - 1) * sem
    return [mean - half, mean + half]


def agreement(files: list[str]) -> dict:
    """Per pipeline, on the first batch without flips: mean and 99th-percentile absolute
    difference from PIL's decode (0-255), and the photos' orientation agreement."""
    reference = next(pil_one_process(files[:BATCH], flips=False)).float()
    out = {}
    for name, pipeline in PIPELINES.items():
        if name.startswith("PIL"):
            continue
        try:
            batch = next(iter(pipeline(files[:BATCH], flips=False))).float()
        except Exception as error:  # noqa: BLE001  (a lab record keeps what failed)
            out[name] = {"error": repr(error)[:2000]}
            continue
        diff = (batch - reference).abs()
        per_photo = diff.flatten(1).mean(1)
        out[name] = {"mean_abs": float(diff.mean()), "p99_abs": float(diff.flatten().kthvalue(
            int(0.99 * diff.numel())).values), "worst_photo_mean_abs": float(per_photo.max()),
            "worst_photo": files[int(per_photo.argmax())].rsplit("/", 1)[-1]}
        print(f"{name} against PIL: {out[name]}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--photos", type=int, default=320)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--folder", default="/root/jpeg_race")
    parser.add_argument("--long-sides", type=int, nargs="+", default=list(LONG_SIDES))
    parser.add_argument("--pipelines", nargs="+", default=list(PIPELINES),
                        help="names of PIPELINES to run (default: all)")
    parser.add_argument("--tag", default="", help="the record is race_h200<_tag>.json")
    args = parser.parse_args()
    for name in [name for name in PIPELINES if name not in args.pipelines]:
        del PIPELINES[name]
    os.makedirs(args.folder, exist_ok=True)
    began = time.perf_counter()
    with multiprocessing.Pool(os.cpu_count()) as pool:
        described = pool.starmap(photo, [(i, args.folder, tuple(args.long_sides))
                                         for i in range(args.photos)])
    files = [str(Path(args.folder, d["file"])) for d in described]
    print(f"{len(files)} photos in {time.perf_counter() - began:.1f} s, "
          f"{sum(d['bytes'] for d in described) / 1e6:.0f} MB, "
          f"{statistics.mean(d['megapixels'] for d in described):.1f} MP on average", flush=True)
    record = {"date": datetime.now(UTC).isoformat(timespec="seconds"),
              "device": torch.cuda.get_device_name(), "cpu_cores": os.cpu_count(),
              "python": platform.python_version(),
              "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__,
                           "pillow": Image.__version__},
              "photos": described, "side": SIDE, "batch": BATCH, "results": {}}
    try:
        from nvidia import dali
        record["versions"]["nvidia-dali"] = dali.__version__
    except ImportError as error:
        record["dali_missing"] = str(error)
    try:
        record["agreement"] = agreement(files)
    except Exception as error:  # noqa: BLE001  (a lab record keeps what failed)
        record["agreement_error"] = repr(error)
    for name, pipeline in PIPELINES.items():
        repeats = 3 if name == "PIL, one process" else args.repeats
        try:
            torch.cuda.reset_peak_memory_stats()
            one_pass(pipeline, files[:2 * BATCH])  # warm-up: workers, nvJPEG, DALI's buffers
            rates = []
            for _ in range(repeats):
                seconds, count = one_pass(pipeline, files)
                rates.append(count / seconds)
            record["results"][name] = {
                "images_per_s": rates, "median": statistics.median(rates),
                "interval95": interval(rates), "repeats": repeats,
                "torch_peak_gpu_mib": torch.cuda.max_memory_allocated() / 2**20}
            print(f"{name}: {statistics.median(rates):.0f} img/s "
                  f"(95 % interval {interval(rates)[0]:.0f}-{interval(rates)[1]:.0f}, n={repeats})",
                  flush=True)
        except Exception as error:  # noqa: BLE001
            record["results"][name] = {"error": repr(error)[:2000]}
            print(f"{name}: FAILED {error!r}"[:600], flush=True)
    record["torchvision_cmyk_cpu_fallbacks"] = torchvision_gpu.cpu_fallbacks
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"race_h200{'_' + args.tag if args.tag else ''}.json"
    (args.out / name).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
