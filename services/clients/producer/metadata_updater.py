"""The producer's metadata thread: refreshes the cluster metadata whenever an update is due.

It sleeps until `Metadata.time_to_next_update()` says a refresh is due (or `wakeup()` says one
was requested), refreshes from the least-loaded node with `request.timeout.ms` per node, and
calls `on_update(cluster)` after every successful answer. A failed refresh is recorded by
`Metadata` (the next waits `retry.backoff.ms`). Refreshing here rather than on the sender
thread keeps a slow or dead node from holding up produce responses and callbacks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from services.clients.cluster import Cluster
from services.clients.metadata import Metadata
from services.clients.transport import ChannelPool
from services.common.errors import KafkaError

logger = logging.getLogger(__name__)

MAX_IDLE_WAIT_MS = 1000


class MetadataUpdater(threading.Thread):
    """Keeps `metadata` fresh until `stop()`."""

    def __init__(self, metadata: Metadata, pool: ChannelPool, request_timeout_ms: int,
                 on_update: Callable[[Cluster], None], name: str):
        super().__init__(name=name, daemon=True)
        self._metadata = metadata
        self._pool = pool
        self._request_timeout_ms = request_timeout_ms
        self._on_update = on_update
        self._wakeup = threading.Event()
        self._stopped = False

    def wakeup(self) -> None:
        self._wakeup.set()

    def stop(self) -> None:
        self._stopped = True
        self._wakeup.set()

    def run(self) -> None:
        while not self._stopped:
            self._wakeup.clear()
            wait_ms = self._metadata.time_to_next_update()
            if wait_ms > 0:
                self._wakeup.wait(min(wait_ms, MAX_IDLE_WAIT_MS) / 1000)
                continue
            try:
                cluster = self._metadata.refresh(self._pool, self._request_timeout_ms)
            except KafkaError as error:
                logger.debug("metadata refresh failed: %s", error)
                continue
            except Exception:
                if self._stopped:  # the channel pool closed under us
                    return
                logger.exception("metadata refresh failed")
                self._metadata.failed_update()
                continue
            try:
                self._on_update(cluster)
            except Exception:
                logger.exception("applying a metadata update failed")
