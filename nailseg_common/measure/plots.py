"""The course's plots and tables, drawn for a blog
column of 740 px: at most ``COLUMN_INCHES`` wide (a wider figure is scaled down as a whole),
no text under ``MIN_FONT`` points, at most two panels of axes side by side; legends outside
the data (under the x label, beside the axes, in a spare panel or under the panels), a
figure's title above its panels' titles, score axes (Dice, IoU) scaled to the scores, and
one scale for one quantity in a figure. ``tests/test_figures.py`` measures each function's
figure for these.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from nailseg_common.core.statistics import mean_spread

COLUMN_INCHES = 7.2  # a 740 px column at 100 dpi, with room for tight bounding boxes
MIN_FONT = 9


def column_subplots(*args, figsize=(6.4, 4.8), **kwargs):
    """``plt.subplots`` with ``figsize`` scaled down to at most ``COLUMN_INCHES`` wide."""
    width, height = figsize
    if width > COLUMN_INCHES:
        width, height = COLUMN_INCHES, height * COLUMN_INCHES / width
    return plt.subplots(*args, figsize=(width, height), **kwargs)


def _legend_below(ax, ncol: int = 2, **kwargs):
    """The legend of ``ax`` under its x label, outside the data: anchored a fixed distance
    (in inches, measured from the ticks and label drawn now) below the axes, so that it
    stays clear of them whatever the layout does to the axes' height."""
    from matplotlib.transforms import ScaledTranslation

    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    figure = ax.figure
    renderer = figure.canvas.get_renderer()
    below = ax.get_window_extent(renderer).y0 - ax.xaxis.get_tightbbox(renderer).y0
    offset = ScaledTranslation(0, -(max(below, 0) / figure.dpi + 0.06), figure.dpi_scale_trans)
    return ax.legend(handles, labels, fontsize=MIN_FONT, loc="upper center", bbox_to_anchor=(0.5, 0),
                     bbox_transform=ax.transAxes + offset, ncol=min(ncol, len(handles)), **kwargs)


def _score_limits(ax, values, ceiling: float = 1.0) -> None:
    """A score axis (Dice, IoU) from a bit below the lowest of ``values`` to a bit above the
    highest, at most ``ceiling``: scores between 0.83 and 0.97 fill the axis, not a tenth of it."""
    import numpy as np

    values = np.asarray([v for v in values if v is not None], dtype=float)
    values = values[np.isfinite(values)]
    if not len(values):
        return
    low, high = float(values.min()), float(values.max())
    pad = max(0.02, 0.08 * (high - low))
    ax.set_ylim(max(0.0, low - pad), min(ceiling, high + pad))


# --- benchmark (notebook 05) ---------------------------------------------------------

_PIPELINE_COLOURS = {"kornia_cpu_decode_sequential": "tab:olive", "kornia_cpu_decode": "tab:brown",
                    "kornia": "tab:purple", "kornia_cache": "tab:pink", "dali": "tab:green",
                    "dali_no_hw_decoder": "tab:cyan"}  # one colour per pipeline, in every panel


def _bench_title(ax, results: dict, what: str) -> None:
    ax.set_title(f"{what}\n{results['device']}, {results['config']['image_size']} px, "
                 f"batch {results['config']['batch_size']}, {results['date'][:10]}", fontsize=MIN_FONT)


def _log_rates(ax) -> None:
    """The x axis of images/s on a log scale, labelled 100, 200, 500, 1000..."""
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())  # no labels in between to overlap
    ax.set_xlabel("images / s (log scale)")


def _pipeline_axis(ax, names: list[str]) -> None:
    """Pipelines as rows, the first on top (horizontal bars: long names never overlap), and
    the legend under the x label, where it hides no bar."""
    ax.set_yticks(range(len(names)), names, fontsize=MIN_FONT)
    ax.set_ylim(len(names) - 0.5, -0.5)
    _legend_below(ax, ncol=3)


