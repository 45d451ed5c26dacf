"""Notebook 07's time to accuracy over several seeds on one GPU: ``results/time_to_accuracy_<gpu>.json``.

Each seed runs 07's recipe the way the notebook runs it: a ``FastNailSegmentation`` of the
profile's faster recipe, compiled and autotuned by ``warm_up`` (its seconds are the run's
``compile_s``), then ``time_to_accuracy`` from the start of ``fit`` to the first validation at
the target IoU, on ``training_datamodule``'s batches (DALI where it runs) seeded with the
seed. Seeds run one after another in one process, alone on the GPU, so their seconds compare;
later seeds reuse the compiled code of the process, so their ``compile_s`` is short. Every
finished seed is appended to ``--runs`` (JSON lines), so that a series can span several
calls; ``--report`` then measures the fastest step (07's bound: the compiled model on resident
batches) and writes the results file from every run in ``--runs``:

    python -m tools.time_to_accuracy_seeds --seeds 0,1,2 --runs /root/keep/seeds.jsonl
    python -m tools.time_to_accuracy_seeds --seeds 3,4 --runs /root/keep/seeds.jsonl \\
        --report results/time_to_accuracy_h200.json

``--profile smoke`` runs the same code on a CPU in a minute (the target is out of its reach).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

import pytorch_lightning as pl

from nailseg_common.core.files import write_json
from nailseg_common.core.statistics import median_range
from nailseg_common.data.preparation import ensure_prepared
from nailseg_common.measure.benchmark import reuse, train_loader_of, training_datamodule
from nailseg_common.measure.timing import measure_training, resident_batches
from nailseg_common.setup.environment import provenance
from nailseg_common.setup.paths import DataLocation
from nailseg_common.setup.profiles import Profile, select_profile, set_matmul_precision
from nailseg_common.training.fast_training import (
    FastNailSegmentation,
    faster_recipe,
    recipe_model,
    seconds_to_level,
    time_to_accuracy,
    warm_up,
)

RUN_FIELDS = ("seed", "reached", "seconds_to_target", "steps_to_target", "best_iou", "compile_s",
              "fit_s", "steps", "history")


def recipe_of(profile_name: str) -> tuple[Profile, DataLocation, Profile]:
    """The profile, its prepared data and 07's faster recipe of it."""
    cfg = select_profile(profile_name)
    data = ensure_prepared(cfg, None, progress=False)
    return cfg, data, faster_recipe(cfg, data)


def warmed_up_model(cfg: Profile, fast: Profile, data: DataLocation,
                    seed: int) -> tuple[FastNailSegmentation, float]:
    """07's model from the weights of ``seed``, compiled and autotuned by ``warm_up`` on the
    batches of ``seed``, and the seconds that took."""
    pl.seed_everything(seed, workers=True, verbose=False)
    model = recipe_model(fast)
    return model, warm_up(model, training_datamodule(data, fast, seed), fast)


def run_seed(cfg: Profile, fast: Profile, data: DataLocation, seed: int,
             target_iou: float) -> tuple[dict, FastNailSegmentation]:
    """One timed run of 07's recipe from the weights and batches of ``seed``."""
    model, compile_s = warmed_up_model(cfg, fast, data, seed)
    run = time_to_accuracy(model, training_datamodule(data, fast, seed), fast, target_iou)
    record = {"seed": seed, "compile_s": compile_s, **run}
    return {field: record[field] for field in RUN_FIELDS}, model


