"""Where notebook 07's Kornia pipeline falls behind its bound, on a GPU.

The same compiled model (07's recipe) is fed by variants of notebook 03's uint8 cache and
fused Kornia policy, one change at a time, each measured as 07 measures pipelines (a third of
a window to warm up, then ``--windows`` windows of the profile's ``bench_steps``):

- ``bound``: batches already on the GPU, no augmentation (07's bound);
- ``resident + policy``: the same batches, augmented in the step (the policy's own cost);
- ``resident + compiled policy``: the policy through ``torch.compile``;
- ``cache (pinned, workers) + policy``: 07's ``kornia`` pipeline (batches copied each step);
- ``cache on the GPU + policy`` / ``+ compiled policy``: the whole uint8 split held on the
  GPU, each batch gathered there in an order drawn on the GPU (no copy, no host sync:
  ``GpuBatches``, copied into ``helpers.py``).

Also the policy alone on one batch, eager and compiled, and each of its ops alone, eager
(CUDA events, median of repeats): where the policy's own time goes.

    python -m lab.kornia_pipeline_gap.kornia_pipeline_gap --profile gpu --out lab/kornia_pipeline_gap/kornia_pipeline_gap_h100.json

``--profile smoke`` checks the code path on a CPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from lab.kornia_pipeline_gap.helpers import GpuBatches, recipe_of, warmed_up_model
from nailseg_common.measure.benchmark import reuse, train_loader_of
from nailseg_common.measure.timing import measure_training, resident_batches
from nailseg_common.pipelines.kornia_pipeline import (
    CachedNailDataModule,
    KorniaAugmentation,
    load_cache,
)
from nailseg_common.pipelines.policy import POLICY
from nailseg_common.setup.environment import device_description, library_versions
from nailseg_common.setup.files import write_json
from nailseg_common.setup.profiles import set_matmul_precision

HERE = Path(__file__).parent  # where this question's results are kept


def policy_ms(augmentation, batch: dict, device: torch.device, repeats: int = 30) -> float:
    """Median milliseconds of the policy on one batch (after three warm-up calls)."""
    for _ in range(3):
        augmentation(batch["image"], batch["label"])
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            augmentation(batch["image"], batch["label"])
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            augmentation(batch["image"], batch["label"])
            times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times)


def main(argv: list[str] | None = None) -> dict:
    """Measures every variant; writes and returns the results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="gpu")
    parser.add_argument("--windows", type=int, default=3, help="timing windows per measurement")
    parser.add_argument("--out", default=str(HERE / "kornia_pipeline_gap_local.json"),
                        help="the JSON report (default: in this folder)")
    args = parser.parse_args(argv)
    cfg, data, fast = recipe_of(args.profile)
    set_matmul_precision(cfg)
    model, compile_s = warmed_up_model(cfg, fast, data, seed=0)
    on_device = [t.to(fast.device) for t in load_cache(data, fast.image_size, "train")]
    bound_batches = resident_batches(GpuBatches(*on_device, fast.batch_size, True), fast.device)  # no second read

    def compiled_policy():  # compiled (and recompiled once its generator exists) before it is timed
        policy = torch.compile(KorniaAugmentation())
        policy_ms(policy, next(iter(bound_batches)), fast.device, repeats=1)
        return policy

    variants = {
        "bound": (lambda: bound_batches, None),
        "resident + policy": (lambda: bound_batches, KorniaAugmentation),
        "resident + compiled policy": (lambda: bound_batches, compiled_policy),
        "cache (pinned, workers) + policy": (lambda: train_loader_of(CachedNailDataModule(data, fast)),
                                             KorniaAugmentation),
        "cache on the GPU + policy": (lambda: GpuBatches(*on_device, fast.batch_size, True), KorniaAugmentation),
        "cache on the GPU + compiled policy": (lambda: GpuBatches(*on_device, fast.batch_size, True),
                                               compiled_policy),
    }
    rows = {}
    for name, (make_loader, make_augmentation) in variants.items():
        augmentation = make_augmentation() if make_augmentation else None
        result = measure_training(make_loader(), fast, fast.bench_steps // 3, fast.bench_steps, args.windows,
                                  augmentation, make_model=reuse(model))
        rows[name] = {"img_s": result["img_s"], "img_s_min": result["img_s_min"],
                      "img_s_max": result["img_s_max"], "windows": len(result["repeats"])}
        print(name, json.dumps(rows[name]), flush=True)
    bound = rows["bound"]["img_s"]
    for row in rows.values():
        row["ratio_to_bound"] = row["img_s"] / bound
        row["ms_per_step"] = 1e3 * fast.batch_size / row["img_s"]
    batch = next(iter(bound_batches))
    alone = {"eager": policy_ms(KorniaAugmentation(), batch, fast.device),
             "compiled": policy_ms(compiled_policy(), batch, fast.device)}
    by_op = {name: policy_ms(KorniaAugmentation({name: op}), batch, fast.device) for name, op in POLICY.items()}
    print("policy alone, ms per batch:", alone, by_op, flush=True)
    results = {
        "what": __doc__.split("\n\n")[0] + " One process alone on the GPU; img/s: median of the windows.",
        "command": f"python -m lab.kornia_pipeline_gap.kornia_pipeline_gap --profile {args.profile} --windows {args.windows}",
        "device": device_description(), "versions": library_versions(),
        "date": time.strftime("%Y-%m-%d"), "profile": args.profile,
        "step": {"batch": fast.batch_size, "image_size": fast.image_size, "compile_s_model": compile_s,
                 "steps_per_window": fast.bench_steps},
        "pipelines": rows, "policy_alone_ms_per_batch": alone, "each_op_alone_ms_per_batch": by_op,
    }
    write_json(args.out, results)
    return results


if __name__ == "__main__":
    main()
