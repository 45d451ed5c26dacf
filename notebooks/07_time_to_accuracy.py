# ---
# jupyter:
#   blog:
#     categories:
#     - performance
#     - torch-compile
#     - gpu
#     - dali
#     - pytorch-lightning
#     date: '2026-11-23'
#     description: Once the input pipeline keeps up, the training step is the limit.
#       Make the whole training reach a quality level sooner, one measured change at
#       a time (fused AdamW, a larger batch with its own recipe, torch.compile compiled
#       once), time it over seeds, count the model's FLOPs, and re-measure the input
#       pipelines against the faster step.
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
# # 07 · Time to accuracy
#
# Notebook 05 measured how much of the **bound** DALI trains at, the bound being notebook
# 02's step with batches already on the GPU. What a reader wants, though, is not images per second but a good
# model sooner.
# This notebook measures exactly that, **wall-clock seconds from the start of `fit` to the
# first validation with hard IoU ≥ a level** on the synthetic validation set, and shortens it
# one measured change at a time, each against the one before:
#
# 1. the step: AdamW's fused kernel, a larger batch, a U-Net whose head predicts at half
#    resolution, `torch.compile` of the U-Net; each measured as a bound, in images per
#    second, against 02's step in the same run;
# 2. the recipe for the larger batch: learning rate, warm-up, schedule and validation
#    interval, and what a validation scores (an average of the weights, each image with its
#    mirror image), which are fields of the run's profile (`fast_lr`, `warmup_steps`,
#    `fast_max_steps`, `val_every_n_epochs`, `fast_ema_decay`, `fast_flip_average`);
# 3. the input pipelines again, against the faster step: which still keep up?
#
# The level is not typed in: it is the highest IoU that every seed of this recipe reaches in
# a committed file of runs on one GPU. Time spent compiling is measured and shown apart: the
# model is compiled once, on every shape the run will use, before anything is timed.
#
# ## What you'll learn
# - how many FLOPs one training image costs (`torch.utils.flop_counter`), and what fraction of
#   the GPU's bf16 peak a training step reaches
# - what a fused optimizer, the batch size, a cheaper decoder and `torch.compile` each buy,
#   measured in one run
# - how to time a training run to a quality level, with compilation kept apart, why one
#   seed's time is not a result, and how to choose a level that every seed reaches
# - how an average of the weights and of mirror images brings a level sooner, at almost no
#   cost
# - how hard a level is: what masks with their outline one pixel off score
# - why a faster step makes input pipelines that "kept up" fall behind, and by how much
# - how to read a profile of the step
#
# > **CPU or GPU?** The notebook runs everywhere. Without a GPU it runs the same code in the
# > `cpu` or `smoke` profile with the compiler off (the profile's `compile_model`: compiling
# > the U-Net for a CPU takes minutes and is not what this notebook is about), and the
# > quality level is out of reach of such short runs: it says so. The numbers that matter
# > come from the `gpu` profile on a GPU; the published edition of this notebook holds them.


# %%
import nailseg_common  # noqa: F401, I001  (first: it silences notices the libraries below print)
import functools
import math

import matplotlib.pyplot as plt
import pandas as pd
import pytorch_lightning as pl
import torch
from IPython.display import display

from nailseg_common.measure import plots, time_to_accuracy_report
from nailseg_common.measure.benchmark import (default_pipelines, interleaved_rates, keeping_up, load_results,
                                              pipeline_rates, profile_step, reuse, train_loader_of,
                                              training_datamodule)
from nailseg_common.measure.profiling import busy_in_words, matmul_peak_tflops
from nailseg_common.core.statistics import Verdict, ratio_spread
from nailseg_common.measure.timing import resident_batches
from nailseg_common.setup.dali import dali_status
from nailseg_common.setup.paths import REPO_ROOT

# %% tags=["parameters"]
profile = ""              # smoke, cpu or gpu; empty: $NAILSEG_PROFILE, else chosen from the hardware
data_root = ""            # your own photos instead of the synthetic set
num_images = None         # size of the synthetic set (ignored with data_root); None: the profile's
image_size = None         # side of the square images the model sees
encoder = None            # smp encoder name
precision = None          # Lightning precision, e.g. 32-true, bf16-mixed
accelerator = None        # cpu or gpu
num_workers = None        # DataLoader workers of the Albumentations pipeline
batch_size = None         # the course's batch: the step we start from
lr = None                 # the course's learning rate (the step's cost does not depend on it)
compile_model = None      # torch.compile the U-Net
fast_batch_size = None    # the batch of the faster step
fast_lr = None            # peak learning rate of the faster recipe
warmup_steps = None       # linear warm-up steps before the cosine decay
fast_max_steps = None     # the schedule of the timed run, in steps
fast_half_resolution_head = None  # the faster recipe's U-Net predicts at half resolution
fast_ema_decay = None     # its validations score an average of the weights, this decay a step (0: off)
fast_flip_average = None  # its validations average each image's logits with its mirror image's
val_every_n_epochs = None  # validate every n epochs of the timed run
bench_steps = None        # batches per timing window
windows = 3               # timing windows per step measurement (median and range)
pipeline_windows = 3      # timing windows per pipeline in the comparison
run_pipelines = True      # re-measure Albumentations, Kornia and DALI against the faster step
profile_steps = 3         # steps of the kernel profile
reference = "results/benchmark_h200.json"  # notebook 05's committed results: ratios to 02's step
seed_results = "results/time_to_accuracy_h200.json"  # this recipe over seeds, alone on one GPU
iou_levels = [0.80, 0.83, 0.86]  # levels of IoU the seeds are timed to (and the file's own)

