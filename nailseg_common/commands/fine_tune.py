"""Fine-tune the course's model on your own photos, in one command: notebook 06's recipe.

``nailseg-fine-tune PHOTOS_ROOT OUT``: PHOTOS_ROOT (``Images/<type>/`` and
``Masks/<type>/``, or flat ``Images/`` and ``Masks/``) is checked and prepared as notebook 06
prepares its ``data_root`` (PHOTOS_ROOT is only read, the prepared files go to the data
folder). The start is ``--checkpoint``, else notebook 06's synthetic start
(:func:`~nailseg_common.training.checkpoints.choose_checkpoint`), read once; every run
follows the profile's ``keep_*`` recipe (the model to keep: as long as a laptop allows) with
notebook 06's functions (:mod:`nailseg_common.training.fine_tuning`).

Every photo is scored as ``nailseg-predict`` would draw its mask (hard Dice and IoU at
probability 0.5 against the full-size mask, the photo seen at the model's side with
test-time flips, the probabilities upsampled to the photo): by the start as it is
(zero-shot, at the side it was trained at) and, by k-fold cross-validation, fine-tuned from
it (at the fine-tuning side) by a model that never saw it; the command prints their means
with standard errors and the paired gain of fine-tuning. Then it fine-tunes the start on
all the photos and writes, each file whole or not at all: ``OUT/scores.csv`` (one row per
photo), ``OUT/summary.json`` (recipe, profile, device, versions, date, both scores and their
sides) and, last, ``OUT/model.pt``, which ``nailseg-predict --checkpoint OUT/model.pt``
reads. When fine-tuning does not beat the start beyond the spread, the last line says so
and names the start to keep using, and ``model.pt`` is not written (an earlier one in OUT is
deleted) unless ``--write-anyway``.

Exit status: 0 done; 2, with one line naming the file and the fix, when an input cannot be
used (see ``docs/troubleshooting.md``); 130 after Ctrl-C, 143 after SIGTERM (nothing of the
run written).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import shutil
import sys
import warnings
from pathlib import Path

from nailseg_common.commands.command_line import (
    IMAGE_SIDE,
    add_checkpoint_option,
    at_least,
    check_numbers,
    choose_device,
    create_out,
    joined_numbers,
    lightning_stops,
    peak_lr,
    run_command,
    starting,
)

with starting(__name__):  # Ctrl-C during these imports: one line (see command_line)
    import numpy as np
    import pandas as pd
    import torch

    from nailseg_common.commands.predict import predict_mask
    from nailseg_common.core.errors import DataError
    from nailseg_common.core.files import (
        as_disk_full,
        discard,
        disk_full,
        free_bytes,
        is_disk_full,
        stale_staging,
        write_json,
    )
    from nailseg_common.core.statistics import Verdict, mean_spread, paired_gain
    from nailseg_common.data.images import read_rgb
    from nailseg_common.data.preparation import (
        LAYOUT_HELP,
        ensure_prepared,
        fit_batch_to_split,
        read_label,
    )
    from nailseg_common.pipelines.cached_pipeline import BatchSlices
    from nailseg_common.setup.environment import provenance
    from nailseg_common.setup.profiles import (
        PROFILES,
        Profile,
        add_profile_option,
        profile_name,
        select_profile,
        set_matmul_precision,
    )
    from nailseg_common.setup.progress import progress
    from nailseg_common.training.checkpoints import (
        Checkpoint,
        build_model,
        choose_checkpoint,
        save_weights,
    )
    from nailseg_common.training.fine_tuning import (
        PhotosOnDevice,
        compare_starts,
        fine_tune,
        k_folds,
        photos_on_device,
        score_photos,
        start_model,
    )
    from nailseg_common.training.unet import LitNailSegmentation

MODEL, SCORES, SUMMARY = "model.pt", "scores.csv", "summary.json"
OUTPUTS = (SCORES, SUMMARY, MODEL)
"""What a run writes, in the order they are renamed into place."""
STAGING = "nailseg-fine-tune"
"""``OUT/.nailseg-fine-tune.tmp-<pid>``: where a run writes :data:`OUTPUTS` before they land."""
PHOTOS_HELP = ("Pass as PHOTOS_ROOT a folder with your photos in Images/<type>/ and their masks "
               "(same names, .png or .jpg) in Masks/<type>/, or all of them directly in "
               "Images/ and Masks/.")
SPACE_MARGIN = 1 << 20
"""Room asked of OUT's disk beyond the model's weights: the scores, the summary, torch.save's
overhead."""
ZERO_SHOT, FINE_TUNED = "zero-shot", "fine-tuned"
JSON_KEYS = {"hard Dice": "hard_dice", "±": "hard_dice_spread", "IoU": "iou", "IoU ±": "iou_spread",
             "worst Dice": "worst_dice"}
"""The names in summary.json of the score table's columns."""
STOPPED = (f"nothing of this run was written ({MODEL}, {SCORES} and {SUMMARY} land together; "
           "those in OUT, if any, are an earlier run's); run the same command again.")
