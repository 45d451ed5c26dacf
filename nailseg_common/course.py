"""The one set-up call every notebook makes after its ``parameters`` cell."""

from __future__ import annotations

import os
from collections.abc import Mapping

import matplotlib
import matplotlib.pyplot as plt  # noqa: F401  (activates the notebook's backend before the style below)
import pandas as pd

from nailseg_common.data.preparation import ensure_prepared, fit_batch_to_split
from nailseg_common.setup.environment import environment_report
from nailseg_common.setup.paths import DataLocation, shown
from nailseg_common.setup.profiles import (
    SETTABLE_FIELDS,
    Profile,
    select_profile,
    set_matmul_precision,
)

FIGURE_DPI = 150
FIGURE_QUALITY = 85  # JPEG: photos and galleries at 150 dpi stay a fraction of their PNG size


def start(parameters: Mapping[str, object], data_root: str | os.PathLike | None = None, *,
          seed: int = 0) -> tuple[Profile, DataLocation]:
    """Choose the run size, report the environment, and prepare the data.

    ``parameters`` is the notebook's namespace after its ``parameters`` cell (``globals()``):
    its ``profile`` and every value it holds for a field of :class:`Profile` go to
    :func:`profiles.select_profile` (``None`` keeps the profile's value), and the process's
    float32 matmul precision follows the profile (:func:`profiles.set_matmul_precision`: TF32
    on a GPU). The data is ``data_root`` (else the parameters' ``data_root``: your photos) or
    the synthetic set, generated and prepared when needed. The batch shrinks, saying so, when
    the training split is too small for it. Returns the profile and where the data is.
    """
    overrides = {name: parameters[name] for name in SETTABLE_FIELDS if name in parameters}
    profile = str(parameters.get("profile") or "")
    data_root = parameters.get("data_root", "") if data_root is None else data_root
    cfg = select_profile(profile, **overrides)
    set_matmul_precision(cfg)
    print(environment_report(cfg))
    show_figures_as_jpeg()
    pd.set_option("display.max_colwidth", None)  # tables show whole cells
    data = ensure_prepared(cfg, data_root or None, seed=seed)
    cfg = fit_batch_to_split(cfg, data)
    print(f"data: {shown(data.raw)} ({'synthetic' if data.synthetic else 'your photos'}), "
          f"prepared in {shown(data.prepared)}")
    return cfg, data


def show_figures_as_jpeg() -> None:
    """Figures in a notebook at ``FIGURE_DPI``, embedded as JPEG (outside IPython: dpi only)."""
    matplotlib.rcParams["figure.dpi"] = FIGURE_DPI
    from IPython import get_ipython

    if get_ipython() is not None:
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("jpeg", pil_kwargs={"quality": FIGURE_QUALITY})
