"""Nail masks and overlays for new photos, by a trained course model.

``nailseg-predict IMAGES OUT``: for every JPEG or PNG photo under IMAGES
(recursively; or IMAGES itself when it is one file), OUT gets, at the photo's path relative
to IMAGES, ``<stem>.png``, the mask (one channel, 0 or 255) at the size a photo viewer shows
the photo (its EXIF orientation applied, as preparation reads it), and
``<stem>_overlay.jpg``, the photo with the mask tinted cyan. The model sees the photo resized
to its training side, as validation does; its probabilities are upsampled bilinearly to the
photo's size and thresholded at 0.5.

The model is ``--checkpoint``, else the better of the profile's newest and the shipped one
(:func:`~nailseg_common.training.checkpoints.choose_checkpoint`), read once; it sees photos at
``--image-size``, else at the side it was trained at, else at the profile's ``image_size``.

No input is ever overwritten, and no output read back: OUT must be new, empty, or a folder
an earlier run wrote (it holds the hidden :data:`MARKER`, written before the first output);
folders holding the marker, and OUT, are not read when they lie inside IMAGES. Links to
folders are followed (each folder read once). Hidden files and folders (as in preparation)
are not read; every other file that is not read is named at the end, with the fix. Each file
is written under a temporary hidden name and renamed into place, so an interrupted run
(Ctrl-C: one line saying it stopped) leaves no half-written file.

Exit status: 2, with one line naming the path and the fix, when the run cannot start (IMAGES
missing or without photos, no checkpoint or not one of the course's, an OUT that holds other
files or cannot be written, a wrong profile...). A photo that cannot be read is skipped with
a warning and the others are written (one bad file in a phone's dump should not cost the
rest of the run); skipped photos, photos in other formats (HEIC, WebP, GIF...), folders that
cannot be read and links that lead nowhere (loops, missing targets) are listed at the end and
the exit status is 1. 130 after Ctrl-C, 143 after SIGTERM.
Otherwise 0 (files that are not photos, such as notes, are named but are no failure).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path
from typing import NamedTuple

from nailseg_common.commands.command_line import (
    IMAGE_SIDE,
    add_checkpoint_option,
    check_numbers,
    choose_device,
    create_out,
    joined_numbers,
    run_command,
    starting,
    unwritable_out,
)

with starting(__name__):  # Ctrl-C during these imports: one line (see command_line)
    import numpy as np
    import torch
    import torch.nn.functional as F
    from PIL import Image
    from torch import nn

    from nailseg_common.core.errors import DataError
    from nailseg_common.core.files import remove_stale_staging, write_whole
    from nailseg_common.data.images import read_rgb
    from nailseg_common.data.preparation import IMAGE_SUFFIXES
    from nailseg_common.pipelines.albumentations_pipeline import valid_transform
    from nailseg_common.setup.paths import runs_dir, shown
    from nailseg_common.setup.profiles import PROFILES, add_profile_option, profile_name
    from nailseg_common.setup.progress import progress
    from nailseg_common.training.checkpoints import SHIPPED_MODEL, build_model, choose_checkpoint
    from nailseg_common.training.fine_tuning import predict_logits

MASK_SUFFIX, OVERLAY_SUFFIX = ".png", "_overlay.jpg"
MARKER = ".nailseg-predict"
"""The hidden file that marks OUT as this command's: it may be written again, never read."""
OTHER_PHOTOS = (".heic", ".heif", ".webp", ".gif", ".bmp", ".tif", ".tiff", ".avif", ".dng")
"""Photo formats that are not read (JPEG and PNG only): their files are a failure (exit 1)."""
CONVERT_HELP = ("convert them to JPEG or PNG and run again (a phone's HEIC: e.g. heif-convert "
                "IN.heic OUT.jpg, ImageMagick mogrify -format jpg *.heic, or on macOS sips -s "
                "format jpeg; or set the camera to save JPEG, 'Most Compatible' on an iPhone)")
MAX_NAMED = 5
STOPPED = ("each mask and overlay written so far is whole, none "
           "half-written; run the same command again to write them all.")
"""What a stop (Ctrl-C, SIGTERM) leaves: the end of its one line."""
TINT, OPACITY = (0, 255, 255), 0.45  # cyan: it stands out on red polish and on skin alike
"""The overlay's colour of nail pixels, and how much of it covers the photo there."""



