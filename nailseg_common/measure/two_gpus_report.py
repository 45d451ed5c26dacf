"""What notebook 08 reports of its runs on one device and on several: the IoU level they are
timed to, the devices and the plans, the record of both runs, their speed and time to
accuracy, the checks (every sample once an epoch, the same validation), where a step's time
goes, and the committed record beside this run's."""

from __future__ import annotations

import itertools
import json
import math
import statistics
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import torch
from IPython.display import display

from nailseg_common.core.statistics import Verdict, mean_spread, median_range, ratio_spread
from nailseg_common.measure.plots import (
    COLUMN_INCHES,
    column_subplots,
    plot_devices_speed,
    plot_iou_curves,
)
from nailseg_common.setup.dali import dali_status
from nailseg_common.setup.paths import REPO_ROOT
from nailseg_common.training.fast_training import common_level
from nailseg_common.training.multi_gpu import expected_missing, shard_sizes

VALIDATION_METRICS = ("val_dice", "val_iou", "val_soft_dice", "val_loss")


def iou_level(target_iou: float | None, seed_results: str, iou_levels) -> float | None:
    """The IoU level the runs are timed to, printed: ``target_iou`` if given, else the highest
    of ``iou_levels`` that every seed of ``seed_results`` (notebook 07's runs) reaches."""
    seeds = json.loads((REPO_ROOT / seed_results).read_text())["runs"]
    level = target_iou or common_level(seeds, iou_levels)
    print(f"IoU level: {level} ({'given' if target_iou else f'every seed of {seed_results} reaches it'})")
    return level


def show_devices(n_devices: int, on_gpu: bool) -> None:
    """Whether DALI runs here, and what the multi-device runs run on."""
    print(dali_status())
    print(f"{n_devices} device(s) for the multi-device runs: "
          + (f"{torch.cuda.device_count()} GPU(s) visible" if on_gpu
             else "CPU processes talking through gloo (no GPU here)"))


def plan_table(plans: dict[str, dict], train_samples: int, batch_size: int) -> pd.DataFrame:
    """A row per :func:`device_plan`: its batches, learning rate and steps, and what DALI's
    shards make of ``train_samples`` training images at ``batch_size`` per device."""
    rows = {}
    for name, plan in plans.items():
        k = plan["devices"]
        batches = train_samples // (k * batch_size)
        rows[name] = {"devices": k, "batch per device": batch_size, "global batch": k * batch_size,
                      "peak lr": plan["lr"], "warm-up steps": plan["warmup"], "steps": plan["steps"],
                      "training shards": shard_sizes(train_samples, k),
                      "batches per rank per epoch": batches, "epochs": plan["steps"] / max(batches, 1),
                      "left out per epoch": expected_missing(train_samples, k, batch_size)}
    return pd.DataFrame.from_dict(rows, orient="index")


def combine(one: dict, many: dict, validation: dict[int, dict], ddp_one: dict | None = None,
            later: dict[str, list[dict]] | None = None) -> dict:
    """The launches as one record: both runs, the validation comparison, coverage, one
    device under DDP (``ddp_one``), and the runs of every seed (``later``: the further
    seeds' runs, under the names ``combine`` gives ``one`` and ``many``)."""
    first, last = validation[min(validation)], validation[max(validation)]
    differences = {name: abs(first[name] - last[name]) for name in VALIDATION_METRICS}
    runs = {"one device": one, f"{many['world_size']} devices": many}
    later = later or {}
    return {"date": many["date"], "devices": many["devices"], "versions": many["versions"],
            "python": many["python"], "runs": runs, "ddp_on_one_device": ddp_one,
            "seeds": {name: [run, *later.get(name, [])] for name, run in runs.items()},
            "speedup": (many["train_img_s"] / one["train_img_s"]
                        if many["train_img_s"] and one["train_img_s"] else None),
            "validation": {"by_devices": {k: {name: v[name] for name in VALIDATION_METRICS}
                                          for k, v in validation.items()},
                           "abs_difference": differences,
                           "max_abs_difference": max(differences.values()),
                           "identical": all(d == 0 for d in differences.values())},
            "coverage": many["coverage"]}


def read_record(path: Path) -> dict | None:
    """A committed results file, None if it is missing."""
    return json.loads(path.read_text()) if path.exists() else None


def committed_record(reference: str, gpus: int) -> dict | None:
    """The committed results ``reference`` (relative to the repository) to show beside this
    run's, or None, saying why: this run on ``gpus`` GPUs (0: none) is itself the record to
    commit when there are two or more, or there is no such file."""
    if gpus > 1:
        print(f"this run is on {gpus} GPUs: it is the record to commit as {reference}")
        return None
    committed = read_record(REPO_ROOT / reference)
    if committed is None:
        print(f"no {reference}: run this notebook on two GPUs and commit its results.json there")
    return committed