def fastest_step(fast: Profile, data: DataLocation, model: FastNailSegmentation, windows: int) -> dict:
    """07's last row of the step ladder: ``model`` (compiled) on resident batches, in img/s."""
    batches = resident_batches(train_loader_of(training_datamodule(data, fast)), fast.device)
    steps = fast.bench_steps
    return measure_training(batches, fast, steps // 3, steps, windows, make_model=reuse(model))


def summarise(runs: list[dict], target_iou: float, target_s: float) -> dict:
    """Median and range of the time to target (a seed that never reached it counts as
    slower than every seed that did), of the steps, best IoU and compilation."""
    reached = [run for run in runs if run["reached"]]
    seconds = seconds_to_level(runs, target_iou)
    median_s = statistics.median(seconds)
    summary = {"seeds": len(runs), "reached": len(reached), "target_iou": target_iou,
               "target_s": target_s,
               "median_seconds_to_target": median_s if math.isfinite(median_s) else None,
               "best_iou": median_range([run["best_iou"] for run in runs]),
               "compile_s": median_range([run["compile_s"] for run in runs])}
    if reached:
        summary["seconds_to_target"] = median_range([run["seconds_to_target"] for run in reached])
        summary["steps_to_target"] = median_range([run["steps_to_target"] for run in reached])
    summary["met"] = len(reached) == len(runs) and median_s <= target_s
    if math.isfinite(median_s):
        summary["median_over_target"] = median_s / target_s
    return summary


def report(cfg: Profile, fast: Profile, runs: list[dict], step: dict, target_iou: float,
           target_s: float, command: str) -> dict:
    recipe = {"encoder": fast.encoder, "image_size": fast.image_size, "batch": fast.batch_size,
              "peak_lr": fast.lr, "warmup_steps": cfg.warmup_steps, "max_steps": fast.max_steps,
              "val_every_n_epochs": cfg.val_every_n_epochs, "compile_model": cfg.compile_model,
              "half_resolution_head": fast.fast_half_resolution_head, "ema_decay": fast.fast_ema_decay,
              "flip_average": fast.fast_flip_average, "precision": fast.precision}
    return {
        "what": ("Notebook 07's recipe timed to the first validation with hard IoU >= target_iou "
                 "(threshold 0.5, per image, averaged over the synthetic validation set), from the "
                 "start of fit, one run per seed (the seed of the initial weights and of the data "
                 "module's augmentations; DALI's shuffling order is the same for every seed), one "
                 "process alone on the GPU; compilation (compile_s, warm_up) apart. step_img_s: "
                 "the compiled step on resident batches, median of its windows."),
        "command": command, **provenance(), "profile": cfg.name, "recipe": recipe,
        "summary": summarise(runs, target_iou, target_s),
        "step_img_s": {"median": step["img_s"], "min": step["img_s_min"], "max": step["img_s_max"],
                       "windows": len(step["repeats"])},
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> dict | None:
    """Runs the seeds; with ``--report``, writes and returns the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds to run")
    parser.add_argument("--runs", type=Path, required=True, help="JSON lines: one finished seed each")
    parser.add_argument("--report", type=Path, help="write the results file from every run in --runs")
    parser.add_argument("--profile", default="gpu")
    parser.add_argument("--target-iou", type=float, default=0.83, help="the level every seed is timed to")
    parser.add_argument("--target-s", type=float, default=30.0, help="the median time to meet, in seconds")
    parser.add_argument("--windows", type=int, default=3, help="timing windows of the fastest step")
    args = parser.parse_args(argv)
    cfg, data, fast = recipe_of(args.profile)
    set_matmul_precision(cfg)
    model = None
    for seed in [int(seed) for seed in args.seeds.split(",") if seed]:
        run, model = run_seed(cfg, fast, data, seed, args.target_iou)
        print(json.dumps({key: value for key, value in run.items() if key != "history"}), flush=True)
        args.runs.parent.mkdir(parents=True, exist_ok=True)
        with args.runs.open("a") as lines:
            lines.write(json.dumps(run) + "\n")
    if args.report:
        if model is None:  # no seed in this call: a model compiled here for the step
            model, _ = warmed_up_model(cfg, fast, data, seed=0)
        step = fastest_step(fast, data, model, args.windows)
        runs = sorted((json.loads(line) for line in args.runs.read_text().splitlines()),
                      key=lambda run: run["seed"])
        seeds = ",".join(str(run["seed"]) for run in runs)
        command = (f"python -m tools.time_to_accuracy_seeds --profile {cfg.name} --seeds {seeds} "
                   f"--target-iou {args.target_iou} --target-s {args.target_s} --runs RUNS "
                   f"--report {args.report}  (the seeds over one or more calls, each alone on the GPU)")
        results = report(cfg, fast, runs, step, args.target_iou, args.target_s, command)
        write_json(args.report, results)
        print(json.dumps(results["summary"], indent=1), f"\nfastest step {step['img_s']:.0f} img/s")
        return results
    return None


if __name__ == "__main__":
    main()
