"""Every figure the package draws fits the blog's column: one function makes them.

Each public plotting function of ``plots`` is drawn below with small inputs shaped like the
notebooks' (the committed results files where they exist) and measured with matplotlib's
renderer at the notebooks' dpi, as the inline backend saves them (``bbox_inches="tight"``):
no wider than the column, no text under ``MIN_FONT``, no legend over data, no title over
the panels, score axes scaled to the scores, one scale per quantity in a figure.
"""

import io
import json
import re
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import Collection
from matplotlib.image import AxesImage
from matplotlib.legend import Legend
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from nailseg_common.course import FIGURE_DPI
from nailseg_common.measure import plots
from nailseg_common.measure.plots import COLUMN_INCHES, MIN_FONT, column_subplots

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
COLUMN_PX = 740


def test_a_wide_figure_is_scaled_to_the_column():
    figure, _ = column_subplots(1, 2, figsize=(11, 3.8))
    width, height = figure.get_size_inches()
    assert width == COLUMN_INCHES and height == 3.8 * COLUMN_INCHES / 11


def test_no_package_module_makes_a_figure_of_its_own():
    plots = ROOT / "nailseg_common" / "measure" / "plots.py"
    found = [str(p.relative_to(ROOT)) for p in (ROOT / "nailseg_common").rglob("*.py")
             if p != plots and re.search(r"plt\.(subplots|figure)\(", p.read_text())]
    assert found == []


# --- inputs shaped like the notebooks' -------------------------------------------------


def _json(name):
    return json.loads((RESULTS / name).read_text())


def _scaled(value, factor):
    """A benchmark result with every rate (``img_s``, its windows) times ``factor``."""
    if isinstance(value, dict):
        return {k: (v * factor if "img_s" in k and isinstance(v, float)
                    else [r * factor for r in v] if k == "repeats" and isinstance(v, list) else _scaled(v, factor))
                for k, v in value.items()}
    return value


def _live_cpu_run():
    """A live run on a CPU beside the H200 reference: no DALI, everything ~50x slower, the
    cache's loader far ahead of the step (the throughput axis goes logarithmic)."""
    live = _scaled(_json("benchmark_h200.json"), 0.02)
    live["device"], live["date"] = "CPU only: AMD EPYC (x86_64), 2 cores", "2026-12-03T10:00:00"
    live["pipelines"] = {n: p for n, p in live["pipelines"].items()
                         if n in ("albumentations_w4", "kornia", "kornia_cache")}
    cache = live["pipelines"]["kornia_cache"]
    cache["loader"] = _scaled(cache["loader"], 3.0)
    cache["loader_img_s"] = cache["loader"]["img_s"]
    return live


def _metrics(start_dice, end_dice, epochs=21, every=3, seed=0, by="epoch"):
    """A training log per epoch (or step) as ``read_metrics`` returns it: a loss every
    row, a validation every ``every`` rows (NaN elsewhere)."""
    rng = np.random.default_rng(seed)
    index = np.arange(epochs) * (12 if by == "step" else 1)
    decay = np.exp(-np.arange(epochs) / 3)
    frame = pd.DataFrame({"train_loss": 0.22 + 1.6 * decay + rng.normal(0, 0.01, epochs)},
                         index=pd.Index(index, name=by))
    valid = np.arange(epochs) % every == every - 1
    dice = end_dice - (end_dice - start_dice) * decay
    for name, values in (("val_loss", 0.2 + 1.5 * decay), ("val_dice", dice),
                         ("val_iou", dice / (2 - dice))):
        frame[name] = np.where(valid, values, np.nan)
    return frame


