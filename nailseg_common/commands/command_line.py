"""How the course's commands end on a user's mistake or Ctrl-C: one line naming the file and
the fix, no traceback."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from pytorch_lightning.utilities.exceptions import SIGTERMException

from nailseg_common.core.errors import DataError


def run_command(command: Callable[[], int], stopped: str) -> int:
    """``command()``'s exit status; a :class:`DataError` is printed on stderr as one line,
    ``error: ...`` (a listing's lines joined), exit 2; Ctrl-C prints ``stopped``, exit 130."""
    try:
        return command()
    except DataError as error:
        lines = (line.strip() for line in str(error).splitlines())
        print(f"error: {' '.join(line for line in lines if line)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(stopped, file=sys.stderr)
        return 130


def unwritable_out(shown: str, reason: str) -> DataError:
    """The error of a command's OUT folder (``shown`` as typed) that cannot be written."""
    return DataError(f"Cannot write to OUT {shown} ({reason}): pass an OUT folder you can write.")


def create_out(out: Path, shown: str) -> None:
    """Create a command's OUT folder ``out`` (``shown`` as typed) before its first output;
    :func:`unwritable_out` when it cannot be created or written."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise unwritable_out(shown, error.strerror or str(error)) from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise unwritable_out(shown, "permission denied")


@contextlib.contextmanager
def lightning_ctrl_c() -> Iterator[None]:
    """Lightning ends a fit that Ctrl-C stopped with ``sys.exit(1)``, Ctrl-C ignored from then
    on: raise :class:`KeyboardInterrupt` instead (:func:`run_command`'s line), Ctrl-C's
    handler back. Lightning's exit on SIGTERM goes on as it is."""
    handler = signal.getsignal(signal.SIGINT)
    try:
        yield
    except SIGTERMException:
        raise
    except SystemExit as stop:
        signal.signal(signal.SIGINT, handler)
        raise KeyboardInterrupt from stop


def choose_device(choice: str) -> torch.device:
    """``cuda`` or ``cpu``; ``auto`` is ``cuda`` when PyTorch sees a GPU."""
    if choice == "cuda" and not torch.cuda.is_available():
        raise DataError("--device cuda, but PyTorch sees no CUDA GPU: use --device cpu (or auto).")
    return torch.device("cuda" if choice != "cpu" and torch.cuda.is_available() else "cpu")
