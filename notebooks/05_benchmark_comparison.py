# ---
# jupyter:
#   blog:
#     categories:
#     - benchmark
#     - gpu
#     - dali
#     - kornia
#     - pytorch
#     date: '2026-11-23'
#     description: Timing GPU training honestly (warm-up, synchronised clocks, repeats,
#       utilisation), then Albumentations on CPU workers, Kornia on the GPU and NVIDIA
#       DALI measured against the bound of a training step with data already on the
#       GPU.
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: blog
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · Benchmark: how much faster is the GPU pipeline?
#
# Notebooks 02 to 04 fed the same U-Net three ways: Albumentations on CPU worker processes,
# a uint8 cache with Kornia augmenting on the GPU, and NVIDIA DALI doing everything on the GPU.
# "Faster" is a claim; this notebook first writes the tools to measure it carefully (the same
# model, batch, image size and precision for every pipeline, a warm-up, a synchronised GPU
# before every clock reading, several repeats with their spread), then measures every
# pipeline against the **bound**: the same training step fed with batches that are already
# on the device, which no input pipeline can beat.
#
# ## What you'll learn
#
# - what to time (the loader alone, the whole training step, the bound) and why all three
# - how to time GPU work honestly: warm-up, `torch.cuda.synchronize()`, repeats, median and spread
# - how to sample GPU and CPU utilisation while the clock runs, and read it next to throughput
# - how the three pipelines compare on an H100, and what that means for your own machine
#
# The timing code is written out here in full; the cells that start with `#| export timing`
# become the module `nailseg_common.timing` (`make export`), which notebooks 03 and 04 and
# the command-line benchmark (`make bench`) use.
#
# > **CPU or GPU?** The notebook runs everywhere. On a machine without a GPU it measures what
# > can run there at a small size (the `smoke` or `cpu` profile) and shows the committed H100
# > reference results beside it, each labelled with its device, library versions and date.
# > On a GPU the live run uses the full `gpu` profile (the reference run took about three
# > minutes on an H100; its file records the wall time).

# %% tags=["parameters"]
profile = ""          # smoke, cpu or gpu; empty: $NAILSEG_PROFILE, else chosen from the hardware
data_root = ""        # a real dataset (Images/1..4, Masks/1..4); empty: the synthetic set
num_images = None     # size of the synthetic set (ignored with data_root)
image_size = None     # side of the square images the model sees
batch_size = None
encoder = None        # smp encoder name, e.g. resnet18, resnet34
lr = None             # AdamW's learning rate (the step's cost does not depend on it)
num_workers = None    # DataLoader workers of the PNG loaders feeding Kornia (the cache uses at most 2)
precision = None      # Lightning precision, e.g. 32-true, bf16-mixed
accelerator = None    # cpu or gpu
bench_steps = None    # batches per timing window
bench_repeats = None  # timing windows per measurement
run_live = True       # run the whole benchmark on this machine now
workers = None        # Albumentations worker counts to try, e.g. [2, 4]; None: the profile's
reference = "results/benchmark_h100.json"  # committed GPU results, relative to the repository

# %%
from nailseg_common.environment import environment_report
from nailseg_common.preparation import ensure_prepared
from nailseg_common.profiles import select_profile

cfg = select_profile(profile, num_images=num_images, image_size=image_size, batch_size=batch_size,
                     encoder=encoder, lr=lr, num_workers=num_workers, precision=precision,
                     accelerator=accelerator, bench_steps=bench_steps, bench_repeats=bench_repeats)
print(environment_report(cfg))
print(f"device {cfg.device}; timing windows: {cfg.bench_repeats} × {cfg.bench_steps} batches")
data = ensure_prepared(cfg, data_root)
print("data:", data.raw)

