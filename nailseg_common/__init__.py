"""Helper package of the nail-segmentation course on fast input pipelines.

One module per concern; the notebooks import from here and only teach and show.
"""

import os
import warnings

# Albumentations checks PyPI for updates on import; the course runs offline.
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")

# Library notices a reader can do nothing about, filtered once for every module and notebook.
for message in (
    r"IProgress not found",  # tqdm.auto in a kernel without ipywidgets
    r".*isinstance\(treespec, LeafSpec\)` is deprecated",  # Lightning 2.6 on torch >= 2.10
    (r"You have overridden `on_after_batch_transfer` in `LightningModule` but have passed in a "
    r"`LightningDataModule`"),  # the hook is meant to run with every DataModule
    r".*does not have many workers which may be a bottleneck",  # smoke/cpu profiles, by choice
):
    warnings.filterwarnings("ignore", message=message)

__version__ = "0.1.0"