# %%
from nailseg_common.course import start

cfg, data = start(globals())
on_gpu = cfg.accelerator == "gpu"
device_name = torch.cuda.get_device_name(cfg.device) if on_gpu else "a CPU"
print(f"this run: {device_name}; {dali_status()}")

# %% [markdown]
# ## The faster module
#
# Everything that changes the step or the recipe lives in one subclass of notebook 02's
# `LitNailSegmentation`, so the model, the loss and the metrics stay the course's own:
#
# - **`compile_model`** compiles the U-Net in place with `nn.Module.compile()` (its
#   `state_dict` keeps its keys, so checkpoints load into an uncompiled model). The compiler
#   (Inductor, `torch.compile`'s back end) fuses the chains of batch norm, activations and
#   additions between the convolutions into a few generated kernels. The loss stays eager: the Lovász hinge's sort and cumulative sum over
#   every pixel of a 384 × 384 image are a few large kernels with nothing to fuse, and
#   Inductor has failed to generate that sum (`InductorError`): compile the part that
#   matters, not everything.
# - **`fused_optimizer`** asks AdamW for its fused CUDA kernel: one launch updates every
#   parameter, instead of a few launches per group of tensors (the default `foreach` kernels).
#   Off, the module leaves `fused` unset (`None`): `fused=False` would also switch off
#   `foreach`, and AdamW would loop over its tensors one launch at a time.
# - **`warmup_steps`** ramp the learning rate up linearly before the cosine decay: a larger
#   batch takes a larger learning rate, and a larger learning rate needs a gentle start.
# - **`half_resolution_head`** drops the decoder's last block, the one at full resolution
#   (below): the U-Net predicts at half resolution and upsamples its logits.
# - **`flip_average`** makes every prediction outside training (validation included) the
#   average of two: the image's logits and those of its mirror image, mirrored back. It
#   doubles the cost of a validation, not of a step.
#
# Predictions outside training run the U-Net uncompiled (`torch.compiler.set_stance`): an
# evaluation-mode forward without gradients is a graph of its own, and compiling it would
# cost more than the few batches of a validation could ever win back.
#
# It also keeps a batch's `sample_id` (notebook 04's DALI graph can add it), which notebook
# 08 uses to check what each GPU saw. (Cells that start with `#| export fast_training` are
# written into `nailseg_common.training.fast_training` by `make export`.)

# %%
#| export training.fast_training: the faster recipe and its clock of time to accuracy
import math

import torch

from nailseg_common.training.unet import LitNailSegmentation


# %%
#| export training.fast_training
class FastNailSegmentation(LitNailSegmentation):
    """Notebook 02's module with the faster step and recipe of the list above. Other keyword
    arguments go to :class:`LitNailSegmentation`; ``sample_id`` in a batch is kept."""

    def __init__(self, *, compile_model: bool = False, fused_optimizer: bool = False,
                 warmup_steps: int = 0, half_resolution_head: bool = False,
                 flip_average: bool = False, **kwargs):
        super().__init__(**kwargs)  # saves every argument, these too, as hyperparameters
        if half_resolution_head:
            predict_at_half_resolution(self.model)
        if compile_model:  # in place: parameters and state_dict keys unchanged
            self.model.compile()

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        if self.training:
            return super().forward(image)
        with torch.compiler.set_stance("force_eager"):  # no second graph for evaluation
            logits = super().forward(image)
            if self.hparams.flip_average:
                logits = 0.5 * (logits + super().forward(image.flip(-1)).flip(-1))
        return logits

    def on_after_batch_transfer(self, batch: dict, dataloader_idx: int) -> dict:
        out = super().on_after_batch_transfer(batch, dataloader_idx)
        if "sample_id" in batch:
            out["sample_id"] = batch["sample_id"]
        return out

    def configure_optimizers(self):
        # fused=None, not False, when off: an explicit False also turns off the default foreach
        # kernels, and AdamW falls back to a loop over its tensors, one launch each
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr,
                                      weight_decay=self.hparams.weight_decay,
                                      fused=self.hparams.fused_optimizer or None)
        warmup, total = self.hparams.warmup_steps, max(1, self.hparams.max_steps)

        def factor(step: int) -> float:  # linear warm-up, then cosine down to 0 at max_steps
            if step < warmup:
                return (step + 1) / warmup
            return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