def _photos(count=4, side=64, seed=0):
    """``count`` photo-like uint8 images with elliptic nails, N×H×W×3 and N×H×W."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[:side, :side]
    images = rng.integers(60, 200, (count, side, side, 3), dtype=np.uint8)
    masks = np.stack([((x - side / 2 - 4 * i) / 12) ** 2 + ((y - side / 2) / 18) ** 2 < 1
                      for i in range(count)]).astype(np.uint8)
    images[masks.astype(bool)] = (200, 40, 60)  # red nails
    return images, masks


def _table(tmp_path=None, per_type=5):
    """``dataset_table`` of four types (files written when ``tmp_path`` is given)."""
    from PIL import Image

    rng = np.random.default_rng(0)
    rows = []
    for kind in range(1, 5):
        for i in range(per_type):
            width, height = (1024, int(rng.integers(430, 1024))) if i % 2 else (int(rng.integers(520, 1024)), 1024)
            rows.append({"type": kind, "width": width, "height": height,
                         "nail_fraction": float(rng.uniform(0.01, 0.12))})
            if tmp_path is not None:
                image, mask = _photos(1, 48, seed=kind * 10 + i)
                rows[-1]["image"], rows[-1]["label"] = tmp_path / f"{kind}_{i}.jpg", tmp_path / f"{kind}_{i}.png"
                Image.fromarray(image[0]).save(rows[-1]["image"])
                Image.fromarray(mask[0] * 255).save(rows[-1]["label"])
    return pd.DataFrame(rows)


def _ratio_table():
    """07's pipelines against the faster step: DALI near the bound, dots from 05's run."""
    names = ["albumentations_w15", "kornia", "dali", "dali_no_hw_decoder"]
    ratios = pd.Series([0.40, 0.34, 0.96, 0.82], index=names)
    spread = pd.Series([0.15, 0.05, 0.04, 0.10], index=names)
    before = pd.Series({n: p["train_ratio_to_bound"] for n, p in _json("benchmark_h200.json")["pipelines"].items()})
    return ratios, spread, before


def _ladder():
    """07's ladder: one change a row, the first row notebook 02's step."""
    rate = {"img_s": 590.0, "img_s_min": 540.0, "img_s_max": 640.0, "repeats": [540.0, 590.0, 640.0]}
    rows = {"02's step (eager, AdamW foreach)": 1.0, "+ fused AdamW": 1.36, "+ batch 60": 1.46,
            "+ half-resolution head": 2.03, "+ torch.compile (the U-Net)": 2.51}
    return plots.ladder_table({name: (32 if gain < 1.4 else 60, 2e9, _scaled(rate, gain))
                               for name, gain in rows.items()}, peak_tflops=400)


def _show_speed():
    """08's speed figure, as ``two_gpus_report.show_speed`` draws it."""
    from nailseg_common.measure import two_gpus_report

    two_gpus_report.show_speed(_json("two_gpus_h200x2.json"), 0.86)
    return plt.gcf()


def _worst_photos():
    import torch

    images, masks = _photos()
    photos = SimpleNamespace(images=torch.from_numpy(images).permute(0, 3, 1, 2),
                             labels=torch.from_numpy(masks)[:, None])
    logits = 8 * (torch.from_numpy(masks)[:, None].float() - 0.5)
    worst = pd.DataFrame({"photo": [f"{i:05d}.jpg" for i in (22, 4, 29, 50)],
                          "dice": [0.93, 0.95, 0.96, 0.96], "iou": [0.86, 0.91, 0.92, 0.93]})
    return plots.plot_worst_photos(worst, photos, logits, "synthetic, no fine-tuning")


def _batch():
    import torch

    images, masks = _photos(8)
    return {"image": torch.from_numpy(images).permute(0, 3, 1, 2), "label": torch.from_numpy(masks)[:, None]}


def _model_predictions():
    import torch

    class Brightness(torch.nn.Module):  # logits from the red channel, on the CPU
        device = torch.device("cpu")

        def forward(self, image):
            return image[:, :1].float() / 255 - 0.5

    batch = _batch()
    dataset = [{"image": image, "label": label} for image, label in zip(batch["image"], batch["label"])]
    return plots.plot_model_predictions(Brightness(), dataset, "32-true")


def _overlays(tmp_path):
    from PIL import Image

    paths = []
    for i, image in enumerate(_photos()[0]):
        paths.append(tmp_path / f"IMG_{i:04d}_overlay.jpg")
        Image.fromarray(image).save(paths[-1])
    return plots.plot_overlays(paths)


