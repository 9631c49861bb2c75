"""`AppendQueue`: hands a coordinator core's appends to its store (`InternalTopicStore`: an internal topic's log) in the
order the core produced them, which is the order replay must see.

The runtime queues appends under its own lock (the one its core runs under) and calls `drain()`
after releasing it; one thread at a time drains, so the store receives them in order. An append
the core no longer wants (its partition was unloaded meanwhile) is skipped. Each write's error
code (and, when the store knows it, the first record's offset) goes to
`on_written(append_id, error_code[, first_offset])` exactly once. An append with a `transaction`
(producer id, epoch) is written as that producer's transactional batch.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from services.common.errors import Errors

logger = logging.getLogger(__name__)


class QueuedAppend(Protocol):
    append_id: int
    partition: int
    records: list[tuple[bytes, bytes | None]]


class InternalTopicStore(Protocol):
    def append(
        self, partition: int, records: list[tuple[bytes, bytes | None]], callback: Callable[[int, int | None], None],
        transaction: tuple[int, int] | None = None,
    ) -> None:  # fmt: skip
        """Append (key, value) records to partition `partition` of the internal topic with acks=all;
        with `transaction` (producer_id, producer_epoch) as one transactional batch of it.

        Calls callback(error_code, first_offset) exactly once, later, possibly from another thread:
        0 and the log offset of the first record when written, else a Kafka error code
        (NOT_COORDINATOR when this coordinator was fenced, REQUEST_TIMED_OUT, ...) and None."""
        ...


class Once:
    """A callback that acts only on its first call; thread-safe."""

    __slots__ = ("_fn", "_lock", "done")

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self._fn = fn
        self._lock = threading.Lock()
        self.done = False

    def __call__(self, *values: Any) -> None:
        with self._lock:
            if self.done:
                return
            self.done = True
        self._fn(*values)


class AppendQueue:
    def __init__(self, store: Any, lock: threading.Lock, is_wanted: Callable[[int], bool],
                 on_written: Callable[..., None], topic: str) -> None:
        self._store = store
        self._lock = lock
        self._is_wanted = is_wanted
        self._on_written = on_written
        self._topic = topic
        self._appends: collections.deque[QueuedAppend] = collections.deque()
        self._draining = False

    def extend(self, appends: Iterable[QueuedAppend]) -> None:
        """Queues appends; the caller holds the lock."""
        self._appends.extend(appends)

    def drain(self) -> None:
        """Hands queued appends to the store; returns at once if another thread is draining."""
        with self._lock:
            if self._draining:
                return
            self._draining = True
        while True:
            with self._lock:
                append = self._appends.popleft() if self._appends else None
                if append is None:
                    self._draining = False
                    return
                if not self._is_wanted(append.append_id):
                    continue
            self._hand_over(append)

    def _hand_over(self, append: QueuedAppend) -> None:
        def written(error_code: int, *first_offset: int | None) -> None:
            self._on_written(append.append_id, error_code, *first_offset)

        try:
            transaction = getattr(append, "transaction", None)
            if transaction is None:
                self._store.append(append.partition, append.records, Once(written))
            else:
                self._store.append(append.partition, append.records, Once(written),
                                   transaction=(transaction.producer_id, transaction.producer_epoch))
        except Exception:
            logger.exception("append to %s-%d failed", self._topic, append.partition)
            written(Errors.UNKNOWN_SERVER_ERROR)