def predict_mask(model: nn.Module, photo: np.ndarray, image_size: int,
                 device: torch.device, flips: bool = True) -> np.ndarray:
    """The ``HxW uint8`` mask (0/255) of ``photo`` (``HxWx3 uint8``): ``model`` on the photo
    resized to ``image_size`` as in validation, with test-time ``flips`` (``predict_logits``),
    its probabilities upsampled bilinearly to the photo's size, nail above 0.5."""
    resized = valid_transform(image_size)(image=photo)["image"]
    batch = torch.from_numpy(np.ascontiguousarray(resized.transpose(2, 0, 1)))[None].to(device)
    probabilities = F.interpolate(torch.sigmoid(predict_logits(model, batch, flips=flips)),
                                  size=photo.shape[:2], mode="bilinear", align_corners=False)
    return ((probabilities[0, 0] > 0.5).to(torch.uint8) * 255).numpy()


def overlay(photo: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``photo`` with the nail pixels of ``mask`` tinted :data:`TINT` at :data:`OPACITY`."""
    tinted = photo.astype(np.float32)
    nail = mask > 0
    tinted[nail] = (1 - OPACITY) * tinted[nail] + OPACITY * np.asarray(TINT, np.float32)
    return np.rint(tinted).astype(np.uint8)


class Found(NamedTuple):
    """What :func:`find_photos` found under IMAGES, each list sorted."""

    photos: list[Path]  # JPEG and PNG files: read
    others: list[Path]  # other files: not read
    hidden: list[Path]  # hidden files and folders: not read
    outputs: list[Path]  # folders of earlier runs (they hold MARKER), OUT aside: not read
    unreadable: list[Path]  # folders that cannot be listed
    dead_links: list[Path]  # links that lead nowhere (a loop, a missing target): not read


def find_photos(images: Path, out: Path) -> Found:
    """``images`` when it is a file, else everything under it, links to folders followed
    (each folder once); photos are files whose suffix is one of ``IMAGE_SUFFIXES`` in any
    case. ``out`` and folders holding :data:`MARKER` are not entered."""
    found = Found([], [], [], [], [], [])
    if images.is_file():
        (found.photos if images.suffix.lower() in IMAGE_SUFFIXES else found.others).append(images)
        return found
    seen = set()
    walk = os.walk(images, followlinks=True,
                   onerror=lambda error: found.unreadable.append(Path(error.filename)))
    for here, folders, names in walk:
        here, real = Path(here), Path(here).resolve()
        if real in seen or (here != images and (real == out or MARKER in names)):
            if real != out and real not in seen:
                found.outputs.append(here)
            folders[:] = []
            continue
        seen.add(real)
        found.hidden.extend(here / name for name in folders + names if name.startswith("."))
        folders[:] = [name for name in folders if not name.startswith(".")]
        for path in (here / name for name in names if not name.startswith(".")):
            if not path.exists():  # a link in a loop, or to nothing
                found.dead_links.append(path)
                continue
            (found.photos if path.suffix.lower() in IMAGE_SUFFIXES else found.others).append(path)
    return Found(*map(sorted, found))


def named(paths: list[Path], root: Path) -> str:
    """The first :data:`MAX_NAMED` of ``paths`` relative to ``root``, and how many more."""
    shown = ", ".join(str(path.relative_to(root)) for path in paths[:MAX_NAMED])
    return shown + (f" and {len(paths) - MAX_NAMED} more" if len(paths) > MAX_NAMED else "")


def check_out(out: Path, shown: str, targets: list[Path], photos: list[Path]) -> None:
    """DataError unless ``out`` (``shown`` as typed) is new, empty or an earlier run's (it holds
    :data:`MARKER`), and no ``target`` is one of the ``photos``: no input is overwritten."""
    if out.exists() and not out.is_dir():
        raise DataError(f"OUT {shown} is a file: pass a folder (new, or one this command wrote).")
    inputs = {photo.resolve() for photo in photos}
    overwritten = [target for target in targets if target.resolve() in inputs]
    if overwritten:
        raise DataError(f"OUT {shown} would overwrite the photo {overwritten[0]} with its mask: "
                        "pass a new or empty folder (a subfolder of IMAGES is fine).")
    if out.is_dir() and not (out / MARKER).is_file():
        held = sorted(path.name for path in out.iterdir())
        if held:
            raise DataError(f"OUT {shown} already holds files this command did not write "
                            f"({', '.join(held[:MAX_NAMED])}{' ...' if len(held) > MAX_NAMED else ''}"
                            "): masks there could overwrite photos; pass a new or empty folder "
                            "(a subfolder of IMAGES is fine).")


def claim(out: Path, shown: str) -> None:
    """Create ``out`` with its :data:`MARKER`, before the first output, and clear what runs
    killed while writing there left; DataError naming OUT when it cannot be written."""
    create_out(out, f"OUT {shown}")
    try:
        (out / MARKER).write_text("Written by nailseg-predict: this folder "
                                  "holds masks and overlays, and is never read as photos.\n")
    except OSError as error:
        raise unwritable_out(f"OUT {shown}", error.strerror or str(error)) from None
    remove_stale_staging(out)


def output_paths(photos: list[Path], root: Path, out: Path) -> dict[Path, tuple[Path, Path]]:
    """``{photo: (mask, overlay)}``, at each photo's path under ``root`` mirrored in ``out``;
    DataError when two photos would write the same mask (``a.jpg`` and ``a.png``)."""
    paths, owners = {}, {}
    for photo in photos:
        relative = photo.relative_to(root)
        mask = out / relative.with_suffix(MASK_SUFFIX)
        if mask in owners:
            raise DataError(f"{owners[mask]} and {photo} would both write {mask}: rename one.")
        owners[mask] = photo
        paths[photo] = mask, mask.with_name(relative.stem + OVERLAY_SUFFIX)
    return paths


def write_outputs(photo: np.ndarray, mask: np.ndarray, paths: tuple[Path, Path]) -> None:
    """The mask as a one-channel PNG and the overlay as a JPEG, each written atomically;
    DataError naming the file (not its temporary name) when it cannot be written."""
    mask_path, overlay_path = paths
    for path, image, options in ((mask_path, Image.fromarray(mask), {"format": "PNG"}),
                                 (overlay_path, Image.fromarray(overlay(photo, mask)),
                                  {"format": "JPEG", "quality": 90})):
        write_whole(path, functools.partial(image.save, **options),
                    ("free some space, or pass an OUT folder on another disk.",
                     "pass an OUT folder you can write."))


NUMBERS = {"--image-size": IMAGE_SIDE}
"""The numeric option, its rule, and the fix of a value that breaks it."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, ``--help`` explaining each option; a wrong ``--image-size`` exits 2."""
    parser = argparse.ArgumentParser(
        prog="nailseg-predict", description=__doc__.splitlines()[0],
        epilog="Exit status: 0 done; 1 some photos or folders could not be read, or are in "
               "another format (listed, the others written); 2 nothing done (the message says "
               "why); 130 stopped by Ctrl-C, 143 by SIGTERM.")
    parser.add_argument("images", metavar="IMAGES", type=Path,
                        help="a folder of photos, searched recursively for "
                             f"{', '.join(IMAGE_SUFFIXES)} files (any case), or one photo")
    parser.add_argument("out", metavar="OUT", type=Path,
                        help="where the outputs go, in IMAGES' subfolders: <stem>.png (the 0/255 "
                             "mask at the photo's displayed size) and <stem>_overlay.jpg (the "
                             "photo, nails tinted cyan); new, empty or an earlier run's; it may lie inside "
                             "IMAGES (it is not read)")
    add_checkpoint_option(parser, "a best-*.ckpt written by notebook 02 or 04 (runs/<profile>/<run>/"
                                  "version_N/checkpoints/), or a model notebook 06 or nailseg-fine-tune saved")
    add_profile_option(parser, "where the default checkpoint is looked for and the default --image-size")
    parser.add_argument("--image-size", default=None,
                        help="side of the square the model sees, a multiple of 32 (default: "
                             "the side it was trained at, read from the checkpoint or its run's "
                             "hparams.yaml, else the profile's image_size: smoke 64, cpu 192, gpu 384)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="where the model runs (default: auto, the GPU when there is one)")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(joined_numbers(argv, tuple(NUMBERS)))
    check_numbers(parser, args, NUMBERS)
    return args


def predict(args: argparse.Namespace) -> int:
    """Write the masks and overlays ``args`` asks for; the exit status (see the module doc)."""
    images, out = args.images.expanduser().resolve(), args.out.expanduser().resolve()
    if not images.exists():
        raise DataError(f"{args.images} does not exist: pass a folder of photos, or one photo.")
    if out == images:
        raise DataError(f"OUT {args.out} is IMAGES itself: the masks would overwrite .png "
                        "photos; pass another folder (a subfolder of IMAGES is fine).")
    if (images / MARKER).is_file():
        raise DataError(f"{args.images} holds the masks and overlays of an earlier run (it has "
                        f"{MARKER}): pass the folder of your photos as IMAGES.")
    found = find_photos(images, out)
    root = images.parent if images.is_file() else images
    if not found.photos:
        others = f"; not read: {named(found.others, root)}" if found.others else ""
        raise DataError(f"No photos in {args.images}: looked for files ending in "
                        f"{', '.join(IMAGE_SUFFIXES)} (any case), hidden ones and OUT left out"
                        f"{others}{'; ' + CONVERT_HELP if other_photos(found) else ''}.")
    paths = output_paths(found.photos, root, out)
    check_out(out, str(args.out), [t for targets in paths.values() for t in targets], found.photos)
    device = choose_device(args.device)
    name = profile_name(args.profile)  # where a checkpoint is looked for; --device says where to run
    checkpoint = choose_checkpoint(args.checkpoint, name)
    if checkpoint is None:
        raise DataError(f"No checkpoint of profile {name!r} under {runs_dir() / name} and no "
                        f"{SHIPPED_MODEL}: run notebook 02 (or 04) in this profile first, or "
                        "pass --checkpoint PATH (a best-*.ckpt).")
    model = build_model(checkpoint).to(device)
    image_size = args.image_size or checkpoint.image_size or PROFILES[name].image_size
    claim(out, str(args.out))
    skipped = []
    with torch.inference_mode():
        for photo, targets in progress(paths.items(), "masks", total=len(paths)):
            try:
                rgb = read_rgb(photo)
            except DataError as error:
                print(f"warning: skipped: {error}", file=sys.stderr)
                skipped.append(photo)
                continue
            write_outputs(rgb, predict_mask(model, rgb, image_size, device), targets)
    print(f"{len(found.photos) - len(skipped)} of {len(found.photos)} photos have a mask under "
          f"{shown(out)} (<stem>{MASK_SUFFIX} and <stem>{OVERLAY_SUFFIX}); model "
          f"{shown(checkpoint.path)} at {image_size}x{image_size} on {device}.")
    return report(found, skipped, root)


def other_photos(found: Found) -> list[Path]:
    """The files of ``found`` in a photo format other than JPEG or PNG."""
    return [path for path in found.others if path.suffix.lower() in OTHER_PHOTOS]


def report(found: Found, skipped: list[Path], root: Path) -> int:
    """Name on stderr every file and folder under ``root`` that was not read; the exit status:
    1 when photos or folders were left unread, else 0."""
    converted = other_photos(found)
    notes = [f"{named(paths, root)} ({why})" for paths, why in (
        ([p for p in found.others if p not in converted], "not photos"),
        (found.hidden, "hidden"),
        (found.outputs, "the outputs of an earlier run")) if paths]
    if notes:
        print(f"note: not read: {'; '.join(notes)}.", file=sys.stderr)
    errors = [f"{len(paths)} {what}: {named(paths, root)}: {fix}." for paths, what, fix in (
        (converted, "photos not in JPEG or PNG were not read", CONVERT_HELP),
        (found.unreadable, "folders could not be read",
         f"give your user read access (chmod -R u+rX {root})"),
        (found.dead_links, "links lead nowhere (a loop, or a missing target)",
         "point them at a photo, or remove them"),
        (skipped, "unreadable photos skipped", "see the warnings above")) if paths]
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    return 1 if errors else 0


def main(argv: list[str] | None = None) -> int:
    """``nailseg-predict``: the exit status; errors as one line on stderr."""
    return run_command(lambda: predict(parse_args(argv)), STOPPED)


if __name__ == "__main__":
    raise SystemExit(main())