def _figure(drawn):
    return drawn if isinstance(drawn, plt.Figure) else drawn.figure


def _runs_03():
    return {"decoded on the CUDA + Kornia": _metrics(0.86, 0.95),
            "Albumentations (notebook 02)": _metrics(0.88, 0.95, seed=1)}


def _learning_curve():
    rows = [(start, photos, dice, spread) for start, values in
            (("synthetic", (0.97, 0.98, 0.98, 0.98)), ("random", (0.33, 0.27, 0.46, 0.54)))
            for photos, dice, spread in zip((5, 10, 20, 48), values, (0.19, 0.18, 0.18, 0.06))]
    return pd.DataFrame(rows, columns=["start", "photos", "dice", "±"])


FIGURES = {  # name: a function of tmp_path that draws one figure as a notebook does
    "benchmark_throughput": lambda _: plots.plot_benchmark_throughput(_json("benchmark_h200.json")),
    "ratio_to_bound": lambda _: plots.plot_ratio_to_bound(_json("benchmark_h200.json")),
    "worker_scaling": lambda _: plots.plot_worker_scaling(_json("benchmark_h200.json")),
    **{f"benchmark_sets_{plot.__name__[5:]}": (
        lambda _, plot=plot: plots.plot_benchmark_sets(
            {"reference": _json("benchmark_h200.json"), "live": _live_cpu_run()}, plot))
       for plot in (plots.plot_benchmark_throughput, plots.plot_ratio_to_bound, plots.plot_worker_scaling)},
    "samples_by_type": lambda tmp: plots.plot_samples_by_type(_table(tmp), per_type=4),
    "synthetic_samples": lambda _: plots.plot_synthetic_samples(
        [(kind, image, mask) for kind, image, mask in zip((1, 2, 3, 4), *_photos())]),
    "image_sizes": lambda _: plots.plot_image_sizes(_table(per_type=60)),
    "nail_fraction": lambda _: plots.plot_nail_fraction(_table(per_type=60)),
    "augmentation_gallery": lambda _: plots.plot_augmentation_gallery(
        {name: (_photos()[0] / 255, _photos()[1]) for name in ("resized", "augmented #1", "augmented #2", "augmented #3")}),
    "share_of_bound": lambda _: plots.plot_share_of_bound(
        {"0 · decoded in CPU workers, Kornia sequential": 0.44, "1 · + fused Kornia (no host syncs)": 0.55,
         "2 · + decoded on the CUDA: the training run above": 0.55, "decode once, ahead: the uint8 cache": 0.86},
        title="Closing the gap on CUDA (gpu profile, 384 px)"),
    "steps_to_bound": lambda _: plots.plot_steps_to_bound(
        pd.DataFrame({"share of bound": {"0 · decoded in CPU workers, Kornia sequential": 0.44,
                                         "decode once, ahead: the uint8 cache": 0.86}}),
        SimpleNamespace(device=SimpleNamespace(type="cuda"), name="gpu", image_size=384)),
    "share_of_bound_target": lambda _: plots.plot_share_of_bound(
        {"kornia": 0.54, "kornia_cache": 0.81, "dali": 0.97}, title="Against a target", target=0.9),
    "training_curves_02": lambda _: plots.plot_training_curves({"this run": _metrics(0.80, 0.94)}),
    "training_curves_03": lambda _: plots.plot_training_curves(_runs_03()),
    "training_curves_06": lambda _: plots.plot_training_curves(
        {"synthetic": _metrics(0.95, 0.98, by="step"), "random": _metrics(0.05, 0.5, by="step", seed=2)}, x="step"),
    "learning_curve": lambda _: plots.plot_learning_curve(_learning_curve(), zero_shot=0.98),
    "predictions": lambda _: plots.plot_predictions(_photos()[0] / 255, _photos()[1], 0.9 * _photos()[1],
                                                    scores=[0.91, 0.88, 0.93, 0.90]),
    "worst_photos": lambda _: _worst_photos(),
    "batch_predictions": lambda _: plots.plot_batch_predictions(
        _batch(), 8 * (_batch()["label"][:4, 0].float() - 0.5)[:, None], scores=[0.9] * 4),
    "overlays": _overlays,
    "model_predictions": lambda _: _model_predictions(),
    "batch_gallery": lambda _: plots.plot_batch_gallery(_batch(), title="one DALI training batch (augmented)"),
    "step_ladder": lambda _: plots.plot_step_ladder(_ladder(), "training images/s on cuda (bound: batches on the device)"),
    "iou_curves_seeds": lambda _: plots.plot_iou_curves(
        {f"seed {run['seed']}": run["history"] for run in _json("time_to_accuracy_h200.json")["runs"]}, 0.86),
    "iou_curves_budget": lambda _: plots.plot_iou_curves(
        {"1500 steps, batch 60": _json("time_to_accuracy_h200.json")["runs"][0]["history"]}, 0.86, budget_s=20),
    "ratio_change": lambda _: plots.plot_ratio_change(*_ratio_table()),
    "devices_speed": lambda _: plots.plot_devices_speed({"one device": 1513.0, "2 devices": 2043.0}),
    "two_gpus_speed": lambda _: _show_speed(),
}


