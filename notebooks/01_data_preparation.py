# ---
# jupyter:
#   blog:
#     categories:
#     - data
#     - segmentation
#     - pytorch
#     date: '2026-11-23'
#     description: A synthetic nail dataset of JPEG photos in the real layout, validation
#       with clear errors, a stratified split, CSV files and labels every pipeline reads.
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: blog
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · Data preparation
#
# Every later notebook trains on the same files, so this one builds them: photos of fingers
# and their nail masks, checked, split into a training and a validation set and listed in
# CSV files. The photos stay JPEGs, as a phone wrote them: every pipeline of the course
# decodes them every epoch, and how fast it does is what the course is about. Without a real
# dataset the course generates a synthetic one: procedurally drawn fingers with polished or
# nude nails on cluttered backgrounds, in exactly the layout of the real set.
#
# ## What you'll learn
#
# - the dataset layout (`Images/1..4`, `Masks/1..4`) and what the four types are
# - how the synthetic nail photos are made, and why they are not trivial to segment
# - validating image/mask pairs, and the clear errors you get for bad files
# - a reproducible train/valid split stratified by type, written to `csv_file/*.csv`
# - photos as users bring them (JPEG, EXIF orientation, progressive, grayscale, CMYK), the
#   labels every pipeline reads, and why the preparation is safe to re-run
# - looking at the data: samples per type, image sizes, how much of an image is nail
#
# > Runs everywhere: nothing here needs a GPU. A `cpu` or `gpu` profile only makes the
# > synthetic set larger.

# %%
import io
import shutil
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from PIL import Image

from nailseg_common.core.errors import DataError
from nailseg_common.data import preparation, synthetic
from nailseg_common.data.images import MASK_THRESHOLD, read_binary_mask, read_header
from nailseg_common.measure import plots

# %% tags=["parameters"]
profile = ""       # smoke, cpu or gpu; empty: $NAILSEG_PROFILE, else chosen from the hardware
data_root = ""     # your own photos (Images/<type>/, Masks/<type>/); empty: the synthetic set
num_images = None  # size of the synthetic set (None: the profile's value; ignored with data_root)
seed = 0           # seed of the train/valid split

# %% [markdown]
# Every notebook then makes one set-up call, `start(globals())`: it reads the parameters
# above from the notebook's namespace (`profile`, `data_root`, and any field of the run's
# profile that the cell sets; `None` keeps the profile's value), reports the machine and
# prepares the data.

# %%
from nailseg_common.course import start

cfg, data = start(globals(), seed=seed)

# %% [markdown]
# That one call did everything this notebook explains step by step: it generated the
# synthetic set (unless you gave a real one), validated it, split it and wrote its labels.
# Every other notebook starts with the same call; when nothing changed it returns at once.
#
# ## The layout
#
# Images and masks live in parallel folders, one sub-folder per type, with the same file
# names. Real sets come as PNG or JPEG; a mask may have a different extension than its image.
#
# ```
# <data root>/
#   Images/1/00000.jpg   Masks/1/00000.png
#   Images/2/...         Masks/2/...
#   Images/3/...         Masks/3/...
#   Images/4/...         Masks/4/...
# ```

# %%
pairs = preparation.find_pairs(data.raw)
print(f"{len(pairs)} image/mask pairs ({'synthetic' if data.synthetic else 'real'} set)")
for p in pairs[:3]:
    print(" ", p.image.relative_to(data.raw), "<->", p.mask.relative_to(data.raw))
pd.Series([p.type for p in pairs]).value_counts().sort_index().rename_axis("type").to_frame("pairs")

# %% [markdown]
# ## How the synthetic photos are made
#
# The synthetic types differ the way the real ones might:

# %%
for kind, description in synthetic.TYPE_DESCRIPTIONS.items():
    print(f"type {kind}: {description}")

# %% [markdown]
# Each picture is drawn with NumPy and Pillow to look like a phone photo: a textured,
# often out-of-focus background (wood, fabric, tiles, print, blotches, stripes) with
# clutter in it, then fingers in skin tones from the fairest to the deepest, lit by a
# directional light or a phone's flash, with pores, blotchy colour, redder shadows, knuckle
# creases, soft shadows on the table and at times a metal ring. Nails are oval, square,
# almond, stiletto, coffin or bitten short, glossy, matte or metallic, polished in one of
# many colours, plain or with nail art (glitter, dots, stripes, ombre, a French tip), or
# left nude with a lunula and a whitish free edge, under a cuticle fold, with a highlight
# placed by the light. A camera comes last: white balance and colour casts, exposure,
# vignetting, brightness-dependent noise, defocus or motion blur, sharpening and JPEG. The
# mask is the visible nail plate only, without the cuticle, as real annotations draw it.
#
# Sample `i` depends only on `(seed, i)` through a NumPy `Generator`, so the same seed gives
# the same bytes on every machine. Here is one sample of each type with its mask:

