# ---
# jupyter:
#   blog:
#     categories:
#     - distributed
#     - ddp
#     - gpu
#     - dali
#     - pytorch-lightning
#     - performance
#     date: '2026-11-30'
#     description: Notebook 07's training on two GPUs of one machine, as a script that
#       Lightning's DDP launcher runs once per GPU, with DALI reading one shard of the
#       training set per GPU. Measured, not assumed - images per second on two GPUs
#       over one, every training image exactly once per epoch (checked with sample ids),
#       validation on two GPUs equal to validation on one, and time to the IoU that
#       every seed of notebook 07 reaches.
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
# # 08 · Two GPUs
#
# Notebook 07 timed one GPU to an IoU level that every seed of its recipe reaches. This
# notebook runs the same training on **two GPUs of one machine** with Lightning's DDP (distributed data parallel):
# one process per GPU, each with a full copy of the model, each reading its own **shard** of
# the training set through DALI, the gradients averaged across the GPUs after every backward
# pass (by NCCL, NVIDIA's library for exchanging tensors between GPUs). Two GPUs do not make a run twice as fast by themselves, so every claim below is
# measured, on the real run:
#
# 1. **throughput**: training images per second on two GPUs over one GPU of the same
#    run, judged against the spread of its epochs: faster than one GPU, and as fast as two
#    GPUs less the gradient all-reduce the step profile finds exposed;
# 2. **coverage**: every training image exactly once per epoch across the two GPUs, checked
#    with the file name of every sample each GPU trained on;
# 3. **validation**: the metrics of a checkpoint validated on two GPUs equal those of the
#    same checkpoint validated on one;
# 4. **time to accuracy** on two GPUs, against one: seconds to notebook 07's IoU level.
#
# DDP does not run inside a Jupyter kernel together with DALI (more on that below), so the
# training is a script, `nailseg-train`, that this notebook launches, and
# that works as well from a terminal, outside the course.
#
# ## What you'll learn
# - why multi-GPU training runs as a script, and how Lightning's launcher runs the same
#   script once per GPU
# - how DALI splits the training set into one shard per GPU, and what dropping the last
#   partial batch of every shard costs
# - how to check with sample ids that an epoch on several GPUs sees every image once
# - how to time training apart from validation, and what a second GPU buys, in images per
#   second and in time to accuracy
# - why a validation spread over several GPUs gives the metrics of a validation on one
#
# > **CPU or GPU?** Without a GPU the notebook runs the same script with two CPU
# > processes (DDP's `gloo` backend, PyTorch's way of exchanging tensors between CPU
# > processes) and short runs (the profile's `ddp_max_steps`): the
# > code, the coverage check and the validation comparison are the real ones, while the
# > speed-up means nothing (the two processes share the same cores). With a single GPU the
# > multi-device runs use that one GPU. In both cases the two-GPU numbers are shown from the
# > committed results of a run on two GPUs.
#
# `iou_level` and `show_devices` (plumbing from `nailseg_common.measure.two_gpus_report`)
# print the IoU level the runs are timed to (`target_iou`, else the highest of `iou_levels`
# that every seed of notebook 07's `seed_results` reaches), which of these cases this is, and
# whether DALI runs here.

# %%
import torch

from nailseg_common.commands.train import launch_training, plan_options, script_options
from nailseg_common.data.preparation import read_split
from nailseg_common.measure import two_gpus_report
from nailseg_common.setup.paths import runs_dir, shown

# %% tags=["parameters"]
profile = ""              # smoke, cpu or gpu; empty: $NAILSEG_PROFILE, else chosen from the hardware
data_root = ""            # your own photos instead of the synthetic set
num_images = None         # size of the synthetic set (ignored with data_root); None: the profile's
image_size = None         # side of the square images the model sees
encoder = None            # smp encoder name
precision = None          # Lightning precision, e.g. 32-true, bf16-mixed
accelerator = None        # cpu or gpu
compile_model = None      # torch.compile the U-Net
fast_lr = None            # peak learning rate on one device (notebook 07's recipe)
warmup_steps = None       # warm-up steps on one device (N devices: ceil of it over N)
val_every_n_epochs = None  # validate every n epochs
ddp_devices = None        # devices of the multi-device runs (at most the GPUs visible)
ddp_batch_size = None     # batch per device
ddp_max_steps = None      # steps of the one-device run
ddp_profile_epoch = None  # the epoch whose steps (a), (b) and (e) profile
ddp_seeds = None          # seeds of the one- and N-device runs; None: the profile's
lr_scaling = "sqrt"       # peak lr on N devices: sqrt (times the root of N), linear (times N) or none
many_epochs = 1.6         # epochs of the N-device run, times the one-device run's
target_iou = None         # hard IoU to reach; None: the highest of iou_levels every seed reaches
iou_levels = [0.80, 0.83, 0.86]  # levels the seeds of seed_results are timed to (notebook 07's)
seed_results = "results/time_to_accuracy_h200.json"  # notebook 07's recipe over seeds
reference = "results/two_gpus_h200x2.json"  # the committed results of a run on two GPUs