"""What a stop (Ctrl-C, SIGTERM) leaves: the end of its one line."""


NUMBERS = {
    "--steps": at_least(1, "a run needs at least 1 step, e.g. 50."),
    "--lr": peak_lr("1e-3"),
    "--image-size": IMAGE_SIDE,
    "--folds": at_least(2, "choose 2 or more (each fold holds out some photos)."),
}
"""The numeric options: what they are, their rule, and the fix of a value that breaks it."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, ``--help`` explaining each option; a number of the wrong kind or sign
    exits 2 naming the option (``--lr -1e-3`` is read as a number)."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="nailseg-fine-tune", description=__doc__.splitlines()[0],
        epilog="Exit status: 0 done; 2 no model written (the message says why); 130 stopped "
               "by Ctrl-C, 143 by SIGTERM. Then: nailseg-predict PHOTOS MASKS --checkpoint "
               "OUT/model.pt.")
    parser.add_argument("photos_root", metavar="PHOTOS_ROOT", type=Path,
                        help="your photos and masks: Images/<type>/ and Masks/<type>/, or flat "
                             "Images/ and Masks/ (a mask has its photo's name); only read")
    parser.add_argument("out", metavar="OUT", type=Path,
                        help=f"where {MODEL}, {SCORES} and {SUMMARY} go")
    add_checkpoint_option(parser, "the model to start from (a best-*.ckpt of notebook 02 or 04, or a model.pt)")
    add_profile_option(parser, "the recipe (keep_steps, keep_lr, keep_image_size, keep_folds)")
    parser.add_argument("--steps", default=None,
                        help="optimizer steps of each run (default: the profile's keep_steps: "
                             "cpu 160, gpu 120)")
    parser.add_argument("--lr", default=None,
                        help="peak learning rate of each run (default: the profile's "
                             "keep_lr: cpu 1e-3, gpu 7e-4)")
    parser.add_argument("--image-size", default=None,
                        help="side of the square the model sees, a multiple of 32 (default: "
                             "the profile's keep_image_size: smoke 64, cpu 192, gpu 384)")
    parser.add_argument("--folds", default=None,
                        help="folds of the cross-validation (default: the profile's "
                             "keep_folds: cpu 3, gpu 5; with fewer photos, one a photo)")
    parser.add_argument("--no-cross-validation", dest="cross_validation",
                        action="store_false",
                        help="skip the cross-validation: score the start as it is, then "
                             "fine-tune on all the photos")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="where it trains (default: auto, as the profile says: gpu on a "
                             "GPU)")
    parser.add_argument("--force", action="store_true",
                        help=f"overwrite {MODEL}, {SCORES} and {SUMMARY} in OUT")
    parser.add_argument("--write-anyway", action="store_true",
                        help=f"write {MODEL} even when fine-tuning does not beat the start as "
                             "nailseg-predict runs each (by default the start is kept and "
                             f"{MODEL} is not written)")
    args = parser.parse_args(joined_numbers(argv, tuple(NUMBERS)))
    check_numbers(parser, args, NUMBERS)
    return args


def check_out(out: Path, shown: str, photos_root: Path, force: bool) -> None:
    """DataError when ``out`` (``shown`` as typed) is a file, lies inside ``photos_root`` (only
    read), or holds one of :data:`OUTPUTS` and not ``force``."""
    if out.exists() and not out.is_dir():
        raise DataError(f"OUT {shown} is a file: pass a folder.")
    root = photos_root.expanduser().resolve()
    if out.is_relative_to(root):
        raise DataError(f"OUT {shown} lies inside PHOTOS_ROOT {root}, which is only read: pass "
                        "an OUT outside it.")
    held = [name for name in OUTPUTS if (out / name).exists()]
    if held and not force:
        raise DataError(f"{Path(shown) / held[0]} exists: pass --force to overwrite it, or "
                        "another OUT.")


def check_space(out: Path, checkpoint: Checkpoint) -> None:
    """DataError, before the runs, when ``out``'s disk lacks room for the model (about the
    start's weights) and the scores."""
    needed = SPACE_MARGIN + sum(value.numel() * value.element_size()
                                for value in checkpoint.state_dict.values()
                                if isinstance(value, torch.Tensor))
    if free_bytes(out) < needed:
        raise DataError(f"Cannot write to OUT {out}: {disk_full(out)}, the model needs about "
                        f"{needed} bytes: free some space, or pass an OUT folder on another "
                        "disk.")


