"""Whether NVIDIA DALI runs here (this module imports without it, and says why not), and
DALI's names for the pipelines that use it."""

from __future__ import annotations

import platform

from nailseg_common.setup.environment import usable_cores

try:
    import nvidia.dali
    from nvidia.dali import fn, types
    from nvidia.dali import pipeline_def as _pipeline_def
    from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    from nvidia.dali.plugin.pytorch import DALIGenericIterator
except ImportError as error:  # macOS, Windows, or a Linux environment without the wheel
    IMPORT_ERROR: ImportError | None = error
    fn = types = LastBatchPolicy = DALIGenericIterator = _pipeline_def = None
else:
    IMPORT_ERROR = None

__all__ = [
    "DALIGenericIterator",
    "LastBatchPolicy",
    "dali_available",
    "dali_status",
    "default_num_threads",
    "fn",
    "pipeline_def",
    "require_dali",
    "types",
    "where_dali_runs",
]


def dali_available() -> bool:
    """True when ``nvidia.dali`` imports (Linux x86_64/aarch64 with the wheel installed)."""
    return IMPORT_ERROR is None


def dali_status() -> str:
    """One line: the DALI version in use, or why it is missing and what to do."""
    if IMPORT_ERROR is None:
        return f"NVIDIA DALI {nvidia.dali.__version__} is available."
    system = platform.system()
    where = (f"DALI has no wheels for {system}" if system in ("Darwin", "Windows")
             else "DALI is not installed in this environment")
    return (f"{where} ({IMPORT_ERROR}). DALI ships Linux wheels only: run this notebook on "
            "Linux, WSL2 or Colab, or `pip install nvidia-dali-cuda120` on Linux.")


def where_dali_runs(device: str) -> str:
    """One line for notebook 04: DALI's version and where its operators run (``device``:
    "gpu" or "cpu"), or why DALI is missing and what the notebook skips then."""
    if IMPORT_ERROR is not None:
        return (f"{dali_status()} The cells under `if HAVE_DALI:` are skipped: the code is "
                "still defined, and the committed H200 results still print.")
    where = {"gpu": "the GPU", "cpu": "the CPU (CPU-only mode: device_id=None)"}[device]
    return f"{dali_status()} Its operators run on {where}."


def require_dali() -> None:
    """Raise a RuntimeError with :func:`dali_status` when DALI is missing."""
    if IMPORT_ERROR is not None:
        raise RuntimeError(dali_status()) from IMPORT_ERROR


def pipeline_def(graph):
    """DALI's ``pipeline_def`` when DALI imports; else a stand-in that raises :func:`dali_status`."""
    if IMPORT_ERROR is None:
        return _pipeline_def(graph)

    def unavailable(*args, **kwargs):
        require_dali()

    return unavailable


def default_num_threads(device: str) -> int:
    """CPU threads for DALI: all cores when everything runs on the CPU, a few for the reader."""
    cores = usable_cores()
    return cores if device == "cpu" else min(4, cores)
