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
# Notebooks 02 to 04 fed the same U-Net from the same JPEG photos three ways, each decoding
# every photo every epoch: Albumentations on CPU worker processes, the GPU decoding the photos
# (nvJPEG) with Kornia augmenting there, and NVIDIA DALI doing everything on the GPU. Beside
# them runs the other way out, decoding once ahead of time (notebook 03's uint8 cache).
# Each of them was judged with notebook 02's instrument: the training images per second
# (`TrainingSpeed`, one reading per epoch) over the **bound**, the same training step fed
# with batches already on the device (`bound_speed`): the step with an input
# pipeline that costs nothing. This notebook takes that instrument apart and builds it out
# into a benchmark: fixed windows of batches instead of epochs, a warm-up, a synchronised
# clock, several repeats with their median and spread, the loader alone beside the training
# step, and the bound measured in the same run, before and after the pipelines.
#
# ## What you'll learn
#
# - what to time (the loader alone, the whole training step, the bound) and why all three
# - how to time GPU work honestly: warm-up, a synchronised clock, repeats, median and spread
# - how to sample GPU and CPU utilisation while the clock runs, and read it next to throughput
# - how the pipelines compare on an H200, judged against targets derived from the same
#   run and its spread, and what that means for your own machine
# - preprocessing alone (decode, resize, augment; no training) in one CPU process, on every
#   core, on the GPU with torchvision and with DALI, beside the 22× a DALI post reported
#
# The timing code is written out here in full; the cells that start with `#| export timing`
# become the module `nailseg_common.measure.timing` (`make export`), which the command-line
# benchmark (`make bench`) and notebook 07 use.
#
# > **CPU or GPU?** The notebook runs everywhere. The live run measures the course's three
# > pipelines on this machine at the profile's size (DALI where it is installed); the full
# > sweep of worker counts and of notebook 03's intermediate steps is `make bench`, whose
# > committed H200 results are read and plotted beside the live ones, labelled with their
# > device, encoder, library versions and date.

# %%
import time

import matplotlib.pyplot as plt
import pandas as pd
import torch
from IPython.display import display

from nailseg_common.core.clock import synchronized_now
from nailseg_common.core.statistics import ratio_spread
from nailseg_common.measure.benchmark import (
    default_pipelines,
    describe_bound,
    describe_targets,
    load_results,
    preprocessing_pipelines,
    preprocessing_rates,
    results_label,
    run_benchmark,
    summary_table,
    worker_counts,
)
from nailseg_common.measure.plots import (
    plot_benchmark_sets,
    plot_benchmark_throughput,
    plot_ratio_to_bound,
    plot_worker_scaling,
)
from nailseg_common.setup.dali import dali_status
from nailseg_common.setup.environment import library_versions
from nailseg_common.setup.paths import REPO_ROOT

# %% tags=["parameters"]
profile = ""          # smoke, cpu or gpu; empty: $NAILSEG_PROFILE, else chosen from the hardware
data_root = ""        # a real dataset (Images/1..4, Masks/1..4); empty: the synthetic set
num_images = None     # size of the synthetic set (ignored with data_root)
image_size = None     # side of the square images the model sees
batch_size = None
encoder = None        # smp encoder name
lr = None             # AdamW's learning rate (the step's cost does not depend on it)
num_workers = None    # DataLoader workers of the Albumentations loader (the cache uses at most 2)
precision = None      # Lightning precision, e.g. 32-true, bf16-mixed
accelerator = None    # cpu or gpu
bench_steps = None    # batches per timing window
bench_repeats = None  # timing windows per measurement
run_live = True       # run the benchmark on this machine now
full_sweep = False    # True: every worker count and notebook 03's steps, as make bench does
workers = None        # Albumentations worker counts, e.g. [2, 4]; None: num_workers, or the sweep's
reference = "results/benchmark_h200.json"  # committed GPU results, relative to the repository

# %%
from nailseg_common.course import start

cfg, data = start(globals())
print(f"device {cfg.device}; timing windows: {cfg.bench_repeats} × {cfg.bench_steps} batches")

