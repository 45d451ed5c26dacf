"""``nailseg-train``: the course's U-Net trained on one or more devices of one machine or of
several (Lightning DDP, a DALI shard per global rank) until a target IoU, or a checkpoint
validated.

Notebook 08 teaches the training (:func:`nailseg_common.training.multi_gpu.run`); this module
is its command line: the options (every option that changes the run is one; what is not
given comes from the profile: ``--profile``, else ``NAILSEG_PROFILE``, else the hardware),
the run's profile, the problems caught before anything starts, and :func:`launch_training`,
which runs the command from a notebook as a terminal would. The batch size is per device,
the learning rate is used as given whatever the number of devices, and the run trains on
whole epochs (the profiles' caps on batches per epoch are not applied). On one machine,
Lightning's DDP launcher re-runs this same command once per further device; on several
(``--num-nodes``), torchrun or SLURM's srun starts it once per device of every node, and the
options must say what they started (:func:`launcher_problem`). :func:`script_options` and
:func:`plan_options` build the command line notebook 08 launches.

Before anything trains, the first process of each node checks the data, the batch against
the splits and devices, the checkpoint to validate and that the run folder and ``--out`` can
be written and hold no earlier run (``--force`` replaces one, and says so). Exit status: 0
done; 2, with one line naming the file and the fix, for a mistake; 130 after Ctrl-C, 143
after SIGTERM, with no ``result.json`` written.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from nailseg_common.commands.command_line import (
    IMAGE_SIDE,
    SEED,
    at_least,
    check_numbers,
    create_out,
    joined_numbers,
    lightning_stops,
    peak_lr,
    run_command,
    starting,
)

with starting(__name__):  # Ctrl-C or SIGTERM during these imports: one line (see command_line)
    import torch
    from pytorch_lightning.plugins.environments import SLURMEnvironment, TorchElasticEnvironment

    from nailseg_common.core.errors import DataError
    from nailseg_common.core.files import discard
    from nailseg_common.data.preparation import ensure_prepared, read_split
    from nailseg_common.setup.dali import dali_available, dali_status
    from nailseg_common.setup.paths import REPO_ROOT, runs_dir, shown
    from nailseg_common.setup.profiles import Profile, add_profile_option, select_profile
    from nailseg_common.training.checkpoints import read_checkpoint
    from nailseg_common.training.multi_gpu import local_rank, run, shard_sizes

CHECKPOINT, RESULT = "final.ckpt", "result.json"
"""What a training run leaves in its run folder (a validation: the result only)."""
LIGHTNING_CHECKPOINTS = f"the {CHECKPOINT} of a nailseg-train run or a best-*.ckpt of notebook 02 or 04"
"""What ``--validate`` loads."""
STOPPED = (f"no {RESULT} was written, so nothing of this run reads as finished; run the "
           "same command again (with --force).")
"""What a stop (Ctrl-C, SIGTERM) leaves: the end of its one line."""


NUMBERS = {
    "--num-images": at_least(1, "give the number of synthetic images, e.g. 1200."),
    "--image-size": IMAGE_SIDE,
    "--devices": at_least(1, "give 1 or more."),
    "--num-nodes": at_least(1, "give 1 or more machines."),
    "--batch-size": at_least(1, "give 1 or more images per device, e.g. 60."),
    "--lr": peak_lr("2e-3"),
    "--warmup-steps": at_least(0, "give 0 or more steps."),
    "--max-steps": at_least(1, "a run needs at least 1 step, e.g. 1500."),
    "--target-iou": (float, lambda iou: 0 < iou <= 1, "choose a hard IoU above 0 and at most 1, e.g. 0.86."),
    "--val-every-n-epochs": at_least(1, "give 1 or more epochs."),
    "--bucket-cap-mb": (float, lambda size: size > 0, "give a size above 0 (PyTorch's is 25)."),
    "--profile-epoch": at_least(0, "give an epoch, 0 or more."),
    "--seed": SEED,
}
"""The numeric options: what they are, their rule, and the fix of a value that breaks it."""


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nailseg-train",
        description="Train the course's U-Net on one or more devices of one machine or of "
                    "several (Lightning DDP, a DALI shard per rank) until a target IoU, or "
                    "validate a checkpoint.")
    add = parser.add_argument
    add_profile_option(parser)
    add("--data-root", default="", help="a real dataset (default: the synthetic set)")
    add("--num-images", help="size of the synthetic set")
    add("--image-size", help="side of the square images the model sees")
    add("--encoder", help="smp encoder name")
    add("--precision", help='Lightning precision, e.g. "bf16-mixed"')
    add("--devices", default="1", help="processes of each node, one per device: GPUs, or CPU "
        "processes talking through gloo")
    add("--num-nodes", default="1", help="machines, started by torchrun (its --nnodes) or "
        "SLURM's srun (--nodes), each with --devices processes")
    add("--accelerator", choices=("cpu", "gpu"), help="default: the profile's")
    add("--batch-size", help="per device: a step trains on devices × batch images "
        "(default: the profile's ddp_batch_size, notebook 07's batch)")
    add("--lr", help="peak learning rate, used as given for any number of devices "
        "(default: the profile's fast_lr, notebook 07's)")
    add("--warmup-steps", help="linear warm-up steps before the cosine decay "
        "(default: the profile's)")
    add("--max-steps", help="optimizer steps of the schedule and of the run "
        "(default: the profile's ddp_max_steps)")
    add("--target-iou", default="0.85", help="stop at the first validation with "
        "hard IoU at least this")
    add("--val-every-n-epochs", help="validate every n epochs (default: the profile's)")
    add("--compile", action=argparse.BooleanOptionalAction, help="torch.compile the U-Net; the "
        "loss stays eager (default: the profile's compile_model)")
    add("--bucket-cap-mb", help="DDP's gradient bucket size in MiB; a compiled "
        "model's graph is split at bucket boundaries (default: PyTorch's, 25)")
    add("--static-graph", action=argparse.BooleanOptionalAction, default=False, help="tell DDP "
        "that every step uses the same parameters in the same order, so it can plan the "
        "all-reduce once")
    add("--gradient-as-bucket-view", action=argparse.BooleanOptionalAction, default=False,
        help="let gradients be views into DDP's buckets (no copy into them after the "
        "backward); CPU runs only: the fused AdamW of GPU runs refuses such gradients")
    add("--ddp-on-one-device", action="store_true", help="wrap one device in DDP too: with "
        "--devices 1, DDP's own cost per step without a second GPU")
    add("--record-samples", action="store_true", help="record every training sample's file "
        "and check that each epoch covers the training set once (several nodes: the run "
        "folder on a file system they share)")
    add("--profile-epoch", help="profile a few training steps of this epoch on rank 0 "
        "(default: no profile)")
    add("--validate", metavar="CKPT", help="validate this checkpoint instead of training")
    add("--seed", default="42", help="model initialisation and augmentation")
    add("--run-name", default="", help="logs and checkpoint go to runs/<profile>/<run name> "
        "(default: ddp_<devices>, ddp_<nodes>x<devices> on several nodes)")
    add("--out", default="", help="results as JSON, written by rank 0 (default: "
        "<run folder>/result.json)")
    add("--force", action="store_true", help="replace an earlier run's final.ckpt and "
        "result.json in the run folder (and --out) instead of refusing")
    return parser


def run_profile(args: argparse.Namespace) -> Profile:
    """The profile the arguments describe, with whole epochs (no cap on batches per epoch);
    batch, learning rate and steps not given are notebook 07's recipe, as notebook 08 runs it."""
    profile = select_profile(args.profile, num_images=args.num_images,
                             image_size=args.image_size, encoder=args.encoder,
                             precision=args.precision, accelerator=args.accelerator,
                             warmup_steps=args.warmup_steps, compile_model=args.compile,
                             val_every_n_epochs=args.val_every_n_epochs)
    return dataclasses.replace(profile, batch_size=args.batch_size or profile.ddp_batch_size,
                               lr=args.lr or profile.fast_lr,
                               max_steps=args.max_steps or profile.ddp_max_steps,
                               max_train_batches=None, max_valid_batches=None)