def show_record(record: dict, label: str, level: float) -> None:
    """A record in full but for its step table: where it comes from (:func:`describe`), its
    speed, its seeds and its checks."""
    describe(record, label)
    show_speed(record, level)
    show_seeds(record, level)
    show_checks(record)


def describe(record: dict, label: str) -> None:
    """Where a record comes from: date, devices, the encoder trained, Python and library
    versions."""
    versions = ", ".join(f"{name} {version}" for name, version in record["versions"].items())
    encoders = sorted({run["config"]["profile"]["encoder"] for run in record["runs"].values()})
    print(f"{label}: {record['date']}, {record['devices'][0]} × {len(record['devices'])}, "
          f"encoder {', '.join(encoders)}, Python {record['python']}; {versions}")


def devices_table(record: dict) -> pd.DataFrame:
    return pd.DataFrame.from_dict({name: {
        "devices": run["world_size"],
        "global batch": run["world_size"] * run["config"]["profile"]["batch_size"],
        "peak lr": run["config"]["lr"], "steps": run["steps"],
        "train img/s": run["train_img_s"], "compile s": run["compile_s"], "fit s": run["fit_s"],
        "best IoU": run["best_iou"]}
        for name, run in record["runs"].items()}, orient="index")


def seconds_to(history: list[dict], level: float) -> float | None:
    """Seconds from the start of ``fit`` to the first validation with ``val_iou >= level``."""
    return next((row["seconds"] for row in history if row["val_iou"] >= level), None)


def window_rates(run: dict) -> list[float]:
    """The training images/s of every epoch of ``run`` but the first (the warm-up) and the
    one the step profile slowed down."""
    profiled = (run.get("step_profile") or {}).get("epoch")
    return [epoch["images"] / epoch["seconds"] for index, epoch in enumerate(run["epochs"])
            if index > 0 and epoch.get("epoch", index) != profiled]


def speedup_verdict(record: dict, target: float, basis: str) -> Verdict | None:
    """Images/s on N devices over one against ``target``, spread from the epochs' windows."""
    one, many = record["runs"].values()
    rates = window_rates(many), window_rates(one)
    if not rates[0] or not rates[1]:
        return None
    return Verdict(f"images/s, {many['world_size']} devices ÷ one", statistics.median(rates[0])
                   / statistics.median(rates[1]), target, ratio_spread(*rates), basis)


def show_speed(record: dict, level: float) -> None:
    """Images/s and time to IoU ``level`` of both runs, and the speed-up against one device."""
    runs = record["runs"]
    table = devices_table(record).assign(**{f"s to IoU {level}": [
        seconds_to(run["history"], level) for run in runs.values()]})
    display(table.round({"train img/s": 1, "compile s": 1, "fit s": 1, "best IoU": 3,
                         f"s to IoU {level}": 1}))
    _, (bars, curves) = column_subplots(1, 2, figsize=(COLUMN_INCHES, 3.4))  # the blog's column
    plot_devices_speed({name: run["train_img_s"] for name, run in runs.items()}, ax=bars)
    plot_iou_curves({name: run["history"] for name, run in runs.items()}, level, ax=curves)
    plt.show()
    verdict = speedup_verdict(record, 1.0, "one device, same run")
    print(verdict or "too few epochs to time (the first epoch is left out)")
    one, many = (seconds_to(run["history"], level) for run in runs.values())
    if one and many:
        print(f"time to IoU {level}: {one:.1f} s on one device, {many:.1f} s on "
              f"{list(runs.values())[1]['world_size']} ({many / one - 1:+.0%})")


def seed_ratios(record: dict, level: float) -> pd.DataFrame:
    """A row per seed: images/s and seconds to IoU ``level`` on one device and on N, and
    their ratios (the same seed: the same initial weights on both)."""
    (one_name, ones), (many_name, manys) = record["seeds"].items()
    rows = {}
    for one, many in zip(ones, manys):
        one_s, many_s = seconds_to(one["history"], level), seconds_to(many["history"], level)
        rows[one["config"]["seed"]] = {
            f"img/s, {one_name}": one["train_img_s"], f"img/s, {many_name}": many["train_img_s"],
            "img/s ratio": (many["train_img_s"] / one["train_img_s"]
                            if one["train_img_s"] and many["train_img_s"] else None),
            f"s to IoU {level}, {one_name}": one_s, f"s to IoU {level}, {many_name}": many_s,
            "time ratio": many_s / one_s if one_s and many_s else None}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("seed")