# %%
plots.plot_synthetic_samples([synthetic.synthetic_sample(seed=0, index=i) for i in range(4)])
plt.show()

# %% [markdown]
# The set is made to be *hard enough*: polish colours also appear in the background
# (coloured blobs, glossy beads), skin-coloured fingers seen from the palm side carry no
# nail, and nude nails have almost the colour of the skin around them. No single threshold
# on a colour channel finds the nails, so a model has to learn shape and context. Let's
# check that claim on a few images: the best threshold on any channel, in either direction,
# scored by **IoU** (intersection over union: the pixels both the threshold and the mask call
# nail, divided by the pixels either calls nail; 1 is a perfect match, 0 no overlap).

# %%
samples = [synthetic.synthetic_sample(0, i)[1:] for i in range(8)]
pixels = np.concatenate([img.reshape(-1, 3) for img, _ in samples]).astype(int)
nail = np.concatenate([m.reshape(-1) for _, m in samples]).astype(bool)

def best_threshold_iou(values):
    in_nail, in_rest = (np.bincount(values[sel], minlength=256) for sel in (nail, ~nail))
    best = 0.0
    for a, b in ((in_nail, in_rest), (in_nail[::-1], in_rest[::-1])):  # >= t and <= t
        hits, false = np.cumsum(a[::-1]), np.cumsum(b[::-1])
        best = max(best, float(np.max(hits / (nail.sum() + false))))
    return best

for name, values in zip("RGB", pixels.T):
    print(f"best IoU of one threshold on {name}: {best_threshold_iou(values):.2f}")

# %% [markdown]
# The models in notebook 02 reach a far higher IoU. `start` generated this notebook's set
# in parallel processes (one per hundred photos, at most one per core: starting a process
# costs a few seconds, so a small set is drawn in one),
# and `generate_synthetic_dataset(root, num_images, seed)` writes a set anywhere:
#
# ```python
# from nailseg_common.data.synthetic import generate_synthetic_dataset
# generate_synthetic_dataset("my-nails", num_images=400, seed=1)
# ```
#
# It writes into a temporary folder next to `root` and renames it at the end, with a small
# `manifest.json` (seed, count, generator version). An interrupted run leaves no
# half-written set behind, and `ensure_prepared` only regenerates when the manifest does
# not match.
#
# ## Reading images and masks
#
# `read_rgb` turns any image into `HxWx3 uint8` (RGBA loses its alpha, grayscale is
# repeated, 16-bit data is scaled by the bit depth it uses). `read_binary_mask` turns any
# mask into `{0, 1}`, by one documented rule (the table "How a mask is read" in
# `docs/your_own_photos.md`, and `nailseg_common.data.images`): a two-level mask, in any pair of levels (0/1, 0/255, 0/100), is
# nail at its higher level; an antialiased 0/255 mask (coloured or JPEG too) is nail from the
# middle up, `MASK_THRESHOLD`; a label mask with a void 255 ring keeps its label as the nail;
# a palette mask is read by colour or index, an RGBA cut-out by its alpha. A class mask
# (0/1/2), an inverted mask, a photo saved into `Masks/` and a mask that is nail everywhere
# are refused with the file's name and the fix, and masks with no nail at all are reported.

# %%
antialiased = np.array([[0, 30, 90, 127, 128, 180, 255]], dtype=np.uint8)
buffer = io.BytesIO()
Image.fromarray(antialiased).save(buffer, format="PNG")
print("threshold:", MASK_THRESHOLD)
print("mask values:", antialiased[0])
print("binarized:  ", read_binary_mask(buffer)[0])

# %% [markdown]
# ## Validation: errors that say what to fix
#
# Before anything is written, every pair is checked: images without a mask and masks
# without an image are listed, unreadable files, broken links and unreadable permissions are
# named, image and mask must have the same size, folders that look like a split
# (`Images/train`, `Images/val`) are refused rather than taken for types, and each type must
# have enough images for both splits. Here we break a copy of a few files on purpose:

# %%
with tempfile.TemporaryDirectory() as tmp:
    broken = Path(tmp) / "broken"
    for p in pairs[:4] + pairs[-4:]:
        for path in (p.image, p.mask):
            target = broken / path.relative_to(data.raw)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
    first = pairs[0]
    (broken / first.mask.relative_to(data.raw)).unlink()  # an image without its mask
    try:
        preparation.prepare_dataset(broken, Path(tmp) / "prepared", progress=False)
    except DataError as error:
        print(str(error).replace(tmp, "<tmp>"))
    shutil.copy(first.mask, broken / first.mask.relative_to(data.raw))
    (broken / pairs[-1].image.relative_to(data.raw)).write_bytes(b"not a png")  # a corrupt file
    try:
        preparation.prepare_dataset(broken, Path(tmp) / "prepared", progress=False)
    except DataError as error:
        print("\n" + str(error).replace(tmp, "<tmp>"))
    print("\nanything written?", (Path(tmp) / "prepared").exists())

