"""The model the course ships (``nailseg_common/pretrained/``), and how well candidates transfer.

Run on a GPU after notebook 04 trained the candidates in the ``gpu`` profile; how the
committed model was made (on the generator's ``wide`` set, see ``tools/train_wide.sh``):

    bash tools/train_wide.sh 0 DIR   # the wide set, seed 0, and notebook 04 on it
    bash tools/train_wide.sh 1 DIR   # a repeat: generator seed 1
    python -m tools.ship_model DIR/wide-seed0.ckpt DIR/wide-seed1.ckpt --ship 0 --style wide \
        --num-images 2400 --commit SHA --trained-by "..." --out DIR

For every candidate checkpoint: its size in half precision, its hard Dice and IoU on the
synthetic validation set, and on notebook 06's stand-in of another style (``--photos``
photos, a fifth held out) the zero-shot scores at each of ``--sizes`` and the scores after
notebook 06's ``fine_tune`` for ``--fine-tune-steps`` steps, once per seed, with the seconds
each start took; the random start of the shipped candidate's encoder for reference, and
one run of the shipped start for ``--timing-steps`` steps, timed. The ``--ship`` candidate
is written in half precision (``unet-<encoder>.pt``) with its
provenance (``unet-<encoder>.json``), scored again as written. ``--profile smoke`` checks
the code path on a CPU in a minute.

Outputs in ``--out``: the model, its provenance, and ``shipped_model.json`` (the comparison).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
from pathlib import Path

from nailseg_common.core.clock import synchronized_now
from nailseg_common.core.files import write_json
from nailseg_common.course import start
from nailseg_common.data.decoded import load_cache
from nailseg_common.data.preparation import ensure_prepared, read_split
from nailseg_common.data.synthetic import GENERATOR_VERSION, STYLES, photos_or_standin
from nailseg_common.setup.environment import provenance
from nailseg_common.setup.paths import DataLocation
from nailseg_common.setup.profiles import Profile, select_profile
from nailseg_common.training.checkpoints import (
    Checkpoint,
    load_weights,
    read_checkpoint,
    save_weights,
)
from nailseg_common.training.fine_tuning import (
    PhotosOnDevice,
    fine_tune,
    photos_on_device,
    predict_logits,
    score_photos,
    start_model,
)
from nailseg_common.training.unet import LitNailSegmentation


def stand_in(cfg, data, steps: int, datamodule=PhotosOnDevice, seed: int = 0) -> PhotosOnDevice:
    """Notebook 06's batches: the stand-in's training split on the device, its validation
    split held out."""
    frame, photos = photos_on_device(data, cfg)
    trained = len(read_split(data, "train"))
    return datamodule(photos, range(trained), range(trained, len(frame)), cfg.batch_size, steps,
                      seed=seed)


def mean_scores(model: LitNailSegmentation, data: DataLocation, image_size: int, device) -> dict:
    """Hard Dice and IoU averaged over the validation photos of ``data`` at ``image_size``."""
    images, labels = load_cache(data, image_size, "valid")
    logits = predict_logits(model, images.to(device), flips=False)  # as notebooks 02-04 validate
    table = score_photos(logits, labels, read_split(data, "valid"))
    return {"dice": round(float(table["dice"].mean()), 4),
            "iou": round(float(table["iou"].mean()), 4), "images": len(table)}


def timed_fine_tune(start_name: str, checkpoint: Checkpoint | None, standin: DataLocation,
                    cfg: Profile, seed: int) -> dict:
    """One start fine-tuned with notebook 06's code on the stand-in's training photos: seconds
    (fit only) and the scores of its validation photos, held out."""
    model = start_model(start_name, cfg.encoder, cfg.fine_tune_lr, cfg.fine_tune_steps, checkpoint,
                        seed)
    batches = stand_in(cfg, standin, cfg.fine_tune_steps, seed=seed)
    began = synchronized_now(cfg.device)
    trainer = fine_tune(model, batches, cfg, f"ship_{start_name}_{cfg.encoder}", seed=seed)
    seconds = synchronized_now(cfg.device) - began
    return {"seed": seed, "seconds": round(seconds, 2), "steps": trainer.global_step,
            **mean_scores(model, standin, cfg.image_size, cfg.device)}


def candidate(checkpoint: Checkpoint, synthetic: DataLocation, standin: DataLocation,
              cfg: Profile, sizes: list[int], seeds: list[int]) -> dict:
    """Every measurement of one candidate checkpoint (see the module's docstring)."""
    encoder = checkpoint.encoder
    cfg = dataclasses.replace(cfg, encoder=encoder)
    model = start_model("synthetic", encoder, cfg.fine_tune_lr, cfg.fine_tune_steps, checkpoint)
    parameters = sum(p.numel() for p in model.parameters())
    return {"checkpoint": checkpoint.path.name, "encoder": encoder, "parameters": parameters,
            "half_precision_mib": round(2 * parameters / 2**20, 1),
            "trained_steps": checkpoint.trained_steps,
            "synthetic_valid": mean_scores(model, synthetic, cfg.image_size, cfg.device),
            "zero_shot": {str(size): mean_scores(model, standin, size, cfg.device)
                          for size in sizes},
            "fine_tuned": [timed_fine_tune("synthetic", checkpoint, standin, cfg, seed)
                           for seed in seeds]}


def ship(checkpoint: Checkpoint, out: Path, cfg: Profile, synthetic: DataLocation,
         provenance: dict) -> dict:
    """``checkpoint`` written in half precision to ``out``, scored again as written, with its
    provenance (``trained_steps`` among it) beside it; returns the provenance."""
    hyper_parameters, encoder = checkpoint.hyper_parameters, checkpoint.encoder
    model = load_weights(LitNailSegmentation(encoder, encoder_weights=None), checkpoint).half()
    path = save_weights(model, out / f"unet-{encoder}.pt", cfg.image_size)
    as_written = load_weights(LitNailSegmentation(encoder, encoder_weights=None), path)  # float32, rounded
    provenance = {"file": path.name, "bytes": path.stat().st_size,
                  "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "encoder": encoder,
                  "image_size": cfg.image_size, "stored_as": "float16 weights",
                  "source_checkpoint": checkpoint.path.name,
                  "hyper_parameters": hyper_parameters, **provenance,
                  "synthetic_valid": mean_scores(as_written, synthetic, cfg.image_size,
                                                 cfg.device)}
    write_json(path.with_suffix(".json"), provenance, default=str)
    return provenance


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.ship_model",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("candidates", nargs="+", type=Path, help="notebook 04 best-*.ckpt files")
    parser.add_argument("--ship", type=int, default=None, help="index of the candidate to ship")
    parser.add_argument("--profile", default="gpu")
    parser.add_argument("--num-images", type=int, default=None, help="images in the candidates' "
                        "training set (recorded); the course set of this size scores them "
                        "(default: the profile's)")
    parser.add_argument("--sets", type=int, default=1, help="sets of --num-images the candidates "
                        "trained on, generator seeds 0, 1, ... (recorded)")
    parser.add_argument("--trained-steps", type=int, default=None, help="optimizer steps of the "
                        "shipped candidate when its file does not record them (a weights file)")
    parser.add_argument("--style", default="course", choices=STYLES,
                        help="the synthetic style the candidates trained on (recorded)")
    parser.add_argument("--photos", type=int, default=50, help="stand-in photos (a fifth held out)")
    parser.add_argument("--sizes", default="128,192,256,384", help="zero-shot image sides")
    parser.add_argument("--seeds", type=int, default=3, help="fine-tuning runs per start")
    parser.add_argument("--fine-tune-steps", type=int, default=None,
                        help="steps of each fine-tuning run (default: the profile's)")
    parser.add_argument("--timing-steps", type=int, default=1200,
                        help="steps of one more run of the shipped start, timed")
    parser.add_argument("--trained-by", default="notebooks/04_dali_pipeline.ipynb, gpu profile "
                        "defaults (encoder <encoder>), on the published edition's data")
    parser.add_argument("--commit", default="", help="the commit the candidates were trained at")
    parser.add_argument("--out", type=Path, required=True)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    candidates = [read_checkpoint(path) for path in args.candidates]  # each read once
    if args.ship is not None:  # checked before anything is measured
        shipped = candidates[args.ship]
        steps = shipped.trained_steps or args.trained_steps
        if not steps:
            raise SystemExit(f"{shipped.path} does not record its training steps: pass --trained-steps.")
    args.out.mkdir(parents=True, exist_ok=True)
    profile = select_profile(args.profile, num_images=args.num_images)
    synthetic = ensure_prepared(profile)
    photos = photos_or_standin(args.profile, num_images=args.photos)
    cfg, standin = start({"profile": args.profile, "fine_tune_steps": args.fine_tune_steps}, photos)
    held_out = read_split(standin, "valid")  # the stand-in's validation split: never trained on
    sizes, seeds = [int(size) for size in args.sizes.split(",")], list(range(args.seeds))
    about = {**provenance(), "commit": args.commit, "profile": cfg.name}
    results = {**about, "standin": {"photos": args.photos, "held_out": len(held_out),
                                    "image_size": cfg.image_size, "batch_size": cfg.batch_size,
                                    "fine_tune_steps": cfg.fine_tune_steps, "seeds": seeds},
               "candidates": [candidate(read, synthetic, standin, cfg, sizes, seeds)
                              for read in candidates]}
    if args.ship is not None:
        encoder = results["candidates"][args.ship]["encoder"]
        random_cfg = dataclasses.replace(cfg, encoder=encoder)
        results["random_start"] = {"encoder": encoder, "fine_tuned": [
            timed_fine_tune("random", None, standin, random_cfg, seed) for seed in seeds]}
        trained_by = args.trained_by.replace("<encoder>", encoder)
        long_cfg = dataclasses.replace(random_cfg, fine_tune_steps=args.timing_steps)
        results["shipped_long_run"] = timed_fine_tune("synthetic", shipped, standin, long_cfg,
                                                      seed=0)
        trained_on = {"generator_version": GENERATOR_VERSION, "style": args.style,
                      "images": profile.num_images * args.sets,
                      "generator_seeds": list(range(args.sets))}
        results["shipped"] = ship(shipped, args.out, cfg, synthetic,
                                  {**about, "trained_by": trained_by, "synthetic_set": trained_on,
                                   "trained_steps": steps})
    write_json(args.out / "shipped_model.json", results, default=str)
    print(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