def show_seeds(record: dict, level: float) -> None:
    """Both ratios of every seed, then their median and range over the seeds."""
    if "seeds" not in record:
        print("one seed in this record: no spread over seeds")
        return
    table = seed_ratios(record, level)
    display(table.round(2))
    many_name = list(record["seeds"])[1]
    for column, what in (("img/s ratio", "images/s"), ("time ratio", f"time to IoU {level}")):
        values = table[column].dropna().tolist()
        missing = len(table) - len(values)
        spread = median_range(values) if values else None
        summary = (f"median {spread['median']:.2f} (range {spread['min']:.2f}–{spread['max']:.2f})"
                   if spread else "not measured")
        print(f"{what}, {many_name} ÷ one, over {len(values)} seed(s): {summary}"
              + (f"; {missing} seed(s) without it (level not reached, or too few epochs)"
                 if missing else ""))
    print("\n".join(bottom_line(record, level)))


TIME_GOAL = 0.75  # two devices' time to the level over one's: the course's goal for a second GPU


def reaching(history: list[dict], level: float) -> dict | None:
    """The first validation with ``val_iou >= level``, None when none reaches it."""
    return next((row for row in history if row["val_iou"] >= level), None)


def level_costs(run: dict, level: float) -> dict | None:
    """What a run paid to reach IoU ``level``: its images (steps × global batch), the seconds
    those images take at its training speed, the rest of its seconds to the level (start-up,
    validations), and the seconds between its validations (how finely the level is timed)."""
    row = reaching(run["history"], level)
    if row is None or not run["train_img_s"]:
        return None
    images = row["step"] * run["world_size"] * run["config"]["profile"]["batch_size"]
    times = [r["seconds"] for r in run["history"]]
    return {"images": images, "seconds": row["seconds"], "img_s": run["train_img_s"],
            "training_s": images / run["train_img_s"],
            "other_s": row["seconds"] - images / run["train_img_s"],
            "validation_every_s": statistics.median(b - a for a, b in itertools.pairwise(times))
            if len(times) > 1 else None}


def bottom_line(record: dict, level: float) -> list[str]:
    """Why N devices reach IoU ``level`` as soon as they do, over the seeds: the images each
    needs to the level, the time those take at each's speed, the other seconds, the
    validation interval; then the time ratio against ``TIME_GOAL``."""
    (one_name, ones), (many_name, manys) = record["seeds"].items()
    pairs = [(level_costs(one, level), level_costs(many, level)) for one, many in zip(ones, manys)]
    pairs = [(one, many) for one, many in pairs if one and many]
    if not pairs:
        return [f"no seed reached IoU {level} on both: no bottom line"]

    def median(key: str, side: int) -> float:
        values = [pair[side][key] for pair in pairs if pair[side][key] is not None]
        return statistics.median(values) if values else math.nan

    ratios = [many["seconds"] / one["seconds"] for one, many in pairs]
    lines = [
        (f"to IoU {level}, median over {len(pairs)} seed(s): {one_name} {median('images', 0):,.0f} images, "
         f"{many_name} {median('images', 1):,.0f} ({median('images', 1) / median('images', 0):.2f}×)"),
        (f"  those images at each run's speed: {median('training_s', 0):.1f} s and {median('training_s', 1):.1f} s; "
         f"the other seconds (start-up, validations): {median('other_s', 0):.1f} s and {median('other_s', 1):.1f} s"),
        (f"  a validation every {median('validation_every_s', 0):.1f} s and "
         f"{median('validation_every_s', 1):.1f} s: each time is known to about one interval")]
    images = median("images", 1) / median("images", 0)
    speed = statistics.median(many["img_s"] / one["img_s"] for one, many in pairs)
    lines.append(f"  at {images:.2f}× the images, {TIME_GOAL}× the time needs {images / TIME_GOAL:.2f}× the "
                 f"images/s; these runs gave {speed:.2f}×")
    verdict = Verdict(f"time to IoU {level}, {many_name} ÷ one (mean of {len(ratios)} seed(s))",
                      statistics.fmean(ratios), TIME_GOAL, mean_spread(ratios), "the goal", higher_is_better=False)
    return [*lines, str(verdict)]


