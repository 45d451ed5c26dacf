"""The input pipelines against notebook 07's faster step, Albumentations over CPU worker counts.

One process on one GPU: 07's model of the faster recipe, compiled once (``warm_up``); its
bound (the same step on resident batches); then ``pipeline_rates`` (07's comparison) for Albumentations
at each ``--workers`` count, the uint8 cache + Kornia and DALI; and, for Albumentations, the
loader alone (each batch moved to the GPU, no training step), which separates the workers'
own rate from what they lose competing with the training process for the cores. The worker
count that reaches ``--ratio`` of the bound is read off the measured curve; when none does,
the optimistic linear extrapolation of the loader alone (its rate per worker at the largest
count) is given instead, marked as such:

    python -m lab.pipelines_by_workers.pipelines_by_workers --workers 1,2,4,8,12,15 \\
        --out lab/pipelines_by_workers/pipelines_fast_step_h100.json

``--profile smoke`` runs the same code on a CPU in a minute.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import os
import sys
from pathlib import Path

from lab.pipelines_by_workers.helpers import fastest_step, recipe_of, warmed_up_model
from nailseg_common.measure.benchmark import default_pipelines, pipeline_rates, reuse
from nailseg_common.measure.timing import measure_loader
from nailseg_common.setup.environment import device_description, library_versions
from nailseg_common.setup.files import write_json
from nailseg_common.setup.profiles import set_matmul_precision

HERE = Path(__file__).parent  # where this question's results are kept

FAMILIES = ("albumentations", "kornia", "dali")


def workers_to_reach(rows: dict, bound_img_s: float, ratio: float) -> dict:
    """The fewest Albumentations workers measured at ``ratio`` of the bound, else the linear
    extrapolation of the loader alone from the largest count (optimistic: it ignores the
    cores the training process needs)."""
    albumentations = sorted((row for row in rows.values() if row["family"] == "albumentations"),
                            key=lambda row: row["workers"])
    measured = next((row["workers"] for row in albumentations if row["ratio to bound"] >= ratio), None)
    most = albumentations[-1]
    per_worker = most["loader img/s"] / most["workers"] if most["workers"] else None
    return {"ratio": ratio, "measured": measured,
            "extrapolated_from_loader": ratio * bound_img_s / per_worker if per_worker else None}


def main(argv: list[str] | None = None) -> dict:
    """Measures every pipeline; writes and returns the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4,8,12,15", help="Albumentations worker counts")
    parser.add_argument("--out", default=str(HERE / "pipelines_by_workers_local.json"),
                        help="the JSON report (default: in this folder)")
    parser.add_argument("--profile", default="gpu")
    parser.add_argument("--windows", type=int, default=3, help="timing windows per measurement")
    parser.add_argument("--ratio", type=float, default=0.9, help="the ratio to the bound to reach")
    args = parser.parse_args(argv)
    cfg, data, fast = recipe_of(args.profile)
    set_matmul_precision(cfg)
    model, compile_s = warmed_up_model(cfg, fast, data, seed=0)
    bound = fastest_step(fast, data, model, args.windows)
    workers = sorted({min(int(count), os.cpu_count() or 1) for count in args.workers.split(",")})
    # each loader built once, shared by the training and the loader-alone measurements
    pipelines = [dataclasses.replace(pipeline, make_loader=functools.cache(pipeline.make_loader))
                 for pipeline in default_pipelines(fast, data, workers=workers)
                 if pipeline.family in FAMILIES]
    rows = pipeline_rates(pipelines, fast, reuse(model), bound["img_s"], args.windows).to_dict("index")
    steps = fast.bench_steps
    for pipeline in pipelines:
        rows[pipeline.name].update(family=pipeline.family, workers=pipeline.num_workers)
        if pipeline.family == "albumentations":
            alone = measure_loader(pipeline.make_loader(), fast.device, steps // 3, steps, args.windows)
            rows[pipeline.name]["loader img/s"] = alone["img_s"]
    results = {
        "what": ("Training images/s of notebook 07's compiled model at its faster step (batch "
                 f"{fast.batch_size}, {fast.image_size} px) fed by each input pipeline, median of "
                 f"{args.windows} windows of {steps} steps, and its ratio to the bound (the same step "
                 "on resident batches) measured in the same process; 'loader img/s': the "
                 "Albumentations loader alone, each batch moved to the GPU."),
        "command": "python -m lab.pipelines_by_workers.pipelines_by_workers " + " ".join(sys.argv[1:] if argv is None else argv),
        "device": device_description(), "cpu_count": os.cpu_count(), "versions": library_versions(),
        "date": datetime.date.today().isoformat(), "profile": cfg.name, "compile_s": compile_s,
        "bound": {"img_s": bound["img_s"], "min": bound["img_s_min"], "max": bound["img_s_max"],
                  "windows": len(bound["repeats"])},
        "pipelines": rows,
        "albumentations_workers_to_reach": workers_to_reach(rows, bound["img_s"], args.ratio),
    }
    write_json(args.out, results)
    for name, row in rows.items():
        print(f"{name}: {row['train img/s']:.0f} img/s, {row['ratio to bound']:.3f} of the bound"
              + (f"; loader alone {row['loader img/s']:.0f} img/s" if "loader img/s" in row else ""))
    print(results["albumentations_workers_to_reach"])
    return results


if __name__ == "__main__":
    main()
