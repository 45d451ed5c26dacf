"""Progress of a loop in a few lines: a notebook keeps every update as an output.

:func:`progress` is a text bar on stdout that refreshes every ``REFRESH_SECONDS``, so a
minute of work leaves a handful of lines, not thousands of fragments (and no stderr box).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from tqdm import tqdm

REFRESH_SECONDS = 10.0


def progress(iterable: Iterable, description: str, total: int | None = None,
             enabled: bool = True) -> Iterable:
    """``iterable`` behind a text bar on stdout that refreshes every ``REFRESH_SECONDS``."""
    return tqdm(iterable, desc=description, total=total, disable=not enabled, file=sys.stdout,
                mininterval=REFRESH_SECONDS, maxinterval=REFRESH_SECONDS, ascii=True)
