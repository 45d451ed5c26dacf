"""How the course's commands end on a user's mistake, Ctrl-C or SIGTERM: one line naming the
file and the fix, no traceback, and an exit status a script can trust (2 a mistake, 130 Ctrl-C,
143 SIGTERM). Light to import (no torch): a command's heavy imports come after it, inside
:func:`starting`, so a stop during them ends in one line too."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from nailseg_common.core.errors import DataError

if TYPE_CHECKING:
    import torch

STARTING = "nothing was written."
"""What a stop while a command starts leaves."""


class Terminated(BaseException):
    """SIGTERM, raised where the process is (as Ctrl-C raises :class:`KeyboardInterrupt`), so
    that a command stopped by it ends like one stopped by Ctrl-C: nothing kept half-written, one
    line, a non-zero exit. Lightning calls the handler too (it keeps the one it finds)."""


def _terminated(signum: int, frame: object) -> None:
    raise Terminated


def on_sigterm_raise() -> Callable | int | None:
    """From now on SIGTERM raises :class:`Terminated` (in the main thread, where signals go);
    the handler it had."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _terminated)


STOPS = {KeyboardInterrupt: ("Ctrl-C", 130), Terminated: ("SIGTERM", 143)}
"""What stops a command: the name its line gives, and the exit status (128 + the signal)."""


def stopped(stop: BaseException, leaves: str, starting: bool = False) -> int:
    """Print the one line of a command stopped by ``stop`` (``stopped (Ctrl-C): <leaves>``);
    its exit status."""
    name, status = STOPS[type(stop)]
    print(f"stopped ({name}){' while starting' if starting else ''}: {leaves}", file=sys.stderr)
    return status


@contextlib.contextmanager
def starting(module: str) -> Iterator[None]:
    """Around a command module's heavy imports (torch...): Ctrl-C or SIGTERM there ends in one
    line when the module runs as ``python -m`` (``module`` is its ``__name__``); imported, the
    stop goes on to the importer (:func:`launch`'s line)."""
    if module == "__main__":
        on_sigterm_raise()
    try:
        yield
    except (KeyboardInterrupt, Terminated) as stop:
        if module != "__main__":
            raise
        raise SystemExit(stopped(stop, STARTING, starting=True)) from None


def launch(module: str) -> int:
    """Import ``nailseg_common.commands.<module>`` and run its ``main()``: the entry points'
    start, so Ctrl-C or SIGTERM during the imports prints one line; the exit status."""
    on_sigterm_raise()
    try:
        main = importlib.import_module(f"nailseg_common.commands.{module}").main
    except (KeyboardInterrupt, Terminated) as stop:
        return stopped(stop, STARTING, starting=True)
    return main()


def predict() -> int:
    """``nailseg-predict``."""
    return launch("predict")


def fine_tune() -> int:
    """``nailseg-fine-tune``."""
    return launch("fine_tune")


def prepare() -> int:
    """``nailseg-prepare``."""
    return launch("prepare")


def train() -> int:
    """``nailseg-train``."""
    return launch("train")


def bench() -> int:
    """``nailseg-bench``."""
    return launch("bench")


def joined_numbers(argv: list[str], options: tuple[str, ...]) -> list[str]:
    """``argv`` with each numeric option followed by a negative number (``--lr -1e-3``) joined
    as ``--lr=-1e-3``: argparse reads ``-1e-3`` as an option of its own."""
    joined, index = [], 0
    while index < len(argv):
        word = argv[index]
        if word == "--":
            return joined + argv[index:]
        following = argv[index + 1] if index + 1 < len(argv) else ""
        if word in options and following.startswith("-") and _is_number(following):
            joined.append(f"{word}={following}")
            index += 2
        else:
            joined.append(word)
            index += 1
    return joined


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def add_checkpoint_option(parser: argparse.ArgumentParser, names: str) -> None:
    """``--checkpoint``, declared here for every command: ``names`` what it may be; its default
    is notebook 06's choice, the same in every command."""
    parser.add_argument("--checkpoint", default="",
                        help=f"{names}; default: of the profile's newest best-*.ckpt and the course's "
                             "model, the better on its synthetic validation")


IMAGE_SIDE = (int, lambda side: side > 0 and side % 32 == 0,
              "the U-Net needs a positive multiple of 32, e.g. 160.")