# %% [markdown]
# Where does a U-Net at 384 px spend its step? Much of it is not in multiplications but in
# moving activations through memory, and the decoder's last block holds the largest ones:
# two convolutions with their batch norms and ReLUs on every pixel of the full-size image.
# `predict_at_half_resolution` drops that block. The head's convolution then reads the block
# before, at half the size, and smp's `SegmentationHead` upsamples the logits bilinearly: the
# outline comes from interpolated logits, still at sub-pixel precision, while the encoder
# still sees every pixel. Whether a cheaper step also learns as fast is a question for the
# clock, below.

# %%
#| export training.fast_training
class SkipBlock(torch.nn.Module):
    """A U-Net decoder block that returns its input as it is (smp calls it with a target size)."""

    def forward(self, x: torch.Tensor, height: int, width: int, skip_connection=None) -> torch.Tensor:
        return x


def predict_at_half_resolution(unet: torch.nn.Module) -> None:
    """Drops the last decoder block of smp's ``unet`` (the one at full resolution), in place:
    the head predicts from the block before and upsamples its logits bilinearly."""
    head, channels = unet.segmentation_head, unet.decoder.blocks[-2].conv2[0].out_channels
    unet.decoder.blocks[-1] = SkipBlock()
    head[0] = torch.nn.Conv2d(channels, head[0].out_channels, kernel_size=3, padding=1)
    head[1] = torch.nn.Upsample(scale_factor=2, mode="bilinear")


# %% [markdown]
# The faster recipe is a profile too: `faster_recipe` swaps in the profile's faster batch,
# peak learning rate and schedule (the batch fitted to a small training split), and
# `recipe_model` builds the module of such a profile. Every timed run below, and
# `tools/time_to_accuracy_seeds.py`, start from these two. `describe_recipe` (plumbing from
# `nailseg_common.measure.time_to_accuracy_report`) prints both recipes in one line.

# %%
#| export training.fast_training
import dataclasses

from nailseg_common.data.preparation import fit_batch_to_split
from nailseg_common.setup.paths import DataLocation
from nailseg_common.setup.profiles import Profile


def faster_recipe(profile: Profile, location: DataLocation) -> Profile:
    """``profile`` with its faster batch, peak learning rate and schedule in place of the
    course's (the batch no larger than the training split of ``location``)."""
    return fit_batch_to_split(dataclasses.replace(
        profile, batch_size=profile.fast_batch_size, lr=profile.fast_lr,
        max_steps=profile.fast_max_steps), location)


def recipe_model(profile: Profile) -> FastNailSegmentation:
    """The module of ``profile``'s recipe, compiled if ``compile_model``, AdamW fused on a GPU."""
    return FastNailSegmentation(encoder=profile.encoder, lr=profile.lr, max_steps=profile.max_steps,
                                warmup_steps=profile.warmup_steps, compile_model=profile.compile_model,
                                fused_optimizer=profile.accelerator == "gpu",
                                half_resolution_head=profile.fast_half_resolution_head,
                                flip_average=profile.fast_flip_average)


# %%
fast = faster_recipe(cfg, data)
print(time_to_accuracy_report.describe_recipe(cfg, fast))


# %% [markdown]
# ## What one image costs: FLOPs and the GPU's peak
#
# `FlopCounterMode` counts the floating-point operations of every convolution and matrix
# product that runs inside it (elementwise work is not counted: it is cheap in FLOPs and
# expensive in memory traffic). One training image costs its forward and backward pass.
# Counting needs shapes, not numbers, so it runs on PyTorch's `meta` device: tensors with
# a shape and no data, where nothing is computed.
# The peak is measured in the same run as the bf16 rate of a large matrix product on a GPU,
# timed with the course's clock (`matmul_peak_tflops` in `nailseg_common.measure.profiling`),
# and shown beside the datasheet's dense bf16 figure where the device is one we know
# (`nailseg_common.measure.profiling.datasheet_tflops`). `flops_in_words` (plumbing from
# `nailseg_common.measure.time_to_accuracy_report`) prints the counts and the two peaks.

# %%
#| export training.fast_training
from torch.utils.flop_counter import FlopCounterMode


def training_flops_per_image(model: LitNailSegmentation, image_size: int) -> dict:
    """FLOPs of ``model``'s forward and forward + backward for one image (``model`` moves to meta)."""
    model = model.to("meta")
    image = torch.rand(1, 3, image_size, image_size, device="meta")
    with FlopCounterMode(display=False) as forward, torch.no_grad():
        model(image)
    with FlopCounterMode(display=False) as training:
        model(image).float().mean().backward()
    return {"forward": forward.get_total_flops(), "training": training.get_total_flops()}


