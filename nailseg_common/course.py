"""The one set-up call every notebook makes after its ``parameters`` cell."""

from __future__ import annotations

import os

import matplotlib
import matplotlib.pyplot as plt  # noqa: F401  (activates the notebook's backend before the style below)
import pandas as pd

from .environment import environment_report
from .paths import DataLocation
from .preparation import ensure_prepared, fit_batch_to_split
from .profiles import Profile, select_profile

FIGURE_DPI = 150


def start(profile: str = "", data_root: str | os.PathLike = "", *, seed: int = 0,
          **overrides) -> tuple[Profile, DataLocation]:
    """Choose the run size, report the environment, and prepare the data.

    ``profile`` and ``overrides`` go to :func:`profiles.select_profile` (``None`` keeps the
    profile's value); the data is ``data_root`` (your photos) or the synthetic set, generated
    and prepared when needed. The batch shrinks, saying so, when the training split is too
    small for it. Returns the profile and where the data is.
    """
    cfg = select_profile(profile, **overrides)
    print(environment_report(cfg))
    matplotlib.rcParams["figure.dpi"] = FIGURE_DPI
    pd.set_option("display.max_colwidth", None)  # tables show whole cells
    data = ensure_prepared(cfg, data_root or None, seed=seed)
    cfg = fit_batch_to_split(cfg, data)
    print(f"data: {data.raw} ({'synthetic' if data.synthetic else 'your photos'}), "
          f"prepared in {data.prepared}")
    return cfg, data