# %% [markdown]
# ## What to time
#
# Three measurements per pipeline, all in one run on one machine:
#
# 1. **Loader alone.** Take batches from the pipeline's training loader, move them to the
#    device the way Lightning does (`non_blocking=True` on a GPU, which overlaps with other
#    work when the loader pins its memory), and, for Kornia, run the augmentation there.
#    Nothing trains. This is how fast the pipeline *can* deliver augmented batches.
# 2. **Training step.** Notebook 02's `LitNailSegmentation` (forward, the loss of symmetric
#    Lovász hinge + binary cross-entropy + soft Dice, backward, AdamW step), driven by the
#    course's `make_trainer` without logging, checkpoints or validation, fed by that loader.
#    This is what a training run gets.
# 3. **The bound.** The same training step on a fixed set of batches that already sit in the
#    device's memory. The benchmark measures it before the pipelines and again after them;
#    the two halves agreeing shows the machine did not change speed during the run.
#
# ## Why a GPU clock needs `synchronize`
#
# A CUDA call returns as soon as its work is *queued*; the GPU runs it later. A clock read
# right after the calls measures how fast Python queued work, not how fast the GPU did it.
# `torch.cuda.synchronize()` waits until the queue is empty, so a clock read after it
# includes all the work. Here are the two readings of the same matrix products (on a CPU
# there is no queue, so they agree):

# %%
import time

import torch

size = 4096 if cfg.device.type == "cuda" else 256
matrix = torch.randn(size, size, device=cfg.device)


def wait_for_device() -> None:
    if cfg.device.type == "cuda":
        torch.cuda.synchronize(cfg.device)


matrix @ matrix  # the first product pays for library start-up; it is not timed
wait_for_device()
start = time.perf_counter()
for _ in range(20):
    product = matrix @ matrix
queued_s = time.perf_counter() - start
wait_for_device()
done_s = time.perf_counter() - start
print(f"20 products of {size}×{size} on {cfg.device}: clock read after queuing {1e3 * queued_s:.2f} ms, "
      f"after synchronising {1e3 * done_s:.2f} ms")

# %% [markdown]
# ## Windows, repeats, median and spread
#
# One timing is one sample of a noisy process: other programs, clocks that boost and
# throttle, the garbage collector. So every measurement times `repeats` consecutive
# *windows* of `steps` batches each, after a warm-up, and reports each window's rate
# (images it saw ÷ its seconds). The summary is the median, which one slow window cannot
# move, with the min–max spread and the quartiles; the rates themselves are kept too, so
# anyone can recompute.

# %%
#| export timing
import statistics


def summarize(rates: list[float]) -> dict:
    """Median, min, max and quartiles of per-window rates (images/s), with the rates."""
    if not rates:
        raise ValueError("No timing windows were measured: use repeats >= 1 and steps >= 1.")
    ordered = sorted(rates)
    if len(ordered) > 1:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        q1 = q3 = ordered[0]
    return {"img_s": statistics.median(ordered), "img_s_min": ordered[0], "img_s_max": ordered[-1],
            "img_s_q1": q1, "img_s_q3": q3, "repeats": list(rates)}


# %% [markdown]
# ## What the machine was doing: utilisation
#
# Throughput says how fast; utilisation says why. NVIDIA's management library (NVML)
# reports, for the last sampling period, the share of time the GPU was running a kernel.
# A thread samples it every 0.1 s with a timestamp, so the mean over any window can be read
# afterwards. NVML numbers its GPUs on its own, ignoring `CUDA_VISIBLE_DEVICES`, so the
# sampler finds PyTorch's device by its UUID. For the CPU, `psutil.cpu_times()` before and
# after a window gives the busy share of all cores (the benchmark's own process included).

# %%
#| export timing
import threading
import time

import psutil
import torch


class UtilisationSampler:
    """GPU utilisation (NVML) sampled every ``interval`` s in a thread, on a ``cuda`` device.

    On other devices nothing is sampled and :meth:`gpu_percent` returns ``None``.
    """

    def __init__(self, device: torch.device, interval: float = 0.1):
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = None
        self._nvml = None
        if device.type == "cuda":
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = self._nvml_handle(device)
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()

    def _nvml_handle(self, device: torch.device):
        """NVML's handle of the CUDA device, matched by UUID (NVML ignores CUDA_VISIBLE_DEVICES)."""
        uuid = str(torch.cuda.get_device_properties(device).uuid)
        try:
            return self._nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        except self._nvml.NVMLError:  # UUID not understood: same numbering when nothing is hidden
            return self._nvml.nvmlDeviceGetHandleByIndex(device.index or 0)

    def _sample(self) -> None:
        while not self._stop.is_set():
            util = self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu
            self.samples.append((time.perf_counter(), util))
            self._stop.wait(self.interval)

    def gpu_percent(self, start: float, end: float) -> float | None:
        """Mean GPU utilisation (%) of the samples taken between ``start`` and ``end``."""
        if self._nvml is None:
            return None
        inside = [u for t, u in list(self.samples) if start <= t <= end]
        return statistics.fmean(inside) if inside else None

    def close(self) -> None:
        """Stop the sampling thread and NVML."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._nvml.nvmlShutdown()


def cpu_busy_percent(before, after) -> float:
    """Share (%) of all cores' time spent busy between two ``psutil.cpu_times()``."""
    idle = (after.idle - before.idle) + (getattr(after, "iowait", 0) - getattr(before, "iowait", 0))
    total = sum(after) - sum(before)
    return 100.0 * (1 - idle / total) if total > 0 else 0.0