# %%
flops = training_flops_per_image(LitNailSegmentation(encoder=cfg.encoder), cfg.image_size)
half = functools.partial(FastNailSegmentation, half_resolution_head=fast.fast_half_resolution_head)
recipe_flops = training_flops_per_image(half(encoder=cfg.encoder), cfg.image_size)
peak_measured = matmul_peak_tflops(cfg.device)
print("\n".join(time_to_accuracy_report.flops_in_words(cfg, flops, recipe_flops, peak_measured)))

# %% [markdown]
# ## The step, one change at a time
#
# Each row below is a bound: the whole training step (`Trainer.fit` of the model, forward,
# loss, backward, optimizer) on batches already on the device, timed with notebook 05's
# `measure_training` (a short warm-up that takes each new shape's one-time costs, then one
# synchronised window). Each row adds one change to the row above. The rows are measured in
# turn, one window each, `windows` rounds (`interleaved_rates`, in
# `nailseg_common.measure.benchmark`): whatever drifts on the machine while they run falls on
# every row alike, and each row reports the median and range of its windows. The resident batches come from DALI where it runs, else from notebook 03's
# photos decoded on the device (`training_datamodule`, in `nailseg_common.measure.benchmark`,
# picks the pipeline). The compiled model is built and compiled once, by `warm_up` (below), and
# `reuse` (beside it) hands that same model to every later measurement, so that no
# measurement compiles again.

# %%
resident = {p.batch_size: resident_batches(train_loader_of(training_datamodule(data, p)), p.device)
            for p in (cfg, fast)}
fused = functools.partial(FastNailSegmentation, fused_optimizer=on_gpu)
fused_half = functools.partial(half, fused_optimizer=on_gpu)
ladder = {"02's step (eager, AdamW foreach)": (cfg, flops, FastNailSegmentation),  # name: profile, FLOPs, model
          "+ fused AdamW" + ("" if on_gpu else ", off here"): (cfg, flops, fused),
          f"+ batch {fast.batch_size}": (fast, flops, fused),
          "+ half-resolution head" + ("" if fast.fast_half_resolution_head else ", off here"):
              (fast, recipe_flops, fused_half)}

# %% [markdown]
# ## Compiling once, apart from the clock
#
# `warm_up` meets every shape a run will meet, the way the run meets it: a `fit` of two
# training steps and one whole validation through the same `Trainer`. That compiles the
# model and autotunes cuDNN; then it restores the weights exactly, and the seconds it took
# are the compilation time, shown apart. Why through the `Trainer`, and not a hand-written
# forward and backward? The compiled code is guarded: it is reused only while what it was
# compiled for still holds (shapes, strides, dtypes, grad and autocast modes, and global
# state such as the float32 matmul precision that `start` sets). A warm-up that
# differs from the run in any of them compiles a graph the run never uses, and the run
# compiles again on the clock. `AccuracyClock` starts when `fit` starts, records the time,
# step and hard IoU of every validation, and stops the run at the first validation with
# IoU ≥ its `target_iou` (this notebook passes the level chosen from the seeds, below).

# %%
#| export training.fast_training
import time

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback

from nailseg_common.training.trainer import make_trainer


def warm_up(model: FastNailSegmentation, datamodule: pl.LightningDataModule, profile: Profile,
            **trainer_options) -> float:
    """Meets every shape of a run the way the run meets it (a ``fit`` of two training steps
    and one whole validation), which compiles and autotunes, then puts the weights back.
    ``trainer_options`` go to ``make_trainer`` (notebook 08: its devices and DDP strategy).
    Returns the seconds it took."""
    state = {key: value.clone() for key, value in model.state_dict().items()}
    trainer = make_trainer(dataclasses.replace(profile, max_steps=2), "warm_up", limit_train_batches=2,
                           check_val_every_n_epoch=1, logger=False, enable_checkpointing=False,
                           enable_progress_bar=False, **trainer_options)
    start = time.perf_counter()
    trainer.fit(model, datamodule=datamodule)
    seconds = time.perf_counter() - start
    model.load_state_dict(state)
    return seconds

# %%
#| export training.fast_training
class AccuracyClock(Callback):
    """Seconds from the start of ``fit`` to every validation; stops at ``val_iou ≥ target``.
    ``fit_s``: the seconds of the whole ``fit``, once it has ended."""

    def __init__(self, target_iou: float):
        self.target_iou = target_iou
        self.history: list[dict] = []
        self.reached: dict | None = None
        self.fit_s: float | None = None

    def setup(self, trainer, pl_module, stage: str) -> None:
        self._start = time.perf_counter()

    def on_validation_end(self, trainer, pl_module) -> None:
        metrics = trainer.callback_metrics
        row = {"seconds": time.perf_counter() - self._start, "step": trainer.global_step,
               "val_iou": float(metrics["val_iou"]), "val_dice": float(metrics["val_dice"])}
        self.history.append(row)
        if self.reached is None and row["val_iou"] >= self.target_iou:
            self.reached = row
            trainer.should_stop = True

    def on_fit_end(self, trainer, pl_module) -> None:
        self.fit_s = time.perf_counter() - self._start


