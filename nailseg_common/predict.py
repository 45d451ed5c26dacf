"""Nail masks and overlays for new photos, by a trained course model.

``python -m nailseg_common.predict IMAGES OUT``: for every JPEG or PNG photo under IMAGES
(recursively; or IMAGES itself when it is one file), OUT gets, at the photo's path relative
to IMAGES, ``<stem>.png``, the mask (one channel, 0 or 255) at the size a photo viewer shows
the photo (its EXIF orientation applied, as preparation reads it), and
``<stem>_overlay.jpg``, the photo with the mask tinted red. The model sees the photo resized
to its training side, as validation does; its probabilities are upsampled bilinearly to the
photo's size and thresholded at 0.5.

The model is ``--checkpoint``, else :func:`default_checkpoint`; it sees photos at
``--image-size``, else at the side it was trained at (:func:`trained_image_size`), else
at the profile's ``image_size``. Hidden files and folders (as in preparation) and OUT, when
it lies inside IMAGES, are not read. Each file is written under
a temporary hidden name and renamed into place, so an interrupted run leaves no half-written
file.

Exit status: 2, with one line naming the path and the fix, when the run cannot start (IMAGES
missing or without photos, no checkpoint or not one of the course's, OUT not writable...).
A photo that cannot be read is skipped with a warning and the others are written (one bad
file in a phone's dump should not cost the rest of the run); the skipped photos are listed
at the end and the exit status is 1. Otherwise 0.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import yaml
from PIL import Image
from torch import nn

from nailseg_common.data.images import DataError, read_rgb
from nailseg_common.data.preparation import IMAGE_SUFFIXES
from nailseg_common.pipelines.albumentations_pipeline import valid_transform
from nailseg_common.setup.paths import runs_dir
from nailseg_common.setup.profiles import Profile, select_profile
from nailseg_common.setup.progress import progress
from nailseg_common.training.finetune import (
    SHIPPED_MODEL,
    checkpoint_hparams,
    load_weights,
    resolve_checkpoint,
)
from nailseg_common.training.unet import LitNailSegmentation

MASK_SUFFIX, OVERLAY_SUFFIX = ".png", "_overlay.jpg"
TINT, OPACITY = (255, 0, 0), 0.45
"""The overlay's colour of nail pixels, and how much of it covers the photo there."""

NOT_A_CHECKPOINT = (LookupError, EOFError, RuntimeError, TypeError, ValueError, AttributeError,
                    pickle.UnpicklingError)
"""What loading a file that is not a course checkpoint raises (no pickle, no
``hyper_parameters`` or ``encoder``, other layers)."""


def default_checkpoint(profile: Profile) -> Path:
    """The model used without ``--checkpoint``: of the newest ``best-*.ckpt`` of notebook 02
    or 04 in ``profile`` and the model the course ships, the one that recorded the better
    synthetic validation Dice (:func:`~nailseg_common.training.finetune.resolve_checkpoint`);
    DataError when there is neither."""
    found = resolve_checkpoint("", profile)
    if found is None:
        raise DataError(f"No checkpoint of profile {profile.name!r} under "
                        f"{runs_dir() / profile.name} and no {SHIPPED_MODEL}: run notebook 02 "
                        "(or 04) in this profile first, or pass --checkpoint PATH (a best-*.ckpt).")
    return found


def trained_image_size(checkpoint: Path) -> int | None:
    """The image side ``checkpoint``'s model was trained at: the file's own ``image_size``
    (written by :func:`~nailseg_common.training.finetune.save_weights`), else the profile its run's CSV
    log recorded (``<run>/version_N/hparams.yaml`` beside ``checkpoints/``); None when neither
    says. Call it on a file :func:`load_model` has read."""
    size = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True).get("image_size")
    if size is None:
        logged = checkpoint.parent.parent / "hparams.yaml"
        try:
            size = (yaml.safe_load(logged.read_text()) or {}).get("profile", {}).get("image_size")
        except (OSError, yaml.YAMLError, AttributeError):
            return None
    return size if isinstance(size, int) and size > 0 else None