# %% [markdown]
# ## The window clock
#
# `WindowClock` puts the pieces together. The code being timed calls `tick(images)` once a
# batch is done (its work queued on the device). The first `warmup` ticks are not timed: the
# first batches pay for cuDNN choosing its kernels, workers starting and memory being
# allocated. After that, at every window boundary the clock synchronises the device, reads
# `time.perf_counter()`, and records the window's rate and utilisation.

# %%
#| export timing
class WindowClock:
    """Counts batches; after ``warmup`` of them, times ``repeats`` windows of ``steps``.

    Call :meth:`tick` once a batch is done (its work queued on the device). At each
    window boundary it synchronises the device, then reads ``time.perf_counter``.
    """

    def __init__(self, device: torch.device, warmup: int, steps: int, repeats: int):
        if steps < 1 or repeats < 1 or warmup < 0:
            raise ValueError(f"Need steps >= 1, repeats >= 1, warmup >= 0 (got {steps}, {repeats}, {warmup}).")
        self.device, self.warmup, self.steps, self.repeats = device, warmup, steps, repeats
        self.total_batches = warmup + steps * repeats
        self.batches = 0
        self.rates: list[float] = []
        self.gpu_util: list[float] = []
        self.cpu_util: list[float] = []
        self._images = 0
        self._sampler = UtilisationSampler(device)
        if warmup == 0:
            self._open()

    def _now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def _open(self) -> None:
        self._images = 0
        self._cpu_before = psutil.cpu_times()
        self._start = self._now()

    def tick(self, images: int) -> None:
        """One batch of ``images`` images is done."""
        self.batches += 1
        if self.batches <= self.warmup:
            if self.batches == self.warmup:
                self._open()
            return
        self._images += images
        if (self.batches - self.warmup) % self.steps == 0 and len(self.rates) < self.repeats:
            end = self._now()
            self.rates.append(self._images / (end - self._start))
            self.cpu_util.append(cpu_busy_percent(self._cpu_before, psutil.cpu_times()))
            gpu = self._sampler.gpu_percent(self._start, end)
            if gpu is not None:
                self.gpu_util.append(gpu)
            if len(self.rates) < self.repeats:
                self._open()
            else:
                self.close()

    @property
    def done(self) -> bool:
        return len(self.rates) == self.repeats

    def close(self) -> None:
        """Stop the utilisation sampler (also done after the last window)."""
        self._sampler.close()

    def result(self) -> dict:
        """:func:`summarize` of the windows, with utilisation (medians over windows)."""
        if not self.done:
            raise RuntimeError(f"Only {len(self.rates)} of {self.repeats} timing windows finished "
                               f"({self.batches} batches seen, {self.total_batches} needed).")
        return {**summarize(self.rates), "batches_per_repeat": self.steps,
                "warmup_batches": self.warmup,
                "gpu_util_pct": statistics.median(self.gpu_util) if self.gpu_util else None,
                "cpu_util_pct": statistics.median(self.cpu_util)}


# %% [markdown]
# The clock on the matrix products from above, one "image" per product:

# %%
clock = WindowClock(cfg.device, warmup=2, steps=10, repeats=3)
while not clock.done:
    product = matrix @ matrix
    clock.tick(1)
products = clock.result()
print("products/s per window:", [f"{rate:.1f}" for rate in products["repeats"]])
print(f"median {products['img_s']:.1f}, min–max {products['img_s_min']:.1f}–{products['img_s_max']:.1f}; "
      f"GPU utilisation {products['gpu_util_pct']}, CPU busy {products['cpu_util_pct']:.0f} %")