SEED = (int, lambda seed: 0 <= seed < 2**32, "give a whole number from 0 to 4294967295.")
"""Rules of :func:`check_numbers` that several commands share: an image side, a seed."""


def at_least(low: int, fix: str) -> tuple[type, Callable[[float], bool], str]:
    """The rule of a whole number ``low`` or more."""
    return int, lambda value: value >= low, fix


def peak_lr(example: str) -> tuple[type, Callable[[float], bool], str]:
    """The rule of a peak learning rate: a number between 0 and 1 (``example`` in the fix)."""
    return float, lambda lr: 0 < lr < 1, f"choose a peak learning rate between 0 and 1, e.g. {example}."


def check_numbers(parser: argparse.ArgumentParser, args: argparse.Namespace,
                  rules: dict[str, tuple[type, Callable[[float], bool], str]]) -> None:
    """Each option of ``rules`` (``{"--lr": (float, rule, fix)}``) given as text converted in
    ``args``; a value of the wrong kind or out of its ``rule`` exits 2 through
    ``parser.error``: ``--lr -0.001: choose ...``."""
    for option, (kind, rule, fix) in rules.items():
        dest = option.removeprefix("--").replace("-", "_")
        text = getattr(args, dest)
        if not isinstance(text, str):
            continue
        try:
            value = kind(text)
        except ValueError:
            parser.error(f"{option} {text}: not a {'whole ' if kind is int else ''}number; {fix}")
        if not rule(value):
            parser.error(f"{option} {value}: {fix}")
        setattr(args, dest, value)


def run_command(command: Callable[[], int], leaves: str) -> int:
    """``command()``'s exit status; a :class:`DataError` is printed on stderr as one line,
    ``error: ...`` (a listing's lines joined), exit 2; Ctrl-C or SIGTERM prints one line saying
    what the stop ``leaves`` (:func:`stopped`), exit 130 or 143; SIGTERM's handler restored."""
    previous = on_sigterm_raise()
    try:
        return command()
    except DataError as error:
        lines = (line.strip() for line in str(error).splitlines())
        print(f"error: {' '.join(line for line in lines if line)}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Terminated) as stop:
        return stopped(stop, leaves)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


OUT_FIX = "pass an OUT folder you can write."


def unwritable_out(shown: str, reason: str, fix: str = OUT_FIX) -> DataError:
    """The error of a command's OUT folder (``shown`` as typed) that cannot be written."""
    return DataError(f"Cannot write to {shown} ({reason}): {fix}")


def create_out(out: Path, shown: str, fix: str = OUT_FIX) -> None:
    """Create a command's output folder ``out`` (``shown`` as the message names it, ``OUT x``
    for a command's OUT argument) before its first output; :func:`unwritable_out`, ending with
    ``fix``, when it cannot be created or written."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise unwritable_out(shown, error.strerror or str(error), fix) from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise unwritable_out(shown, "permission denied", fix)


@contextlib.contextmanager
def lightning_stops() -> Iterator[None]:
    """Around Lightning's fits, so that a stop ends in :func:`run_command`'s one line: Lightning
    ends a fit that Ctrl-C stopped with ``sys.exit(1)``, Ctrl-C ignored from then on: raise
    :class:`KeyboardInterrupt` instead, Ctrl-C's handler back. Lightning's own exit on SIGTERM
    (a ``SystemExit`` without a code, were :class:`Terminated` not raised first) is a SIGTERM
    too, and its log line of the signal is left out."""
    from pytorch_lightning.utilities.exceptions import SIGTERMException

    logging.getLogger("pytorch_lightning.trainer.connectors.signal_connector").setLevel(logging.WARNING)
    handler = signal.getsignal(signal.SIGINT)
    try:
        yield
    except SIGTERMException as stop:
        raise Terminated from stop
    except SystemExit as stop:
        signal.signal(signal.SIGINT, handler)
        raise KeyboardInterrupt from stop


def choose_device(choice: str) -> torch.device:
    """``cuda`` or ``cpu``; ``auto`` is ``cuda`` when PyTorch sees a GPU."""
    import torch

    if choice == "cuda" and not torch.cuda.is_available():
        raise DataError("--device cuda, but PyTorch sees no CUDA GPU: use --device cpu (or auto).")
    return torch.device("cuda" if choice != "cpu" and torch.cuda.is_available() else "cpu")