def load_model(checkpoint: Path) -> LitNailSegmentation:
    """The course's U-Net with every weight of ``checkpoint``, in eval mode; DataError naming
    the file when it is not a checkpoint of that model."""
    try:
        encoder = checkpoint_hparams(checkpoint)["encoder"]
        return load_weights(LitNailSegmentation(encoder), checkpoint).eval()
    except OSError as error:
        raise DataError(f"Cannot read checkpoint {checkpoint} ({error.strerror or error}).") from None
    except NOT_A_CHECKPOINT as error:
        reason = (str(error).strip().splitlines() or [""])[0][:100]
        raise DataError(f"{checkpoint} is not a checkpoint of this course's U-Net "
                        f"({type(error).__name__}: {reason}): pass a best-*.ckpt written by "
                        "notebook 02 or 04 (or notebook 08's final.ckpt).") from None


def predict_mask(model: nn.Module, photo: np.ndarray, image_size: int,
                 device: torch.device) -> np.ndarray:
    """The ``HxW uint8`` mask (0/255) of ``photo`` (``HxWx3 uint8``): ``model`` on the photo
    resized to ``image_size`` as in validation, its probabilities upsampled bilinearly to the
    photo's size, nail above 0.5."""
    resized = valid_transform(image_size)(image=photo)["image"]
    batch = torch.from_numpy(np.ascontiguousarray(resized.transpose(2, 0, 1)))[None].to(device)
    probabilities = F.interpolate(torch.sigmoid(model(batch).float()), size=photo.shape[:2],
                                  mode="bilinear", align_corners=False)
    return ((probabilities[0, 0] > 0.5).to(torch.uint8) * 255).cpu().numpy()