def plot_benchmark_throughput(results: dict, ax=None):
    """Horizontal bars of loader and training images/s per pipeline (median, min-max whiskers),
    the bound as a vertical line with its spread shaded."""
    import numpy as np

    names = list(results["pipelines"])
    made = ax is None
    if made:
        _, ax = column_subplots(figsize=(COLUMN_INCHES, 1.9 + 0.4 * len(names)))
    y = np.arange(len(names))
    for offset, key, colour in ((-0.2, "loader", "tab:blue"), (0.2, "train", "tab:orange")):
        stats = [results["pipelines"][n][key] for n in names]
        median = np.array([s["img_s"] for s in stats])
        spread = np.array([[m - s["img_s_min"] for m, s in zip(median, stats)],
                           [s["img_s_max"] - m for m, s in zip(median, stats)]])
        ax.barh(y + offset, median, height=0.4, xerr=spread, capsize=3, color=colour,
                label=f"{key} alone" if key == "loader" else "training step")
    bound = results["bound"]
    ax.axvspan(bound["img_s_min"], bound["img_s_max"], color="grey", alpha=0.2)
    ax.axvline(bound["img_s"], color="black", linestyle="--", label="bound (batches on device)")
    ax.set_xlabel("images / s")
    if _wide_rates(results):  # a loader far faster than training: keep both readable
        _log_rates(ax)
    _pipeline_axis(ax, names)
    _bench_title(ax, results, "Throughput")
    if made:
        ax.figure.tight_layout()
    return ax


def _wide_rates(results: dict) -> bool:
    """Whether the rates of ``results`` span more than 20x (a log axis shows them all)."""
    rates = [r for p in results["pipelines"].values() for r in (p["loader_img_s"], p["train_img_s"])]
    rates.append(results["bound"]["img_s"])
    return max(rates) > 20 * min(rates)


def plot_ratio_to_bound(results: dict, ax=None):
    """Horizontal bars of each pipeline's training rate over the bound, whiskers its spread
    (from both sides' windows), the bound's own spread shaded around 1, and red dotted marks
    where a pipeline with work on the device would be if that work ran in series with the step."""
    from nailseg_common.measure.benchmark import ratio_to_bound_spread, serial_ratio

    names = list(results["pipelines"])
    made = ax is None
    if made:
        _, ax = column_subplots(figsize=(COLUMN_INCHES, 1.9 + 0.35 * len(names)))
    ratios = [results["pipelines"][n]["train_ratio_to_bound"] for n in names]
    bars = ax.barh(range(len(names)), ratios, color="tab:orange",
                   xerr=[ratio_to_bound_spread(results, n) for n in names], capsize=3)
    ax.bar_label(bars, fmt="%.2f", fontsize=MIN_FONT, padding=2)
    bound = results["bound"]
    relative = mean_spread(bound["repeats"]) / bound["img_s"]
    ax.axvspan(1 - relative, 1 + relative, color="grey", alpha=0.2)
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
    in_series = [n for n in names if results["pipelines"][n]["family"] in ("kornia", "dali")]
    for i, name in enumerate(in_series):
        row = names.index(name)
        ax.vlines(serial_ratio(results, name), row - 0.4, row + 0.4, color="red", linestyle=":",
                  label="its work in series with the step" if i == 0 else None)
    ax.set_xlim(0, max(1.15, 1.1 * max(ratios)))
    ax.set_xlabel("training rate / bound")
    _pipeline_axis(ax, names)
    _bench_title(ax, results, "Share of the bound")
    if made:
        ax.figure.tight_layout()
    return ax


def plot_worker_scaling(results: dict, ax=None):
    """Albumentations images/s against CPU workers, with the GPU pipelines and the bound as lines."""
    made = ax is None
    if made:
        _, ax = column_subplots(figsize=(COLUMN_INCHES, 4.6))
    albu = sorted((p for p in results["pipelines"].values() if p["family"] == "albumentations"),
                  key=lambda p: p["num_workers"])
    workers = [p["num_workers"] for p in albu]
    ax.plot(workers, [p["loader_img_s"] for p in albu], "o-", color="tab:blue",
            label="Albumentations loader alone")
    ax.plot(workers, [p["train_img_s"] for p in albu], "s-", color="tab:orange",
            label="Albumentations training")
    for name, p in results["pipelines"].items():
        if p["family"] != "albumentations":
            ax.axhline(p["train_img_s"], linestyle="-.", color=_PIPELINE_COLOURS.get(name, "tab:grey"),
                       label=f"{name} training")
    ax.axhline(results["bound"]["img_s"], color="black", linestyle="--", label="bound")
    ax.set_xticks(workers)
    ax.set_xlabel("DataLoader workers")
    ax.set_ylabel("images / s")
    ax.set_ylim(bottom=0)
    _legend_below(ax, ncol=2)
    _bench_title(ax, results, "Scaling with CPU workers")
    if made:
        ax.figure.tight_layout()
    return ax


