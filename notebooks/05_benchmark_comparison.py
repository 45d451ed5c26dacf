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
#     description: Albumentations on CPU workers, Kornia on the GPU and NVIDIA DALI
#       measured against the bound of a training step with data already on the GPU,
#       on an H100.
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
# "Faster" is a claim; this notebook measures it the way a careful engineer would: the same
# model, batch, image size and precision for every pipeline, a warm-up, a synchronised GPU
# before every clock reading, several repeats with their spread, and beside every pipeline
# the **bound**: the same training step fed with batches that are already on the GPU, so no
# input pipeline can do better.
#
# ## What you'll learn
#
# - what to time (the loader alone, the whole training step, the bound) and why all three
# - how to time GPU work honestly: warm-up, `torch.cuda.synchronize()`, repeats, median and spread
# - how to read GPU and CPU utilisation next to throughput
# - how the three pipelines compare on an H100, and what that means for your own machine
#
# **CPU or GPU?** The notebook runs everywhere. On a machine without a GPU it measures what can
# run there at a small size (the `smoke` or `cpu` profile) and shows the committed H100
# reference results beside it, each labelled with its device, versions and date. On a GPU the
# live run uses the full size and takes about five minutes.

# %% tags=["parameters"]
profile = ""       # "smoke", "cpu" or "gpu"; "" = $NAILSEG_PROFILE, else chosen from the hardware
data_root = ""     # a real dataset (Images/1..4, Masks/1..4); "" = the synthetic set
num_epochs = None  # None = the profile's value (the benchmark counts steps, not epochs)
run_live = True    # measure this machine now
workers = None     # Albumentations worker counts to try, e.g. [2, 4]; None = the profile's
reference = "results/benchmark_h100.json"  # committed GPU results, relative to the repository

# %%
from nailseg_common.environment import environment_report
from nailseg_common.preparation import ensure_prepared
from nailseg_common.profiles import select_profile

cfg = select_profile(profile, num_epochs=num_epochs)
print(environment_report(cfg))
data = ensure_prepared(cfg, data_root)
print("data:", data.raw)

# %% [markdown]
# ## Method
#
# Three measurements per pipeline, all in one run on one machine:
#
# 1. **Loader alone.** Take batches from the pipeline's training loader, move them to the
#    device the way Lightning does (`non_blocking=True`, from pinned memory), and, for Kornia,
#    run the augmentation there. Nothing trains. This is how fast the pipeline *can* deliver
#    augmented batches.
# 2. **Training step.** The same `LitNailSegmentation` (forward, Lovász loss, backward, AdamW
#    step), driven by the course's `make_trainer` without logging, checkpoints or validation,
#    fed by that loader. This is what a training run gets.
# 3. **The bound.** The same training step on a fixed set of batches that already sit in GPU
#    memory. It is measured before the pipelines and again after them; the two halves
#    agreeing shows the GPU's clocks did not drift during the run.
#
# Every measurement first runs a warm-up (cuDNN picks its kernels, workers start and the
# batches they prefetched are used up), then `repeats` windows of `steps` batches. Each
# window starts and ends with `torch.cuda.synchronize()` before `time.perf_counter()`: the
# GPU runs asynchronously, so without it a clock measures how fast Python *queued* work, not
# how fast the GPU did it. Each window gives one images/s figure; we report the median and
# the min–max spread, and the ratio `train img/s ÷ bound img/s`. A thread samples GPU
# utilisation through NVML while the windows run; `psutil` gives the share of all CPU cores
# that was busy.
#
# The pipelines come from their own modules; the harness only times them:

# %%
from nailseg_common.benchmark import default_pipelines, worker_counts
from nailseg_common.dali_pipelines import dali_status

pipelines = default_pipelines(cfg, data, workers)
print(dali_status())
print(f"Albumentations worker counts: {list(workers or worker_counts(cfg))}")
for p in pipelines:
    print(f"  {p.name:<20} {'GPU augmentation in the step' if p.make_augmentation else 'augmented by the loader'}")
print(f"batch {cfg.batch_size}, {cfg.image_size} px, {cfg.encoder} U-Net, {cfg.precision}; "
      f"{cfg.bench_repeats} windows of {cfg.bench_steps} batches each")

# %% [markdown]
# ## Live run on this machine
#
# This is the benchmark `make bench` runs (`python -m nailseg_common.benchmark`), at this
# profile's size. Each line reports a pipeline once both of its measurements are done.

# %%
from nailseg_common.benchmark import results_label, run_benchmark, stability_warning