def time_to_accuracy(model: FastNailSegmentation, datamodule: pl.LightningDataModule,
                     profile: Profile, target_iou: float) -> dict:
    """Fit ``model`` (warmed up before) until validation, every ``profile.val_every_n_epochs``
    epochs, reaches ``target_iou`` (or ``profile.max_steps``), validating the average of the
    weights if ``profile.fast_ema_decay``. Seconds are wall time from the start of ``fit``."""
    clock = AccuracyClock(target_iou)
    averaging = [AverageWeights(profile.fast_ema_decay)] if profile.fast_ema_decay else []
    trainer = make_trainer(profile, "time_to_accuracy", enable_checkpointing=False,
                           enable_progress_bar=False, callbacks=[clock, *averaging])
    trainer.fit(model, datamodule=datamodule)
    reached = clock.reached
    return {"max_steps": profile.max_steps, "fit_s": clock.fit_s, "reached": reached is not None,
            "seconds_to_target": reached["seconds"] if reached else None,
            "steps_to_target": reached["step"] if reached else None,
            "best_iou": max((row["val_iou"] for row in clock.history), default=float("nan")),
            "steps": trainer.global_step, "history": clock.history}


# %% [markdown]
# ## Scoring an average of the weights
#
# Near its best, a run's IoU goes up and down from one validation to the next: each step
# moves the weights by the noise of one batch as well as by what it learned. An exponential
# moving average of the weights smooths that noise away at almost no cost: after every step,
# `average ← decay · average + (1 − decay) · weights`, one fused kernel over all the
# parameters (`torch.optim.swa_utils.get_ema_multi_avg_fn`). `AverageWeights` swaps the
# average in for each validation and the trained weights back after it; training itself
# never sees the average. Its decay starts low, `(1 + step) / (10 + step)`, so that the
# average of a short run is not dominated by the random start, and rises to the profile's
# `fast_ema_decay`. (Lightning's `WeightAveraging` callback does the same with a copy of
# the whole module, buffers included; this one keeps the parameters only.)

# %%
#| export training.fast_training
from torch.optim.swa_utils import get_ema_multi_avg_fn


def load_values(module: torch.nn.Module, values: list[torch.Tensor]) -> None:
    with torch.no_grad():
        for parameter, value in zip(module.parameters(), values, strict=True):
            parameter.copy_(value)


class AverageWeights(Callback):
    """Validates an exponential moving average of the parameters, updated after every step
    with the decay ``min(decay, (1 + step) / (10 + step))``."""

    def __init__(self, decay: float):
        self.decay, self.average, self.trained = decay, [], []

    def on_train_start(self, trainer, pl_module) -> None:
        self.average = [parameter.detach().clone() for parameter in pl_module.parameters()]

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        decay = min(self.decay, (1 + trainer.global_step) / (10 + trainer.global_step))
        get_ema_multi_avg_fn(decay)(self.average, [p.detach() for p in pl_module.parameters()], None)

    def on_validation_epoch_start(self, trainer, pl_module) -> None:
        if self.average:  # none before training (a sanity check validates the weights as they are)
            self.trained = [parameter.detach().clone() for parameter in pl_module.parameters()]
            load_values(pl_module, self.average)

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if self.trained:
            load_values(pl_module, self.trained)
            self.trained = []


# %% [markdown]
# The last row of the step: the model of the timed run, compiled once here. Its initial
# weights are kept so that the timed run below starts from them, not from the weights the
# measurement trained. Then every row of the ladder is measured, in turn.

# %%
pl.seed_everything(0, workers=True, verbose=False)
model = recipe_model(fast)
compile_s = warm_up(model, training_datamodule(data, fast), fast)
initial = {key: value.clone() for key, value in model.state_dict().items()}
print(f"compilation and autotuning: {compile_s:.1f} s, apart from every measurement"
      + ("" if cfg.compile_model else " (compile_model is off: autotuning only)"))