# %% [markdown]
# ## The split
#
# Each type contributes `valid_fraction` of its images (rounded, at least one) to the
# validation set, chosen with a seeded random permutation. Stratifying by type keeps the rare
# kinds of photo in both sets; the seed makes the split the same on every run. A type with a
# single image cannot be split, and says so. `split_pairs` takes any pairs that carry a
# `type`, a `name` and an `image` path (the `Pair`s of `find_pairs`), and `prepare_dataset`
# calls exactly this function.

# %%
#| export data.split: the split of the prepared pairs into training and validation, stratified by type
import numpy as np

from nailseg_common.core.errors import DataError


def type_order(kind: str) -> tuple[int, int | str]:
    """Sort key of type folders: numbers in numeric order (1, 2, 10), then names."""
    return (0, int(kind)) if kind.isdigit() else (1, kind)


def split_pairs(pairs: list, valid_fraction: float = 0.2, seed: int = 0) -> tuple[list, list]:
    """Split ``pairs`` (with ``type``, ``name``, ``image``) into ``(train, valid)``, stratified
    by type: ``round(n · valid_fraction)`` images of each type, at least one, go to valid."""
    if not 0.0 < valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be between 0 and 1, got {valid_fraction}")
    rng = np.random.default_rng(seed)
    by_type: dict[str, list] = {}
    for pair in pairs:
        by_type.setdefault(pair.type, []).append(pair)
    train, valid = [], []
    for kind in sorted(by_type, key=type_order):
        members = sorted(by_type[kind], key=lambda p: p.name)
        n_valid = max(1, round(len(members) * valid_fraction))
        if n_valid >= len(members):
            folder = members[0].image.parent
            raise DataError(
                f"Type {kind!r} ({folder}) has only {len(members)} image(s): the train split "
                f"of that type would be empty. Add images to {folder} (at least 2 per type), "
                "remove the folder, or use more synthetic images (the profile's num_images).")
        chosen = set(rng.permutation(len(members))[:n_valid].tolist())
        for i, pair in enumerate(members):
            (valid if i in chosen else train).append(pair)
    return train, valid


# %% [markdown]
# Run it on the pairs found above and compare with the split the preparation wrote: the
# same images, because it is the same function with the same seed.

# %%
train_pairs, valid_pairs = split_pairs(pairs, seed=seed)
train, valid = preparation.read_split(data, "train"), preparation.read_split(data, "valid")
print(f"{len(train_pairs)} training and {len(valid_pairs)} validation pairs; same as the "
      f"prepared split: {sorted(str(p.image) for p in valid_pairs) == sorted(valid['image'])}")
counts = pd.concat({"train": train["type"].value_counts(), "valid": valid["type"].value_counts()},
                   axis=1).sort_index().rename_axis("type")
counts["valid %"] = (100 * counts["valid"] / (counts["train"] + counts["valid"])).round(1)
print("images in both splits:", len(set(train["image"]) & set(valid["image"])))
counts

# %% [markdown]
# The split is written, as in the original series (Nguyen Hoang-Phuong's ["Segmentation
# Model" series](https://hphuongdhsp.github.io/ml-blog/)), to `csv_file/train.csv` and
# `csv_file/valid.csv`. Paths in the files are relative (to the data root for `image` and
# `mask`, to the prepared folder for `label`); `read_split` makes them absolute.

# %%
pd.read_csv(data.train_csv).head()

# %% [markdown]
# ## Photos as phones write them, labels as the pipelines read them
#
# The synthetic photos are stored the way users' photos come: JPEGs of the profile's
# `photo_side` pixels on the long side, one in five progressive, one in twenty grayscale and
# one in twenty CMYK (as some editors save them), and a third stored on their side with an
# EXIF orientation that turns them upright, as a phone stores a portrait photo. The mask is
# drawn on the photo as it is shown, upright. Each file's header says which it is:

# %%
both = pd.concat([train, valid])
headers = pd.DataFrame([read_header(path)._asdict() for path in both["image"]])
print(headers.value_counts(["format", "mode", "orientation"]).rename("photos").to_frame())

