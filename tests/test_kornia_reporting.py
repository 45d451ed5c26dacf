"""Notebook 03's plumbing: the table of steps beside the bound, the item and batch lines, the cache's cost."""

import numpy as np
import pytest
import torch

from nailseg_common.data.decoded import CacheCost
from nailseg_common.measure import benchmark
from nailseg_common.pipelines.gallery import decoded_and_augmented, item_shapes
from nailseg_common.training.run_logs import EpochRates, speeds_table


def _rates(*img_s: float) -> EpochRates:
    rates = EpochRates()
    rates.epochs = [{"img_s": value} for value in img_s]
    return rates


def test_speeds_table_sets_each_median_beside_the_bound():
    bound = _rates(999.0, 100.0, 100.0)  # the first epoch is the warm-up
    table = speeds_table({"slow": _rates(1.0, 40.0, 50.0, 60.0), "fast": _rates(1.0, 90.0)}, bound)
    assert list(table.index) == ["slow", "fast"]
    assert table.loc["slow", "img/s"] == 50.0 and table.loc["slow", "epochs"] == 3
    assert (table.loc["slow", "min"], table.loc["slow", "max"]) == (40.0, 60.0)
    assert table["share of bound"].tolist() == pytest.approx([0.5, 0.9])


def test_item_shapes_name_the_file_and_the_shapes():
    items = [{"file": "/data/Images/1/a.jpg", "label": np.zeros((8, 8), np.uint8),
              "data": np.zeros(100, np.uint8), "orientation": 6},
             {"file": "/data/Images/2/b.png", "pixels": np.zeros((3, 8, 8), np.uint8),
              "label": np.zeros((8, 8), np.uint8)}]
    assert item_shapes(items).splitlines() == [
        "a.jpg {'label': (8, 8), 'data': (100,), 'orientation': 6}",
        "b.png {'pixels': (3, 8, 8), 'label': (8, 8)}"]


def test_decoded_and_augmented_in_one_line():
    image = torch.zeros(2, 3, 4, 4, dtype=torch.uint8)
    augmented = torch.linspace(0, 1, 96).view(2, 3, 4, 4)
    assert decoded_and_augmented(image, augmented) == (
        "decoded: (2, 3, 4, 4) torch.uint8 cpu | augmented: torch.float32 [0.00, 1.00]")


def test_the_cache_cost_prints_as_one_line():
    assert str(CacheCost(12.34, 2, 708.4, 1200.0)) == (
        "the cache: 708 MB on disk beside 1200 MB of photos, built in 12.3 s on 2 cores")


def test_kornia_steps_table_picks_notebook_03s_rows(capsys):
    results = benchmark.load_results()
    if results is None:
        pytest.skip("no committed reference results")
    table = benchmark.kornia_steps_table(results)
    assert capsys.readouterr().out.strip() == benchmark.results_label(results)
    assert set(table.index) <= set(benchmark.KORNIA_STEPS) and list(table.columns) == [
        "training img/s", "share of bound"]
