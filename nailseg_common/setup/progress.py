"""Progress of a loop in a few lines: a notebook keeps every update as an output.

:func:`progress` is a text bar on stdout that first shows after ``REFRESH_SECONDS`` and then
refreshes every ``REFRESH_SECONDS``, so a minute of work leaves a handful of lines, not
thousands of fragments (and no stderr box), and a shorter loop one line, at its end.
A Lightning training's lines: :mod:`nailseg_common.training.progress_lines`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator

from tqdm import tqdm

REFRESH_SECONDS = 10.0


def progress(iterable: Iterable, description: str, total: int | None = None,
             enabled: bool = True) -> Iterator:
    """``iterable`` behind a text bar on stdout that refreshes every ``REFRESH_SECONDS``.

    An item counts as done when the loop asks for the next one or stops asking: a loop
    that stops after the last item (``zip(items, progress(...))`` never asks past it)
    still ends its bar at 100 %.
    """
    bar = tqdm(total=total if total is not None else getattr(iterable, "__len__", lambda: None)(),
               desc=description, disable=not enabled, file=sys.stdout,
               mininterval=REFRESH_SECONDS, maxinterval=REFRESH_SECONDS, delay=REFRESH_SECONDS,
               ascii=True)
    return _counted(iterable, bar)


def _counted(iterable: Iterable, bar: tqdm) -> Iterator:
    try:
        for item in iterable:
            try:
                yield item
            except GeneratorExit:  # the loop is done with this item and wants no more
                bar.update(1)
                raise
            bar.update(1)
    finally:
        if bar.n and bar.last_print_n == 0:  # shorter than the delay: the bar once, at its end
            print(bar, file=bar.fp, flush=True)
        bar.close()
