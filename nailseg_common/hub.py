"""Whether the Hugging Face Hub can be reached, so that an offline machine does not wait.

Offline, the Hub client retries each file with growing pauses, half a minute or more before
it gives up. :func:`cache_only_when_offline` asks first (one connection, a few seconds at
most) and, when the Hub cannot be reached, lets the client look in its local cache only.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from urllib.parse import urlparse

from huggingface_hub import constants as hub_constants


def hub_reachable(timeout: float = 3.0) -> bool:
    """True when a connection to the Hugging Face Hub (``HF_ENDPOINT``) opens within ``timeout``."""
    url = urlparse(hub_constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
    except OSError:
        return False
    return True


@contextlib.contextmanager
def cache_only_when_offline() -> Iterator[bool]:
    """Inside, downloads from the Hub use the local cache only when the Hub cannot be reached
    (``huggingface_hub``'s ``HF_HUB_OFFLINE`` switch, put back on the way out). Yields
    whether the Hub was reachable."""
    if hub_reachable():
        yield True
        return
    offline = hub_constants.HF_HUB_OFFLINE
    hub_constants.HF_HUB_OFFLINE = True
    try:
        yield False
    finally:
        hub_constants.HF_HUB_OFFLINE = offline
