"""The course's one error for a mistake a user can make."""

from __future__ import annotations


class DataError(ValueError):
    """A dataset, data folder or setting the course cannot use; the message says which and
    how to fix it (in a notebook, IPython shows the message alone, without a traceback)."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]
