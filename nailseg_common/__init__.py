"""Helper package of the nail-segmentation course on fast input pipelines.

The notebooks import from here and only teach and show. Its layers, each a subpackage:

- ``setup``: profiles, paths, the one ``start()`` of a notebook, the environment, files, progress;
- ``data``: the synthetic set and your photos, images and masks, preparation, the split;
- ``pipelines``: the augmentation policy and its Albumentations, Kornia and DALI pipelines;
- ``training``: the U-Net, its trainer and logs, the fast recipe, fine-tuning, two GPUs;
- ``measure``: timing, the benchmark, profiling, the plots.

On top, the commands a user runs: ``python -m nailseg_common.predict`` and
``python -m nailseg_common.train``.
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
    r".*Profiler clears events at the end of each cycle",  # torch.profiler with a schedule
):
    warnings.filterwarnings("ignore", message=message)

__version__ = "0.1.0"
