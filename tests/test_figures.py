"""Every figure the package draws fits the blog's column: one function makes them."""

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from nailseg_common.measure.plots import COLUMN_INCHES, column_subplots

ROOT = Path(__file__).resolve().parents[1]


def test_a_wide_figure_is_scaled_to_the_column():
    figure, _ = column_subplots(1, 2, figsize=(11, 3.8))
    width, height = figure.get_size_inches()
    assert width == COLUMN_INCHES and height == 3.8 * COLUMN_INCHES / 11


def test_no_package_module_makes_a_figure_of_its_own():
    plots = ROOT / "nailseg_common" / "measure" / "plots.py"
    found = [str(p.relative_to(ROOT)) for p in (ROOT / "nailseg_common").rglob("*.py")
             if p != plots and re.search(r"plt\.(subplots|figure)\(", p.read_text())]
    assert found == []
