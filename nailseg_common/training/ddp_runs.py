"""What a run of ``nailseg-train`` (notebook 08) records: DDP's options, the devices of every
node, the header of its results and what rank 0 writes and prints at the end (:func:`report`).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import torch

from nailseg_common.core.files import write_json
from nailseg_common.setup.environment import device_description, provenance
from nailseg_common.setup.profiles import Profile


def ddp_options(args: argparse.Namespace) -> dict:
    """The keyword arguments the arguments give ``DistributedDataParallel`` (through
    Lightning's ``DDPStrategy``); PyTorch's defaults for what was not given."""
    options = {"static_graph": args.static_graph,
               "gradient_as_bucket_view": args.gradient_as_bucket_view}
    if args.bucket_cap_mb is not None:
        options["bucket_cap_mb"] = args.bucket_cap_mb
    return options


def device_names(profile: Profile, world_size: int, num_nodes: int) -> list[str]:
    """The name of every device of the run, node after node, each node named as this one
    (rank 0's) names its own devices: the nodes of a run are taken to be alike."""
    per_node = world_size // num_nodes
    if profile.accelerator == "gpu":
        return [torch.cuda.get_device_name(index) for index in range(per_node)] * num_nodes
    return [device_description()] * world_size


def run_record(args: argparse.Namespace, profile: Profile, world_size: int) -> dict:
    """What every results file starts with: when, on what, with which settings."""
    return {**provenance(), "devices": device_names(profile, world_size, args.num_nodes),
            "world_size": world_size,
            "config": {**vars(args), "profile": dataclasses.asdict(profile)}}


def report(args: argparse.Namespace, trainer, result: dict) -> dict:
    """Rank 0 writes ``result`` (``args.out``, else the run folder) and says what it holds."""
    path = write_json(Path(args.out or Path(trainer.default_root_dir) / "result.json"), result)
    if "history" in result:
        if result["reached"]:
            outcome = (f"IoU {args.target_iou} after {result['seconds_to_target']:.1f} s "
                       f"({result['steps_to_target']} steps)")
        elif result["history"]:
            outcome = f"IoU {args.target_iou} not reached (best {result['best_iou']:.3f})"
        else:
            outcome = f"IoU {args.target_iou} not reached (no validation ran)"
        speed = (f"{result['train_img_s']:.0f} img/s" if result["train_img_s"] is not None
                 else "not measured (one epoch, which is left out as warm-up)")
        print(f"{trainer.world_size} device(s): {outcome}; fit {result['fit_s']:.1f} s, "
              f"compilation {result['compile_s']:.1f} s apart; training {speed}")
        if result["coverage"] is not None:
            bad = [row["epoch"] for row in result["coverage"] if not row["ok"]]
            print(f"sample coverage of {len(result['coverage'])} complete epoch(s): "
                  + (f"wrong in epochs {bad}" if bad else "ok"))
    else:
        print(f"{trainer.world_size} device(s): val_iou {result['val_iou']:.6f}, val_dice "
              f"{result['val_dice']:.6f}, val_loss {result['val_loss']:.6f}")
    print(f"results: {path}")
    return result
