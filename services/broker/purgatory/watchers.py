"""`Watchers`: the delayed operations waiting on one watch key, in arrival order.

An operation watched on several keys sits in several `Watchers`. Completed operations are dropped
from a key's list when that key is checked (`try_complete_watched`) or when the purgatory purges
(`purge_completed`); the purgatory deletes a key's `Watchers` once it is empty. Operations are held
by identity, so subclasses that define `__eq__` (dataclasses) are fine. The lock is the one of the
purgatory shard holding the key, so looking a key up and watching on it is one critical section; it
is never held while an operation's own code runs.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Generic, TypeVar

from services.broker.purgatory.delayed_operation import DelayedOperation

Op = TypeVar("Op", bound=DelayedOperation)


class Watchers(Generic[Op]):
    """Thread-safe ordered set of operations watching `key`."""

    __slots__ = ("key", "_operations", "_lock")

    def __init__(self, key: Hashable, lock: threading.Lock) -> None:
        self.key = key
        self._operations: dict[int, Op] = {}
        self._lock = lock

    def __len__(self) -> int:
        return len(self._operations)

    @property
    def is_empty(self) -> bool:
        return not self._operations

    def watch_locked(self, operation: Op) -> None:
        """Add `operation`; the caller holds the lock given at construction."""
        self._operations[id(operation)] = operation

    def unwatch_locked(self, operation: Op) -> None:
        """Drop `operation`; the caller holds the lock given at construction."""
        self._operations.pop(id(operation), None)

    def try_complete_watched(self) -> int:
        """Try to complete each watched operation; drop finished ones; return how many this call completed."""
        with self._lock:
            snapshot = list(self._operations.values())
        completed = 0
        finished: list[Op] = []
        for operation in snapshot:
            if operation.is_completed:
                finished.append(operation)
            elif operation.safe_try_complete():
                finished.append(operation)
                completed += 1
        if finished:
            self._forget(finished)
        return completed

    def purge_completed(self) -> int:
        """Drop operations completed elsewhere (expired, or completed through another key)."""
        with self._lock:
            finished = [op for op in self._operations.values() if op.is_completed]
            for operation in finished:
                del self._operations[id(operation)]
        return len(finished)

    def cancel(self) -> list[Op]:
        """Stop watching everything; cancel each operation's timeout; return them (not completed)."""
        with self._lock:
            operations = list(self._operations.values())
            self._operations.clear()
        for operation in operations:
            operation.cancel()
        return operations

    def _forget(self, operations: list[Op]) -> None:
        with self._lock:
            for operation in operations:
                self._operations.pop(id(operation), None)