name = "+ torch.compile (the U-Net)" + ("" if cfg.compile_model else ", off here")
ladder[name] = (fast, recipe_flops, reuse(model))
rates = interleaved_rates({row: (p, resident[p.batch_size], make) for row, (p, _, make) in ladder.items()},
                          fast.bench_steps // 3, fast.bench_steps, windows)
steps = plots.ladder_table({row: (p.batch_size, f["training"], rates[row]) for row, (p, f, _) in ladder.items()},
                           peak_measured)
plots.plot_step_ladder(steps, f"training images/s on {cfg.device.type} (bound: batches on the device)")
plt.show()
steps.round(3)

# %% [markdown]
# How to read it: a larger batch gives the GPU larger convolutions and halves the per-step
# overheads (optimizer, launches, the Python of Lightning's loop) per image. The head at
# half resolution saves a few percent of the FLOPs and a larger share of the time: the block
# it drops worked on the largest activations of the step. The compiler
# earns its keep in the memory-bound work between the convolutions (batch norm, ReLU, the
# decoder's concatenations and upsampling), which the eager step runs as one kernel each;
# the convolutions themselves stay cuDNN's, and the loss stays as it was. The last column
# puts the step against the hardware: a U-Net at this size spends much of its time moving
# activations through memory, not multiplying matrices. The profile at the end of this
# notebook shows where the time goes.
#
# What the changes bought, in one number: the faster step's images per second over 02's
# eager step, both measured above in this run, on this machine, with the 95 % interval that
# the windows of both rows give the ratio (`ratio_spread`, from
# `nailseg_common.core.statistics`: the course's `±`).

# %%
eager, faster = rates["02's step (eager, AdamW foreach)"], rates[name]
print(f"faster step ÷ 02's step: {faster['img_s'] / eager['img_s']:.3f} "
      f"± {ratio_spread(faster['repeats'], eager['repeats']):.3f} ({windows} windows each, this run)")

# %% [markdown]
# ## The level: what every seed of the recipe reaches
#
# One run is one seed, and near its best its curve goes up and down from one validation to
# the next, so one run's time says little about the next one's. `tools/time_to_accuracy_seeds.py`
# runs this notebook's recipe once per seed (the seed of the initial weights and of the
# augmentations), one seed after another in one process alone on a GPU, and commits every
# run to `seed_results`. The cells below read that file: every seed's curve, then every seed's
# time to several levels of IoU (`iou_levels`, and the level the file's runs stopped at).
# `read_seeds` and `describe_seeds` (plumbing from `nailseg_common.measure.time_to_accuracy_report`)
# read the file and say where it comes from.

# %%
seeds = time_to_accuracy_report.read_seeds(REPO_ROOT / seed_results)
print(time_to_accuracy_report.describe_seeds(seeds, seed_results))

# %% [markdown]
# `seconds_to_level` times every seed to a level, at its first validation at or above it. A
# seed that never reaches a level counts as slower than every seed that does, so a level
# that some seeds miss has a median only while most reach it, and no range at all. The level
# of this notebook is the highest of the table's levels that **every** seed reaches: a level
# the recipe reaches, whatever the seed, and a time with a median and a range to compare with.
# `levels_table` (plumbing from `nailseg_common.measure.time_to_accuracy_report`) gives each
# level's count of seeds that reach it, and their median, fastest and slowest seconds.

# %%
#| export training.fast_training
def seconds_to_level(runs: list[dict], level: float) -> list[float]:
    """Each run's seconds to its first validation with IoU ≥ ``level`` (from its ``history``);
    ``math.inf`` for a run that never reaches it: slower than every run that does."""
    return [next((row["seconds"] for row in run["history"] if row["val_iou"] >= level), math.inf)
            for run in runs]


def common_level(runs: list[dict], levels) -> float | None:
    """The highest of ``levels`` that every run reaches; ``None`` when not one is."""
    return max((lv for lv in levels if math.inf not in seconds_to_level(runs, lv)), default=None)


# %%
level, by_seed = None, None
if seeds:
    levels = sorted({*iou_levels, seeds["summary"]["target_iou"]})
    by_seed = pd.DataFrame({lv: seconds_to_level(seeds["runs"], lv) for lv in levels})
    level = common_level(seeds["runs"], levels)
    display(time_to_accuracy_report.levels_table(by_seed))
    print(f"the level: IoU {level}, the highest that all {len(seeds['runs'])} seeds reach")
    plots.plot_iou_curves({f"seed {run['seed']}": run["history"] for run in seeds["runs"]}, level)
    plt.show()

# %% [markdown]
# ## Time to accuracy
#
# Now the whole run, timed to that level: the faster step with the recipe of the profile (peak
# learning rate, warm-up, `fast_max_steps` steps of cosine schedule, validation every
# `val_every_n_epochs` epochs), from the compiled model's initial weights. DALI feeds it
# where it runs. The run stops at the first validation at or above the level.

# %%
model.load_state_dict(initial)
run = time_to_accuracy(model, training_datamodule(data, fast), fast, level or math.inf)
outcome = (f"IoU {level} after {run['seconds_to_target']:.1f} s ({run['steps_to_target']} steps)"
           if run["reached"] else f"IoU {level} not reached (best {run['best_iou']:.4f})")
print(f"{fast.max_steps}-step schedule: {outcome}; fit {run['fit_s']:.1f} s, "
      f"compilation {compile_s:.1f} s apart")
plots.plot_iou_curves({f"{fast.max_steps} steps, batch {fast.batch_size}": run["history"]}, level or 1.0)
plt.show()

# %% [markdown]
# The verdict (`against_seeds`, plumbing from `nailseg_common.measure.time_to_accuracy_report`):
# did this run reach the level, and how long did it take against the seeds' median? One run
# is one more draw from the seeds' spread of times, so its `±` is the 95 % interval of one
# more draw (`prediction_spread`: Student's t for the seeds' count times their standard
# deviation, widened by the uncertainty of their mean).
# On another device than the seeds' the seconds compare devices as well as runs.

# %%
print(f"this run on {device_name}; the seeds on {seeds['device'] if seeds else 'no file'}")
print(time_to_accuracy_report.against_seeds(run, by_seed, level, on_gpu))

# %% [markdown]
# ## How hard is a level? One pixel of outline
#
# Hard IoU counts pixels, and a small nail has few of them inside for each one on its
# outline. Before chasing a level, score what the labels allow: the validation masks
# themselves, grown or shrunk by one pixel (notebook 02's `grown`: a 3 × 3 maximum, or minimum), are a
# prediction whose outline is one pixel off all round and right everywhere else. The
# table gives their IoU per type of image, at the notebook's `image_size`: a level not far
# below it asks for an outline right to about a pixel, on every nail: one reason why the levels
# above the chosen one are reached by only some seeds, or none.

# %%
#| export training.fast_training
from nailseg_common.training.unet import per_image_iou


def mask_iou(predicted: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """Per-image hard IoU of {0, 1} masks (1 where both are empty), as validation scores it."""
    return per_image_iou(2.0 * predicted - 1.0, label)  # logits > 0 exactly where predicted


# %%
from nailseg_common.data.decoded import load_cache
from nailseg_common.data.preparation import read_split
from nailseg_common.training.unet import grown  # notebook 02's

labels = load_cache(data, cfg.image_size, "valid")[1].float()
off_by_one = pd.DataFrame({"type": read_split(data, "valid")["type"],
                           "one pixel larger": mask_iou(grown(labels, 1), labels).numpy(),
                           "one pixel smaller": mask_iou(grown(labels, -1), labels).numpy()})
outline = off_by_one.groupby("type").mean()
outline.loc["all"] = off_by_one.drop(columns="type").mean()
outline.round(3)

# %% [markdown]
# ## The input pipelines against the faster step
#
# A pipeline that kept up with 02's step may not keep up with this one. Each pipeline
# below trains the same compiled model at the faster step, in `pipeline_windows` short
# windows, and divides its images per second by the faster step's bound measured in this
# process (the last row of the ladder), with the spread of both sides' windows. Each
# pipeline's loader is also timed alone (`alone img/s`: its batches moved to the GPU and
# augmented there, nothing trained), which says what its own work costs. `pipeline_rates`
# (in `nailseg_common.measure.benchmark`) does both with notebook 05's timing functions.
# Notebook 05 measured DALI against 02's step; does it keep up with this faster one? Kornia and
# Albumentations fall behind by design, the lessons of notebooks 03 and 05. The dots are the ratios to 02's
# step from notebook 05's committed run. A pipeline keeps up when its whole interval lies
# within a tenth of the bound (above 0.9); a few windows give a wide interval, and then
# `keeping_up` (plumbing from `nailseg_common.measure.benchmark`, a line per pipeline) says it
# cannot tell rather than call it either way.

# %%
if run_pipelines:
    pipelines = [pipeline for pipeline in default_pipelines(fast, data, workers=[cfg.num_workers])
                 if pipeline.family in ("albumentations", "kornia", "dali")]
    table = pipeline_rates(pipelines, fast, reuse(model), faster["img_s"], pipeline_windows, faster["repeats"])
    old = load_results(REPO_ROOT / reference)
    before = pd.Series({n: p["train_ratio_to_bound"] for n, p in old["pipelines"].items()}) if old else None
    display(table.round(3))
    plots.plot_ratio_change(table["ratio to bound"], table["±"], before)
    plt.show()
    print("\n".join(keeping_up(table, pipeline_windows)))

# %% [markdown]
# The lesson of the course about input pipelines: "fast enough" is relative to the step.
# Albumentations on CPU workers is bounded by the CPU cores, whatever the GPU does, so every
# gain of the step widens its gap (notebook 05's exercise 1 measures the curve over worker
# counts). Kornia shares the GPU with the step:
# its cost per image is fixed, so its share grows as the step shrinks. DALI also runs on the
# GPU, but its operators are few, batched and overlap with the step through its prefetch
# queue: they run in the gaps the step leaves on the GPU. Whether those gaps are wide enough
# is a question for the profile.
#
# ## Where the time goes: a profile of the fastest step
#
# Where the step's time goes should come from a measurement. `torch.profiler` records
# `profile_steps` steps of the fastest step (the compiled model in the Trainer, on resident
# batches, the first step left out) and the kernels are grouped by what they do
# (`profile_step`, in `nailseg_common.measure.benchmark`, runs the steps through the Trainer as
# every run does; the recording callback and the groups' name patterns are in
# `nailseg_common.measure.profiling`).

# %%
kernels = profile_step(model, fast, resident[fast.batch_size], profile_steps)
busy_ms, wall_ms = kernels["ms per step"].sum(), 1e3 * fast.batch_size / faster["img_s"]
step_flops = recipe_flops["training"] * fast.batch_size
print("\n".join(busy_in_words(kernels, wall_ms, step_flops, peak_measured, "GPU" if on_gpu else "CPU")))
kernels.assign(share=kernels["ms per step"] / busy_ms).round(3)

# %% [markdown]
# Read the table with the FLOP count from the start: if the convolutions and matrix
# products ran at the measured peak, they would take `training FLOPs × batch ÷ peak`;
# `busy_in_words` (plumbing from `nailseg_common.measure.profiling`) prints that floor (on a
# GPU) next to what they took, and the table says what the rest of the step costs.
#
# The profile also answers the question the pipelines left open. DALI hides its work in the
# time the step leaves the GPU idle (`wall − busy`, above). What DALI adds to a step is
# `step ÷ ratio − step` (nothing, when its ratio is 1 or more); what its own work takes is a
# batch at its `alone img/s`. If DALI adds more than the idle time but no more than its own
# work, it falls behind because the faster step leaves it no room on the GPU: a lesson about
# sharing a GPU, not a fault of the pipeline. The check below compares the two, with the
# spread of DALI's ratio.

# %%
if run_pipelines and "dali" in table.index:
    dali = table.loc["dali"]
    ratio = dali["ratio to bound"]
    if on_gpu:  # a CPU's operators overlap on its threads: there, busy time says no more
        print(f"the faster step leaves the GPU idle {max(wall_ms - busy_ms, 0):.1f} ms of its {wall_ms:.1f} ms")
    added_ms, alone_ms = wall_ms * (1 / ratio - 1), 1e3 * fast.batch_size / dali["alone img/s"]
    print(Verdict("ms DALI adds to a step", added_ms, alone_ms, wall_ms * dali["±"] / ratio ** 2,
                  "DALI's own work, alone", higher_is_better=False) if ratio < 1 else
          f"DALI adds nothing measurable to a step: {ratio:.3f} ± {dali['±']:.3f} of the faster bound")

# %% [markdown]
# ## Summary
#
# - The metric that matters is time to a quality, from the start of `fit`; compilation is
#   a separate, one-off cost, so it is measured apart (`warm_up` runs every shape first) and
#   the compiled model is reused by every measurement.
# - A fused optimizer, a larger batch, a head at half resolution and `torch.compile` each
#   make the step faster; the table above says by how much on this machine, and the FLOP
#   count says how far the step still is from the GPU's peak. The head costs few FLOPs but
#   much memory traffic: the profile, not the FLOP count, finds such work.
# - A larger batch needs its own recipe (learning rate, warm-up, schedule), and the recipe
#   is part of the run's profile: `fast_batch_size`, `fast_lr`, `warmup_steps`,
#   `fast_max_steps`, `val_every_n_epochs`, `compile_model`, `fast_half_resolution_head`.
# - What a validation scores is part of the recipe too: an exponential moving average of
#   the weights, and each image averaged with its mirror image, smooth away the noise of the
#   last batches for the cost of a copy of the weights and a second forward pass.
# - One seed is not a result: the time to accuracy is reported over seeds, as a median and
#   range, from a committed file, at the highest level every seed reaches; one run's time is
#   judged against that median, with the 95 % interval of one more draw as its spread.
# - A level has a scale: score the validation masks off by one pixel all round before
#   chasing it. A level near that score asks for outlines right to about a pixel, and no
#   faster step buys that.
# - A faster step raises the bar for the input pipeline: re-measure the pipelines whenever
#   the step changes. A pipeline on the GPU hides its work in the step's idle time; a step
#   that keeps the GPU busy leaves it less, and the profile shows how much.
# - Notebook 08 takes the same training to two GPUs, as a script.
#
# ## Exercises
#
# 1. Turn the head back to full resolution (`fast_half_resolution_head=False`): what does
#    the step lose, and how much later does the run reach the level?
# 2. Add `mode="max-autotune"` to the compile (edit `FastNailSegmentation`): how much longer
#    does compilation take, and what does the step gain?
# 3. Try a larger `fast_batch_size` with a larger `fast_lr`: is the step faster per image,
#    and does the time to accuracy follow?
# 4. Validate every epoch (`val_every_n_epochs=1`): how much of the time to accuracy is
#    validation?
# 5. Try shorter schedules (`fast_max_steps`): a cosine schedule reaches its best near its
#    end, so a shorter one reaches the level sooner, if it reaches it at all. Which is the
#    shortest that does?
# 6. Score the masks off by two pixels (`grown(labels, 2)`), and at a smaller `image_size`:
#    how does the cost of an outline error change with the size of the nails in pixels?
# 7. Validate the weights as trained (`fast_ema_decay=0`, `fast_flip_average=False`): how
#    many more steps does the run take to the level? Then try a decay of 0.99: a longer
#    memory smooths more, but remembers older, worse weights.
# 8. Train at a smaller image size for the first half of the schedule and at the full size
#    for the second (progressive resizing): two `fit` calls with two data modules. Does it
#    reach the level sooner?