# %%
from nailseg_common.course import start

cfg, data = start(globals())
level = two_gpus_report.iou_level(target_iou, seed_results, iou_levels)  # notebook 07's
on_gpu = cfg.accelerator == "gpu"
n_devices = min(cfg.ddp_devices, torch.cuda.device_count()) if on_gpu else cfg.ddp_devices
train_samples = len(read_split(data, "train"))
two_gpus_report.show_devices(n_devices, on_gpu)

# %% [markdown]
# ## Why a script
#
# DDP needs one process per GPU. Lightning starts them in one of two ways: **fork** the
# running Python (`strategy="ddp_notebook"`, the only way inside a Jupyter kernel), or
# **re-run the script** in new processes (`strategy="ddp"`). Forking is out here: a process
# forked after CUDA was initialised cannot use CUDA, and DALI's pipelines (their worker
# threads, their CUDA streams) do not survive a fork either. So the training is a script,
# and the notebook launches it like a terminal would:
#
# ```
# nailseg-train --devices 2 --batch-size B --lr LR --record-samples
# ```
#
# Lightning's launcher does the rest. The command starts **rank 0**; when it reaches
# `trainer.fit`, rank 0 starts `nailseg-train` again with the same
# arguments, once per further GPU, with `LOCAL_RANK=1` (and so on) in its environment. So
# everything before `trainer.fit` runs in every process: each one parses the arguments,
# picks its GPU (`torch.cuda.set_device(LOCAL_RANK)`), builds and compiles its model,
# then all of them meet in `fit`, where DDP connects them and DALI gives each its shard.
# Rank 0 alone writes the results.
#
# The script's training code is below, in full; `make export` writes it into
# `nailseg_common.training.multi_gpu`, and `nailseg_common.commands.train`, the command line,
# hands `run` the arguments it parsed.
#
# ### Shards, and what DROP leaves out
#
# DALI's reader splits the `N` training files into `k` shards, shard `i` being files
# `⌊i·N/k⌋` to `⌊(i+1)·N/k⌋` of the epoch's shuffled order (one permutation for all ranks:
# the shards are disjoint), and moves each rank to the next shard every epoch. Training
# batches are full (`LastBatchPolicy.DROP`), and the ranks of a DDP run must take the same
# number of steps (each step waits for every rank's gradients), so DALI stops every rank
# when the smallest shard runs out of full batches: each rank trains on
# `⌊N / (k·batch)⌋` batches per epoch, and `N − ⌊N / (k·batch)⌋·k·batch` images are left
# out of each epoch (different ones every epoch, as the order is reshuffled).
#
# `tests/test_multi_gpu.py` checks this arithmetic against CPU DALI for several shard
# counts, set sizes and batches. It holds in every case but one: when the shards differ in
# size (`N` not a multiple of `k`) and the smaller shard is a multiple of the batch, the
# reader pads the smaller shards to the size of the larger, and that batch of pure padding
# is served as the first batch of the *next* epoch: from the second epoch on, some images
# come twice and others not at all. The script warns when that can happen; a training set
# that divides evenly between the GPUs avoids it (the plan below prints the shards).
#
# The check itself is a pure function of the names each rank saw in one epoch, tested in
# `tests/test_multi_gpu.py` and run on every epoch of the real run.

# %%
#| export training.multi_gpu: training on one GPU or several with DDP, behind `nailseg-train`
import collections
import os
import warnings


