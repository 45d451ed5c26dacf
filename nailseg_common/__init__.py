"""Helper package of the nail-segmentation course on fast input pipelines.

The notebooks import from here and only teach and show. Its layers, each importing only from
itself and the layers before it in :data:`LAYERS` (``tests/test_layers.py`` checks):

- ``core``: the ground: the one error, the clock, statistics, files;
- ``setup``: profiles, paths, the environment, DALI's availability, progress;
- ``data``: the synthetic set and your photos, images and masks, preparation, the split;
- ``pipelines``: the augmentation policy and its Albumentations, Kornia and DALI pipelines;
- ``training``: the U-Net, its trainer and logs, checkpoints, the fast recipe, fine-tuning,
  several GPUs;
- ``measure``: timing, the benchmark, profiling, the plots and what notebooks 06 and 08 report;
- ``course``: the one ``start()`` of a notebook;
- ``commands``: what a user runs: ``nailseg-predict``, ``nailseg-finetune``, ``nailseg-train``.
"""

LAYERS = ("core", "setup", "data", "pipelines", "training", "measure", "course", "commands")

import os
import warnings

# Albumentations checks PyPI for updates on import; the course runs offline.
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
# torch.profiler's tracer (Kineto) writes its start and stop, and on a machine without a GPU
# "gpuGetDeviceCount failed", to stderr at every profile; the profiles' tables say the rest.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

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