# %% [markdown]
# Preparation decodes every photo once, to check it against its mask, but does not convert
# it: the photos stay as they are, and every pipeline decodes them every epoch (notebook 02
# on CPU workers, 03 and 04 on the GPU). Decoding once ahead of time, as the original series
# did with `.npy` arrays, is a choice notebook 03 makes and measures. What preparation writes
# is each mask *as the course reads it* (the rule above, EXIF applied): a 0/255 PNG at the
# photo's displayed size, `labels/<type>/<name>.png`, which every pipeline can decode as it
# is. Labels are one channel of two values, so they are small:

# %%
def megabytes(paths):
    return sum(Path(p).stat().st_size for p in paths) / 1e6

label = Image.open(both["label"].iloc[0])
print(f"a label: {label.format} {label.mode} {label.size}, values {np.unique(np.asarray(label))}")
print(f"photos: {megabytes(both['image']):.1f} MB, labels: {megabytes(both['label']):.1f} MB")

# %% [markdown]
# Everything was written into a temporary folder and renamed into place at the end, so a
# crash never leaves half a dataset behind, and a re-run produces byte-identical files.
# A second `ensure_prepared` finds its own `prepared.json` (a fingerprint of the input
# files and the split settings, and a size and digest of every file it wrote), checks the
# prepared files against it, and does nothing; a deleted, truncated or replaced file would
# make it rebuild instead of handing broken files to a loader:

# %%
began = time.perf_counter()
preparation.ensure_prepared(cfg, data_root, seed=seed)
print(f"second call: {time.perf_counter() - began:.2f} s")

# %% [markdown]
# ## Looking at the data
#
# One row per type, with the masks overlaid. Check that every nail is covered and nothing
# else is: a model can only be as good as its masks.

# %%
table = preparation.dataset_table(data)
plots.plot_samples_by_type(table, per_type=4)
plt.show()

# %% [markdown]
# Aspect ratios vary, and a real set's sizes do too. Models need fixed-size batches, so
# notebooks 02-04 resize every photo to the profile's `image_size` as they decode it (see
# the augmentation policy); the files keep their own size.

# %%
plots.plot_image_sizes(table)
plt.show()

# %% [markdown]
# Nails are a small part of most images, and a very small part of the far-away type. This
# imbalance is why notebook 02 uses a Dice loss next to binary cross-entropy, and why pixel
# accuracy would be a misleading metric: the last line below is the pixel accuracy of a
# model that predicts no nail anywhere.

# %%
plots.plot_nail_fraction(table)
plt.show()
print(table.groupby("type")["nail_fraction"].describe()[["mean", "min", "max"]].round(4))
print(f"pixel accuracy of predicting no nail anywhere: {1 - table['nail_fraction'].mean():.1%}")

# %% [markdown]
# ## Using the real dataset
#
# Put the real photos in the same layout (`Images/1..4`, `Masks/1..4`, PNG or JPEG, masks
# with the same file names) anywhere you like and either
#
# - set the `data_root` parameter of a notebook (papermill: `-p data_root /path/to/nails`), or
# - export `NAILSEG_DATA_ROOT=/path/to/nails` before starting Jupyter or `make course`.
#
# The prepared files go to `data/prepared/<folder name>-<8 hex digits of its path>/`, so two
# datasets in folders of the same name never share prepared files; the raw folder is only
# read.
# If something is wrong with a file, the error names it and says what to do.

# %%
print("this run used the", "synthetic" if data.synthetic else "real", "set")
print("prepared files:", data.prepared.relative_to(data.prepared.parents[1]))

# %% [markdown]
# ## Summary
#
# - `start(globals())` is the one call every notebook makes; through
#   `ensure_prepared` it generates the synthetic set if needed, validates, splits and
#   writes the labels, and is safe to re-run.
# - The synthetic set mimics the real layout and types, and is hard enough that a colour
#   threshold fails (best IoU shown above), so the models must learn shapes.
# - Bad data fails early with a message naming the file and the fix; nothing is left
#   half-written.
# - The split (`split_pairs`, shown above) is stratified by type and seeded;
#   `csv_file/train.csv` and `valid.csv` list
#   the pairs with relative paths. The photos stay JPEGs, decoded by every pipeline every
#   epoch; the labels are the masks as the course reads them, upright, 0/255 PNG.

# %% [markdown]
# ## Exercises
#
# 1. Change `seed` in the parameters and re-run: which files change, and which stay
#    byte-identical?
# 2. Generate a set with `generate_synthetic_dataset(path, 40, seed=7)` and look at a few
#    type-3 images: how many pixels does the smallest nail cover? What does that mean for
#    the `image_size` a model should see?
# 3. Break a copy of the dataset in other ways (resize a mask, save an image as RGBA, save
#    a mask as JPEG) and run `prepare_dataset` on it. Which of these are errors, and which
#    are silently converted? Why is that the right choice?
# 4. Extend `best_threshold_iou` to the HSV hue channel. Is hue a better single feature
#    than R, G or B on this data?
