"""The benchmark of notebook 05: every input pipeline against the bound, in one run.

The measuring is :mod:`nailseg_common.measure.timing` (taught in notebook 05); this module is the
catalogue and the report. For every pipeline (Albumentations on CPU workers at several
worker counts, notebook 03's steps to the uint8 cache + Kornia on the GPU, DALI when it is
installed) :func:`run_benchmark` measures the **loader alone**
(:func:`~nailseg_common.measure.timing.measure_loader`) and the **training step**
(:func:`~nailseg_common.measure.timing.measure_training`), both in images/s, and the **bound**: the
same training step on batches already on the device, half of its windows measured before
the pipelines and half after them (their ratio, ``drift``, shows whether the machine's
speed changed during the run). ``train_ratio_to_bound`` is a pipeline's median training
rate over the bound's median.

Notebook 03 times its steps to the bound with its own ``TrainingSpeed`` epochs
(:func:`timed_epochs`, :func:`steps_to_bound`) and reads their reference rows
(:func:`kornia_steps_table`).

The report judges a run by itself: :func:`claims` derives DALI's targets from the same run
(the ratio it would train at if its work ran in series with the step, and the bound's
images/s) and judges them against the spread of the windows (:mod:`nailseg_common.core.statistics`);
:func:`lessons` says what the pipelines that fall behind by design (Kornia in the step,
Albumentations on CPU workers) cost.

Results are a JSON-ready dict (written with :func:`nailseg_common.core.files.write_json`, read
with :func:`load_results`) that records the device, CPU, library versions and date with
every number. ``nailseg-bench --profile gpu --out results/benchmark_h200.json`` (``make
bench``, :mod:`nailseg_common.commands.bench`) runs it from the command line.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pytorch_lightning as pl
import torch

from nailseg_common.core.statistics import Verdict, mean_spread, ratio_spread
from nailseg_common.measure.profiling import KernelProfile
from nailseg_common.measure.timing import (
    BOUND_BATCHES,
    measure_loader,
    measure_training,
    resident_batches,
    summarize,
    without_validation_hint,
)
from nailseg_common.setup.environment import cpu_model, provenance
from nailseg_common.setup.paths import REPO_ROOT, DataLocation
from nailseg_common.setup.profiles import Profile
from nailseg_common.training.trainer import make_trainer
from nailseg_common.training.unet import LitNailSegmentation

SCHEMA_VERSION = 2
"""2: every pipeline decodes the photos it trains on (``kornia`` on the device), beside the
decode-once ``kornia_cache``; results of an older schema measured other pipelines."""
REFERENCE_RESULTS = REPO_ROOT / "results" / "benchmark_h200.json"

# Albumentations worker counts per profile (capped at the machine's CPU count).
WORKER_COUNTS = {"smoke": (0,), "cpu": (0, 2), "gpu": (4, 8, 15)}


@dataclass
class Pipeline:
    """One input pipeline: how to build its training loader, and its GPU augmentation.

    ``make_loader()`` returns a new training loader: an iterable of batch-contract dicts
    (called once per pipeline; the loader-alone and the training measurements share it,
    so a cache or a DALI graph is built once). ``make_augmentation()`` (or ``None``)
    returns the ``nn.Module`` that runs on the device after the transfer, inside the
    training step.
    """

    name: str
    family: str  # "albumentations", "kornia", "kornia_steps" (notebook 03's steps) or "dali"
    make_loader: Callable[[], Iterable[dict]]
    make_augmentation: Callable[[], torch.nn.Module] | None = None
    num_workers: int | None = None


# --------------------------------------------------------------------------- the run


def worker_counts(profile: Profile) -> tuple[int, ...]:
    """The profile's Albumentations worker counts, none above this machine's CPU count."""
    cpus = os.cpu_count() or 1
    counts = WORKER_COUNTS.get(profile.name, (profile.num_workers,))
    return tuple(sorted({min(count, cpus) for count in counts}))


def default_pipelines(profile: Profile, location: DataLocation,
                      workers: Iterable[int] | None = None, kornia_steps: bool = True) -> list[Pipeline]:
    """Every pipeline from the same photos: Albumentations decoding on CPU workers at each
    worker count; notebook 03's steps (CPU decoding with Kornia in the step, only on a GPU
    and with ``kornia_steps``), then its pipeline, decoding on the device; the decode-once
    variant (notebook 03's uint8 cache + Kornia); and DALI, if available, with its default
    decoder and, on a GPU, without the hardware JPEG decoder."""
    from nailseg_common.pipelines.albumentations_pipeline import NailDataModule
    from nailseg_common.pipelines.cached_pipeline import CachedNailDataModule
    from nailseg_common.pipelines.dali_pipeline import DALINailDataModule
    from nailseg_common.pipelines.kornia_pipeline import (
        DeviceDecodedNailDataModule,
        KorniaAugmentation,
    )
    from nailseg_common.setup.dali import dali_available

    pipelines = [
        Pipeline(f"albumentations_w{n}", "albumentations",
                 _loader_of(lambda n=n: NailDataModule(location, dataclasses.replace(profile, num_workers=n))),
                 num_workers=n)
        for n in (worker_counts(profile) if workers is None else workers)
    ]
    on_cpu_workers = _loader_of(lambda: NailDataModule(location, profile, augment=False))
    steps = [] if profile.accelerator != "gpu" or not kornia_steps else [
        Pipeline("kornia_cpu_decode_sequential", "kornia_steps", on_cpu_workers,
                 make_augmentation=lambda: KorniaAugmentation(implementation="sequential")),
        Pipeline("kornia_cpu_decode", "kornia_steps", on_cpu_workers, make_augmentation=KorniaAugmentation),
    ]
    pipelines += steps + [
        Pipeline("kornia", "kornia", _loader_of(lambda: DeviceDecodedNailDataModule(location, profile)),
                 make_augmentation=KorniaAugmentation),
        Pipeline("kornia_cache", "decode_once", _loader_of(lambda: CachedNailDataModule(location, profile)),
                 make_augmentation=KorniaAugmentation),
    ]
    if dali_available():
        pipelines.append(Pipeline("dali", "dali", _loader_of(lambda: DALINailDataModule(location, profile))))
        if profile.accelerator == "gpu":
            pipelines.append(Pipeline("dali_no_hw_decoder", "dali", _loader_of(
                lambda: DALINailDataModule(location, profile, hw_decoder_load=0.0))))
    return pipelines


INCLUDES = {
    "albumentations": "read, decode, EXIF turn, resize and the policy on the CPU, one photo at a "
                      "time; uint8 batches copied to the device",
    "kornia": "the bytes read on the CPU; decode (nvJPEG on a GPU), EXIF turn and resize on the "
              "device, one photo at a time, ahead of the step on a GPU (the loader's pin-memory "
              "thread), then the policy on the batch in the step (CMYK JPEGs and PNGs decoded "
              "on the CPU)",
    "dali": "read on DALI's CPU threads; decode (on a GPU nvJPEG, with the hardware decoder's "
            "share unless the row says none), EXIF turn, resize and the policy in DALI's graph, "
            "batches prefetched",
    "decode_once": "no decoding: a gather from the uint8 cache, copied to the device, then the "
                   "policy on the batch",
}
"""What each family's preprocessing does per batch; every one draws per-sample random parameters."""


def preprocessing_pipelines(profile: Profile, location: DataLocation) -> list[Pipeline]:
    """Preprocessing alone, from the same photos, as the posts compared it: Albumentations in
    one process and on every core, notebook 03's decoding on the device with Kornia, DALI
    (on a GPU also without its hardware decoder), and the decode-once cache beside them."""
    from nailseg_common.pipelines.albumentations_pipeline import NailDataModule
    from nailseg_common.pipelines.cached_pipeline import CachedNailDataModule
    from nailseg_common.pipelines.dali_pipeline import DALINailDataModule
    from nailseg_common.pipelines.kornia_pipeline import (
        DeviceDecodedNailDataModule,
        KorniaAugmentation,
    )
    from nailseg_common.setup.dali import dali_available
    from nailseg_common.setup.environment import usable_cores

    def albumentations(workers: int):
        return _loader_of(lambda: NailDataModule(location, dataclasses.replace(profile, num_workers=workers)))

    cores, where = usable_cores(), profile.device.type.upper()
    on_gpu = profile.accelerator == "gpu"
    rows = [Pipeline("Albumentations, one CPU process", "albumentations", albumentations(0), num_workers=0),
            Pipeline(f"Albumentations, every CPU core ({cores} workers)", "albumentations",
                     albumentations(cores), num_workers=cores),
            Pipeline(f"torchvision decode on the {where}, Kornia", "kornia",
                     _loader_of(lambda: DeviceDecodedNailDataModule(location, profile)),
                     make_augmentation=KorniaAugmentation)]
    if dali_available():
        rows.append(Pipeline("DALI" + (", hardware decoder" if on_gpu else " on the CPU"), "dali",
                             _loader_of(lambda: DALINailDataModule(location, profile))))
        if on_gpu:
            rows.append(Pipeline("DALI, no hardware decoder", "dali", _loader_of(
                lambda: DALINailDataModule(location, profile, hw_decoder_load=0.0))))
    rows.append(Pipeline("decode once, ahead: the uint8 cache, Kornia", "decode_once",
                         _loader_of(lambda: CachedNailDataModule(location, profile)),
                         make_augmentation=KorniaAugmentation))
    return rows


def preprocessing_rates(pipelines: list[Pipeline], profile: Profile, steps: int, windows: int,
                        log: Callable[[str], None] = print):
    """Images/s of each pipeline's preprocessing alone (its training loader, batches moved to
    the device and augmented there, nothing trained: :func:`measure_loader`), ``windows``
    windows of ``steps`` batches after a warm-up, with the windows' rates, what it includes
    and the GPU memory torch saw at its peak (DALI's own memory is not torch's)."""
    import pandas as pd

    rows, device = {}, profile.device
    for pipeline in pipelines:
        started = time.perf_counter()
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        augmentation = pipeline.make_augmentation().to(device) if pipeline.make_augmentation else None
        loader = pipeline.make_loader()
        result = measure_loader(loader, device, max(1, steps // 3), steps, windows, augmentation)
        peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
        del loader
        _free_memory(device)
        rows[pipeline.name] = {"img/s": result["img_s"], "windows": result["repeats"],
                               "torch peak GPU MiB": peak, "includes": INCLUDES[pipeline.family]}
        log(f"{pipeline.name}: {result['img_s']:.1f} img/s  [{time.perf_counter() - started:.1f} s]")
    return pd.DataFrame(rows).T


def _loader_of(make_datamodule: Callable[[], pl.LightningDataModule]) -> Callable[[], Iterable[dict]]:
    """A ``make_loader`` for :class:`Pipeline`: the training loader of a new datamodule."""
    return lambda: train_loader_of(make_datamodule())


def train_loader_of(datamodule: pl.LightningDataModule) -> Iterable[dict]:
    """The training loader of ``datamodule``, prepared and set up as ``Trainer.fit`` would."""
    datamodule.prepare_data()
    datamodule.setup("fit")
    return datamodule.train_dataloader()


def training_datamodule(location: DataLocation, profile: Profile,
                        seed: int | None = None) -> pl.LightningDataModule:
    """Notebook 04's DALI data module when DALI runs here, else notebook 03's, decoding on the
    device; ``seed`` (of DALI's augmentations, or of the loader's order) if given, else the
    module's default (notebook 07's timed runs)."""
    from nailseg_common.pipelines.dali_pipeline import DALINailDataModule
    from nailseg_common.setup.dali import dali_available

    seeded = {} if seed is None else {"seed": seed}
    if dali_available():
        return DALINailDataModule(location, profile, **seeded)
    from nailseg_common.pipelines.kornia_pipeline import DeviceDecodedNailDataModule

    return DeviceDecodedNailDataModule(location, profile, **seeded)


def reuse(model: pl.LightningModule) -> Callable[..., pl.LightningModule]:
    """A ``make_model`` for :func:`measure_training` that returns ``model`` (notebook 07: compiled
    once), with the pipeline's ``gpu_augmentation``; its other arguments are ignored."""
    def make_model(gpu_augmentation: torch.nn.Module | None = None, **ignored):
        model.gpu_augmentation = gpu_augmentation
        return model
    return make_model


def timed_epochs(profile: Profile, datamodule: pl.LightningDataModule, implementation: str = "fused"):
    """The ``TrainingSpeed`` of a U-Net with ``KorniaAugmentation(implementation=...)`` in its step
    fed by ``datamodule``: ``profile.bench_repeats`` epochs of ``profile.bench_steps`` batches after
    one warm-up epoch, no validation, log or checkpoint (notebook 03's steps)."""
    from nailseg_common.pipelines.kornia_pipeline import KorniaAugmentation
    from nailseg_common.training.trainer import TrainingSpeed

    speed = TrainingSpeed()
    model = LitNailSegmentation(profile.encoder, profile.lr, profile.max_steps,
                                gpu_augmentation=KorniaAugmentation(implementation=implementation))
    make_trainer(profile, "03_gap", max_steps=-1, max_epochs=profile.bench_repeats + 1,
                 limit_train_batches=profile.bench_steps, limit_val_batches=0, callbacks=[speed],
                 logger=False, enable_checkpointing=False, enable_progress_bar=False,
                 ).fit(model, datamodule=datamodule)
    return speed


def steps_to_bound(profile: Profile, location: DataLocation, loader: Iterable, trained, resident: int = 4):
    """Notebook 03's steps to the bound, one ``run_logs.speeds_table`` row each: 0, the photos
    decoded in CPU workers (notebook 02's loader, unaugmented) with ``"sequential"`` Kornia in
    the step; 1, the same with ``"fused"``; 2, ``trained`` (the training run, decoded on the
    device); then the uint8 cache with ``"fused"``; each but 2 timed by :func:`timed_epochs`.
    The bound is a plain U-Net on the first ``resident`` batches of ``loader`` moved to the
    device, for as many steps as a timed row. Prints the bound's rate and the cache's cost
    (``data.decoded.cache_cost``); returns the table and the bound."""
    from nailseg_common.data.decoded import cache_cost
    from nailseg_common.pipelines.albumentations_pipeline import NailDataModule
    from nailseg_common.pipelines.cached_pipeline import CachedNailDataModule
    from nailseg_common.training.run_logs import speeds_table
    from nailseg_common.training.trainer import bound_speed

    cost = cache_cost(location, profile.image_size)  # built first, if needed: not while a row is timed
    batches = [batch.to(profile.device) for batch, _ in zip(loader, range(resident))]
    bound = bound_speed(profile, lambda: LitNailSegmentation(profile.encoder, profile.lr, profile.max_steps),
                        batches, profile.bench_steps * (profile.bench_repeats + 1))
    speeds = {"0 · decoded in CPU workers, Kornia sequential":
              timed_epochs(profile, NailDataModule(location, profile, augment=False), "sequential"),
              "1 · + fused Kornia (no host syncs)":
              timed_epochs(profile, NailDataModule(location, profile, augment=False), "fused"),
              f"2 · + decoded on the {profile.device.type.upper()}: the training run above": trained,
              "decode once, ahead: the uint8 cache": timed_epochs(profile, CachedNailDataModule(location, profile))}
    print(f"bound: {bound.images_per_second():.1f} training images/s ({len(batches)} resident batches)")
    print(cost)
    return speeds_table(speeds, bound), bound


def interleaved_rates(rows: dict[str, tuple[Profile, Iterable[dict], Callable]], warmup: int, steps: int,
                      windows: int) -> dict[str, dict]:
    """:func:`measure_training` of every row (name -> profile, resident batches, ``make_model``),
    in ``windows`` rounds of one window per row, the rows in turn, each call warmed up by
    ``warmup`` steps alike: a drift of the machine (clocks, heat, a neighbour) falls on every
    row, not on the rows measured last. Each row's result summarises its windows."""
    measured: dict[str, list[dict]] = {name: [] for name in rows}
    for _ in range(windows):
        for name, (profile, batches, make_model) in rows.items():
            measured[name].append(measure_training(batches, profile, warmup, steps, 1, make_model=make_model))
    return {name: _pooled(results) for name, results in measured.items()}


def _pooled(results: list[dict]) -> dict:
    gpu = [r["gpu_util_pct"] for r in results if r["gpu_util_pct"] is not None]
    return {**summarize([r["img_s"] for r in results]), "batches_per_repeat": results[0]["batches_per_repeat"],
            "warmup_batches": results[0]["warmup_batches"], "gpu_util_pct": statistics.median(gpu) if gpu else None,
            "cpu_util_pct": statistics.median(r["cpu_util_pct"] for r in results)}


def pipeline_rates(pipelines: list[Pipeline], profile: Profile, make_model: Callable,
                   bound_img_s: float, windows: int, bound_windows: list[float] | None = None):
    """Training images/s of ``make_model``'s module (notebook 07: its compiled model, reused)
    fed by each of ``pipelines``, in ``windows`` windows of ``profile.bench_steps`` steps, its
    ratio to ``bound_img_s`` and, given the bound's window rates, the ratio's spread (``±``);
    ``alone img/s``: the same loader (and augmentation) alone, nothing trained."""
    import pandas as pd

    rows = {}
    for pipeline in pipelines:
        augmentation = pipeline.make_augmentation() if pipeline.make_augmentation else None
        loader, steps = pipeline.make_loader(), profile.bench_steps
        alone = measure_loader(loader, profile.device, steps // 3, steps, windows, augmentation)
        result = measure_training(loader, profile, steps // 3, steps, windows, augmentation, make_model=make_model)
        rows[pipeline.name] = {"train img/s": result["img_s"], "min": result["img_s_min"],
                               "max": result["img_s_max"], "ratio to bound": result["img_s"] / bound_img_s,
                               "alone img/s": alone["img_s"]}
        if bound_windows:
            rows[pipeline.name]["±"] = ratio_spread(result["repeats"], bound_windows)
    return pd.DataFrame(rows).T


KEEPS_UP = 0.9  # a pipeline keeps up when the whole interval of its ratio to the bound lies above it


def keeping_up(table, windows: int) -> list[str]:
    """A line per pipeline of :func:`pipeline_rates`'s ``table``: its ratio to the bound with
    its spread, and whether it keeps up (its whole interval above :data:`KEEPS_UP`), falls
    behind (below the bound beyond the spread), or its ``windows`` windows cannot tell."""
    lines = []
    for pipeline, row in table.iterrows():
        verdict = Verdict(f"{pipeline} ÷ the faster bound", row["ratio to bound"], 1.0, row["±"], "same process")
        low = verdict.value - verdict.spread
        keeps = ("falls behind" if verdict.outcome == "missed" else "keeps up" if low >= KEEPS_UP
                 else f"cannot tell from {windows} windows (its interval reaches {low:.2f})")
        lines.append(f"{pipeline}: {verdict.value:.3f} ± {verdict.spread:.3f} of the faster bound, {keeps}")
    return lines


def profile_step(model: pl.LightningModule, profile: Profile, resident: Iterable[dict], steps: int):
    """Device (or CPU) time per kernel group of ``steps`` training steps of ``model`` on
    ``resident`` batches (``resident_batches``; its ``gpu_augmentation`` off: the bound's
    step), through the Trainer as in every run, the first step left out, in ms per step
    (notebook 07)."""
    model.gpu_augmentation = None
    recorder = KernelProfile(profile.device.type == "cuda")
    trainer = make_trainer(dataclasses.replace(profile, max_steps=steps + 1), "profile",
                           limit_val_batches=0, logger=False, enable_checkpointing=False,
                           enable_progress_bar=False, callbacks=[recorder])
    with without_validation_hint():
        trainer.fit(model, resident)
    return recorder.ms_per_group(steps)


def _free_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def run_benchmark(profile: Profile, pipelines: list[Pipeline],
                  bound_source: Callable[[], Iterable[dict]] | None = None,
                  steps: int | None = None, repeats: int | None = None, warmup: int | None = None,
                  config: dict | None = None, log: Callable[[str], None] = print,
                  make_model: Callable[..., pl.LightningModule] = LitNailSegmentation) -> dict:
    """Measure every pipeline and the bound; return the results dict (see :func:`load_results`).

    ``bound_source()`` gives a loader whose first batches become the bound's resident set
    (default: the first pipeline's loader).
    ``steps``/``repeats`` default to the profile's ``bench_steps``/``bench_repeats``;
    ``warmup`` to a fifth of ``steps`` (at least 1), plus a loader's prefetch buffer.
    The device is ``profile.device``. ``make_model`` builds the model of every training
    measurement (see :func:`measure_training`; notebook 07 passes a faster one).
    """
    run_started = time.perf_counter()
    steps = steps or profile.bench_steps
    repeats = repeats or profile.bench_repeats
    warmup = max(1, steps // 5) if warmup is None else warmup
    device = profile.device
    bound_source = bound_source or pipelines[0].make_loader

    def bound(label: str, windows: int) -> dict:
        started = time.perf_counter()
        result = measure_training(resident_batches(bound_source(), device), profile, warmup, steps,
                                  windows, make_model=make_model)
        log(f"bound ({label}): {result['img_s']:.1f} img/s  [{time.perf_counter() - started:.1f} s]")
        _free_memory(device)
        return result

    bound_start = bound("start", (repeats + 1) // 2)
    measured = []
    for pipeline in pipelines:
        started = time.perf_counter()
        batches = pipeline.make_loader()  # one loader for both measurements (a cache is built once)
        setup_s = time.perf_counter() - started
        workers = pipeline.num_workers if pipeline.num_workers is not None else getattr(batches, "num_workers", None)
        augmentation = pipeline.make_augmentation().to(device) if pipeline.make_augmentation else None
        loader = measure_loader(batches, device, warmup, steps, repeats, augmentation)
        _free_memory(device)
        augmentation = pipeline.make_augmentation() if pipeline.make_augmentation else None
        train = measure_training(batches, profile, warmup, steps, repeats, augmentation, make_model=make_model)
        del batches
        _free_memory(device)
        measured.append((pipeline, workers, setup_s, loader, train))
        log(f"{pipeline.name}: loader {loader['img_s']:.1f} img/s, train {train['img_s']:.1f} img/s"
            f"  [{time.perf_counter() - started:.1f} s]")
    halves = [bound_start] + ([bound("end", repeats // 2)] if repeats > 1 else [])

    bound_result = {**summarize([rate for half in halves for rate in half["repeats"]]),
                    "start": bound_start, "end": halves[-1] if repeats > 1 else None,
                    "drift": halves[-1]["img_s"] / bound_start["img_s"] if repeats > 1 else None,
                    "gpu_util_pct": _median_or_none([half["gpu_util_pct"] for half in halves]),
                    "cpu_util_pct": statistics.median([half["cpu_util_pct"] for half in halves])}
    results = {
        "schema": SCHEMA_VERSION,
        **provenance(),
        "device": _device_name(device),  # the device timed, by its short name
        "cuda": torch.version.cuda if device.type == "cuda" else None,
        "cpu_count": os.cpu_count(),
        "cpu": cpu_model(),
        "config": {"profile": profile.name, "image_size": profile.image_size,
                   "batch_size": profile.batch_size, "encoder": profile.encoder,
                   "precision": profile.precision, "lr": profile.lr, "num_images": profile.num_images,
                   "steps_per_repeat": steps, "repeats": repeats, "warmup_steps": warmup,
                   "bound_batches": BOUND_BATCHES, "driver": "training.make_trainer + Trainer.fit",
                   **(config or {})},
        "bound": bound_result,
        "pipelines": {},
    }
    for pipeline, workers, setup_s, loader, train in measured:
        results["pipelines"][pipeline.name] = {
            "family": pipeline.family, "num_workers": workers, "setup_s": setup_s,
            "loader_img_s": loader["img_s"], "train_img_s": train["img_s"],
            "train_ratio_to_bound": train["img_s"] / bound_result["img_s"],
            "loader": loader, "train": train,
        }
    results["wall_s"] = time.perf_counter() - run_started
    return results


def _median_or_none(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({cpu_model()})"


# --------------------------------------------------------------------------- reading results


def load_results(path: str | os.PathLike = REFERENCE_RESULTS) -> dict | None:
    """Results written by ``nailseg-bench``, or ``None`` when the
    file does not exist or measured the pipelines of an older schema (their names meant other
    pipelines); a newer schema is a ValueError."""
    path = Path(path)
    if not path.exists():
        return None
    results = json.loads(path.read_text())
    if isinstance(results.get("schema"), int) and results["schema"] < SCHEMA_VERSION:
        return None
    if results.get("schema") != SCHEMA_VERSION:
        raise ValueError(f"{path} has benchmark schema {results.get('schema')!r}, this code reads "
                         f"{SCHEMA_VERSION}: re-run `nailseg-bench`.")
    return results


def results_label(results: dict) -> str:
    """One line naming where and when results were measured."""
    v = results["versions"]
    return (f"{results['device']}, {results['cpu_count']} CPU cores, {results['config']['profile']} profile "
            f"({results['config']['image_size']} px, batch {results['config']['batch_size']}, "
            f"{results['config']['precision']}, encoder {results['config'].get('encoder', '?')}), "
            f"torch {v.get('torch')}, {results['date'][:10]}")


def shares_table(results: dict, names: Iterable[str]):
    """A DataFrame of the pipelines ``names`` that ``results`` measured: training img/s and
    share of the bound."""
    import pandas as pd

    measured = {n: results["pipelines"][n] for n in names if n in results["pipelines"]}
    return pd.DataFrame({"training img/s": {n: p["train_img_s"] for n, p in measured.items()},
                         "share of bound": {n: p["train_ratio_to_bound"] for n, p in measured.items()}})


KORNIA_STEPS = ("kornia_cpu_decode_sequential", "kornia_cpu_decode", "kornia", "kornia_cache")
"""Notebook 03's steps to the bound, as the benchmark names its pipelines."""


def kornia_steps_table(results: dict):
    """Prints where ``results`` were measured (:func:`results_label`) and returns the
    :func:`shares_table` of notebook 03's :data:`KORNIA_STEPS`."""
    print(results_label(results))
    return shares_table(results, KORNIA_STEPS)


def summary_table(results: dict):
    """A DataFrame: one row per pipeline and one for the bound (img/s, spread, ratio, utilisation)."""
    import pandas as pd

    def spread(stats: dict) -> str:
        return f"{stats['img_s_min']:.0f}-{stats['img_s_max']:.0f}"

    rows = []
    for name, p in results["pipelines"].items():
        rows.append({"pipeline": name, "workers": p["num_workers"],
                     "loader img/s": p["loader_img_s"], "loader min-max": spread(p["loader"]),
                     "train img/s": p["train_img_s"], "train min-max": spread(p["train"]),
                     "ratio to bound": p["train_ratio_to_bound"],
                     "ratio ±": ratio_to_bound_spread(results, name),
                     "GPU util %": p["train"]["gpu_util_pct"], "CPU util %": p["train"]["cpu_util_pct"]})
    b = results["bound"]
    rows.append({"pipeline": "bound (batches on device)", "workers": None, "loader img/s": None,
                 "loader min-max": "", "train img/s": b["img_s"], "train min-max": spread(b),
                 "ratio to bound": 1.0, "ratio ±": None, "GPU util %": b["gpu_util_pct"], "CPU util %": b["cpu_util_pct"]})
    return pd.DataFrame(rows).astype({"workers": "Int64"}).set_index("pipeline")


def describe_bound(results: dict) -> str:
    """The bound's median, the range of its windows and its spread (± its 95 % interval,
    in %), and its halves before and after the pipelines: the spread to read every ratio
    against, not a promise that it held still."""
    b = results["bound"]
    line = (f"bound: {b['img_s']:.0f} img/s, median of {len(b['repeats'])} windows, range "
            f"{b['img_s_min']:.0f}-{b['img_s_max']:.0f} ± {100 * mean_spread(b['repeats']) / b['img_s']:.1f} %")
    if b["end"] is None:
        return line
    return line + f"; {b['start']['img_s']:.0f} before the pipelines, {b['end']['img_s']:.0f} after"


def best_albumentations(results: dict) -> str | None:
    """Name of the Albumentations entry with the highest training rate."""
    names = [n for n, p in results["pipelines"].items() if p["family"] == "albumentations"]
    return max(names, key=lambda n: results["pipelines"][n]["train_img_s"], default=None)


def cpu_workers_to_reach_bound(results: dict) -> float | None:
    """CPU workers the Albumentations loader would need to feed the bound.

    Assumes its rate per worker at the highest worker count measured scales linearly
    (an optimistic assumption: memory bandwidth and the main process do not scale).
    """
    albu = [p for p in results["pipelines"].values() if p["family"] == "albumentations" and p["num_workers"]]
    if not albu:
        return None
    most = max(albu, key=lambda p: p["num_workers"])
    return results["bound"]["img_s"] / (most["loader_img_s"] / most["num_workers"])


def ratio_to_bound_spread(results: dict, name: str) -> float:
    """The spread of ``name``'s training ratio to the bound, from both sides' windows."""
    return ratio_spread(results["pipelines"][name]["train"]["repeats"], results["bound"]["repeats"])


def serial_ratio(results: dict, name: str) -> float:
    """The ratio to the bound that ``name`` would train at if its own work (its loader alone,
    augmentation included) ran in series with each step: ``bound_ms / (bound_ms + loader_ms)``."""
    bound_ms, loader_ms = (1000 * results["config"]["batch_size"] / rate for rate in
                           (results["bound"]["img_s"], results["pipelines"][name]["loader_img_s"]))
    return bound_ms / (bound_ms + loader_ms)


def claims(results: dict) -> list[Verdict]:
    """What the course claims for DALI, judged from the run's own measurements: its input work
    is hidden behind the step (training ratio above the ratio in series), and its loader alone
    delivers at least what the bound consumes. Empty when DALI did not run."""
    dali = results["pipelines"].get("dali")
    if dali is None:
        return []
    loader, bound = dali["loader"]["repeats"], results["bound"]["repeats"]
    return [Verdict("dali training ÷ bound", dali["train_ratio_to_bound"], serial_ratio(results, "dali"),
                    ratio_to_bound_spread(results, "dali"), "its work in series"),
            Verdict("dali loader img/s", dali["loader_img_s"], results["bound"]["img_s"],
                    math.hypot(mean_spread(loader), mean_spread(bound)), "the bound")]


def lessons(results: dict) -> list[str]:
    """The pipelines that fall behind by design, each with what it costs: Kornia's augmentation
    runs inside the step, in series; CPU workers cannot feed a fast GPU step."""
    lines, pipelines, batch = [], results["pipelines"], results["config"]["batch_size"]
    if "kornia" in pipelines:
        kornia, bound_img_s = pipelines["kornia"], results["bound"]["img_s"]
        lines.append(f"lesson, kornia (augmentation in the step): {kornia['train_ratio_to_bound']:.3f} "
                     f"± {ratio_to_bound_spread(results, 'kornia'):.3f} of the bound, "
                     f"{serial_ratio(results, 'kornia'):.3f} if fully in series")
        lines.append(f"  a batch: the step at the bound {1000 * batch / bound_img_s:.1f} ms, "
                     f"the loader and augmentation alone {1000 * batch / kornia['loader_img_s']:.1f} ms")
        if kornia["train_ratio_to_bound"] + ratio_to_bound_spread(results, "kornia") < serial_ratio(results, "kornia"):
            lines.append("  below even its work in series: the step and the loader slow each other down "
                         "(one GPU and one main process for both) by more than their times add up")
    best, needed = best_albumentations(results), cpu_workers_to_reach_bound(results)
    if best is not None:
        lines.append(f"lesson, {best} (CPU workers): {pipelines[best]['train_ratio_to_bound']:.3f} "
                     f"± {ratio_to_bound_spread(results, best):.3f} of the bound")
    if needed is not None:
        most = max((p for p in pipelines.values() if p["family"] == "albumentations"),
                   key=lambda p: p["num_workers"] or 0)
        lines.append(f"  the loader alone: {most['loader_img_s']:.0f} img/s on {most['num_workers']} workers, "
                     f"so about {needed:.0f} for the bound's rate")
        lines.append("  (optimistic: it leaves out the training process competing for the cores)")
    return lines


def describe_targets(results: dict) -> str:
    """The bound's spread, the claims judged (:func:`claims`) and the lessons (:func:`lessons`)."""
    judged = [str(verdict) for verdict in claims(results)] or [
        "dali: not measured in this run, so its claims are not judged"]
    return "\n".join([describe_bound(results), *judged, *lessons(results)])