@pytest.fixture(params=sorted(FIGURES))
def drawn(request, tmp_path):
    """A figure drawn, laid out and rendered at the notebooks' dpi, and its tight box in px."""
    plt.close("all")
    figure = _figure(FIGURES[request.param](tmp_path))
    figure.set_dpi(FIGURE_DPI)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=FIGURE_DPI, bbox_inches="tight")  # as the inline backend
    renderer = figure.canvas.get_renderer()
    yield request.param, figure, renderer, figure.get_tightbbox(renderer)
    plt.close(figure)


def test_the_function_list_covers_every_plotting_function():
    drawers = {name for name in dir(plots) if name.startswith("plot_")}
    drawn_by = {name for name in drawers if any(name[5:] in key for key in FIGURES)}
    assert drawers == drawn_by


def test_a_figure_fits_the_column(drawn):
    name, _, _, tight = drawn
    assert tight.width <= COLUMN_INCHES + 0.05, f"{name}: {tight.width * FIGURE_DPI:.0f} px wide at {FIGURE_DPI} dpi"
    assert tight.width * FIGURE_DPI <= 2 * COLUMN_PX
    assert tight.height <= 1.25 * COLUMN_INCHES, f"{name}: {tight.height:.1f} in tall, a stack a reader scrolls"


def test_no_text_is_smaller_than_the_minimum(drawn):
    name, figure, _, tight = drawn
    shrink = min(1.0, COLUMN_PX / (tight.width * FIGURE_DPI))  # a wider figure is scaled down
    small = [(t.get_text(), t.get_fontsize()) for t in figure.findobj(Text)
             if t.get_visible() and t.get_text().strip() and t.get_fontsize() < MIN_FONT]
    assert small == [], name
    smallest = min(t.get_fontsize() for t in figure.findobj(Text) if t.get_visible() and t.get_text().strip())
    assert smallest / 72 * FIGURE_DPI * shrink >= 9, f"{name}: {smallest} pt text is under 9 px in the column"


def _along(xy, count):
    """``count`` points along each segment between the successive points ``xy``."""
    steps = np.linspace(0, 1, count)[None, :, None]
    return (xy[:-1, None] + steps * (xy[1:, None] - xy[:-1, None])).reshape(-1, 2)


