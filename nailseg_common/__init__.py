"""Helper package of the nail-segmentation course on fast input pipelines.

The notebooks import from here and only teach and show. Its layers are :data:`LAYERS`, each
importing only from itself and the layers before it (``tests/test_layers.py`` checks);
``docs/code.md`` says what each holds and which notebook writes which module.
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
