"""What notebook 07 says of its runs: the faster recipe and its FLOPs in words, the committed
file of its seeds and the levels they reach, and one timed run against the seeds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from nailseg_common.core.statistics import Verdict, prediction_spread
from nailseg_common.measure.profiling import datasheet_tflops
from nailseg_common.setup.profiles import Profile


def describe_recipe(course: Profile, fast: Profile) -> str:
    """One line: the course's step (``course``) and the faster recipe (``fast``, from
    ``faster_recipe``), every field that the faster recipe changes."""
    return (f"the course's step: batch {course.batch_size}, lr {course.lr}; the faster recipe: batch "
            f"{fast.batch_size}, peak lr {fast.lr}, {fast.warmup_steps} warm-up steps, "
            f"{fast.max_steps} steps, validation every {fast.val_every_n_epochs} epoch(s), "
            f"half-resolution head {fast.fast_half_resolution_head}, compile {fast.compile_model}; "
            f"validations score an average of the weights (decay {fast.fast_ema_decay}, 0: off), "
            f"flip-averaged {fast.fast_flip_average}")


def read_seeds(path: Path) -> dict | None:
    """The seeds' file that ``tools/time_to_accuracy_seeds.py`` writes, None if it is missing."""
    return json.loads(path.read_text()) if path.exists() else None


def describe_seeds(seeds: dict | None, name: str) -> str:
    """Where the seeds' file ``name`` comes from, or how to write it when it is missing."""
    if seeds is None:
        return f"no {name}: see `python -m tools.time_to_accuracy_seeds --help`"
    return (f"{name}: {len(seeds['runs'])} seeds on {seeds['device']}, torch {seeds['versions']['torch']}, "
            f"{seeds['date']}")


def levels_table(by_seed: pd.DataFrame) -> pd.DataFrame:
    """A row per level of ``by_seed`` (a column per level, a row per seed, its seconds to the
    level, ``math.inf`` where it misses it): how many seeds reach it, their median, fastest
    and slowest seconds (the slowest of those that reach it); NaN where a time is infinite."""
    reached = by_seed < math.inf
    return (pd.DataFrame({"seeds reaching it": reached.sum(), "median s": by_seed.median(),
                          "fastest s": by_seed.min(), "slowest s": by_seed[reached].max()})
            .replace(math.inf, float("nan")).rename(index="IoU {:.2f}".format).round(1))


def against_seeds(run: dict, by_seed: pd.DataFrame, level: float, on_gpu: bool) -> Verdict | str:
    """``run`` (``time_to_accuracy``'s) against the median of the seeds' seconds to ``level``,
    with the 95 % interval of one more draw (``prediction_spread``); when the run missed the
    level, a line that says why there is no time to compare."""
    if run["reached"]:
        times = by_seed[level]
        return Verdict(f"seconds to IoU {level}", run["seconds_to_target"], times.median(),
                       prediction_spread(times), "seeds' median", higher_is_better=False)
    return (f"IoU {level} not reached in {run['max_steps']} steps: "
            + ("no time to compare" if on_gpu else "a CPU profile trains far too briefly"))


def flops_in_words(profile: Profile, flops: dict, recipe_flops: dict, peak_tflops: float | None) -> list[str]:
    """``training_flops_per_image``'s counts of 02's U-Net (``flops``) and of the faster
    recipe's (``recipe_flops``) in GFLOP, and the measured bf16 peak beside the datasheet's."""
    lines = [(f"U-Net {profile.encoder} at {profile.image_size} px, GFLOP per image: "
              f"{flops['forward'] / 1e9:.1f} forward, {flops['training'] / 1e9:.1f} forward + backward; "
              f"the faster recipe's {recipe_flops['training'] / 1e9:.1f}")]
    if peak_tflops:
        lines.append(f"bf16 peak: {peak_tflops:.0f} TFLOP/s measured (8192³ matrix product), "
                     f"datasheet {datasheet_tflops(profile.device) or 'unknown'}")
    return lines
