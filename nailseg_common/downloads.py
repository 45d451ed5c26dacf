"""A clear error when pretrained weights cannot be downloaded (the machine is offline)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def offline_hint(encoder: str, encoder_weights: str | None) -> Iterator[None]:
    """Turn an ``OSError`` raised while building a model with ``encoder_weights`` (DNS,
    connection, "not in the local cache") into a ``RuntimeError`` that says what to do."""
    try:
        yield
    except OSError as error:
        raise RuntimeError(
            f"Could not download the {encoder_weights!r} weights of encoder {encoder!r}: this "
            f"machine looks offline ({type(error).__name__}). Use encoder_weights=None (random "
            "initialisation, the course default), or download the weights once on a connected "
            "machine so they are in the Hugging Face cache."
        ) from error
