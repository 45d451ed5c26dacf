"""Plain against DDP-wrapped runs of ``run.sh`` on one GPU: images/s, the step profile's
parts and the time to IoU 0.86, per seed and as median and range over the seeds."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

PARTS = ("wall_ms", "compute_ms", "all_reduce_not_hidden_ms", "idle_ms", "nccl_ms")


def median_range(values: list[float]) -> dict | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(folder: str) -> None:
    runs = {path.stem: json.loads(path.read_text()) for path in sorted(Path(folder).glob("seed*.json"))}
    plain = [run for name, run in runs.items() if not name.endswith("_ddp")]
    ddp = [run for name, run in runs.items() if name.endswith("_ddp")]
    summary = {}
    for label, group in (("plain", plain), ("ddp", ddp)):
        summary[label] = {
            "train_img_s": median_range([run["train_img_s"] for run in group]),
            "seconds_to_target": median_range([run["seconds_to_target"] for run in group if run["reached"]]),
            "reached": sum(run["reached"] for run in group), "seeds": len(group),
            "step_profile": {part: median_range([run["step_profile"][part] for run in group
                                                 if run["step_profile"] and run["step_profile"][part] is not None])
                             for part in PARTS
                             if any(run["step_profile"] and run["step_profile"][part] is not None for run in group)}}
    ratios = [d["train_img_s"] / p["train_img_s"] for p, d in zip(plain, ddp)]
    summary["ddp_over_plain_img_s"] = median_range(ratios)
    first = plain[0]
    record = {"what": __doc__.splitlines()[0], "command": "bash lab/ddp_on_one_gpu/run.sh OUT",
              "devices": first["devices"], "date": first["date"], "versions": first["versions"],
              "python": first["python"], "summary": summary,
              "runs": {name: {key: run[key] for key in ("train_img_s", "seconds_to_target", "steps_to_target",
                                                          "best_iou", "compile_s", "fit_s", "step_profile", "epochs")}
                       for name, run in runs.items()}}
    Path("lab/ddp_on_one_gpu/ddp_on_one_gpu_h200.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