def score_table(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """:func:`compare_starts`' table of ``tables``, with the spread of the mean IoU."""
    table = compare_starts(tables)
    table.insert(table.columns.get_loc("IoU") + 1, "IoU ±",
                 [mean_spread(tables[name]["iou"]) for name in table.index])
    return table


def per_photo(tables: dict[str, pd.DataFrame], frame: pd.DataFrame, root: Path) -> pd.DataFrame:
    """One row per photo: its path under ``root``, its type, and its ``dice`` and ``iou`` by
    each model of ``tables``."""
    rows = pd.DataFrame({"image": [Path(image).relative_to(root).as_posix()
                                   for image in frame["image"]], "type": frame["type"]})
    for name, table in tables.items():
        rows[f"{name} dice"], rows[f"{name} iou"] = table["dice"], table["iou"]
    return rows.sort_values("image")


def scored_as_predicted(model: LitNailSegmentation, frame: pd.DataFrame, rows, side: int,
                        device: torch.device) -> pd.DataFrame:
    """The hard ``dice`` and ``iou`` of the photos ``rows`` of ``frame`` (index kept), each as
    ``nailseg-predict`` draws its mask with ``model``: the photo seen at ``side`` with
    test-time flips, the probabilities upsampled to the photo's own size and thresholded,
    scored against the full-size mask (preparation's label: EXIF turns applied)."""
    model = model.to(device).eval()
    scored = []
    with torch.inference_mode():
        for row in rows:
            photo = read_rgb(frame.at[row, "image"])
            nail = torch.from_numpy(read_label(frame.at[row, "label"]) == 1)
            drawn = torch.from_numpy(predict_mask(model, photo, side, device) > 0)
            # the drawn mask as logits (+1 nail, -1 not): notebook 06's scores of one photo
            scored.append(score_photos(drawn.float()[None, None] * 2 - 1,
                                       nail.float()[None, None], frame.loc[[row]]))
    return pd.concat(scored)


def score_and_fine_tune(cfg: Profile, frame: pd.DataFrame, photos: BatchSlices, folds: list,
                        checkpoint: Checkpoint) -> tuple[dict[str, pd.DataFrame], LitNailSegmentation]:
    """Every photo scored as ``nailseg-predict`` runs each model (:func:`scored_as_predicted`):
    by the start as it is, at the side it was trained at, and, out of fold over ``folds``
    (when there are some), fine-tuned from it with notebook 06's recipe, at ``cfg.image_size``;
    and the start fine-tuned on all the photos (none held out: it validates none). A bar
    counts the runs."""
    def start_weights() -> LitNailSegmentation:
        return start_model("synthetic", cfg.encoder, cfg.fine_tune_lr, cfg.fine_tune_steps, checkpoint)

    start_side = start_image_size(checkpoint, cfg.name)
    tables = {ZERO_SHOT: scored_as_predicted(start_weights(), frame, frame.index, start_side,
                                             cfg.device)}
    everything = np.arange(len(frame))
    held_out_scores = []
    with (contextlib.closing(progress(range(len(folds) + 1), "fine-tuning runs")) as runs,
          contextlib.redirect_stdout(io.StringIO()),  # each run's step lines: the bar says it
          warnings.catch_warnings(), lightning_stops()):
        warnings.filterwarnings("ignore", "Total length of `DataLoader` across ranks is zero")
        for fold, (train, held_out) in enumerate(folds):
            next(runs)
            model = start_weights()
            fine_tune(model, PhotosOnDevice(photos, train, held_out, cfg.batch_size,
                                            cfg.fine_tune_steps, seed=fold), cfg, "06_synthetic",
                      seed=fold)
            held_out_scores.append(scored_as_predicted(model, frame, held_out, cfg.image_size,
                                                       cfg.device))
        if folds:
            tables[FINE_TUNED] = pd.concat(held_out_scores).sort_index()
        next(runs)
        model = start_weights()
        fine_tune(model, PhotosOnDevice(photos, everything, everything[:0], cfg.batch_size,
                                        cfg.fine_tune_steps), cfg, "06_all_photos")
    return tables, model


def start_image_size(checkpoint: Checkpoint, profile: str) -> int:
    """The side ``nailseg-predict --profile profile`` runs the start at: the side it was
    trained at, else the profile's."""
    return checkpoint.image_size or PROFILES[profile].image_size


def report(tables: dict[str, pd.DataFrame], sides: dict[str, int]) -> dict:
    """Print the mean scores of ``tables`` (each model at its side of ``sides``) and, with
    fine-tuned ones, the paired gain of fine-tuning and its verdict; the same for
    ``summary.json``."""
    scores = score_table(tables)
    print("hard Dice and IoU at probability 0.5, each photo's mask drawn as nailseg-predict "
          f"draws it ({', '.join(f'{name} at {side} px' for name, side in sides.items())}), "
          f"means over the photos (±: the 95 % interval of the mean):\n"
          f"{scores.round(3).to_string()}")
    summary = {"scores": scores.rename(columns=JSON_KEYS).to_dict(orient="index"),
               "image_sides": sides}
    if FINE_TUNED in tables:
        fine_tuned, zero_shot = tables[FINE_TUNED]["dice"], tables[ZERO_SHOT]["dice"]
        gain = paired_gain(fine_tuned, zero_shot)
        verdict = Verdict("fine-tuning gain in hard Dice", gain["gain"], 0.0,
                          mean_spread(fine_tuned - zero_shot), "the start as it is")
        print(f"{verdict}; better on {gain['wins']} photos, worse on {gain['loses']}")
        summary.update(gain=gain, verdict=verdict.outcome)
    return summary


def fine_tune_photos(args: argparse.Namespace, argv: list[str]) -> int:
    """Score, fine-tune and write what ``args`` asks for; the exit status (0)."""
    out = args.out.expanduser().resolve()
    accelerator = (None if args.device == "auto"
                   else "gpu" if choose_device(args.device).type == "cuda" else "cpu")
    name = profile_name(args.profile)
    checkpoint = choose_checkpoint(args.checkpoint, name)
    if checkpoint is None:
        raise DataError(f"No checkpoint of profile {name!r} and no model shipped with the "
                        "course: pass --checkpoint PATH (a best-*.ckpt or a model.pt).")
    build_model(checkpoint)  # weights that do not fit the U-Net: DataError, before any training
    check_out(out, str(args.out), args.photos_root, args.force)
    profile = select_profile(name, accelerator=accelerator)
    cfg = dataclasses.replace(profile, image_size=args.image_size or profile.keep_image_size,
                              fine_tune_steps=args.steps or profile.keep_steps,
                              fine_tune_lr=args.lr or profile.keep_lr,
                              encoder=checkpoint.encoder)
    set_matmul_precision(cfg)
    try:
        data = ensure_prepared(cfg, args.photos_root.expanduser())
    except DataError as error:  # preparation's layout advice is the notebooks': this command's
        raise DataError(str(error).replace(LAYOUT_HELP, PHOTOS_HELP)) from None
    cfg = fit_batch_to_split(cfg, data)
    create_out(out, f"OUT {args.out}")  # before the runs: an OUT it cannot write stops it now
    check_space(out, checkpoint)
    frame, photos = photos_on_device(data, cfg)
    folds = (k_folds(len(frame), min(args.folds or cfg.keep_folds, len(frame)))
             if args.cross_validation else [])
    print(f"start: {checkpoint.path}; {len(frame)} photos, "
          + (f"{len(folds)} folds" if folds else "no cross-validation")
          + f"; {cfg.fine_tune_steps} steps a run at {cfg.image_size} px, batch {cfg.batch_size}, "
          f"lr {cfg.fine_tune_lr}, on {cfg.device}")
    tables, model = score_and_fine_tune(cfg, frame, photos, folds, checkpoint)
    summary = report(tables, {ZERO_SHOT: start_image_size(checkpoint, cfg.name),
                              **({FINE_TUNED: cfg.image_size} if folds else {})})
    gained = summary.get("verdict", "met") == "met"  # no cross-validation: nothing to compare
    write_model = gained or args.write_anyway
    recipe = {"start": str(checkpoint.path), "encoder": cfg.encoder, "image_size": cfg.image_size,
              "batch_size": cfg.batch_size, "steps": cfg.fine_tune_steps, "lr": cfg.fine_tune_lr,
              "keep_statistics": cfg.fine_tune_keep_statistics, "precision": cfg.precision,
              "folds": len(folds)}
    run = {"command": ["nailseg-fine-tune", *argv], **provenance(),
           "photos_root": str(data.raw), "photos": len(frame), "profile": cfg.name,
           "recipe": recipe, **summary, "model_written": write_model}
    write_outputs(out, per_photo(tables, frame, data.raw), run,
                  model if write_model else None, cfg.image_size)
    if gained:
        print(f"{out / MODEL}: fine-tuned on all {len(frame)} photos; per-photo scores in "
              f"{SCORES}, the run in {SUMMARY}. Masks for new photos: nailseg-predict PHOTOS "
              f"MASKS --checkpoint {out / MODEL}")
    else:
        kept = (f"{out / MODEL} is the fine-tuned model all the same (--write-anyway)"
                if write_model else f"{MODEL} not written (--write-anyway writes it)")
        print(f"fine-tuning did not beat the start as nailseg-predict runs each "
              f"({summary['verdict']}): keep the start, nailseg-predict PHOTOS MASKS "
              f"--checkpoint {checkpoint.path}; {kept}; the scores in {SCORES}, the run in "
              f"{SUMMARY}.")
    return 0


def write_outputs(out: Path, scores: pd.DataFrame, run: dict, model: LitNailSegmentation | None,
                  image_size: int) -> None:
    """:data:`SCORES`, :data:`SUMMARY` and :data:`MODEL` in ``out`` as one unit: all three are
    written into a hidden staging folder in ``out`` (what a killed run left there is deleted
    first), then renamed into place, the model last; without a ``model`` (the start kept), an
    earlier run's :data:`MODEL` in ``out`` is deleted, so that none is taken for this run's.
    DataError naming OUT when they cannot be written, nothing of them left behind."""
    for name in (*OUTPUTS, STAGING):  # staging of killed runs, theirs or an older version's
        for left in stale_staging(out / name):
            discard(left)
    staging = out / f".{STAGING}.tmp-{os.getpid()}"
    try:
        staging.mkdir()
        scores.to_csv(staging / SCORES, index=False)
        write_json(staging / SUMMARY, run, default=float)  # numpy's numbers
        if model is not None:
            save_weights(model, staging / MODEL, image_size)
        for name in OUTPUTS if model is not None else (SCORES, SUMMARY):
            os.replace(staging / name, out / name)
        if model is None:
            (out / MODEL).unlink(missing_ok=True)
    except OSError as error:
        if is_disk_full(as_disk_full(error, staging)):  # while the staged files fill the disk
            raise DataError(f"Cannot write {MODEL}, {SCORES} and {SUMMARY} to {out}: "
                            f"{disk_full(out)}: free some space, or pass an OUT folder on "
                            "another disk; nothing was written.") from None
        raise DataError(f"Cannot write {MODEL}, {SCORES} and {SUMMARY} to {out} "
                        f"({error.strerror or error}): pass an OUT folder you can write; "
                        "nothing was written.") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """``nailseg-fine-tune``: the exit status; errors as one line on stderr."""
    argv = sys.argv[1:] if argv is None else argv
    return run_command(lambda: fine_tune_photos(parse_args(argv), argv), STOPPED)


if __name__ == "__main__":
    raise SystemExit(main())