def overlay(photo: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``photo`` with the nail pixels of ``mask`` tinted :data:`TINT` at :data:`OPACITY`."""
    tinted = photo.astype(np.float32)
    nail = mask > 0
    tinted[nail] = (1 - OPACITY) * tinted[nail] + OPACITY * np.asarray(TINT, np.float32)
    return np.rint(tinted).astype(np.uint8)


def save_atomically(image: Image.Image, path: Path, file_format: str, **options) -> None:
    """``image`` written to ``path`` under a temporary hidden sibling name, then renamed into
    place: an interrupted run leaves the previous file or none, never half of one."""
    staging = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        image.save(staging, format=file_format, **options)
        os.replace(staging, path)
    finally:
        staging.unlink(missing_ok=True)


def find_photos(images: Path, out: Path) -> list[Path]:
    """``images`` when it is a photo, else the photos under it, sorted: files whose suffix is
    one of ``IMAGE_SUFFIXES`` in any case, hidden files and folders and ``out`` left out."""
    if images.is_file():
        return [images] if images.suffix.lower() in IMAGE_SUFFIXES else []
    return sorted(path for path in images.rglob("*")
                  if path.suffix.lower() in IMAGE_SUFFIXES and path.is_file()
                  and not path.is_relative_to(out)
                  and not any(part.startswith(".") for part in path.relative_to(images).parts))


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
    """The mask as a one-channel PNG and the overlay as a JPEG, each written atomically."""
    mask_path, overlay_path = paths
    try:
        mask_path.parent.mkdir(parents=True, exist_ok=True)
        save_atomically(Image.fromarray(mask), mask_path, "PNG")
        save_atomically(Image.fromarray(overlay(photo, mask)), overlay_path, "JPEG", quality=90)
    except OSError as error:
        raise DataError(f"Cannot write {os.fsdecode(error.filename or mask_path)} "
                        f"({error.strerror or error}): pass an OUT folder you can write.") from None


def choose_device(choice: str) -> torch.device:
    """``cuda`` or ``cpu``; ``auto`` is ``cuda`` when PyTorch sees a GPU."""
    if choice == "cuda" and not torch.cuda.is_available():
        raise DataError("--device cuda, but PyTorch sees no CUDA GPU: use --device cpu (or auto).")
    return torch.device("cuda" if choice != "cpu" and torch.cuda.is_available() else "cpu")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, ``--help`` explaining each option; a wrong ``--image-size`` exits 2."""
    parser = argparse.ArgumentParser(
        prog="python -m nailseg_common.predict", description=__doc__.splitlines()[0],
        epilog="Exit status: 0 done; 1 some photos could not be read (listed, the others "
               "written); 2 nothing done (the message says why).")
    parser.add_argument("images", metavar="IMAGES", type=Path,
                        help="a folder of photos, searched recursively for "
                             f"{', '.join(IMAGE_SUFFIXES)} files (any case), or one photo")
    parser.add_argument("out", metavar="OUT", type=Path,
                        help="where the outputs go, in IMAGES' subfolders: <stem>.png (the 0/255 "
                             "mask at the photo's displayed size) and <stem>_overlay.jpg (the "
                             "photo, nails tinted red); it may lie inside IMAGES (it is not read)")
    parser.add_argument("--checkpoint", default="",
                        help="a best-*.ckpt written by notebook 02 or 04 (runs/<profile>/<run>/"
                             "version_N/checkpoints/), or a model notebook 06 saved; default: "
                             "of the profile's newest best-*.ckpt and the course's model, the "
                             "better on its synthetic validation")
    parser.add_argument("--profile", default="",
                        help="smoke, cpu or gpu: where the default checkpoint is looked for and "
                             "the default --image-size (default: $NAILSEG_PROFILE, else chosen "
                             "from the hardware)")
    parser.add_argument("--image-size", type=int, default=None,
                        help="side of the square the model sees, a multiple of 32 (default: "
                             "the side it was trained at, read from the checkpoint or its run's "
                             "hparams.yaml, else the profile's image_size: smoke 64, cpu 96, gpu 384)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="where the model runs (default: auto, the GPU when there is one)")
    args = parser.parse_args(argv)
    if args.image_size is not None and (args.image_size <= 0 or args.image_size % 32):
        parser.error(f"--image-size {args.image_size}: the U-Net needs a positive multiple of 32.")
    return args


def predict(args: argparse.Namespace) -> int:
    """Write the masks and overlays ``args`` asks for; the exit status (see the module doc)."""
    images, out = args.images.expanduser().resolve(), args.out.expanduser().resolve()
    if not images.exists():
        raise DataError(f"{args.images} does not exist: pass a folder of photos, or one photo.")
    if out == images:
        raise DataError(f"OUT {args.out} is IMAGES itself: the masks would overwrite .png "
                        "photos; pass another folder (a subfolder of IMAGES is fine).")
    photos = find_photos(images, out)
    if not photos:
        raise DataError(f"No photos in {args.images}: looked for files ending in "
                        f"{', '.join(IMAGE_SUFFIXES)} (any case), hidden ones and OUT left out.")
    paths = output_paths(photos, images.parent if images.is_file() else images, out)
    device = choose_device(args.device)
    try:  # only the profile's name and image_size matter here; --device says where to run
        profile = select_profile(args.profile, accelerator="cpu")
        checkpoint = (resolve_checkpoint(args.checkpoint, profile) if args.checkpoint
                      else default_checkpoint(profile))
    except (ValueError, FileNotFoundError) as error:
        raise DataError(str(error)) from None
    model = load_model(checkpoint).to(device)
    image_size = args.image_size or trained_image_size(checkpoint) or profile.image_size
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
    print(f"{len(photos) - len(skipped)} of {len(photos)} photos have a mask under {out} "
          f"(<stem>{MASK_SUFFIX} and <stem>{OVERLAY_SUFFIX}); model {checkpoint} at "
          f"{image_size}x{image_size} on {device}.")
    if skipped:
        print(f"error: {len(skipped)} unreadable photos skipped: "
              + ", ".join(map(str, skipped)), file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m nailseg_common.predict``: the exit status; errors as one line on stderr."""
    try:
        return predict(parse_args(argv))
    except DataError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