# %% [markdown]
# ## What to time
#
# Three measurements per pipeline, all in one run on one machine:
#
# 1. **Loader alone.** Take batches from the pipeline's training loader, move them to the
#    device the way Lightning does (`non_blocking=True` on a GPU, which overlaps with other
#    work when the loader pins its memory), and, for Kornia, run the augmentation there.
#    Nothing trains. This is how fast the pipeline *can* deliver augmented batches.
# 2. **Training step.** Notebook 02's `LitNailSegmentation` (forward, the loss, backward,
#    AdamW step), driven by the course's `make_trainer` without logging, checkpoints or
#    validation, fed by that loader. This is what a training run gets.
# 3. **The bound.** The same training step on a fixed set of batches that already sit in the
#    device's memory. The benchmark measures it before the pipelines and again after them,
#    so its windows span the whole run: their range is the spread every ratio is read against.
#
# Notebook 02's `TrainingSpeed` took one reading per epoch and left out the first; here the
# readings are windows of a fixed number of batches, after a warm-up of a fixed number, so
# a measurement costs the same whatever the size of an epoch.
#
# ## Why a GPU clock needs synchronising
#
# A CUDA call returns as soon as its work is *queued*; the GPU runs it later. A clock read
# right after the calls measures how fast Python queued work, not how fast the GPU did it.
# `torch.cuda.synchronize()` waits until the queue is empty, so a clock read after it
# includes all the work. The course has one such clock, `synchronized_now(device)` in
# `nailseg_common.measure.profiling`: it synchronises a CUDA device, then reads `time.perf_counter()`.
# Here are the two readings of the same matrix products (on a CPU there is no queue, so
# they agree):

# %%
size = 4096 if cfg.device.type == "cuda" else 256
products = 20
matrix = torch.randn(size, size, device=cfg.device)
matrix @ matrix  # the first product pays for library start-up; it is not timed
began = synchronized_now(cfg.device)
for _ in range(products):
    product = matrix @ matrix
queued_s = time.perf_counter() - began  # no synchronising: the queue, not the work
done_s = synchronized_now(cfg.device) - began
print(f"{products} products of {size}×{size} on {cfg.device}: clock read after queuing "
      f"{1e3 * queued_s:.2f} ms, after synchronising {1e3 * done_s:.2f} ms")

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
#| export measure.timing: timing an input pipeline alone and feeding a training step, window by window
import statistics  # the timing module's imports, for the cells below too

import psutil
import torch

from nailseg_common.core.clock import synchronized_now
from nailseg_common.measure.profiling import UtilisationSampler, cpu_busy_percent


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
# ## The window clock
#
# `WindowClock` puts the pieces together. The code being timed calls `tick(images)` once a
# batch is done (its work queued on the device). The first `warmup` ticks are not timed: the
# first batches pay for cuDNN choosing its kernels, workers starting and memory being
# allocated. After that, at every window boundary the clock reads `synchronized_now` and
# records the window's rate.
#
# Throughput says how fast; utilisation says why. So each window also records what the
# machine was doing: the GPU's busy share, which NVIDIA's management library (NVML) reports
# and a thread samples with timestamps, and the busy share of all CPU cores from
# `psutil.cpu_times()` before and after the window. Both come from
# `nailseg_common.measure.profiling` (the NVML thread is plumbing, not the lesson).

