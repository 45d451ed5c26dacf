"""Which of notebook 06's starts this machine can fine-tune, and why not the others."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path


def available_starts(starts: Iterable[str], make_start: Callable[[str], object],
                     checkpoint: Path | None, try_imagenet: bool) -> tuple[list[str], dict[str, str]]:
    """The ``starts`` that can be fine-tuned here, and for each other one the reason: the
    ``"synthetic"`` start needs ``checkpoint``; the ``"imagenet"`` start needs ``try_imagenet``
    and its weights, which ``make_start("imagenet")`` fetches once (its ``RuntimeError`` says
    why it could not)."""
    available, skipped = [], {}
    for start in starts:
        if start == "synthetic" and checkpoint is None:
            skipped[start] = "no checkpoint (see above)"
        elif start == "imagenet" and not try_imagenet:
            skipped[start] = "try_imagenet=False"
        elif start == "imagenet":
            try:
                make_start(start)
                available.append(start)
            except RuntimeError as error:
                skipped[start] = str(error)
        else:
            available.append(start)
    return available, skipped
