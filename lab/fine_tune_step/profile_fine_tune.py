"""Where a fine-tuning step of notebook 06 spends its time, on the machine it runs on.

    python -m lab.fine_tune_step.profile_fine_tune --out fine_tune_profile.json

Notebook 06's fine-tuning (``PhotosOnDevice``, the Kornia policy, ``make_trainer``) on its
stand-in (``--photos`` photos, a fifth held out), no validation, ``--steps`` steps a run:
the first run of the process (cuDNN's kernel search included), then as it is for each
``--encoders``, without the augmentation, with a batch ``--batch-scale`` times larger, at
``--small-size`` px, and the same step as a plain PyTorch loop (no Lightning: the bound of
the step's host overhead). A ``torch.profiler`` trace of ``--trace-steps`` steps gives the
operators' host and device times and the device's busy share of the wall time.
``--starts N`` times N whole starts of notebook 06 instead (validations included) without
its CUDA graphs (eager), its batches' indices on the device (as the notebook draws them)
alternating with batches whose indices are copied from the host at each step, then the same
``--steps`` as a plain PyTorch loop, and lists the places where the steps wait for the GPU
(torch's sync debug mode). ``--starts N --compile-mode MODE`` times N of the notebook's
starts whose U-Nets are compiled in that mode, in one process: the first start compiles,
the others may reuse its code. ``--starts N --cuda-graphs`` times N of the notebook's
starts as it runs them (the U-Net replayed as CUDA graphs) alternating with N starts
without the graphs (``--graphs-only``: only the graphed starts; ``--host-indices``: each
also with indices from the host). ``--sync-sites STEPS``
lists the source lines where that many steps of the notebook's ``fine_tune`` wait for the
GPU, each with its stack.
``--profile smoke`` checks the code path on a CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
import traceback
import warnings
from pathlib import Path

import pytorch_lightning as pl
import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import BatchSampler, DataLoader, RandomSampler

from lab.fine_tune_step.helpers import stand_in
from nailseg_common.data.synthetic import photos_or_standin
from nailseg_common.measure.profiling import synchronized_now
from nailseg_common.pipelines.kornia_pipeline import KorniaAugmentation
from nailseg_common.setup.course import start
from nailseg_common.setup.environment import device_description, library_versions
from nailseg_common.training.fast_training import FastNailSegmentation
from nailseg_common.training.finetune import PhotosOnDevice, fine_tune, start_model
from nailseg_common.training.trainer import make_trainer
from nailseg_common.training.unet import segmentation_loss

HERE = Path(__file__).parent  # where this question's results are kept


class HostIndexedPhotos(PhotosOnDevice):
    """``PhotosOnDevice`` with the same batches as notebook 06 drew them before 2026-11-25:
    each batch's indices a Python list from a sampler, copied to the device at every step (a
    copy that waits for the GPU to finish the work queued before it)."""

    def train_dataloader(self) -> DataLoader:
        photos = self.sets["train"]
        passes = RandomSampler(photos, num_samples=self.steps * self.batch_size,
                               generator=torch.Generator().manual_seed(self.seed))
        return DataLoader(photos, sampler=BatchSampler(passes, self.batch_size, drop_last=True),
                          batch_size=None)


NOTEBOOK_BATCHES = "indices on the device (notebook 06)"
DATAMODULES = {NOTEBOOK_BATCHES: PhotosOnDevice, "indices from the host": HostIndexedPhotos}


def timed_starts(cfg, data, steps: int, repeats: int, datamodules=DATAMODULES,
                 compile_mode: str | None = None,
                 cuda_graphs: tuple[bool, ...] = (False,)) -> dict[str, list[dict]]:
    """Notebook 06's ``fine_tune`` as it runs there (validations included), ``repeats``
    starts of ``steps`` steps with each of ``datamodules`` and each of ``cuda_graphs``
    (``fine_tune``'s option), alternating, in one process: seconds of each. With
    ``compile_mode``, each start's U-Net goes through ``torch.compile`` in that mode first
    (the first start compiles; the others reuse its code unless something forces a
    recompilation)."""
    variants = {(f"{name}, CUDA graphs" if graphs else name): (datamodule, graphs)
                for name, datamodule in datamodules.items() for graphs in cuda_graphs}
    runs = {name: [] for name in variants}
    for repeat in range(repeats):
        for name, (datamodule, graphs) in variants.items():
            model = start_model("random", cfg.encoder, cfg.finetune_lr, steps)
            if compile_mode:
                model.model.compile(mode=compile_mode)
            batches = stand_in(cfg, data, steps, datamodule)
            began = synchronized_now(cfg.device)
            trainer = fine_tune(model, batches, cfg, "profile_fine_tune", seed=repeat,
                                cuda_graphs=graphs)
            seconds = synchronized_now(cfg.device) - began
            runs[name].append({"encoder": cfg.encoder, "repeat": repeat,
                               "steps": trainer.global_step, "batch": cfg.batch_size,
                               "image_size": cfg.image_size, "compile_mode": compile_mode,
                               "cuda_graphs": graphs, "seconds": round(seconds, 2),
                               "ms_per_step": round(1000 * seconds / steps, 1)})
            print(name, runs[name][-1], flush=True)
    return runs


def sync_sites(cfg, data, steps: int, frames: int = 8) -> dict[str, dict]:
    """Where ``steps`` steps of notebook 06's ``fine_tune`` (CUDA graphs on a GPU, one
    validation) wait for the GPU (torch's sync debug mode), by source line: how often, and
    the innermost ``frames`` of the Python stack there. A line counted about ``steps`` times
    waits at every step."""
    if cfg.device.type != "cuda":
        return {}
    sites: dict[str, dict] = {}

    def record(message, category, filename, lineno, file=None, line=None):
        if "synchroniz" in str(message):
            stack = [f"{frame.filename}:{frame.lineno} {frame.name}"
                     for frame in traceback.extract_stack()[:-1]
                     if not frame.filename.endswith("warnings.py")]
            site = sites.setdefault(f"{filename}:{lineno}",
                                    {"count": 0, "stack": stack[-frames:]})
            site["count"] += 1

    model = start_model("random", cfg.encoder, cfg.finetune_lr, steps)
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = record
            fine_tune(model, stand_in(cfg, data, steps), cfg, "profile_fine_tune", validations=1)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return dict(sorted(sites.items(), key=lambda item: -item[1]["count"]))


def timed_fit(cfg, data, steps: int, augment: bool = True, model=None,
              benchmark: bool = True) -> dict:
    """``steps`` Lightning steps as in notebook 06 (of ``model``, else a new random start),
    no validation: seconds and ms a step."""
    pl.seed_everything(0, verbose=False)
    model = model or start_model("random", cfg.encoder, cfg.lr, steps)
    model.gpu_augmentation = KorniaAugmentation(seed=0) if augment else None
    trainer = make_trainer(dataclasses.replace(cfg, max_steps=steps), "profile_fine_tune",
                           enable_checkpointing=False, limit_val_batches=0,
                           benchmark=benchmark and cfg.device.type == "cuda")
    began = synchronized_now(cfg.device)
    trainer.fit(model, datamodule=stand_in(cfg, data, steps))
    seconds = synchronized_now(cfg.device) - began
    return {"steps": trainer.global_step, "batch": cfg.batch_size, "encoder": cfg.encoder,
            "image_size": cfg.image_size, "augment": augment, "seconds": round(seconds, 2),
            "ms_per_step": round(1000 * seconds / steps, 1)}


def plain_loop(cfg, data, steps: int) -> dict:
    """The same step without Lightning: batches from the same module, the same model, loss,
    optimizer and schedule, bf16 autocast on a GPU."""
    pl.seed_everything(0, verbose=False)
    module = start_model("random", cfg.encoder, cfg.lr, steps).to(cfg.device).train()
    if module.uses_channels_last:
        module.model.to(memory_format=torch.channels_last)
    augment = KorniaAugmentation(seed=0)
    configured = module.configure_optimizers()
    optimizer, scheduler = configured["optimizer"], configured["lr_scheduler"]["scheduler"]
    loader = stand_in(cfg, data, steps).train_dataloader()
    autocast = torch.autocast(cfg.device.type, torch.bfloat16, enabled=cfg.device.type == "cuda")
    began = synchronized_now(cfg.device)
    for batch in loader:
        image, label = augment(batch["image"], batch["label"])
        with autocast:
            loss = segmentation_loss(module(image), label)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
    seconds = synchronized_now(cfg.device) - began
    return {"steps": steps, "batch": cfg.batch_size, "encoder": cfg.encoder,
            "seconds": round(seconds, 2), "ms_per_step": round(1000 * seconds / steps, 1)}


def faster_steps(cfg, data, steps: int) -> dict:
    """The step with AdamW's fused kernel, then also compiled (default mode, then CUDA graphs):
    each compiled model's first run (compilation included) and a second run of the same
    model from fresh weights (compiled code reused)."""
    def fresh(compile_mode=None):
        model = FastNailSegmentation(encoder=cfg.encoder, lr=cfg.lr, max_steps=steps,
                                     fused_optimizer=True)
        if compile_mode:
            model.model.compile(mode=compile_mode)
        return model

    runs = {"fused AdamW": timed_fit(cfg, data, steps, model=fresh())}
    for mode in ("default", "reduce-overhead"):
        model = fresh(mode)
        weights = {key: value.clone() for key, value in model.state_dict().items()}
        runs[f"compiled ({mode}), first run"] = timed_fit(cfg, data, steps, model=model)
        model.load_state_dict(weights)
        runs[f"compiled ({mode}), again"] = timed_fit(cfg, data, steps, model=model)
    return runs


def traced_fit(cfg, data, steps: int, rows: int = 25) -> dict:
    """``timed_fit`` under ``torch.profiler``: the top operators by device and by host time,
    and the device's busy time a step."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cfg.device.type == "cuda" else [])
    with profile(activities=activities) as trace:
        run = timed_fit(cfg, data, steps)
    events = trace.key_averages()
    device_us = sum(event.self_device_time_total for event in events)
    run["device_busy_ms_per_step"] = round(device_us / 1000 / steps, 1)
    run["by_device_time"] = events.table(sort_by="self_device_time_total", row_limit=rows)
    run["by_host_time"] = events.table(sort_by="self_cpu_time_total", row_limit=rows)
    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.fine_tune_step.profile_fine_tune",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="gpu")
    parser.add_argument("--photos", type=int, default=50)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--trace-steps", type=int, default=30)
    parser.add_argument("--encoders", nargs="+", default=["resnet34", "mobilenet_v2"])
    parser.add_argument("--batch-scale", type=int, default=3)
    parser.add_argument("--small-size", type=int, default=256)
    parser.add_argument("--no-cudnn-benchmark", action="store_true",
                        help="only the first run and a second one, without cuDNN's kernel search")
    parser.add_argument("--faster", action="store_true",
                        help="only the first run and the fused, compiled and graphed steps")
    parser.add_argument("--starts", type=int, default=0,
                        help="only notebook 06's whole starts of --steps steps, this many for "
                             "each of --encoders")
    parser.add_argument("--compile-mode", default=None,
                        help="with --starts: only the notebook's starts, each U-Net compiled in "
                             "this torch.compile mode (e.g. reduce-overhead: CUDA graphs)")
    parser.add_argument("--cuda-graphs", action="store_true",
                        help="with --starts: only the notebook's starts, with its CUDA graphs "
                             "(GraphedUNet) and without, alternating")
    parser.add_argument("--host-indices", action="store_true",
                        help="with --cuda-graphs: also starts whose batches copy their "
                             "indices from the host at each step, alternating")
    parser.add_argument("--graphs-only", action="store_true",
                        help="with --cuda-graphs: only the graphed starts")
    parser.add_argument("--sync-sites", type=int, default=0, metavar="STEPS",
                        help="only where this many steps of the notebook's fine_tune wait for "
                             "the GPU, by source line with its stack")
    parser.add_argument("--out", type=Path, default=HERE / "profile_fine_tune_local.json",
                        help="the JSON report (default: in this folder)")
    args = parser.parse_args(argv)
    photos = photos_or_standin(args.profile, num_images=args.photos)
    cfg, data = start(args.profile, photos, encoder=args.encoders[0])
    if args.sync_sites:
        return write(args, {f"sync sites, {args.sync_sites} steps": sync_sites(
            cfg, data, args.sync_sites)})
    if args.starts and (args.compile_mode or args.cuda_graphs):
        notebook = DATAMODULES if args.host_indices else {NOTEBOOK_BATCHES: PhotosOnDevice}
        label = f", compiled ({args.compile_mode})" if args.compile_mode else ""
        graphs = (True,) if args.graphs_only else (True, False)
        return write(args, {encoder + label: timed_starts(
            dataclasses.replace(cfg, encoder=encoder), data, args.steps, args.starts, notebook,
            args.compile_mode, graphs if args.cuda_graphs else (False,))
            for encoder in args.encoders})
    if args.starts:
        runs = {encoder: timed_starts(dataclasses.replace(cfg, encoder=encoder), data,
                                      args.steps, args.starts) for encoder in args.encoders}
        runs["plain PyTorch loop"] = plain_loop(cfg, data, args.steps)
        runs["sync sites, 20 steps"] = sync_sites(cfg, data, 20)
        return write(args, runs)
    runs = {"first run": timed_fit(cfg, data, args.steps, benchmark=not args.no_cudnn_benchmark)}
    if args.no_cudnn_benchmark or args.faster:
        runs.update({"second run": timed_fit(cfg, data, args.steps,
                                              benchmark=not args.no_cudnn_benchmark)}
                    if args.no_cudnn_benchmark else faster_steps(cfg, data, args.steps))
        return write(args, runs)
    for encoder in args.encoders:
        runs[f"as in notebook 06, {encoder}"] = timed_fit(
            dataclasses.replace(cfg, encoder=encoder), data, args.steps)
    runs["without augmentation"] = timed_fit(cfg, data, args.steps, augment=False)
    larger = dataclasses.replace(cfg, batch_size=args.batch_scale * cfg.batch_size)
    runs[f"batch x{args.batch_scale}"] = timed_fit(larger, data, args.steps)
    small, small_data = start(args.profile, photos, encoder=args.encoders[0],
                              image_size=args.small_size)
    runs[f"at {args.small_size} px"] = timed_fit(small, small_data, args.steps)
    runs["plain PyTorch loop"] = plain_loop(cfg, data, args.steps)
    runs["traced"] = traced_fit(cfg, data, args.trace_steps)
    write(args, runs)
    print(runs["traced"]["by_device_time"])
    print(runs["traced"]["by_host_time"])


def write(args, runs: dict) -> None:
    result = {"device": device_description(), "versions": library_versions(),
              "date": time.strftime("%Y-%m-%d"), "photos": args.photos, "runs": runs}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for name, run in runs.items():
        if isinstance(run, dict):
            print(name, {k: v for k, v in run.items() if not k.startswith("by_")})


if __name__ == "__main__":
    main()