live = run_benchmark(cfg, pipelines, config={"data": data.raw.name}) if run_live else None
if live is not None:
    print("live:", results_label(live))
    print(stability_warning(live) or "The bound was stable between the start and the end of the run.")

# %% [markdown]
# ## The reference: an H100
#
# The course's reference numbers were measured with the full `gpu` profile (U-Net with a
# ResNet-34 encoder, bf16, batch 32, 384×384 px, 1200 synthetic images) on one NVIDIA H100
# and committed to the repository. Compare them with your live run only through the labels:
# they come from another machine, another day and a larger size.

# %%
from nailseg_common.benchmark import load_results
from nailseg_common.paths import REPO_ROOT

committed = load_results(REPO_ROOT / reference)
if committed is None:
    print(f"No reference results yet: {reference} has not been committed. Run "
          "`python -m nailseg_common.benchmark --profile gpu --out " + reference + "` on a GPU.")
else:
    print("reference:", results_label(committed))
    print(stability_warning(committed) or "The bound was stable between the start and the end of the run.")

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
# Kornia cache loader needs at most two; DALI runs its own threads instead). Utilisation
# columns are medians over the training windows; CPU utilisation is the busy share of all
# cores, the benchmark's own process included.

# %%
from nailseg_common.benchmark import summary_table

for name, results in result_sets.items():
    print(f"{name}: {results_label(results)}")
    print(summary_table(results).round(2).to_string(), end="\n\n")

# %% [markdown]
# ## Targets
#
# The course promises, on the H100: DALI training at ≥ 0.97 of the bound with its loader
# alone at ≥ 5000 images/s, and Kornia training at ≥ 0.90 of the bound. The check below reads
# the numbers from the results file; where a target is missed it says by how much and gives
# the time budget of one batch: the step at the bound, the input pipeline alone, and the
# ratio to expect if the input work ran *before* each step on the same GPU instead of
# alongside it.

# %%
from nailseg_common.benchmark import describe_targets

if committed is None:
    print("No committed reference results: the targets cannot be checked yet.")
else:
    print(describe_targets(committed))
if live is not None and live["cuda"] is not None:
    print("\nlive run on this GPU:")
    print(describe_targets(live))

# %% [markdown]
# Reading the budget: Kornia's augmentation runs inside the training step, on the same CUDA
# stream, so its time adds to every step and the "serial" ratio is what to expect. DALI runs
# its graph on its own stream with a prefetch queue, so it can overlap with the step and get
# close to the bound, as long as the GPU has room for both. Albumentations overlaps too, in
# other processes, but only up to what the CPU cores deliver.
#
# ## What this means for your machine
#
# The H100 makes the point sharply because its step is so fast. The same arithmetic applies to
# any machine: how many images per second does one training step consume, and how many can
# your input pipeline deliver?

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
# - **Without a GPU** the training step itself is the slow part: expect every pipeline near
#   the bound (your live run above shows whether yours is; on a busy machine the windows
#   scatter, so look at the spread before reading anything into a ratio above 1). Moving
#   augmentation "to the GPU" gains nothing there; Albumentations with a couple of workers is
#   the sensible choice.
# - **On a mid-range GPU** the step is several times slower than on an H100, so fewer CPU
#   workers keep up. Compare the bound with Albumentations at your core count: if the ratio
#   is near 1, the CPU pipeline is fine.
# - **On a fast GPU with few CPU cores** (cloud instances often give 8–16 cores per GPU), the
#   CPU pipeline leaves the GPU idle most of the time. That is where moving augmentation to
#   the GPU, or the whole pipeline to DALI, pays off.
# - Rerun this notebook with `profile = "gpu"` (or `make bench`) on your own GPU: the live
#   numbers then answer the question for your hardware directly.

# %% [markdown]
# ## Summary
#
# - Time the loader alone, the full training step, and the bound (batches already on the
#   device), in the same run, with the same model, batch, image size and precision.
# - Warm up, synchronise the GPU before reading a clock, repeat, and report the median with
#   its spread; record the device, versions and date with the numbers.
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
# 3. Explain a missed target with `nailseg_common.training.DataWaitTimer`: train a few
#    steps of the Kornia pipeline with it and compare the waiting time per step with the
#    gap between the step and the bound.
# 4. Kornia's augmentation adds to every step. Estimate from the table how much faster the
#    Kornia pipeline would train if the augmentation ran on a second CUDA stream, overlapping
#    with the previous step.