def _data_boxes(ax, renderer):
    """Display-space boxes of what ``ax`` draws: patches, images, line points (sampled along
    every segment), collections' points and segments."""
    clip = ax.get_window_extent(renderer)
    boxes = []
    for patch in ax.patches:  # the part of each drawn inside the axes
        box = Bbox.intersection(patch.get_window_extent(renderer), clip) if patch.get_visible() else None
        if box is not None and box.width > 0.5 and box.height > 0.5:
            boxes.append(box)
    boxes += [image.get_window_extent(renderer) for image in ax.get_images()
              if isinstance(image, AxesImage) and image.get_visible()]
    points = []
    for line in ax.get_lines():
        if not line.get_visible() or line.get_label().startswith("_nolegend_leg"):
            continue
        xy = line.get_transform().transform(line.get_path().vertices)
        points.append(xy)
        if line.get_linestyle() not in ("None", "", " "):  # the segments between the points
            points.append(_along(xy, 50))
    for collection in ax.collections:
        if not isinstance(collection, Collection) or not collection.get_visible():
            continue
        offsets = collection.get_offsets()
        if len(offsets) and offsets.any():  # (a collection without offsets has one at 0, 0)
            points.append(collection.get_offset_transform().transform(offsets))
        for path in collection.get_paths():
            xy = collection.get_transform().transform(path.vertices)
            if len(xy) >= 2 and not len(offsets) > 1:  # segments (error bars, vlines, contours)
                points.append(_along(xy, 20))
    points = [p[np.isfinite(p).all(axis=1)] for p in points if len(p)]
    inside = [p[(p[:, 0] >= clip.x0) & (p[:, 0] <= clip.x1) & (p[:, 1] >= clip.y0) & (p[:, 1] <= clip.y1)]
              for p in points]
    return boxes, np.concatenate(inside) if inside else np.zeros((0, 2))


def _legends(figure):
    return [legend for legend in figure.findobj(Legend) if legend.get_visible()]


def test_no_legend_is_drawn_over_data(drawn):
    name, figure, renderer, _ = drawn
    for legend in _legends(figure):
        frame = legend.get_window_extent(renderer).padded(-1)
        for ax in figure.axes:
            boxes, points = _data_boxes(ax, renderer)
            over = [box for box in boxes if frame.overlaps(box)]
            assert over == [], f"{name}: the legend {[t.get_text() for t in legend.get_texts()]} hides a bar or image"
            hidden = points[(points[:, 0] > frame.x0) & (points[:, 0] < frame.x1)
                            & (points[:, 1] > frame.y0) & (points[:, 1] < frame.y1)]
            assert len(hidden) == 0, (f"{name}: the legend {[t.get_text() for t in legend.get_texts()]} "
                                      f"hides {len(hidden)} points of lines, markers or whiskers")


def test_no_title_is_drawn_over_the_panels(drawn):
    name, figure, renderer, _ = drawn
    title = figure._suptitle
    if title is None or not title.get_text():
        return
    box = title.get_window_extent(renderer)
    for ax in figure.axes:
        for text in (ax.title, ax._left_title, ax._right_title):
            if text.get_text():
                assert not box.overlaps(text.get_window_extent(renderer)), f"{name}: {title.get_text()!r}"
        assert not box.overlaps(ax.get_window_extent(renderer).padded(-1)), f"{name}: {title.get_text()!r}"


def _score_axes(figure):
    for ax in figure.axes:
        words = ax.get_ylabel() + " " + ax.get_title()
        if re.search(r"\b(IoU|Dice)\b", words) and ax.get_lines():
            values = np.concatenate([np.asarray(line.get_ydata(), float) for line in ax.get_lines()
                                     if line.get_transform() == ax.transData])  # not axhline's
            yield ax, values[np.isfinite(values)]


def test_score_axes_are_scaled_to_the_scores(drawn):
    name, figure, *_ = drawn
    for ax, values in _score_axes(figure):
        low, high = ax.get_ylim()
        spread = max(values.max() - values.min(), 0.05)
        assert high - low <= 3 * spread + 0.05, (f"{name}: {ax.get_title() or ax.get_ylabel()} spans "
                                                 f"{low:.2f}-{high:.2f} for scores {values.min():.2f}-{values.max():.2f}")
        assert low <= values.min() and min(values.max(), 1.0) <= high  # a score's axis may stop at 1


def test_one_scale_for_one_quantity(drawn):
    name, figure, *_ = drawn
    scales = {}
    for ax in figure.axes:
        for axis, label in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())):
            quantity = re.sub(r"\s*\(log scale\)", "", label).strip()
            if quantity:
                scales.setdefault(quantity, set()).add(getattr(ax, f"get_{axis}scale")())
    assert {q: s for q, s in scales.items() if len(s) > 1} == {}, name
