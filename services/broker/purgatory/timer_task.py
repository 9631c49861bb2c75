"""`TimerTask`: something to run once after `delay_ms`, cancellable, held by at most one timer slot.

A task is linked to the timer through a `TimerTaskEntry` (see `task_list`). The task remembers only
its newest entry: adding a task again replaces the entry, and the old one is unlinked from its
bucket, so a re-added task runs once, at its newest expiration. An entry whose task no longer points
at it counts as cancelled and is dropped instead of run. `cancel()` forgets the entry first and then
unlinks it; the timer checks the same mark before running or re-inserting an entry.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.broker.purgatory.task_list import TimerTaskEntry


class TimerTask:
    """Subclasses implement `run()`; `delay_ms` counts from the moment the task is added to a timer."""

    __slots__ = ("delay_ms", "_entry", "_task_lock")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self._entry: TimerTaskEntry | None = None
        self._task_lock = threading.Lock()

    def run(self) -> None:
        raise NotImplementedError

    def cancel(self) -> None:
        """Withdraw the task from its timer; a no-op if it already ran or was never added."""
        with self._task_lock:
            entry, self._entry = self._entry, None
        if entry is not None:
            entry.remove()

    def _set_entry(self, entry: TimerTaskEntry) -> None:
        with self._task_lock:
            previous, self._entry = self._entry, entry
        if previous is not None and previous is not entry:
            previous.remove()

    def _owns(self, entry: TimerTaskEntry) -> bool:
        return self._entry is entry

    def _release(self, entry: TimerTaskEntry) -> bool:
        """Detach `entry` from the task just before it runs; False if it was cancelled or replaced."""
        with self._task_lock:
            if self._entry is not entry:
                return False
            self._entry = None
            return True