def local_rank() -> int:
    """This process's rank on its machine: ``LOCAL_RANK`` (Lightning's launcher, torchrun),
    else ``SLURM_LOCALID`` (srun); a process started by hand is rank 0."""
    return int(os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0")))


def shard_sizes(samples: int, shards: int) -> list[int]:
    """How many of ``samples`` each DALI shard holds: shard i is ``[⌊i·N/k⌋, ⌊(i+1)·N/k⌋)``."""
    return [(i + 1) * samples // shards - i * samples // shards for i in range(shards)]


def expected_missing(samples: int, world_size: int, batch_size: int) -> int:
    """Training samples one epoch leaves out: every rank runs ``⌊N / (world·batch)⌋`` full
    batches (DROP, as many as the smallest shard allows)."""
    return samples - samples // (world_size * batch_size) * world_size * batch_size


def pads_into_next_epoch(samples: int, world_size: int, batch_size: int) -> bool:
    """Whether DALI (measured on 2.4) serves a batch of padding in the next epoch: shards of
    unequal size whose smaller size is a multiple of the batch."""
    return samples % world_size != 0 and samples // world_size % batch_size == 0


def warn_if_padded(samples: int, world_size: int, batch_size: int) -> None:
    if pads_into_next_epoch(samples, world_size, batch_size):
        warnings.warn(f"{samples} training images in shards of {shard_sizes(samples, world_size)} "
                      f"with batch {batch_size}: DALI serves a batch of padding in the next "
                      "epoch, so later epochs repeat some images and skip others. Use a training "
                      "set that divides evenly between the devices, or another batch.", stacklevel=2)


def check_epoch_coverage(names_by_rank: dict[int, list[str]], all_names: list[str],
                         world_size: int, batch_size: int) -> dict:
    """Did one epoch on ``world_size`` ranks see every name of ``all_names`` (unique) once,
    but for the ``expected_missing`` that DROP leaves out?"""
    counts = collections.Counter(name for names in names_by_rank.values() for name in names)
    known = set(all_names)
    duplicates = sorted(name for name, count in counts.items() if count > 1)
    unknown = sorted(set(counts) - known)
    missing = len(known - set(counts))
    expected = expected_missing(len(all_names), world_size, batch_size)
    return {"per_rank": {rank: len(names) for rank, names in sorted(names_by_rank.items())},
            "seen": len(known & set(counts)), "duplicates": duplicates, "missing": missing,
            "expected_missing": expected, "unknown": unknown,
            "ok": not duplicates and not unknown and missing == expected}


# %% [markdown]
# ### Images per second, and the sample ledger
#
# Notebook 02's `TrainingSpeed` times the training part of every epoch, validation
# excluded, with the course's clock; it counts the images of every rank (a rank's batches ×
# the number of ranks), and its median leaves out the first epoch (DALI filling its queues,
# cuDNN's first calls).
#
# `SampleLedger` keeps the `sample_id` of every training batch (notebook 04's DALI graph
# adds each sample's file path, notebook 07's module keeps it in the batch). It holds the
# tensors and decodes them once per epoch, so the check adds no synchronisation to the
# steps. At the end of `fit` every rank writes its ledger to the run folder, all ranks wait
# for each other (`strategy.barrier()`), and rank 0 reads them all and checks every
# complete epoch.

# %%
#| export training.multi_gpu
import json
from pathlib import Path

import torch
from pytorch_lightning.callbacks import Callback

from nailseg_common.core.files import write_json
from nailseg_common.pipelines.dali_pipeline import sample_names


class SampleLedger(Callback):
    """The training sample names of every complete epoch, per rank; at the end of ``fit``
    rank 0 checks each epoch with :func:`check_epoch_coverage` (``coverage``)."""

    def __init__(self, all_names: list[str]):
        repeated = sorted(n for n, c in collections.Counter(all_names).items() if c > 1)
        if repeated:
            raise ValueError(f"{len(repeated)} training file names occur in several type "
                             f"folders (e.g. {repeated[0]}): the ledger tells samples apart "
                             "by file name; give every image a name of its own.")
        self.all_names, self.epochs = all_names, {}
        self.coverage: list[dict] | None = None

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._ids: list[torch.Tensor] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._ids.append(batch["sample_id"])  # decoded at the epoch's end: no sync per step
        self._batch_size = len(batch["sample_id"])

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if len(self._ids) == trainer.num_training_batches:  # not an epoch cut by max_steps
            self.epochs[trainer.current_epoch] = sample_names(torch.cat(self._ids))

    def on_fit_end(self, trainer, pl_module) -> None:
        folder = Path(trainer.default_root_dir) / "samples"
        write_json(folder / f"rank{trainer.global_rank}.json", self.epochs)
        trainer.strategy.barrier("SampleLedger")
        if not trainer.is_global_zero:
            return
        ledgers = [json.loads((folder / f"rank{rank}.json").read_text())
                   for rank in range(trainer.world_size)]
        complete = sorted(set.intersection(*(set(ledger) for ledger in ledgers)), key=int)
        self.coverage = [
            {"epoch": int(epoch), **check_epoch_coverage(
                {rank: ledger[epoch] for rank, ledger in enumerate(ledgers)}, self.all_names,
                trainer.world_size, self._batch_size)}
            for epoch in complete]


# %% [markdown]
# ### A profile of a few steps
#
# Images per second say how much a second GPU buys, not where the rest of the time goes.
# `StepProfile` records a few training steps in the middle of one epoch with
# `torch.profiler`, on rank 0, after one warm-up step (the profiler's `schedule`: starting
# the profiler costs time that would otherwise show up as idle), and splits the wall time
# of a step in three:
#
# - **compute**: the GPU runs at least one kernel other than NCCL's;
# - **all-reduce not hidden**: only NCCL kernels run, the gradient averaging that compute
#   does not overlap. On rank 0 a NCCL kernel also spans the wait for the other GPU to
#   reach the same all-reduce, so a rank that is late shows up here too;
# - **idle**: no kernel runs at all, the GPU waits for the host (Python, Lightning, DDP's
#   hooks, the next batch).
#
# Without a GPU there are no kernels to record, and the profiler's own cost on the CPU would
# be most of the step: `StepProfile` then times the wall clock alone.
# A GPU runs kernels of several streams at once, so the three are measured as the union of
# the kernels' time intervals, not as sums of kernel times. What the profiled steps do not
# hold is the boundary between epochs: `TrainingSpeed` times whole epochs, and the
# difference per step is the cost of that boundary (DALI's epoch change, Lightning's epoch
# hooks, the callbacks' synchronisations).

# %%
#| export training.multi_gpu
import contextlib

from torch.profiler import ProfilerActivity, profile, schedule

from nailseg_common.core.clock import synchronized_now


def covered_ms(intervals: list[tuple[float, float]]) -> float:
    """The time covered by the union of ``(start, end)`` intervals, given in µs, in ms."""
    total, reach = 0.0, float("-inf")
    for begin, end in sorted(intervals):
        if end > reach:
            total += end - max(begin, reach)
            reach = end
    return total / 1e3


def split_steps(kernels: list[tuple[str, float, float]] | None, wall_ms: float, steps: int) -> dict:
    """Per step in ms: ``wall_ms`` and, from the ``(name, start µs, end µs)`` of the kernels of
    ``steps`` steps (None: not recorded), compute, all-reduce not hidden, idle, and NCCL; with
    kernels, the wall is their span, from the first one's start to the last one's end."""
    split = {"steps": steps, "wall_ms": wall_ms, "compute_ms": None,
             "all_reduce_not_hidden_ms": None, "idle_ms": None, "nccl_ms": None}
    if kernels is not None:
        compute = covered_ms([(s, e) for name, s, e in kernels if "nccl" not in name.lower()])
        busy = covered_ms([(s, e) for _, s, e in kernels])
        nccl = covered_ms([(s, e) for name, s, e in kernels if "nccl" in name.lower()])
        span = covered_ms([(min(s for _, s, _ in kernels), max(e for _, _, e in kernels))])
        split |= {"wall_ms": span / steps,  # the GPU's clock: the three parts add up to it
                  "compute_ms": compute / steps, "all_reduce_not_hidden_ms": (busy - compute) / steps,
                  "idle_ms": (span - busy) / steps, "nccl_ms": nccl / steps}
    return split

# %%
#| export training.multi_gpu
class StepProfile(Callback):
    """``torch.profiler`` over ``steps`` training batches of epoch ``epoch`` on rank 0, after
    a batch that warms the profiler up; ``summary``: :func:`split_steps` of them."""

    def __init__(self, epoch: int, steps: int = 5):
        self.epoch, self.steps = epoch, steps
        self.summary: dict | None = None
        self._profiler: profile | None = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.is_global_zero and trainer.current_epoch == self.epoch and batch_idx == 1:
            self._steps = min(self.steps, trainer.num_training_batches - 2)  # after the warm-up
            self._cuda = pl_module.device.type == "cuda"  # kernels to record on a GPU only
            warm_then_record = schedule(wait=0, warmup=1, active=max(self._steps, 1), repeat=1)
            self._profiler = (profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                                      schedule=warm_then_record) if self._cuda
                              else contextlib.nullcontext()) if self._steps > 0 else None
            if self._profiler is not None:  # batch 1 warms it up, it records from batch 2 on
                self._profiler.__enter__()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._profiler is None:
            return
        last = batch_idx == 1 + self._steps
        if last:
            wall_ms = 1e3 * (synchronized_now(pl_module.device) - self._start) / self._steps
        if self._cuda:
            self._profiler.step()  # the schedule: warm up on batch 1, record, then stop
        if batch_idx == 1:  # the profiler is warm: the profiled steps start
            self._start = synchronized_now(pl_module.device)
        if not last:
            return
        self._profiler.__exit__(None, None, None)
        kernels = [(event.name, event.time_range.start, event.time_range.end)
                   for event in self._profiler.events() if event.device_type.name == "CUDA"
                   ] if self._cuda else None
        self._profiler = None
        self.summary = {"epoch": self.epoch, **split_steps(kernels, wall_ms, self._steps)}

    def on_train_end(self, trainer, pl_module) -> None:
        if self._profiler is not None:  # the run ended within the profiled steps: no summary
            self._profiler.__exit__(None, None, None)
            self._profiler = None


# %% [markdown]
# ### Training and validation
#
# The command line lives in `nailseg_common.commands.train`: its options, the run's profile
# (what an option does not give comes from the profile, as in the notebooks), and the
# problems caught before anything starts, each with its fix (DALI missing, more devices than
# GPUs). It has no Kornia pipeline: notebook 03's `BatchSampler` would be replaced by DDP
# with one that yields single images. The batch size is per device, and the learning rate
# is used as given.
# Three options go to PyTorch's `DistributedDataParallel` (`ddp_options`), to be measured
# one at a time: `--bucket-cap-mb` (the size of the gradient buckets that are all-reduced
# while the backward still runs), `--static-graph` and `--gradient-as-bucket-view`.
# `--ddp-on-one-device` wraps a one-GPU run in DDP too, which separates DDP's own cost per
# step from what a second GPU adds; a step profile also records the NCCL kernels' whole time
# (`nccl_ms`), hidden behind other kernels or not.
#
# `train` is notebook 07's time to accuracy, made to run once per rank, with 07's whole
# recipe: `recipe_model` (the half-resolution head, flip-averaged validations) and
# `AverageWeights` (validations score the average of the weights). Every process
# takes its GPU before anything touches CUDA, seeds (so every rank builds the same initial
# weights; DDP also copies rank 0's at the start), and warms its model up on every shape it
# will meet the way the run meets it, as notebook 07 does: a `fit` of two steps and one whole
# validation through the same kind of `Trainer` (07's `warm_up`, given this script's
# devices and DDP strategy), then the weights put back. Compilation stays out of the timed
# `fit`. The model is compiled outside DDP, as one graph:
# `torch._dynamo.config.patch(optimize_ddp=False)` sets a global compiler flag for the
# `with` block only and restores it after (so the gradients are all-reduced after the
# backward, not during it). After `fit`, every rank takes part in saving the checkpoint
# (rank 0 writes it) and rank 0 writes the results.

# %%
#| export training.multi_gpu
import argparse

import pytorch_lightning as pl
from pytorch_lightning.strategies import DDPStrategy

from nailseg_common.data.preparation import ensure_prepared, read_split
from nailseg_common.pipelines.dali_pipeline import DALINailDataModule, split_files
from nailseg_common.setup.paths import DataLocation
from nailseg_common.setup.profiles import Profile, set_matmul_precision
from nailseg_common.training.ddp_runs import ddp_options, report, run_record
from nailseg_common.training.fast_training import (
    AccuracyClock,
    AverageWeights,
    FastNailSegmentation,
    recipe_model,
    warm_up,
)
from nailseg_common.training.trainer import TrainingSpeed, make_trainer


def device_options(args: argparse.Namespace) -> dict:
    """``devices`` (per node), ``num_nodes`` and ``strategy`` of this script's Trainers: DDP
    (with ``ddp_options``) when there are several devices in all, or ``--ddp-on-one-device``."""
    ddp = args.devices * args.num_nodes > 1 or args.ddp_on_one_device
    return {"devices": args.devices, "num_nodes": args.num_nodes,
            "strategy": DDPStrategy(**ddp_options(args)) if ddp else "auto"}


def run_trainer(args: argparse.Namespace, profile: Profile, **options) -> pl.Trainer:
    """:func:`make_trainer` on this script's devices (:func:`device_options`)."""
    return make_trainer(profile, args.run_name, enable_checkpointing=False, enable_progress_bar=False,
                        **device_options(args), **options)

# %%
#| export training.multi_gpu
def train(args: argparse.Namespace, profile: Profile, location: DataLocation) -> dict | None:
    """Fit until ``args.target_iou``, on every rank; rank 0 returns (and writes) the results."""
    if profile.accelerator == "gpu":
        torch.cuda.set_device(local_rank())
    pl.seed_everything(args.seed, workers=True, verbose=False)
    model = recipe_model(profile)  # notebook 07's: half-resolution head, flip averaging
    clock, speed = AccuracyClock(args.target_iou), TrainingSpeed()
    averaging = AverageWeights(profile.fast_ema_decay) if profile.fast_ema_decay else None
    train_names = [Path(path).stem for path in split_files(location, "train")[0]]
    ledger, step_profile = (SampleLedger(train_names) if args.record_samples else None,
                            None if args.profile_epoch is None else StepProfile(args.profile_epoch))
    trainer = run_trainer(args, profile,  # validates every profile.val_every_n_epochs epochs
                          callbacks=[c for c in (clock, speed, averaging, ledger, step_profile) if c])
    if local_rank() == 0:
        warn_if_padded(len(train_names), args.devices * args.num_nodes, profile.batch_size)
    with torch._dynamo.config.patch(optimize_ddp=False):  # restored when the block ends
        compile_s = warm_up(model, DALINailDataModule(location, profile, seed=args.seed), profile,
                            **device_options(args))
        trainer.fit(model, datamodule=DALINailDataModule(location, profile, seed=args.seed,
                                                         sample_ids=args.record_samples))
    checkpoint = Path(trainer.default_root_dir) / "final.ckpt"  # weights, no optimizer state
    trainer.save_checkpoint(checkpoint, weights_only=True)  # every rank calls it, rank 0 writes
    if not trainer.is_global_zero:
        return None
    reached = clock.reached
    result = {
        **run_record(args, profile, trainer.world_size), "compile_s": compile_s,
        "fit_s": clock.fit_s, "reached": reached is not None,
        "seconds_to_target": reached["seconds"] if reached else None,
        "steps_to_target": reached["step"] if reached else None,
        "best_iou": max((row["val_iou"] for row in clock.history), default=None),
        "steps": trainer.global_step, "history": clock.history, "epochs": speed.epochs,
        "train_img_s": speed.images_per_second() if len(speed.epochs) > 1 else None,
        "coverage": ledger.coverage if ledger else None,
        "step_profile": step_profile.summary if step_profile else None,
        "checkpoint": str(checkpoint)}
    return report(args, trainer, result)

# %% [markdown]
# `validate` loads a checkpoint into the uncompiled module and runs `trainer.validate` on
# as many devices as asked. Validation batches keep the last partial one (`PARTIAL`), so
# the shards cover the validation set once; the Dice and IoU means are torchmetrics
# metrics, which add up their sums and counts over the ranks before dividing. The
# validation loss, though, is logged by notebook 02's module without `sync_dist`: each
# rank holds the mean of its own shard, so `validate` weights each rank's mean by its
# number of images and adds them up across the ranks itself.

# %%
#| export training.multi_gpu
def validate(args: argparse.Namespace, profile: Profile, location: DataLocation) -> dict | None:
    """Validate the checkpoint ``args.validate`` on every rank; rank 0 returns the metrics."""
    if profile.accelerator == "gpu":
        torch.cuda.set_device(local_rank())
    model = FastNailSegmentation.load_from_checkpoint(args.validate, map_location="cpu",
                                                      compile_model=False)
    trainer = run_trainer(args, profile)
    metrics = trainer.validate(model, datamodule=DALINailDataModule(location, profile,
                                                                    seed=args.seed), verbose=False)[0]
    per_rank = shard_sizes(len(read_split(location, "valid")), trainer.world_size)
    images = per_rank[trainer.global_rank]
    totals = trainer.strategy.reduce(
        torch.tensor([metrics["val_loss"] * images, images], dtype=torch.float64,
                     device=trainer.strategy.root_device), reduce_op="sum")
    if not trainer.is_global_zero:
        return None
    return report(args, trainer, {
        **run_record(args, profile, trainer.world_size),
        "checkpoint": str(Path(args.validate).resolve()), "validation_images_per_rank": per_rank,
        **{name: float(metrics[name]) for name in ("val_dice", "val_iou", "val_soft_dice")},
        "val_loss": float(totals[0] / totals[1])})

# %%
#| export training.multi_gpu
def run(args: argparse.Namespace, profile: Profile) -> dict | None:
    """``nailseg-train`` with its parsed ``args`` and ``profile``: train (or ``--validate``);
    rank 0 returns the results."""
    set_matmul_precision(profile)  # TF32 on a GPU, for this process (as `start` in a notebook)
    # notebook 02's module logs these per rank (no sync_dist): the script reports the synced
    # IoU and Dice, and adds up the validation loss across the ranks itself
    warnings.filterwarnings("ignore", message=r".*self\.log\('(train_loss|val_loss|epoch_s)'")
    location = ensure_prepared(profile, args.data_root or None, progress=local_rank() == 0)
    return (validate if args.validate else train)(args, profile, location)


# %% [markdown]
# ## The runs
#
# Launches of the script, each a fresh set of processes:
#
# - **(a)** one device: notebook 07's recipe (`fast_lr`, `warmup_steps`), the per-device
#   batch `ddp_batch_size`, `ddp_max_steps` steps;
# - **(b)** N devices, with `--record-samples`: the same per-device batch, so a step trains
#   on N times the images. The learning rate grows with the global batch (`lr_scaling`, √N
#   by default) and the warm-up covers the same images (`⌈warmup_steps / N⌉` steps). A
#   larger batch makes fewer, larger steps, and each step of a larger batch does not go N
#   times as far, so (b) trains for `many_epochs` times the epochs of (a),
#   `⌈ddp_max_steps · many_epochs / N⌉` steps (exercise 1 tries others);
# - **(c)** and **(d)**: (b)'s final checkpoint validated on one device, then on N;
# - **(e)**, on a GPU: (a) again on one device wrapped in DDP (`--ddp-on-one-device`): DDP's
#   own work (its hooks, copying the gradients into buckets) with an all-reduce among one
#   process, so that NCCL's share of a step on N devices can be told apart from DDP's (a CPU
#   profile holds wall time only, so there it would tell nothing);
# - then (a) and (b) again for the further seeds of `ddp_seeds` ((a) to (e) take seed 0):
#   one seed is one draw.
#
# (a), (b) and (e) also profile a few steps of epoch `ddp_profile_epoch`, so seed 0's times
# carry the profiler's cost, on one device and on N alike. `device_plan` writes notebook
# 07's recipe for N devices:

# %%
#| export training.multi_gpu
import math

LR_SCALING = {"none": lambda n: 1.0, "sqrt": math.sqrt, "linear": float}


def device_plan(profile: Profile, devices: int, lr_scaling: str = "sqrt",
                many_epochs: float = 1.6) -> dict:
    """Notebook 07's recipe on ``devices`` devices: the peak lr times ``lr_scaling`` of N, the
    warm-up over the same images, ``many_epochs`` times the epochs of one device."""
    if lr_scaling not in LR_SCALING:
        raise ValueError(f"lr_scaling must be one of {sorted(LR_SCALING)}, not {lr_scaling!r}")
    epochs = many_epochs if devices > 1 else 1.0
    return {"devices": devices, "lr": profile.fast_lr * LR_SCALING[lr_scaling](devices),
            "warmup": math.ceil(profile.warmup_steps / devices),
            "steps": math.ceil(profile.ddp_max_steps * epochs / devices)}

# %% [markdown]
# The settings, and what DALI's shards make of the training set: `plan_table` (plumbing from
# `nailseg_common.measure.two_gpus_report`) puts each plan in a row with its batches per rank
# and epoch, from `shard_sizes` and `expected_missing` above.

# %%
out_dir = runs_dir() / cfg.name / "two_gpus"
plans = {"one device": device_plan(cfg, 1),
         f"{n_devices} devices": device_plan(cfg, n_devices, lr_scaling, many_epochs)}
two_gpus_report.plan_table(plans, train_samples, cfg.ddp_batch_size)

# %% [markdown]
# `launch_training` (in `nailseg_common.commands.train`) runs the script as a terminal would: the
# notebook's Python, the repository as the working folder, the output captured; a failed
# run raises with the end of its output, where the reason is. `script_options` and
# `plan_options` (in `nailseg_common.commands.train`) write the settings above as the
# script's options.

# %%
common = script_options(cfg, level, data_root)


def run(name: str, *options: str, seed: int = 0) -> dict:
    return launch_training(out_dir / f"{name}.json", *common, *options, "--seed", str(seed),
                           "--run-name", f"two_gpus/{name}")


one_plan, many_plan = plans.values()
one = run("one_device", *plan_options(one_plan, cfg.ddp_profile_epoch))
many = run(f"{n_devices}_devices", *plan_options(many_plan, cfg.ddp_profile_epoch), "--record-samples")
validation = {k: run(f"validate_{k}", "--validate", many["checkpoint"], "--devices", str(k))
              for k in sorted({1, n_devices})}
ddp_one = run("one_device_ddp", *plan_options(one_plan, cfg.ddp_profile_epoch),
              "--ddp-on-one-device") if on_gpu else None
later = {name: [run(f"{plan['devices']}_devices_seed{seed}", *plan_options(plan), seed=seed)
                for seed in range(1, cfg.ddp_seeds)] for name, plan in plans.items()}

# %% [markdown]
# ## What the runs measured
#
# `nailseg_common.measure.two_gpus_report` holds the tables and plots: `combine` joins the
# launches into one record, and `show_record` shows where a record comes from, its speed, its
# seeds and its checks, for this run and, below, for the committed results of the run on two
# GPUs. The speed-up is judged against one device of the same run
# (is a second GPU faster at all?), with the spread of the epochs' images per second (each
# epoch after the first is one window), and the time to accuracy is read from each run's
# validations at the IoU level above. `show_seeds` then pairs the runs of each seed (the
# same initial weights on one device and on N) and gives the median and range over the
# seeds of both ratios: images per second on N devices over one, and time to the level on N
# devices over one. Its last lines say why the time ratio is what it is: the images each run
# needed to reach the level (a global batch N × larger often needs more), the seconds those
# take at each run's speed beside the other seconds to the level (start-up, validations),
# how often each run validates (a time to a level is known only to a validation), and the
# speed a second GPU would need for 0.75 × the time, the goal, at those images.

# %%
record = two_gpus_report.combine(one, many, validation, ddp_one, later)
two_gpus_report.show_record(record, "this run", level)

# %% [markdown]
# ### Where a step's time goes
#
# Two GPUs reach `N ×` the images per second of one only if a step on two takes as long as
# a step on one. `explain_speedup` puts the profiled steps of both runs side by side: the
# three parts of a profiled step (compute, all-reduce not hidden, idle), then the rest: the
# time per step of the unprofiled epochs less the profiled step's wall time, that is the
# epoch boundary spread over the steps less what the profiler added to the profiled steps
# (negative when the profiler added more). The parts add up to the time per step that the
# images per second above come from; where the rest is negative, the three parts carry the
# profiler's cost, and a change of a part smaller than the change of the rest between the
# runs is not resolved: the table says so. Its last line is a lesson more than a target: if
# the all-reduce not hidden were all a second GPU cost, the images per second would grow
# N × (one device's step) / (that step + the exposed all-reduce); where the measured speed-up
# misses that, the cost lies elsewhere, in the parts that grew. The column of (e), one device
# under DDP, splits what grew: from one device to (e) is DDP's own work, from (e) to N
# devices is what the other GPU and NCCL add.

# %%
two_gpus_report.explain_speedup(record)

# %% [markdown]
# How to read the validation comparison: the same checkpoint sees the same images on one
# device and on several, but not in the same batches (a rank's shard is a part of the
# validation set), and the sums of the per-image metrics are added in another order. In
# exact arithmetic the metrics are equal. In floating point the last digits may differ:
# around 1e-7 from the order of the sums in float32; on a GPU a little more, as the
# convolutions may run other algorithms for another batch size, and under bf16 a pixel
# whose logit is within rounding of 0 can change sides. An image validated twice or not
# at all would move a mean by about 1/N of the spread of the per-image values (N
# validation images), far more than rounding.
#
# ## The committed two-GPU run
#
# The results of a run on a machine with two GPUs are committed as `reference`; in the cells
# below `committed_record` reads them (or says why it does not) and the same functions show
# them, with the machine, the versions and the date they were measured on. The record of
# this run goes to `runs/`, beside its logs; a run on two GPUs or more is itself the record
# to commit, so it shows no other.

# %%
results_path = write_json(out_dir / "results.json", record)
print(f"this run's combined results: {shown(results_path)}")
committed = two_gpus_report.committed_record(reference, n_devices if on_gpu else 0)
if committed is not None:
    two_gpus_report.show_record(committed, f"committed {reference}", level)

# %%
if committed is not None:
    two_gpus_report.explain_speedup(committed)

# %% [markdown]
# How to read the committed run: the speed-up lines above say whether two GPUs are faster
# than one beyond the noise, and whether the exposed all-reduce explains what they miss of
# 2 ×; the step table says where the difference per step comes from. Compute that grows on two GPUs while the all-reduce stays hidden has two candidate
# causes, neither measured here: NCCL's kernels take SMs (streaming multiprocessors, the
# GPU's compute units) and memory bandwidth from the
# convolutions they overlap, and DDP adds kernels of its own (copying the gradients into its
# buckets and back, dividing them by the number of GPUs). Profiling one GPU with the
# all-reduce switched off (`no_sync`) would tell them apart.
#
# ## Past one machine
#
# The same script runs on several machines. `--num-nodes N` gives Lightning `num_nodes=N`,
# and `--devices` still counts the devices of each node. A launcher starts one process per
# device: `torchrun --nnodes N --nproc-per-node D` on every node, or `srun` under SLURM with
# `--ntasks-per-node` set to D. A process's global rank is its node's rank × D plus its rank
# on the node, and DALI's reader takes that rank as its shard of N × D, so an epoch still
# sees each training image once: `tests/test_nodes.py` checks it with two one-process
# "nodes" on one machine, and `docs/clusters.md` has the commands.
#
# ## Summary
#
# - Multi-GPU training with DALI runs as a script: Lightning's launcher starts the same
#   command once per GPU (`LOCAL_RANK`), and everything before `trainer.fit` runs in every
#   process, so each process picks its GPU and compiles its model before `fit`.
# - DALI's readers split the shuffled training set into one shard per rank; every rank
#   takes `⌊N / (ranks·batch)⌋` full batches, and the sample ledger checks on the real run
#   that an epoch sees every image once, but for that remainder.
# - Validation on several devices gives the metrics of one device when the shards cover
#   the set once (DALI's `PARTIAL`) and the metrics add sums and counts across ranks
#   (torchmetrics); a value logged without `sync_dist` is only its rank's.
# - A second GPU doubles the images per step, not the speed of a step: a profile of a few
#   steps splits the time of a step into compute, all-reduce not hidden and idle, and says
#   where the rest of the 2 × goes.
# - A global batch N × larger needs its own recipe: a larger learning rate and more epochs.
# - One seed is one draw: the runs repeat for `ddp_seeds` seeds, each seed's runs on one
#   device and on N start from the same weights, and the ratios are given as a median and a
#   range over the seeds; one device under DDP splits DDP's own cost from the second GPU's.
#
# ## Exercises
#
# 1. Run (b) with `lr_scaling="linear"` and with `"none"`, and with other `many_epochs`:
#    which reaches the target in the fewest epochs, and which soonest?
# 2. Give the script a training set that does not divide by two with a batch that divides
#    the smaller shard (`--num-images` and `--batch-size`; `pads_into_next_epoch` says
#    which): does the coverage check catch what the script warns about?
# 3. Validate every epoch (`val_every_n_epochs=1`) on two GPUs: how much of the time to
#    accuracy is validation, compared with one GPU?
# 4. Use `SyncBatchNorm` (`Trainer(sync_batchnorm=True)` through `make_trainer`'s
#    overrides): batch norm then sees the global batch. What does it cost per step, and
#    does the time to accuracy change?
# 5. Launch the script with `torchrun --nproc_per_node 2 -m nailseg_common.commands.train
#    --devices 2 ...` instead: Lightning sees the processes started for it. What changes in
#    what runs before `fit`?
