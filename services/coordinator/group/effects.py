"""How the group coordinator acts outside a group's lock: deferred callbacks and ordered appends.

Request callbacks and `GroupStore.append` are never called while a group lock is held, since a
store callback (possibly on another thread) needs that lock. Instead, code under the lock
records what to do:

- `Effects.call(fn, *args)`: run after the lock is released, in order.
- `StoreOutbox.enqueue(partition, records, callback)`: queued while the lock is held, so appends
  reach the store in the order their groups' locks were taken (the order replay must see), and
  handed to the store after the lock is released by whichever thread is draining the queue.

`once(fn)` wraps a callback so that only its first invocation has an effect: the coordinator
answers parked requests with NOT_COORDINATOR when it loses a partition, and the store's own
answer, arriving later, must then be ignored. A store callback answered that way is marked done
and the append itself is skipped if it has not been handed to the store yet.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


class Once:
    """A callback that acts only on its first call; thread-safe."""

    __slots__ = ("_fn", "_lock", "done")

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn
        self._lock = threading.Lock()
        self.done = False

    def __call__(self, *args: Any) -> None:
        with self._lock:
            if self.done:
                return
            self.done = True
        self._fn(*args)


def once(fn: Callable[..., Any]) -> Once:
    return fn if isinstance(fn, Once) else Once(fn)


class Effects:
    """Calls deferred until the group lock is released."""

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        self._calls: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []

    def call(self, fn: Callable[..., Any] | None, *args: Any) -> None:
        if fn is not None:
            self._calls.append((fn, args))

    def run(self) -> None:
        calls, self._calls = self._calls, []
        for fn, args in calls:
            try:
                fn(*args)
            except Exception:
                logger.exception("group coordinator callback %r failed", fn)


AppendRequest = tuple[int, list[tuple[bytes, bytes | None]] | None, Once, int]


class StoreOutbox:
    """A FIFO of appends, handed to the store by one draining thread at a time."""

    def __init__(self, append: Callable[[int, list[tuple[bytes, bytes | None]], Callable[[int], None]], None]):
        self._append = append
        self._queue: collections.deque[AppendRequest] = collections.deque()
        self._lock = threading.Lock()
        self._draining = False

    def enqueue(self, partition: int, records: list[tuple[bytes, bytes | None]], callback: Once) -> None:
        with self._lock:
            self._queue.append((partition, records, callback, 0))

    def enqueue_failure(self, callback: Once, error_code: int) -> None:
        """Answer `callback(error_code)` in queue order, without appending anything."""
        with self._lock:
            self._queue.append((-1, None, callback, error_code))

    def drain(self) -> None:
        """Hand queued appends to the store; returns at once if another call is draining."""
        with self._lock:
            if self._draining:
                return
            self._draining = True
        while True:
            with self._lock:
                if not self._queue:
                    self._draining = False
                    return
                item = self._queue.popleft()
            self._hand_over(*item)

    def _hand_over(
        self, partition: int, records: list[tuple[bytes, bytes | None]] | None, callback: Once, error_code: int
    ) -> None:
        if callback.done:
            return
        try:
            if records is None:
                callback(error_code)
            else:
                self._append(partition, records, callback)
        except Exception:
            logger.exception("append to __consumer_offsets-%d failed", partition)
            callback(_UNKNOWN_SERVER_ERROR)


_UNKNOWN_SERVER_ERROR = -1