def argument_problem(args: argparse.Namespace, profile: Profile) -> str | None:
    """What is wrong with the arguments, and how to fix it; None when nothing is."""
    if not dali_available():
        return dali_status()
    if args.gradient_as_bucket_view and profile.accelerator == "gpu":
        return ("--gradient-as-bucket-view: a GPU run steps with AdamW's fused kernel, which "
                "refuses gradients that are views into DDP's buckets (\"must have same dtype, "
                "device, and layout\", on two H200s, 2026-11-24): leave it off on GPUs.")
    gpus = torch.cuda.device_count()
    if profile.accelerator == "gpu" and args.devices > gpus:
        return (f"--devices {args.devices} but this machine shows {gpus} GPU(s): use "
                f"--devices {gpus} or fewer (check CUDA_VISIBLE_DEVICES), or --accelerator cpu.")
    world_size = args.devices * args.num_nodes
    if args.ddp_on_one_device and world_size > 1:
        return (f"--ddp-on-one-device is for --devices 1 on one node; {world_size} devices use "
                "DDP anyway.")
    if args.validate and (args.record_samples or args.profile_epoch is not None):
        return ("--record-samples and --profile-epoch look at training batches: drop them "
                "with --validate.")
    if args.validate and not Path(args.validate).is_file():
        return (f"--validate {args.validate}: no such checkpoint; train first (without "
                "--validate) and pass the checkpoint path its results name.")
    return launcher_problem(args)


