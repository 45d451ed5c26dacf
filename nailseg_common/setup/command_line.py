"""How the course's commands end on a user's mistake: one line naming the file and the fix,
no traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable

from nailseg_common.data.images import DataError


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
