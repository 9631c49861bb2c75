"""Where expired timer tasks run: `InlineExecutor` (the calling thread) or `BoundedExecutor` (a pool).

`SystemTimer` hands every due task to an executor outside its own lock. Inline execution runs the
task in the thread that advanced the clock (or added an already-due task), which makes unit tests
deterministic. `BoundedExecutor` is Kafka's "executor-<name>" pool: a fixed number of daemon threads
fed by a queue of at most `queue_capacity` tasks; `submit` blocks while the queue is full, so a
flood of expirations slows the reaper instead of growing memory. A task that raises is logged and
does not stop the others. Anything with `submit(fn)` and `shutdown()` (a `ThreadPoolExecutor`, say)
can stand in.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)

DEFAULT_QUEUE_CAPACITY = 10_000
SHUTDOWN_JOIN_TIMEOUT_S = 5.0


class TaskExecutor(Protocol):
    def submit(self, fn: Callable[[], object], /) -> object: ...

    def shutdown(self) -> object: ...


def run_logged(fn: Callable[[], object]) -> None:
    """Run `fn`, logging instead of raising if it fails."""
    try:
        fn()
    except Exception:
        log.exception("timer task %r failed", fn)


class InlineExecutor:
    """Runs each task immediately in the submitting thread."""

    def submit(self, fn: Callable[[], object], /) -> None:
        run_logged(fn)

    def shutdown(self) -> None:
        pass


class BoundedExecutor:
    """`threads` workers draining a queue of at most `queue_capacity` tasks; shutdown drops queued ones."""

    def __init__(self, name: str, threads: int = 1, queue_capacity: int = DEFAULT_QUEUE_CAPACITY) -> None:
        if threads < 1 or queue_capacity < 1:
            raise ValueError(f"need threads >= 1 and queue_capacity >= 1, got {threads}, {queue_capacity}")
        self._capacity = queue_capacity
        self._pending: deque[Callable[[], object]] = deque()
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._not_full = threading.Condition(self._lock)
        self._stopped = False
        self._workers = [
            threading.Thread(target=self._work, name=f"executor-{name}-{i}", daemon=True)
            for i in range(threads)
        ]
        for worker in self._workers:
            worker.start()

    def submit(self, fn: Callable[[], object], /) -> bool:
        """Queue `fn`, waiting while the queue is full; False (not queued) after shutdown."""
        with self._not_full:
            while len(self._pending) >= self._capacity and not self._stopped:
                self._not_full.wait()
            if self._stopped:
                return False
            self._pending.append(fn)
            self._not_empty.notify()
            return True

    @property
    def pending(self) -> int:
        return len(self._pending)

    def shutdown(self) -> None:
        """Stop accepting tasks, drop queued ones, let running ones finish, join the workers."""
        with self._lock:
            self._stopped = True
            self._pending.clear()
            self._not_empty.notify_all()
            self._not_full.notify_all()
        current = threading.current_thread()
        for worker in self._workers:
            if worker is not current:
                worker.join(SHUTDOWN_JOIN_TIMEOUT_S)

    def _work(self) -> None:
        while True:
            with self._not_empty:
                while not self._pending and not self._stopped:
                    self._not_empty.wait()
                if self._stopped:
                    return
                fn = self._pending.popleft()
                self._not_full.notify()
            run_logged(fn)