def launcher_problem(args: argparse.Namespace) -> str | None:
    """How ``--num-nodes`` and ``--devices`` disagree with what torchrun or SLURM started (as
    Lightning detects them), and the fix; None when they agree, or nothing started them."""
    world_size = args.devices * args.num_nodes
    if TorchElasticEnvironment.detect():
        started = int(os.environ["WORLD_SIZE"])
        if started != world_size:
            return (f"torchrun started {started} process(es) in all, but --num-nodes "
                    f"{args.num_nodes} × --devices {args.devices} is {world_size}: pass "
                    "torchrun's --nnodes as --num-nodes and its --nproc-per-node as --devices.")
    elif SLURMEnvironment.detect():
        nodes = os.environ.get("SLURM_NNODES", str(args.num_nodes))
        tasks = os.environ.get("SLURM_NTASKS_PER_NODE", str(args.devices))
        if (nodes, tasks) != (str(args.num_nodes), str(args.devices)):
            return (f"SLURM gave {nodes} node(s) of {tasks} task(s), but this is --num-nodes "
                    f"{args.num_nodes} --devices {args.devices}: pass --num-nodes {nodes} "
                    f"--devices {tasks} (sbatch's --nodes and --ntasks-per-node).")
    return None


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, Profile]:
    """The arguments and the run's profile (which holds warm-up, compile and validation
    interval); a problem exits with a message naming the fix, a number of the wrong kind or
    sign too (``--lr -1e-3`` is read as a number)."""
    parser = argument_parser()
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(joined_numbers(argv, tuple(NUMBERS)))
    check_numbers(parser, args, NUMBERS)
    try:
        profile = run_profile(args)
    except (ValueError, RuntimeError) as error:
        parser.error(str(error))
    problem = argument_problem(args, profile)
    if problem:
        parser.error(problem)
    args.compile = profile.compile_model
    args.run_name = args.run_name or (f"ddp_{args.devices}" if args.num_nodes == 1
                                      else f"ddp_{args.num_nodes}x{args.devices}")
    return args, profile


def script_options(profile: Profile, target_iou: float, data_root: str = "") -> list[str]:
    """The options every launch of notebook 08 shares: ``profile``'s settings, the IoU level."""
    return ["--profile", profile.name, "--num-images", str(profile.num_images),
            "--image-size", str(profile.image_size), "--encoder", profile.encoder,
            "--precision", profile.precision, "--accelerator", profile.accelerator,
            "--batch-size", str(profile.ddp_batch_size), "--target-iou", str(target_iou),
            "--val-every-n-epochs", str(profile.val_every_n_epochs),
            "--compile" if profile.compile_model else "--no-compile",
            *(["--data-root", data_root] if data_root else [])]


def plan_options(plan: dict, profile_epoch: int | None = None) -> list[str]:
    """A run's plan (``devices``, ``lr``, ``warmup``, ``steps``) as options of the script,
    profiling epoch ``profile_epoch`` (None: no profile)."""
    return ["--devices", str(plan["devices"]), "--lr", str(plan["lr"]), "--warmup-steps",
            str(plan["warmup"]), "--max-steps", str(plan["steps"]),
            *(["--profile-epoch", str(profile_epoch)] if profile_epoch is not None else [])]


