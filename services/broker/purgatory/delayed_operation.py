"""`DelayedOperation`: a request parked until it can complete or its `delay_ms` runs out.

Subclasses (a produce waiting for acks=all, a fetch waiting for `fetch.min.bytes`) implement:

    try_complete()   check whether the operation can complete now; if so call `force_complete()`
                     and return its result, else return False
    on_complete()    build and send the response; runs exactly once, whichever way it completes
    on_expiration()  extra work on timeout (metrics), called after `on_complete`

`force_complete()` is the single door to completion: the first caller, from any thread, wins,
cancels the timeout and runs `on_complete`; everyone else gets False. The purgatory calls
`try_complete` only through `safe_try_complete*`, which hold `lock` so that two checks of the same
operation never interleave; pass a shared `lock` when completion must be serialised with other
state (as Kafka's group operations share the group's lock). On timeout the timer calls `run()`.
Once completed, however that happened, the operation calls the callback its purgatory left with
`when_completed`, which takes it off the watch lists of all its keys at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from services.broker.purgatory.timer_task import TimerTask


class _Lock(Protocol):
    def __enter__(self) -> object: ...

    def __exit__(self, *exc: object) -> object: ...


class DelayedOperation(TimerTask):
    """Base class of everything a `DelayedOperationPurgatory` holds."""

    __slots__ = ("lock", "_completed", "_when_completed")

    def __init__(self, delay_ms: int, lock: _Lock | None = None) -> None:
        super().__init__(delay_ms)
        self.lock = lock if lock is not None else threading.RLock()
        self._completed = False
        self._when_completed: Callable[[DelayedOperation], None] | None = None

    def when_completed(self, callback: Callable[[DelayedOperation], None]) -> None:
        """`callback(self)` runs once, after `on_complete`, by whoever completes the operation."""
        self._when_completed = callback

    def try_complete(self) -> bool:
        raise NotImplementedError

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_expiration(self) -> None:
        raise NotImplementedError

    @property
    def is_completed(self) -> bool:
        return self._completed

    def force_complete(self) -> bool:
        """Complete now unless already completed; True only for the one caller that completed it."""
        with self._task_lock:
            if self._completed:
                return False
            self._completed = True
            entry, self._entry = self._entry, None
        if entry is not None:
            entry.remove()  # what cancel() does, done in the same critical section
        try:
            self.on_complete()
        finally:
            callback, self._when_completed = self._when_completed, None
            if callback is not None:
                callback(self)
        return True

    def safe_try_complete(self) -> bool:
        """`try_complete` under the operation's lock."""
        with self.lock:
            return self.try_complete()

    def safe_try_complete_or_else(self, otherwise: Callable[[], None]) -> bool:
        """Under the lock: `try_complete`; if that fails, call `otherwise` and `try_complete` once more."""
        with self.lock:
            if self.try_complete():
                return True
            otherwise()
            return self.try_complete()

    def run(self) -> None:
        """Timeout: complete the operation if nobody has yet, then report the expiration."""
        if self.force_complete():
            self.on_expiration()