def plot_benchmark_sets(result_sets: dict, plot, **kwargs):
    """One panel per benchmark result (``{name: results}``) drawn by ``plot(results, ax=...)``:
    bar charts of the pipelines one above the other (two side by side leave no room for the
    names), the worker scaling side by side; one legend under the panels, one title above
    them, and one scale for images/s in every panel."""
    if not result_sets:
        raise ValueError("No benchmark results to plot: set run_live = True, or commit "
                         "results/benchmark_h200.json (nailseg-bench --profile gpu).")
    count = len(result_sets)
    if plot is plot_worker_scaling:
        shape, figsize, options = (1, count), (COLUMN_INCHES, 4.4 if count > 1 else 4.0), {}
    else:  # each panel as tall as its bars, ticks and title, then the figure's title and legend
        heights = [1.0 + 0.3 * len(results["pipelines"]) for results in result_sets.values()]
        shape, figsize = (count, 1), (COLUMN_INCHES, sum(heights) + 0.8)
        options = {"gridspec_kw": {"height_ratios": heights}}
    fig, axes = column_subplots(*shape, squeeze=False, figsize=figsize, layout="constrained", **options)
    entries = {}
    for ax, (name, results) in zip(axes.flat, result_sets.items()):
        plot(results, ax=ax, **kwargs)
        what = ax.get_title().split("\n")[0]
        separator = "\n" if shape[1] > 1 else ", "
        ax.set_title(f"{name}: {results['device']}{separator}{results['config']['image_size']} px, "
                     f"batch {results['config']['batch_size']}, {results['date'][:10]}", fontsize=MIN_FONT)
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if any(ax.get_xscale() == "log" for ax in axes.flat) and plot is plot_benchmark_throughput:
        for ax in axes.flat:  # the same quantity on the same scale in every panel
            _log_rates(ax)
    fig.suptitle(what, fontsize=11)
    if entries:
        fig.legend(entries.values(), entries.keys(), loc="outside lower center", fontsize=MIN_FONT,
                   ncol=min(3 if max(map(len, entries)) <= 30 else 2, len(entries)))
    return fig



# --- data (notebook 01) ---------------------------------------------------------------


def plot_samples_by_type(table, per_type: int = 4, seed: int = 0):
    """One row per type: ``per_type`` random images with their masks overlaid in green.

    ``table`` is :func:`nailseg_common.data.preparation.dataset_table` (or a ``read_split``).
    """
    import numpy as np

    from nailseg_common.data.images import read_rgb
    from nailseg_common.data.preparation import read_label

    types = sorted(table["type"].unique())
    fig, axes = column_subplots(len(types), per_type, figsize=(2.6 * per_type, 2.3 * len(types)),
                             squeeze=False)
    rng = np.random.default_rng(seed)
    for row, kind in zip(axes, types):
        members = table[table["type"] == kind]
        picks = np.sort(rng.choice(len(members), size=min(per_type, len(members)), replace=False))
        for ax in row:
            ax.set_axis_off()
        for ax, (_, sample) in zip(row, members.iloc[picks].iterrows()):
            image = read_rgb(sample["image"])
            mask = read_label(sample["label"]).astype(bool)
            overlay = image.copy()
            overlay[mask] = (0.45 * overlay[mask] + (0, 140, 0)).astype(np.uint8)
            ax.imshow(overlay)
            ax.contour(mask, levels=[0.5], colors="yellow", linewidths=0.6)
            ax.set_title(f"type {kind}  {image.shape[1]}x{image.shape[0]}", fontsize=MIN_FONT)
    fig.suptitle("Samples per type, nail masks overlaid in green")
    fig.tight_layout()
    return fig


def plot_synthetic_samples(samples):
    """Synthetic samples ``(type, image, mask)`` side by side, each image above its mask."""
    fig, axes = column_subplots(2, len(samples), figsize=(3 * len(samples), 5.5), squeeze=False)
    for column, (kind, image, mask) in enumerate(samples):
        axes[0, column].imshow(image)
        axes[0, column].set_title(f"type {kind}: {image.shape[1]}x{image.shape[0]}", fontsize=9)
        axes[1, column].imshow(mask, cmap="gray")
    for ax in axes.flat:
        ax.set_axis_off()
    fig.tight_layout()
    return fig