# %%
#| export measure.timing
class WindowClock:
    """Counts batches; after ``warmup`` of them, times ``repeats`` windows of ``steps``
    (call :meth:`tick` once a batch is done; a window ends with ``synchronized_now``)."""

    def __init__(self, device: torch.device, warmup: int, steps: int, repeats: int):
        if steps < 1 or repeats < 1 or warmup < 0:
            raise ValueError(f"Need steps >= 1, repeats >= 1, warmup >= 0 (got {steps}, {repeats}, {warmup}).")
        self.device, self.warmup, self.steps, self.repeats = device, warmup, steps, repeats
        self.total_batches = warmup + steps * repeats
        self.batches, self.rates, self.gpu_util, self.cpu_util = 0, [], [], []
        self._sampler = UtilisationSampler(device)
        if warmup == 0:
            self._open()

    def _open(self) -> None:
        self._images, self._cpu_before = 0, psutil.cpu_times()
        self._start = synchronized_now(self.device)

    def tick(self, images: int) -> None:
        """One batch of ``images`` images is done."""
        self.batches += 1
        if self.batches == self.warmup:
            self._open()
        if self.batches <= self.warmup or self.done:
            return
        self._images += images
        if (self.batches - self.warmup) % self.steps == 0:  # a window ends
            end = synchronized_now(self.device)
            self.rates.append(self._images / (end - self._start))
            self.cpu_util.append(cpu_busy_percent(self._cpu_before, psutil.cpu_times()))
            self.gpu_util.append(self._sampler.gpu_percent(self._start, end))
            self.close() if self.done else self._open()

    @property
    def done(self) -> bool:
        return len(self.rates) == self.repeats

    def close(self) -> None:
        """Stop the utilisation sampler (also done after the last window)."""
        self._sampler.close()

    def result(self) -> dict:
        """The summary of the windows: :func:`window_summary`."""
        return window_summary(self)


# %% [markdown]
# What a clock reports: `summarize` of its windows' rates, how the windows were made, and
# the utilisation (medians over the windows). Asking before the last window ended is a bug
# in the caller, so it raises.

# %%
#| export measure.timing
def window_summary(clock: WindowClock) -> dict:
    """:func:`summarize` of ``clock``'s windows, with utilisation (medians over windows)."""
    if not clock.done:
        raise RuntimeError(f"Only {len(clock.rates)} of {clock.repeats} timing windows finished "
                           f"({clock.batches} batches seen, {clock.total_batches} needed).")
    gpu = [u for u in clock.gpu_util if u is not None]
    return {**summarize(clock.rates), "batches_per_repeat": clock.steps,
            "warmup_batches": clock.warmup,
            "gpu_util_pct": statistics.median(gpu) if gpu else None,
            "cpu_util_pct": statistics.median(clock.cpu_util)}


# %% [markdown]
# The clock on the matrix products from above, one "image" per product. A window must last
# long enough for its utilisation to mean something: NVML samples every 0.1 s and the
# kernel counts CPU time in hundredths of a second, so the windows below hold a thousand
# products each (a few tenths of a second on a GPU).

# %%
clock = WindowClock(cfg.device, warmup=2, steps=1000, repeats=3)
while not clock.done:
    product = matrix @ matrix
    clock.tick(1)
timed = clock.result()
gpu_busy = "not sampled (no GPU)" if timed["gpu_util_pct"] is None else f"{timed['gpu_util_pct']:.0f} %"
print("products/s per window:", [f"{rate:.1f}" for rate in timed["repeats"]])
print(f"median {timed['img_s']:.1f}, min–max {timed['img_s_min']:.1f}–{timed['img_s_max']:.1f} "
      f"over {len(timed['repeats'])} windows; GPU utilisation {gpu_busy}, "
      f"CPU busy {timed['cpu_util_pct']:.0f} %")

# %% [markdown]
# ## The loader alone
#
# `measure_loader` drives a loader through the clock: each batch is moved to the device as
# Lightning moves it and, when the pipeline augments on the device, augmented there. Three
# details matter. A `DataLoader` with workers has `num_workers × prefetch_factor` batches
# ready before the clock starts, and timing those would measure a buffer, not the workers;
# so they are added to the warm-up. Its `W` workers also start together and deliver their
# batches in bursts, one each; batch `k + W` comes from the worker that made batch `k`, so a
# window of whole rounds of `W` batches times each worker once a batch, where a shorter one
# could time a burst.

# %%
#| export measure.timing
from collections.abc import Callable, Iterable, Iterator


def prefetched_batches(loader) -> int:
    """Batches a ``DataLoader``'s workers hold ready ahead of time (0 for other loaders)."""
    workers = getattr(loader, "num_workers", 0) or 0
    return workers * (getattr(loader, "prefetch_factor", None) or 0)