def launch_training(out: Path, *options: str) -> dict:
    """Run the command as a terminal would, with ``options`` and ``--out out``, replacing the
    notebook's earlier run of that name (``--force``): the installed ``nailseg-train``, else
    (the package on a path, not installed) ``python -m``; rank 0's results (the JSON file)."""
    script = Path(sys.executable).with_name("nailseg-train")
    start = [str(script)] if script.is_file() else [sys.executable, "-m", __name__]
    command = [*start, *options, "--out", str(out), "--force"]
    env = {**os.environ, "NO_ALBUMENTATIONS_UPDATE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, check=False)
    if done.returncode != 0 or not out.exists():
        tail = "\n".join(done.stdout.splitlines()[-40:])
        raise RuntimeError(f"{' '.join(command)}\nfailed (exit {done.returncode}); the end "
                           f"of its output:\n{tail}")
    summary = [line for line in done.stdout.splitlines() if "device(s):" in line or "coverage" in line]
    print(f"[{out.stem}, {time.perf_counter() - started:.0f} s with start-up] " + "\n  ".join(summary))
    return json.loads(out.read_text())


def run_folder(args: argparse.Namespace, profile: Profile) -> Path:
    """Where the run's logs, ``final.ckpt`` and (without ``--out``) ``result.json`` go."""
    return runs_dir() / profile.name / args.run_name


def check_sizes(args: argparse.Namespace, profile: Profile, splits: dict[str, int]) -> None:
    """DataError when a split of ``splits`` (its number of images) cannot feed each device of
    every node (DALI's shards): training drops a shard's last partial batch, so it needs a
    whole batch a device, validation one image a device. The fix names what fits."""
    world_size = args.devices * args.num_nodes
    for split, images in splits.items():
        smallest = min(shard_sizes(images, world_size))
        if smallest < (profile.batch_size if split == "train" else 1):
            fewer = "--devices" if args.num_nodes == 1 else "--devices or --num-nodes"
            fits = f"pass --batch-size {smallest} or less" if smallest else f"pass fewer {fewer}"
            raise DataError(f"--batch-size {profile.batch_size} on {world_size} device(s): the "
                            f"{split} split holds {images} images, {smallest} a device: {fits}, "
                            "or use a larger set (--num-images, --data-root).")


def check_names(location) -> None:
    """DataError when two training photos share a file name (``--record-samples`` tells the
    samples apart by name)."""
    owners: dict[str, str] = {}
    for image in read_split(location, "train")["image"]:
        name = Path(image).stem
        if name in owners:
            raise DataError(f"--record-samples tells the training samples apart by file name, "
                            f"and {owners[name]} and {image} share one: rename one of them, or "
                            "drop --record-samples.")
        owners[name] = image


def check_checkpoint(path: str) -> None:
    """DataError unless ``path`` is a Lightning checkpoint of the course's U-Net (``final.ckpt``,
    ``best-*.ckpt``), the kind ``--validate`` loads; a weights file the course writes is named."""
    checkpoint = read_checkpoint(path, LIGHTNING_CHECKPOINTS)  # DataError: no course checkpoint
    if checkpoint.trained_steps is None:
        raise DataError(f"--validate {path} is a weights file (a model.pt of nailseg-fine-tune or "
                        "notebook 06, or the model the course ships), not a Lightning checkpoint: "
                        f"pass {LIGHTNING_CHECKPOINTS}.")


def check_outputs(args: argparse.Namespace, profile: Profile) -> None:
    """DataError when the run folder or ``--out`` cannot be written, or holds an earlier run's
    results and not ``--force``; with it, those are deleted first, and said so."""
    folder = run_folder(args, profile)
    out = Path(args.out).expanduser().resolve() if args.out else folder / RESULT
    if out.is_dir():
        raise DataError(f"--out {args.out} is a folder: pass a file name, e.g. "
                        f"{Path(args.out) / RESULT}.")
    create_out(folder, f"the run folder {shown(folder)}", "set NAILSEG_RUNS_DIR to a folder "
               "you can write, or pass another --run-name.")
    create_out(out.parent, f"--out's folder {shown(out.parent)}", "pass an --out you can write.")
    held = [path for path in ((out,) if args.validate else (folder / CHECKPOINT, out))
            if path.exists()]
    if held and not args.force:
        raise DataError(f"{', '.join(shown(path) for path in held)} hold an earlier run: pass "
                        "--force to replace them, or another --run-name (and --out).")
    for path in held:
        discard(path)
    if held:
        print(f"--force: replacing the earlier run's {', '.join(shown(path) for path in held)}")


def check_run(args: argparse.Namespace, profile: Profile) -> None:
    """Everything that can be checked before a run starts, each mistake a DataError naming the
    file and the fix: the data (prepared here), the batch against the splits and devices, the
    checkpoint to validate, the names ``--record-samples`` needs, the outputs."""
    location = ensure_prepared(profile, args.data_root or None)
    splits = {split: len(read_split(location, split))
              for split in (("valid",) if args.validate else ("train", "valid"))}
    check_sizes(args, profile, splits)
    if args.validate:
        check_checkpoint(args.validate)
    if args.record_samples:
        check_names(location)
    check_outputs(args, profile)


def train_command(argv: list[str] | None) -> int:
    """Parse, check (on the first process of each node; the others skip it) and run; 0."""
    args, profile = parse_args(argv)
    if local_rank() == 0:
        check_run(args, profile)
    with lightning_stops():
        run(args, profile)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``nailseg-train``: train (or ``--validate``); the exit status, errors as one line."""
    return run_command(lambda: train_command(argv), STOPPED)


if __name__ == "__main__":
    raise SystemExit(main())