# %% [markdown]
# ## The loader alone
#
# `measure_loader` drives a loader through the clock: each batch is moved to the device as
# Lightning moves it and, when the pipeline augments on the device, augmented there. Two
# details matter. A `DataLoader` with workers has `num_workers × prefetch_factor` batches
# ready before the clock starts, and timing those would measure a buffer, not the workers;
# so they are added to the warm-up. And a measurement may need more batches than one epoch
# holds, so the loader is started again, as training does at each epoch.

# %%
#| export timing
from collections.abc import Callable, Iterable, Iterator


def prefetched_batches(loader) -> int:
    """Batches a ``DataLoader``'s workers hold ready ahead of time (0 for other loaders)."""
    workers = getattr(loader, "num_workers", 0) or 0
    return workers * (getattr(loader, "prefetch_factor", None) or 0)


def endless(loader: Iterable[dict]) -> Iterator[dict]:
    """The loader's batches epoch after epoch (a new iterator each epoch, as in training)."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            raise RuntimeError(f"The loader {type(loader).__name__} yielded no batch in an epoch.")


def to_device(batch: dict, device: torch.device) -> dict:
    """``batch`` on ``device``; asynchronous on a GPU, as Lightning copies it."""
    return {key: value.to(device, non_blocking=device.type == "cuda") for key, value in batch.items()}


def measure_loader(loader: Iterable[dict], device: torch.device, warmup: int, steps: int,
                   repeats: int, augmentation: torch.nn.Module | None = None) -> dict:
    """Images/s of the loader alone: each batch moved to ``device`` (and augmented there)."""
    clock = WindowClock(device, warmup + prefetched_batches(loader), steps, repeats)
    batches = endless(loader)
    try:
        while not clock.done:
            batch = to_device(next(batches), device)
            if augmentation is not None:
                batch["image"], batch["label"] = augmentation(batch["image"], batch["label"])
            clock.tick(batch["image"].shape[0])
    finally:
        batches.close()
        clock.close()
    return clock.result()


# %% [markdown]
# Notebook 02's Albumentations loader, with the profile's `num_workers`. The warm-up is a
# fifth of a window (at least one batch), as in the benchmark below.

# %%
from nailseg_common.datasets import NailDataModule

warmup = max(1, cfg.bench_steps // 5)
albumentations = NailDataModule(data, cfg)
albumentations.setup("fit")
albumentations_loader = albumentations.train_dataloader()
alone = measure_loader(albumentations_loader, cfg.device, warmup, cfg.bench_steps, cfg.bench_repeats)
print(f"Albumentations, {cfg.num_workers} workers, loader alone: {alone['img_s']:.1f} img/s "
      f"(windows {', '.join(f'{rate:.1f}' for rate in alone['repeats'])}; "
      f"warm-up {alone['warmup_batches']} batches)")

# %% [markdown]
# ## The training step and the bound
#
# The bound needs a loader that costs nothing: `resident_batches` copies a few batches of a
# real loader to the device once, and `ResidentBatches` hands them out again and again, an
# epoch as long as the original loader's. Lightning's copy of a batch that is already on the
# device does nothing, so the step runs as fast as the model allows. The batches are real
# (same size, same pixel statistics), so the step does the same work as with any pipeline.

# %%
#| export timing
BOUND_BATCHES = 8  # distinct batches kept on the device for the bound


class ResidentBatches:
    """The bound's loader: ``length`` batches per epoch cycled from a set already on the device."""

    def __init__(self, batches: list[dict], length: int):
        if not batches:
            raise ValueError("The bound needs at least one batch.")
        self.batches, self.length = batches, length

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[dict]:
        for index in range(self.length):
            yield dict(self.batches[index % len(self.batches)])  # a fresh dict: hooks may edit it


def resident_batches(loader: Iterable[dict], device: torch.device, count: int = BOUND_BATCHES) -> ResidentBatches:
    """The first ``count`` batches of ``loader`` copied to ``device``, one epoch as long as the loader's."""
    batches = []
    for batch in loader:
        batches.append({key: value.to(device).clone() for key, value in batch.items()})
        if len(batches) == count:
            break
    return ResidentBatches(batches, len(loader))


# %% [markdown]
# `measure_training` times the real thing: `Trainer.fit` of a fresh model (seed 0), from
# notebook 02's `make_trainer` with its precision and cuDNN settings, minus the logger,
# checkpoints, progress bar and validation. A callback ticks the clock after every
# optimizer step, and the run stops after exactly the batches the clock needs. A
# pipeline's GPU augmentation goes into the model (`gpu_augmentation`), where it runs in
# `on_after_batch_transfer`, inside the training step.