def window_steps(loader, steps: int) -> int:
    """``steps`` rounded up to whole rounds of a ``DataLoader``'s workers."""
    workers = getattr(loader, "num_workers", 0) or 0
    return -(-steps // workers) * workers if workers else steps


# %% [markdown]
# And a measurement may need more batches than one epoch holds, so the loader is started
# again, as training does at each epoch:

# %%
#| export measure.timing
def endless(loader: Iterable[dict]) -> Iterator[dict]:
    """The loader's batches epoch after epoch (a new iterator each epoch, as in training)."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            raise RuntimeError(f"The loader {type(loader).__name__} yielded no batch in an epoch.")


def to_device(batch, device: torch.device) -> dict:
    """``batch`` on ``device``; asynchronous on a GPU, as Lightning copies it. A batch with
    its own ``.to`` (notebook 03's encoded photos, decoded on the way) moves itself."""
    non_blocking = device.type == "cuda"
    if not isinstance(batch, dict):
        return batch.to(device, non_blocking=non_blocking)
    return {key: value.to(device, non_blocking=non_blocking) for key, value in batch.items()}


def measure_loader(loader: Iterable[dict], device: torch.device, warmup: int, steps: int,
                   repeats: int, augmentation: torch.nn.Module | None = None) -> dict:
    """Images/s of the loader alone: each batch moved to ``device`` (and augmented there)."""
    steps = window_steps(loader, steps)
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
# ## The training step and the bound
#
# The bound needs a loader that costs nothing: `resident_batches` copies a few batches of a
# real loader to the device once, and `ResidentBatches` hands them out again and again, an
# epoch as long as the original loader's. Lightning's copy of a batch that is already on the
# device does nothing, so the step runs as fast as the model allows. The batches are real
# (same size, same pixel statistics), so the step does the same work as with any pipeline.

# %%
#| export measure.timing
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
        batches.append({key: value.clone() for key, value in to_device(batch, device).items()})
        if len(batches) == count:
            break
    return ResidentBatches(batches, len(loader))

# %% [markdown]
# `measure_training` times the real thing: `Trainer.fit` of a fresh model (seed 0), from
# notebook 02's `make_trainer` with its precision and cuDNN settings, minus the logger,
# checkpoints, progress lines and validation. A callback ticks the clock after every
# optimizer step, and the run stops after exactly the batches the clock needs. A
# pipeline's GPU augmentation goes into the model (`gpu_augmentation`), where it runs in
# `on_after_batch_transfer`, inside the training step.

# %%
#| export measure.timing
import contextlib
import warnings

import pytorch_lightning as pl

from nailseg_common.setup.profiles import Profile
from nailseg_common.training.trainer import make_trainer
from nailseg_common.training.unet import LitNailSegmentation


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
    steps = window_steps(loader, steps)
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
# ## The live run
#
# The benchmark (`nailseg_common.measure.benchmark`) measures pipelines with these functions. Its
# catalogue, `default_pipelines`, builds each pipeline's loader from the module that teaches
# it: Albumentations (notebook 02), decoding on the device + Kornia (notebook 03), and DALI
# (notebook 04) when it is installed, with and (on a GPU) without its hardware JPEG decoder;
# every one reads the same photo files. Beside them, the decode-once cache + Kornia (notebook
# 03's last row). The live run takes Albumentations at the profile's worker count;
# `full_sweep = True` adds every worker count and notebook 03's intermediate steps on a GPU,
# as `make bench` does.

# %%
sweep = workers or (worker_counts(cfg) if full_sweep else [cfg.num_workers])
pipelines = default_pipelines(cfg, data, sweep, kornia_steps=full_sweep)
print(dali_status())
for p in pipelines:
    where = "augmentation on the device, in the step" if p.make_augmentation else "augmented by the loader"
    print(f"  {p.name:<22} {where}")
print(f"batch {cfg.batch_size}, {cfg.image_size} px, {cfg.encoder} U-Net, {cfg.precision}; "
      f"{cfg.bench_repeats} windows of {cfg.bench_steps} batches each (with workers, whole rounds of them)")

# %% [markdown]
# `run_benchmark` measures the bound (half of its windows), then for each pipeline its loader
# alone and its training step on one loader (a cache or a DALI graph is built once), then the
# other half of the bound. Each line reports a pipeline once both of its measurements are
# done. `make bench` runs the same at the `gpu` profile's size and writes the results to a
# JSON file.

# %%
live = run_benchmark(cfg, pipelines, config={"data": data.raw.name}) if run_live else None
if live is not None:
    print("live:", results_label(live), f"in {live['wall_s']:.0f} s")
    print(describe_bound(live))

# %% [markdown]
# ## Reading one measurement
#
# Every number of the run keeps its windows. Here are the bound and the first pipeline, window
# by window: the median is the middle of the sorted windows (the mean of the two middle
# ones for an even count), the spread the slowest and fastest, and the
# share of the bound compares medians measured minutes apart on the same machine.

# %%
if live is not None:
    first = next(iter(live["pipelines"]))
    entry = live["pipelines"][first]
    rows = {"bound (before the pipelines)": live["bound"]["start"],
            "bound (after them)": live["bound"]["end"] or live["bound"]["start"],
            f"{first}: loader alone": entry["loader"], f"{first}: training": entry["train"]}
    windows = pd.DataFrame({name: pd.Series(r["repeats"]) for name, r in rows.items()}).T
    windows.columns = [f"window {k + 1}" for k in windows.columns]
    windows["median"] = [r["img_s"] for r in rows.values()]
    display(windows.round(1).astype(object).fillna(""))
    print(f"{first}: training at {entry['train_ratio_to_bound']:.2f} of the bound; its loader "
          f"alone delivers {entry['loader_img_s'] / live['bound']['img_s']:.2f} of what the bound consumes")

# %% [markdown]
# On a CPU the model computes on the same cores that load and augment, so the share of the
# bound says little there; and with a warm-up of one batch, the first training measurement
# of a session may still pay for start-up costs, so read the spread before the median. On a
# GPU the share of the bound is the number this notebook is about.
#
# ## The reference: an H200
#
# The course's reference numbers are in the committed file `results/benchmark_h200.json`,
# written by `make bench BENCH_OUT=results/benchmark_h200.json` on a GPU machine: every
# pipeline, every worker count. Every number below labelled "reference" is read from that
# file, which records where it comes from: the device, the CPU cores, the profile's sizes and
# encoder, the library versions and the date. Where its encoder is not this run's, its
# images/s belong to another U-Net: compare the shares of the bound, not the rates. Those versions are the GPU machine's, which need not be
# the ones the course pins for laptops and CI; the table compares them with this machine's.

# %%
committed = load_results(REPO_ROOT / reference)
if committed is None:
    print(f"No reference results of these pipelines: {reference} is missing or older. Run "
          f"`nailseg-bench --profile gpu --out {reference}` on a GPU (`make bench`).")
else:
    print("reference:", results_label(committed), f"in {committed['wall_s']:.0f} s")
    print(describe_bound(committed))
    versions = pd.DataFrame({"reference run": committed["versions"], "this machine": library_versions()})
    versions["same"] = versions["reference run"] == versions["this machine"]
    display(versions)
result_sets = {name: r for name, r in (("reference", committed), ("live", live)) if r is not None}

# %% [markdown]
# ## Throughput
#
# Blue bars are the loader alone, orange bars the training step (whiskers: slowest and
# fastest window). The dashed line is the bound, with its spread shaded. A pipeline whose
# orange bar reaches the line costs the training nothing; the gap between an orange bar and
# the line is time the GPU spent waiting for data or doing the augmentation instead of
# training.

# %%
plot_benchmark_sets(result_sets, plot_benchmark_throughput)
plt.show()

# %% [markdown]
# ## Share of the bound, and the targets
#
# The same training rates divided by the bound, with whiskers for the spread of each ratio
# (`ratio_spread` of `nailseg_common.core.statistics`: the course's `±`, a 95 % interval from
# the standard errors of the pipeline's windows and of the bound's, relative to their
# medians, combined, with Student's t for their counts). The grey band
# around 1 is the bound's own spread. A pipeline measured above 1 by less than its spread
# does not beat the bound, which is the step with an input pipeline that costs nothing: it
# keeps up within noise.
#
# What should each pipeline reach? The targets are derived from the same run, not typed in.
# A pipeline's loader alone gives the time its own work takes per batch, `loader_ms`, and the
# bound the step's, `bound_ms`. If that work ran **in series** with the step, on the same
# GPU before each step, the training would run at `bound_ms / (bound_ms + loader_ms)` of the
# bound: the red dotted marks.
#
# - **DALI, a claim:** its graph runs on its own CUDA stream with a prefetch queue, so its work
#   is hidden behind the step. The claim holds when its training ratio is above the ratio in
#   series by more than the spread; and its loader alone must deliver at least the bound's
#   images/s (spread: the course's `±` of both sides' windows, combined).
# - **Kornia, a lesson:** its augmentation runs inside the training step, on the step's stream,
#   in series by design, while its decoding runs ahead (notebook 03: in the loader's pin-memory
#   thread, on a stream of its own). The ratio in series counts all of its loader's work,
#   decoding included, so the decoding hidden behind the step shows as a bar above the mark;
#   what the step still pays is the gap between its bar and 1.
# - **Albumentations, a lesson:** CPU worker processes cannot feed a fast GPU step. The
#   number of workers it would need is read off the loader-alone rate per worker at the
#   highest count measured, an optimistic estimate: the training process competes with the
#   workers for the same cores, as the gap between its loader alone and its training shows.

# %%
plot_benchmark_sets(result_sets, plot_ratio_to_bound)
plt.show()
for name, results in result_sets.items():
    print(f"{name} ({results['device']}):\n{describe_targets(results)}\n")

# %% [markdown]
# `describe_targets` (in `nailseg_common.measure.benchmark`) prints each claim as a
# `Verdict`: met or missed only by more than its spread, else "within noise". The same
# arithmetic judges a live run on any machine: on a CPU there is no DALI, and the model
# computes on the cores that load and augment, so the lessons say more about the machine
# than about the pipelines.
#
# ## More CPU workers?
#
# The obvious fix for a slow CPU pipeline is more worker processes. Here is how the
# Albumentations pipeline scales with them, against the GPU pipelines and the bound (the live
# run measures one worker count unless `full_sweep` or `workers` asks for more).

# %%
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
for name, results in result_sets.items():
    print(f"{name}: {results_label(results)}")
    display(summary_table(results).round(2))

# %% [markdown]
# ## Preprocessing alone: the posts' comparison
#
# A post this course remakes ("NVIDIA DALI 出奇蹟") timed preprocessing alone, no training:
# a dog/cat set at batch 64 took 77.8 s with torchvision on the CPU and 3.49 s with DALI
# decoding on the GPU, **22×** (one Xeon Silver 4110, an RTX 2080 Ti). The same race here,
# from this run's photos: each pipeline's training loader, its batches moved to the device and
# augmented there, nothing trained (`measure_loader`, the "loader alone" above), in one CPU
# process, on every core, and on the device. The table gives the median images/s and the GPU
# memory torch saw at its peak (DALI's buffers are DALI's own, not torch's); the lines below
# it say what each row includes. Fewer
# batches a window than the race above: one CPU process is slow.

# %%
preprocessing_steps = max(2, cfg.bench_steps // 4)
preprocessing = preprocessing_rates(preprocessing_pipelines(cfg, data), cfg, preprocessing_steps,
                                    cfg.bench_repeats)
display(preprocessing[["img/s", "torch peak GPU MiB"]].astype(float).round(1))
for name, includes in preprocessing["includes"].items():
    print(f"{name}: {includes}")

# %% [markdown]
# The post compared DALI with one CPU process. The nearest honest alternative is every core
# the machine has, so both ratios are printed, each with the spread of both sides' windows
# (`ratio_spread`, the course's `±`). The fastest row is read among those that decode:

# %%
decoding = preprocessing[preprocessing.index != preprocessing.index[-1]]  # the cache decodes nothing
fastest = decoding["img/s"].astype(float).idxmax()
for slower in [name for name in preprocessing.index[:2] if name != fastest]:
    ratio = preprocessing.at[fastest, "img/s"] / preprocessing.at[slower, "img/s"]
    spread = ratio_spread(preprocessing.at[fastest, "windows"], preprocessing.at[slower, "windows"])
    print(f"{fastest} / {slower}: {ratio:.1f}× ± {spread:.1f} (the post: 22×)")

# %% [markdown]
# ## What this means for your machine
#
# The H200 makes the point sharply because its step is so fast. The same arithmetic applies
# to any machine: how many images per second does one training step consume, and how many
# can your input pipeline deliver?
# The lessons above give both numbers for each run: the bound's images/s, what the best CPU
# pipeline reaches of it, and how many workers the loader-alone rate says it would take.
#
# - **Without a GPU** the training step itself is the slow part: expect every pipeline near
#   the bound (your live run above shows whether yours is; on a busy machine the windows
#   scatter, so look at the spread before reading anything into a ratio above 1). Moving
#   augmentation "to the GPU" gains nothing there; Albumentations with a couple of workers is
#   the sensible choice.
# - **On a mid-range GPU** the step is several times slower than on an H200, so fewer CPU
#   workers keep up. Compare the bound with Albumentations at your core count: if the ratio
#   is near 1, the CPU pipeline is fine.
# - **On a fast GPU with few CPU cores per GPU**, as cloud instances often have, the CPU
#   pipeline leaves the GPU idle much of the time. That is where moving augmentation to the
#   GPU, or the whole pipeline to DALI, pays off.
# - Rerun this notebook with `profile = "gpu"` and `full_sweep = True` (or `make bench`) on
#   your own GPU: the live numbers then answer the question for your hardware directly.

# %% [markdown]
# ## Summary
#
# - Time the loader alone, the full training step, and the bound (batches already on the
#   device), in the same run, with the same model, batch, image size and precision.
# - Warm up (prefetched batches included), synchronise the GPU before reading a clock,
#   repeat, and report the median with its spread; sample utilisation inside the same
#   windows; record the device, versions and date with the numbers.
# - The ratio to the bound is the number that matters: it says how much of the GPU's time the
#   input pipeline costs. Read it against its spread; derive a target from the same run (the
#   ratio in series, the bound's images/s) and call it met or missed only beyond the spread.
# - CPU workers scale until cores run out; on a fast GPU, decoding on the GPU (torchvision's
#   nvJPEG with Kornia, or DALI) keeps the GPU busy with a fraction of the CPU, and decoding
#   once ahead of time removes the decoding from the race at the price of a cache.
# - Preprocessing alone, the posts' measure, is printed against one CPU process and against
#   every core: the second is the comparison a reader can act on.

# %% [markdown]
# ## Exercises
#
# 1. Run the live benchmark with `workers = [1, 2]` and then with your machine's core count.
#    Where does the Albumentations curve flatten, and what is the CPU utilisation there?
# 2. Change `reference` to your own results file written by
#    `nailseg-bench --out results/mine.json` and compare both machines.
# 3. On a GPU, time the matrix products of the first cells in windows of your own, reading
#    `time.perf_counter()` without synchronising, and compare the rates with `WindowClock`'s.
#    Then synchronise once, before the last reading only: which window absorbs the GPU's
#    time, and what does the median say then?
# 4. Measure notebook 02's instrument and this one side by side: train the Kornia pipeline
#    for a few epochs with `TrainingSpeed` and compare its images/s with the `kornia` row's
#    training median and spread. Which one moves more between two runs?
# 5. Kornia's augmentation adds to every step. Estimate from the table how much faster the
#    Kornia pipeline would train if the augmentation ran on a second CUDA stream, overlapping
#    with the previous step.