def show_checks(record: dict) -> None:
    """The coverage of every complete epoch and the validation on one device and on several."""
    coverage = pd.DataFrame(record["coverage"] or [])
    if not coverage.empty:
        coverage["per_rank"] = coverage["per_rank"].map(lambda sizes: " + ".join(map(str, sizes.values())))
        coverage["duplicates"] = coverage["duplicates"].map(len)
        coverage["unknown"] = coverage["unknown"].map(len)
        display(coverage.set_index("epoch").head(4))
        print(f"{coverage['ok'].sum()} of {len(coverage)} complete epochs saw each training image "
              "once, but the expected DROP remainder" + ("" if coverage["ok"].all()
                                                          else ": COVERAGE WRONG in the others"))
    checked = record["validation"]
    display(pd.DataFrame({f"{k} device(s)": v for k, v in checked["by_devices"].items()}
                         | {"|difference|": checked["abs_difference"]}))
    print("validation metrics on one device and on several: "
          + ("identical" if checked["identical"]
             else f"differ by at most {checked['max_abs_difference']:.1e}"))


DDP_ON_ONE = "one device under DDP"
NCCL_IN_ALL = "NCCL kernels, hidden or not"
REST = "the rest: epoch boundary less the profiler's cost"
STEP_PARTS = ("compute (kernels other than NCCL's)", "all-reduce not hidden", "idle within the steps", REST)


def step_breakdown(runs: dict[str, dict]) -> pd.DataFrame | None:
    """Milliseconds per training step of each run, by part, the parts adding up to its time per
    step (the median of its unprofiled epochs): the three parts of its profiled steps (their
    wall), then the rest, the time per step less that wall: the epoch boundary spread over the
    steps, less what the profiler added to the profiled steps (negative when the profiler
    added more). None without step profiles."""
    columns = {}
    for name, run in runs.items():
        profiled = run.get("step_profile")
        later = [epoch for index, epoch in enumerate(run["epochs"]) if index > 0
                 and epoch.get("epoch", index) != (profiled or {}).get("epoch")]
        if not profiled or not later:
            return None
        batch = run["world_size"] * run["config"]["profile"]["batch_size"]
        per_step_ms = statistics.median(1e3 * e["seconds"] * batch / e["images"] for e in later)
        parts = (profiled["compute_ms"], profiled["all_reduce_not_hidden_ms"], profiled["idle_ms"],
                 per_step_ms - profiled["wall_ms"])
        columns[name] = dict(zip(STEP_PARTS, parts)) | {
            "profiled step": profiled["wall_ms"], "time per step": per_step_ms, "images per step": batch,
            NCCL_IN_ALL: profiled.get("nccl_ms")}  # hidden or not
    return pd.DataFrame(columns)


def explain_speedup(record: dict) -> None:
    """The breakdown table, and the difference per step between the runs, part by part, with
    how much of it the profiler's cost leaves unresolved."""
    (one_name, one), (many_name, many) = record["runs"].items()
    ddp_one = record.get("ddp_on_one_device")
    table = step_breakdown({one_name: one, **({DDP_ON_ONE: ddp_one} if ddp_one else {}),
                            many_name: many})
    if table is None:
        print("no step profiles in this record (runs of fewer than two epochs)")
        return
    display(table.round(2))
    for name in table.columns:
        rest = table.loc[REST, name]
        if rest < 0:
            print(f"{name}: the profiled steps took {-rest:.2f} ms longer than an unprofiled step: "
                  "the profiler added at least that to the parts above")
    difference = (table[many_name] - table[one_name]).drop(["time per step", "images per step",
                                                             "profiled step", NCCL_IN_ALL])
    if difference.isna().any():
        print("no GPU: the profile holds wall time only, the parts are not measured")
        return
    one_ms, many_ms = table.loc["time per step", one_name], table.loc["time per step", many_name]
    devices = table.loc["images per step", many_name] / table.loc["images per step", one_name]
    print(f"a step on {devices:.0f} devices takes {many_ms - one_ms:+.1f} ms longer than on one "
          f"({one_ms:.1f} ms), so the images/s grow {devices:.0f} × {one_ms:.1f} / {many_ms:.1f} "
          f"= {devices * one_ms / many_ms:.2f} ×; the difference by part:")
    for part, ms in difference.sort_values(ascending=False).items():
        print(f"  {part:50s} {ms:+6.2f} ms")
    if table.loc[REST].lt(0).any():
        print(f"  the parts of profiled steps carry the profiler's cost, which differs between the runs "
              f"by up to {abs(difference[REST]):.1f} ms a step: a part's change smaller than that is not resolved")
    if DDP_ON_ONE in table:
        own_ms = table.loc["time per step", DDP_ON_ONE] - one_ms
        print(f"of the {many_ms - one_ms:+.1f} ms, DDP's own work (one device under DDP) takes "
              f"{own_ms:+.1f} ms and the other GPU with NCCL {many_ms - one_ms - own_ms:+.1f} ms")
    exposed = table.loc["all-reduce not hidden", many_name]
    print(speedup_verdict(record, devices * one_ms / (one_ms + exposed),
                          f"{devices:.0f}× less the exposed all-reduce"))