# %%
#| export timing
import contextlib
import warnings

import pytorch_lightning as pl

from nailseg_common.models import LitNailSegmentation
from nailseg_common.profiles import Profile
from nailseg_common.training import make_trainer


class ClockCallback(pl.Callback):
    """Ticks a :class:`WindowClock` after each training step (optimizer step queued)."""

    def __init__(self, clock: WindowClock):
        self.clock = clock

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.clock.tick(batch["image"].shape[0])


@contextlib.contextmanager
def without_validation_hint() -> Iterator[None]:
    """The benchmark trains without validation on purpose; Lightning's hint about it is noise."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*`validation_step` but have no `val_dataloader`.*")
        yield


def measure_training(loader: Iterable[dict], profile: Profile, warmup: int, steps: int, repeats: int,
                     augmentation: torch.nn.Module | None = None,
                     make_model: Callable[..., pl.LightningModule] = LitNailSegmentation) -> dict:
    """Images/s of full training steps on ``loader`` (``Trainer.fit`` of a fresh model, seed 0),
    on ``profile.device``. ``make_model(encoder=, lr=, max_steps=, gpu_augmentation=)`` builds
    the model (notebook 07 passes a faster one)."""
    clock = WindowClock(profile.device, warmup + prefetched_batches(loader), steps, repeats)
    torch.manual_seed(0)
    model = make_model(encoder=profile.encoder, lr=profile.lr, max_steps=1,
                       gpu_augmentation=augmentation)
    with without_validation_hint(), contextlib.closing(clock):
        trainer = make_trainer(  # the course's Trainer, minus logging, checkpoints and validation
            profile, "benchmark", max_steps=clock.total_batches, max_epochs=-1,
            limit_train_batches=1.0, limit_val_batches=0, logger=False, enable_checkpointing=False,
            enable_progress_bar=False, callbacks=[ClockCallback(clock)])
        trainer.fit(model, train_dataloaders=loader)
    return clock.result()


# %% [markdown]
# The bound and the training step on the Albumentations loader from above, side by side:

# %%
bound = measure_training(resident_batches(albumentations_loader, cfg.device), cfg, warmup,
                         cfg.bench_steps, cfg.bench_repeats)
trained = measure_training(albumentations_loader, cfg, warmup, cfg.bench_steps, cfg.bench_repeats)
for name, result in (("bound (batches on the device)", bound), ("Albumentations training", trained)):
    print(f"{name:<30} {result['img_s']:8.1f} img/s  (min–max {result['img_s_min']:.1f}–"
          f"{result['img_s_max']:.1f}, CPU busy {result['cpu_util_pct']:.0f} %)")
print(f"share of the bound: {trained['img_s'] / bound['img_s']:.2f}")

# %% [markdown]
# On a CPU the model computes on the same cores that load and augment, so the share of the
# bound says little there; and with the `smoke` profile's warm-up of one batch, the first
# training measurement of a session may still pay for start-up costs, so read the spread
# before the median. On a GPU the share of the bound is the number this notebook is about.
#
# ## The pipelines
#
# The benchmark (`nailseg_common.benchmark`, run by `make bench`) measures every pipeline of
# the course with these functions. Its catalogue builds each pipeline's loader from the
# module that teaches it: Albumentations (notebook 02) at several worker counts, notebook
# 03's steps from PNG files to the uint8 cache + Kornia (the intermediate steps only on a
# GPU), and DALI (notebook 04) when it is installed.

# %%
from nailseg_common.benchmark import default_pipelines, worker_counts
from nailseg_common.dali_pipelines import dali_status

pipelines = default_pipelines(cfg, data, workers)
print(dali_status())
print(f"Albumentations worker counts: {list(workers or worker_counts(cfg))}")
for p in pipelines:
    where = "augmentation on the device, in the step" if p.make_augmentation else "augmented by the loader"
    print(f"  {p.name:<22} {where}")
print(f"batch {cfg.batch_size}, {cfg.image_size} px, {cfg.encoder} U-Net, {cfg.precision}; "
      f"{cfg.bench_repeats} windows of {cfg.bench_steps} batches each")

# %% [markdown]
# ## Live run on this machine
#
# `run_benchmark` measures the bound (half of its windows), then each pipeline's loader
# alone and training step on one loader (a cache or a DALI graph is built once), then the
# other half of the bound. Each line reports a pipeline once both of its measurements are
# done. `make bench` runs the same at the `gpu` profile's size and writes the results to a
# JSON file.

# %%
from nailseg_common.benchmark import results_label, run_benchmark, stability_warning

live = run_benchmark(cfg, pipelines, config={"data": data.raw.name}) if run_live else None
if live is not None:
    print("live:", results_label(live))
    print(stability_warning(live) or "The bound was stable between the start and the end of the run.")

# %% [markdown]
# ## The reference: an H100
#
# The course's reference numbers are in the committed file `results/benchmark_h100.json`,
# written by `make bench BENCH_OUT=results/benchmark_h100.json` on a GPU machine. Every
# number below that is labelled "reference" is read from that file, and the file records
# where it comes from: the device, the CPU cores, the profile's sizes, the library versions
# and the date. Those versions are the GPU machine's, which need not be the ones the course
# pins in `pyproject.toml` for laptops and CI; the table compares them with this machine's.

# %%
import pandas as pd

from nailseg_common.benchmark import load_results
from nailseg_common.environment import library_versions
from nailseg_common.paths import REPO_ROOT

committed = load_results(REPO_ROOT / reference)
if committed is None:
    print(f"No reference results yet: {reference} has not been committed. Run "
          f"`python -m nailseg_common.benchmark --profile gpu --out {reference}` on a GPU.")
else:
    print("reference:", results_label(committed))
    if "wall_s" in committed:
        print(f"the whole run took {committed['wall_s']:.0f} s")
    print(stability_warning(committed) or "The bound was stable between the start and the end of the run.")
    versions = pd.DataFrame({"reference run": committed["versions"], "this machine": library_versions()})
    versions["same"] = versions["reference run"] == versions["this machine"]
    print(versions.to_string())

result_sets = {name: r for name, r in (("reference", committed), ("live", live)) if r is not None}

# %% [markdown]
# ## Throughput
#
# Blue bars are the loader alone, orange bars the training step (whiskers: fastest and
# slowest window). The dashed line is the bound, with its spread shaded. A pipeline whose
# orange bar reaches the line costs the training nothing; the gap between an orange bar and
# the line is time the GPU spent waiting for data or doing the augmentation instead of
# training.

# %%
import matplotlib.pyplot as plt

from nailseg_common.plots import plot_benchmark_sets, plot_benchmark_throughput

plot_benchmark_sets(result_sets, plot_benchmark_throughput)
plt.show()

# %% [markdown]
# ## Share of the bound
#
# The same training rates divided by the bound. Red dotted marks are the course's targets
# for the GPU reference: DALI at least 0.97 of the bound, Kornia at least 0.90.

# %%
from nailseg_common.benchmark import TARGETS
from nailseg_common.plots import plot_ratio_to_bound

plot_benchmark_sets(result_sets, plot_ratio_to_bound, targets=TARGETS)
plt.show()

# %% [markdown]
# ## More CPU workers?
#
# The obvious fix for a slow CPU pipeline is more worker processes. Here is how the
# Albumentations pipeline scales with them, against the GPU pipelines and the bound.

# %%
from nailseg_common.plots import plot_worker_scaling

plot_benchmark_sets(result_sets, plot_worker_scaling)
plt.show()

# %% [markdown]
# ## The numbers
#
# `workers` is the number of DataLoader worker processes, read from each loader (the
# Kornia cache loader uses at most two; DALI runs its own threads instead and shows none).
# Utilisation columns are medians over the training windows; CPU utilisation is the busy
# share of all cores, the benchmark's own process included.

# %%
from nailseg_common.benchmark import summary_table

for name, results in result_sets.items():
    print(f"{name}: {results_label(results)}")
    print(summary_table(results).round(2).to_string(), end="\n\n")

# %% [markdown]
# ## Targets
#
# The course's targets, for the H100 reference: DALI training at ≥ 0.97 of the bound with its
# loader alone at ≥ 5000 images/s, and Kornia training at ≥ 0.90 of the bound. The check
# below reads the numbers from the results; where a target is missed it says by how much and
# gives the time budget of one batch: the step at the bound, the input pipeline alone, and
# the ratio to expect if the input work ran *before* each step on the same GPU instead of
# alongside it.

# %%
from nailseg_common.benchmark import describe_targets

if committed is None:
    print("No committed reference results: the targets cannot be checked yet.")
else:
    print("reference:")
    print(describe_targets(committed))
if live is not None and live["cuda"] is not None:
    print("\nlive run on this GPU:")
    print(describe_targets(live))

# %% [markdown]
# Reading the budget: Kornia's augmentation runs inside the training step, on the same CUDA
# stream, so its time adds to every step and the "serial" ratio is what to expect unless the
# loader's copies overlap with the step. DALI runs its graph on its own stream with a
# prefetch queue, so it can overlap with the step and get close to the bound, as long as the
# GPU has room for both. Albumentations overlaps too, in other processes, but only up to what
# the CPU cores deliver.
#
# ## What this means for your machine
#
# The H100 makes the point sharply because its step is so fast. The same arithmetic applies
# to any machine: how many images per second does one training step consume, and how many
# can your input pipeline deliver?

# %%
from nailseg_common.benchmark import best_albumentations, cpu_workers_to_reach_bound

for name, results in result_sets.items():
    best = best_albumentations(results)
    needed = cpu_workers_to_reach_bound(results)
    line = (f"{name} ({results['device']}): the bound is {results['bound']['img_s']:.0f} img/s; "
            f"the best CPU pipeline ({best}) reaches {results['pipelines'][best]['train_ratio_to_bound']:.2f} of it")
    if needed is not None:
        line += f"; feeding the bound from CPU workers would take about {needed:.0f} of them"
    print(line + ".")

# %% [markdown]
# The worker estimate assumes that the rate per worker at the highest count measured keeps
# scaling, which is optimistic: memory bandwidth and the main process do not scale.
#
# - **Without a GPU** the training step itself is the slow part: expect every pipeline near
#   the bound (your live run above shows whether yours is; on a busy machine the windows
#   scatter, so look at the spread before reading anything into a ratio above 1). Moving
#   augmentation "to the GPU" gains nothing there; Albumentations with a couple of workers is
#   the sensible choice.
# - **On a mid-range GPU** the step is several times slower than on an H100, so fewer CPU
#   workers keep up. Compare the bound with Albumentations at your core count: if the ratio
#   is near 1, the CPU pipeline is fine.
# - **On a fast GPU with few CPU cores** (cloud instances often give 8–16 cores per GPU), the
#   CPU pipeline leaves the GPU idle much of the time. That is where moving augmentation to
#   the GPU, or the whole pipeline to DALI, pays off.
# - Rerun this notebook with `profile = "gpu"` (or `make bench`) on your own GPU: the live
#   numbers then answer the question for your hardware directly.

# %% [markdown]
# ## Summary
#
# - Time the loader alone, the full training step, and the bound (batches already on the
#   device), in the same run, with the same model, batch, image size and precision.
# - Warm up (prefetched batches included), synchronise the GPU before reading a clock,
#   repeat, and report the median with its spread; sample utilisation inside the same
#   windows; record the device, versions and date with the numbers.
# - The ratio to the bound is the number that matters: it says how much of the GPU's time the
#   input pipeline costs.
# - CPU workers scale until cores run out; on a fast GPU the cache + Kornia and DALI pipelines
#   keep the GPU busy with a fraction of the CPU.

# %% [markdown]
# ## Exercises
#
# 1. Run the live benchmark with `workers = [1, 2]` and then with your machine's core count.
#    Where does the Albumentations curve flatten, and what is the CPU utilisation there?
# 2. Change `reference` to your own results file written by
#    `python -m nailseg_common.benchmark --out results/mine.json` and compare both machines.
# 3. On a GPU, time the matrix products of the first cells in windows of your own, reading
#    `time.perf_counter()` without synchronising, and compare the rates with `WindowClock`'s.
#    Then synchronise once, before the last reading only: which window absorbs the GPU's
#    time, and what does the median say then?
# 4. Explain a missed target with `nailseg_common.training.DataWaitTimer`: train a few
#    steps of the Kornia pipeline with it and compare the waiting time per step with the
#    gap between the step and the bound.
# 5. Kornia's augmentation adds to every step. Estimate from the table how much faster the
#    Kornia pipeline would train if the augmentation ran on a second CUDA stream, overlapping
#    with the previous step.