def plot_image_sizes(table):
    """Width against height per type, and the spread of aspect ratios."""
    fig, (left, right) = column_subplots(1, 2, figsize=(10, 3.8))
    types = sorted(table["type"].unique())
    for kind in types:
        part = table[table["type"] == kind]
        left.scatter(part["width"], part["height"], s=12, alpha=0.7, label=f"type {kind}")
    left.set_xlabel("width (px)")
    left.set_ylabel("height (px)")
    left.set_title("Image sizes")
    right.hist([table[table["type"] == k]["width"] / table[table["type"] == k]["height"]
                for k in types], bins=20, stacked=True, label=[f"type {k}" for k in types])
    right.legend(fontsize=MIN_FONT, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # both panels' colours
    right.set_xlabel("aspect ratio (width / height)")
    right.set_ylabel("images")
    right.set_title("Aspect ratios")
    fig.tight_layout()
    return fig


def plot_nail_fraction(table, ax=None):
    """Share of nail pixels per image, one box per type (points: single images)."""
    import numpy as np

    if ax is None:
        _, ax = column_subplots(figsize=(6, 3.8))
    types = sorted(table["type"].unique())
    values = [100 * table[table["type"] == k]["nail_fraction"] for k in types]
    ax.boxplot(values, showfliers=False)
    ax.set_xticks(range(1, len(types) + 1), [f"type {k}" for k in types])
    rng = np.random.default_rng(0)
    for i, v in enumerate(values, start=1):
        ax.scatter(i + rng.uniform(-0.15, 0.15, len(v)), v, s=8, alpha=0.5, color="tab:green")
    ax.set_ylabel("nail pixels (% of image)")
    ax.set_title("How much of each image is nail")
    return ax


# --- GPU augmentation (notebook 03) ----------------------------------------------------


def plot_augmentation_gallery(panels: dict, max_images: int = 4):
    """One row per image, one column per pipeline; the mask's outline drawn on the image.

    ``panels`` is :func:`nailseg_common.pipelines.gallery.gallery_panels`. A yellow outline
    that hugs the nail after a flip or an affine shows image and mask moved together.
    """
    names = list(panels)
    count = min(max_images, len(next(iter(panels.values()))[0]))
    fig, axes = column_subplots(count, len(names), figsize=(2.4 * len(names), 2.4 * count), squeeze=False)
    for column, name in enumerate(names):
        images, masks = panels[name]
        axes[0, column].set_title(name, fontsize=9)
        for row in range(count):
            ax = axes[row, column]
            ax.imshow(images[row].clip(0, 1))
            if masks[row].any():
                ax.contour(masks[row], levels=[0.5], colors="yellow", linewidths=0.8)
            ax.set_axis_off()
    fig.tight_layout()
    return fig


def plot_share_of_bound(shares: dict, title: str, target: float | None = None, ax=None):
    """Horizontal bars: each pipeline's training rate as a share of the bound (1.0), top down
    in the order of ``shares`` (``{name: share}``), with an optional dotted target line."""
    made = ax is None
    if made:
        _, ax = column_subplots(figsize=(COLUMN_INCHES, 1.2 + 0.45 * len(shares)))
    ax.barh(list(shares), list(shares.values()), color="tab:purple")
    ax.invert_yaxis()
    if target is not None:
        ax.axvline(target, color="red", linestyle=":", label=f"target {target:.2f}")
    ax.set(xlabel="training images/s ÷ bound", title=title)
    _legend_below(ax)
    if made:
        ax.figure.tight_layout()  # the long names inside the figure, not past its edge
    return ax


def plot_steps_to_bound(table, profile):
    """:func:`plot_share_of_bound` of notebook 03's steps (a ``run_logs.speeds_table``), titled
    with ``profile``'s device, name and image side."""
    title = f"Closing the gap on {profile.device.type.upper()} ({profile.name} profile, {profile.image_size} px)"
    return plot_share_of_bound(table["share of bound"].to_dict(), title=title)


# --- Lightning baseline (notebook 02) ---------------------------------------------------


def plot_training_curves(runs: dict, x: str = "epoch"):
    """Loss and validation Dice/IoU per epoch (or ``x="step"``) of labelled runs, drawn together.

    ``runs`` maps a label to :func:`nailseg_common.training.trainer.read_metrics` (one row per
    epoch; epochs without a validation are left out of its lines). Solid lines are
    validation, dashed lines training; Dice and IoU are hard
    (threshold 0.5, per image, averaged).
    """
    fig, axes = column_subplots(2, 2, figsize=(COLUMN_INCHES, 6.4))  # two panels a row
    loss_ax, dice_ax, iou_ax, legend_ax = axes.flat
    legend_ax.axis("off")  # the fourth panel holds the legend of the three, over no data
    for index, (label, metrics) in enumerate(runs.items()):
        colour, valid = f"C{index}", metrics.dropna(subset=["val_dice"])  # validated epochs
        marker = "o" if len(valid) < 30 else None
        loss_ax.plot(metrics.index, metrics["train_loss"], color=colour, linestyle="--",
                     label=f"{label}, train")
        loss_ax.plot(valid.index, valid["val_loss"], color=colour, marker=marker,
                     label=f"{label}, validation")
        dice_ax.plot(valid.index, valid["val_dice"], color=colour, marker=marker, label=label)
        iou_ax.plot(valid.index, valid["val_iou"], color=colour, marker=marker, label=label)
    loss_ax.set(xlabel=x, ylabel="Lovász + CE + soft-Dice loss",
                title="Loss")
    dice_ax.set(xlabel=x, title="Validation Dice (threshold 0.5)")
    iou_ax.set(xlabel=x, title="Validation IoU (threshold 0.5)")
    for ax, column in ((dice_ax, "val_dice"), (iou_ax, "val_iou")):
        _score_limits(ax, [v for metrics in runs.values() for v in metrics[column].dropna()])
    for ax in (loss_ax, dice_ax, iou_ax):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs and steps are whole
    legend_ax.legend(*loss_ax.get_legend_handles_labels(), loc="center", fontsize=MIN_FONT,
                     title="dashed: training, solid: validation", title_fontsize=MIN_FONT)
    fig.tight_layout()
    return fig


def plot_learning_curve(curve, zero_shot: float | None = None):
    """Mean hard Dice against training photos, one line per start with its spread as bars
    (``curve``: columns ``start``, ``photos``, ``dice``, ``±``), and the zero-shot Dice as a
    dotted line when given."""
    fig, ax = column_subplots(figsize=(6, 3.8))
    for index, (start, points) in enumerate(curve.sort_values("photos").groupby("start", sort=False)):
        ax.errorbar(points["photos"], points["dice"], yerr=points["±"], color=f"C{index}",
                    marker="o", capsize=3, label=start)
    if zero_shot is not None:
        ax.axhline(zero_shot, color="grey", linestyle=":", label="synthetic, no fine-tuning")
    ax.set_xscale("log")
    ax.minorticks_off()  # the log axis' own labels (6×10⁰ ...) would crowd the counts
    ax.set_xticks(sorted(curve["photos"].unique()), labels=sorted(curve["photos"].unique()))
    ax.set(xlabel="training photos per fold", ylabel="hard Dice on held-out photos",
           title="Learning curve (mean, 95 % interval)")
    _score_limits(ax, [*(curve["dice"] - curve["±"]), *(curve["dice"] + curve["±"]), zero_shot])
    _legend_below(ax, ncol=3)
    fig.tight_layout()
    return fig


def plot_predictions(images, masks, probabilities, scores=None, max_images: int = 4):
    """Top row: each image with the ground truth (yellow) and the prediction at 0.5 (cyan)
    outlined; bottom row: the predicted probability. ``images`` N×H×W×3 in [0, 1],
    ``masks`` and ``probabilities`` N×H×W; ``scores`` (e.g. per-image IoU) titles the columns.
    """
    count = min(max_images, len(images))
    fig, axes = column_subplots(2, count, figsize=(2.6 * count, 5.4), squeeze=False,
                                layout="constrained")  # the title above the panels' titles
    for column in range(count):
        top, bottom = axes[0, column], axes[1, column]
        top.imshow(images[column].clip(0, 1))
        for outline, colour in ((masks[column], "yellow"), (probabilities[column] > 0.5, "cyan")):
            if outline.any():
                top.contour(outline, levels=[0.5], colors=colour, linewidths=1.0)
        if scores is not None:
            top.set_title(f"IoU {scores[column]:.2f}", fontsize=9)
        image = bottom.imshow(probabilities[column], vmin=0, vmax=1, cmap="magma")
        for ax in (top, bottom):
            ax.set_axis_off()
    fig.colorbar(image, ax=axes[1, :].tolist(), shrink=0.8, label="P(nail)")
    fig.suptitle("ground truth (yellow) vs prediction (cyan)", fontsize=10)
    return fig


def plot_worst_photos(worst, photos, logits, start: str):
    """Notebook 06's worst photos of ``start``: ``worst`` (rows of its per-photo table:
    ``photo``, ``dice``, ``iou``; index: the photo's row in ``photos``, uint8 images and
    labels on any device) drawn with :func:`plot_predictions` from ``logits`` (N×1×S×S)."""
    import torch

    index = list(worst.index)
    fig = plot_predictions(photos.images[index].permute(0, 2, 3, 1).cpu().numpy() / 255,
                           photos.labels[index, 0].cpu().numpy(),
                           torch.sigmoid(logits[index, 0]).numpy())
    for ax, (_, row) in zip(fig.axes, worst.iterrows()):
        ax.set_title(f"{row['photo']}\nDice {row['dice']:.2f}, IoU {row['iou']:.2f}", fontsize=MIN_FONT)
    fig.suptitle(f"worst photos of {start}: ground truth (yellow), prediction (cyan)", fontsize=10)
    return fig


def plot_batch_predictions(batch: dict, logits, scores=None, max_images: int = 4):
    """:func:`plot_predictions` of a batch-contract ``batch`` (``image`` N×3×H×W uint8,
    ``label`` N×1×H×W) and the model's ``logits`` for it, all on the CPU."""
    import torch

    return plot_predictions(batch["image"].permute(0, 2, 3, 1).numpy() / 255,
                            batch["label"][:, 0].numpy(), torch.sigmoid(logits)[:, 0].numpy(),
                            scores=scores, max_images=max_images)


def plot_model_predictions(model, dataset, precision: str, max_images: int = 4):
    """:func:`plot_batch_predictions` of a LightningModule ``model`` on the first ``max_images``
    samples of a batch-contract ``dataset``, in eval mode without gradients, under bf16
    autocast when ``precision`` trains in bf16, each column titled by its IoU
    (``training.unet.per_image_iou``)."""
    import torch
    from torch.utils.data import default_collate

    from nailseg_common.training.unet import per_image_iou

    batch = default_collate([dataset[i] for i in range(min(max_images, len(dataset)))])
    device = model.device
    with torch.no_grad(), torch.autocast(device.type, torch.bfloat16, enabled="bf16" in precision):
        logits = model.eval()(batch["image"].to(device)).float().cpu()
    return plot_batch_predictions(batch, logits, scores=per_image_iou(logits, batch["label"]),
                                  max_images=max_images)


def plot_overlays(paths, max_images: int = 4):
    """The first ``max_images`` overlay images of ``paths`` in a row, titled by file name."""
    count = max(1, min(max_images, len(paths)))
    fig, axes = column_subplots(1, count, figsize=(3.2 * count, 3.4), squeeze=False)
    for ax, path in zip(axes[0], paths):
        ax.imshow(plt.imread(path))
        ax.set_title(Path(path).name, fontsize=MIN_FONT)
    for ax in axes[0]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def plot_batch_gallery(batch: dict, max_images: int = 8, columns: int = 4, title: str | None = None):
    """A batch-contract dict (``image`` B×3×H×W, ``label`` B×1×H×W; torch on any device or
    numpy, uint8 or float) as a grid of images with the label's outline in yellow."""
    def host(values):
        return values.detach().cpu().numpy() if hasattr(values, "detach") else values

    images, labels = host(batch["image"])[:max_images], host(batch["label"])[:max_images]
    images = images.transpose(0, 2, 3, 1) / (255.0 if images.dtype.kind == "u" else 1.0)
    rows = -(-len(images) // columns)
    fig, axes = column_subplots(rows, columns, figsize=(2.4 * columns, 2.4 * rows), squeeze=False)
    for index, ax in enumerate(axes.flat):
        ax.set_axis_off()
        if index < len(images):
            ax.imshow(images[index].clip(0, 1))
            if labels[index, 0].any():
                ax.contour(labels[index, 0], levels=[0.5], colors="yellow", linewidths=0.8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


# --- time to accuracy (notebook 07) and two GPUs (notebook 08) ---------------------------


def ladder_table(rates: dict, peak_tflops: float | None = None) -> pd.DataFrame:
    """One row per step measurement (``rates``: name -> (batch, training FLOPs per image of
    its model, ``measure_training`` result)): median images/s and its window range, the gain
    over the row before and over the first, TFLOP/s, and the share of ``peak_tflops`` if given."""
    steps = pd.DataFrame({name: {"batch": batch, "img/s": r["img_s"], "min": r["img_s_min"],
                                 "max": r["img_s_max"], "windows": len(r["repeats"]), "flops": flops}
                          for name, (batch, flops, r) in rates.items()}).T
    steps["× previous"] = steps["img/s"] / steps["img/s"].shift(1)
    steps["× 02's step"] = steps["img/s"] / steps["img/s"].iloc[0]
    steps["TFLOP/s"] = steps.pop("flops") * steps["img/s"] / 1e12
    if peak_tflops:
        steps["% of measured peak"] = 100 * steps["TFLOP/s"] / peak_tflops
    return steps


def plot_step_ladder(steps, xlabel: str, ax=None):
    """Horizontal bars of a table with ``img/s``, ``min`` and ``max`` per row (median,
    min-max whiskers), the first row on top."""
    ax = ax or column_subplots(figsize=(COLUMN_INCHES, 1.3 + 0.35 * len(steps)))[1]
    ax.barh(steps.index[::-1], steps["img/s"][::-1], color="#4c72b0",
            xerr=[(steps["img/s"] - steps["min"])[::-1], (steps["max"] - steps["img/s"])[::-1]])
    ax.set_xlabel(xlabel)
    ax.set_title("one change at a time\n(bars: median, whiskers: min-max of the windows)", fontsize=10)
    ax.figure.tight_layout()
    return ax


def plot_iou_curves(runs: dict, level: float, budget_s: float | None = None, ax=None):
    """Hard IoU of every validation against seconds since the start of ``fit``; ``runs`` maps
    a label to a run's ``history`` (rows with ``seconds`` and ``val_iou``); a dashed line at
    the IoU ``level``, a dotted one at ``budget_s`` seconds if given."""
    ax = ax or column_subplots(figsize=(8, 4))[1]
    for label, history in runs.items():
        ax.plot([row["seconds"] for row in history], [row["val_iou"] for row in history],
                marker=".", label=label)
    ax.axhline(level, color="gray", linestyle="--", linewidth=1, label=f"IoU {level:g}")
    if budget_s is not None:
        ax.axvline(budget_s, color="crimson", linestyle=":", linewidth=1, label=f"budget {budget_s:g} s")
    ax.set_xlabel("seconds since the start of fit (compilation apart)")
    ax.set_ylabel("hard IoU (validation)")
    _score_limits(ax, [row["val_iou"] for history in runs.values() for row in history] + [level])
    _legend_below(ax, ncol=3)
    ax.figure.tight_layout()
    return ax


def plot_ratio_change(ratios, spread=None, before=None, ax=None):
    """Bars of each pipeline's ratio to the bound of the faster step (whiskers: ``spread``);
    dots at ``before`` (the ratios to the old step's bound), a dashed line at the bound."""
    ax = ax or column_subplots(figsize=(8, 3))[1]
    ax.barh(ratios.index[::-1], ratios[::-1], color="#55a868", label="faster step (this run)",
            xerr=None if spread is None else spread.reindex(ratios.index)[::-1], capsize=3)
    if before is not None:
        ax.scatter(before.reindex(ratios.index)[::-1], ratios.index[::-1], color="black",
                   zorder=3, label="02's step (notebook 05's committed run)")
    ax.axvline(1.0, color="gray", linestyle="--", linewidth=1)
    ax.set_xlabel("training images/s ÷ the bound of the same step")
    ax.set_xlim(0, 1.1)
    _legend_below(ax)
    ax.figure.tight_layout()
    return ax


def plot_devices_speed(runs: dict, ax=None):
    """Training images/s of each run of notebook 08 (``runs``: name -> ``train_img_s``), a
    dashed line at one device's."""
    ax = ax or column_subplots(figsize=(5, 3.8))[1]
    names, rates = list(runs), [rate or 0.0 for rate in runs.values()]
    ax.bar(names, rates, color=["#4c72b0", "#55a868"][:len(names)])
    ax.axhline(rates[0], color="gray", linestyle="--", linewidth=1, label="one device")
    ax.set_ylabel("training images/s (validation excluded)")
    _legend_below(ax)
    return ax
