"""`buffer.memory` as a counted budget, as Kafka's BufferPool bounds the producer's memory.

Every batch takes `max(batch.size, its first record)` bytes when it is created and gives them back
when all its records are answered. `allocate` blocks while the budget is short, first come first
served (a FIFO of waiters, so a large request is not starved by small ones), for at most the time
it is given, then raises `BufferExhaustedError`. While anyone waits the pool counts as exhausted,
and the record accumulator then treats every batch as ready to send, to free memory sooner.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from services.clients.producer.errors import BufferExhaustedError, ProducerClosedError


class BufferPool:
    """A thread-safe byte budget with FIFO blocking allocation."""

    def __init__(self, total_bytes: int, on_wait: Callable[[], None] | None = None):
        self.total_bytes = total_bytes
        self._available = total_bytes
        self._lock = threading.Lock()
        self._waiters: deque[threading.Condition] = deque()
        self._on_wait = on_wait
        self._closed = False
        self.wait_time_ns_total = 0

    @property
    def available_bytes(self) -> int:
        return self._available

    @property
    def waiting_threads(self) -> int:
        return len(self._waiters)

    @property
    def exhausted(self) -> bool:
        return bool(self._waiters)

    def allocate(self, size: int, max_block_ms: float) -> int:
        """Takes `size` bytes, waiting up to `max_block_ms` for them; returns `size`."""
        if size > self.total_bytes:
            raise ValueError(f"cannot allocate {size} bytes from a buffer.memory of {self.total_bytes}")
        with self._lock:
            if self._closed:
                raise ProducerClosedError("the producer was closed while allocating memory")
            if not self._waiters and self._available >= size:
                self._available -= size
                return size
            return self._wait_for(size, max_block_ms)

    def _wait_for(self, size: int, max_block_ms: float) -> int:
        condition = threading.Condition(self._lock)
        self._waiters.append(condition)
        started = time.monotonic_ns()
        deadline = started + max_block_ms * 1_000_000
        try:
            if self._on_wait is not None:
                self._on_wait()
            while not self._closed and (self._waiters[0] is not condition or self._available < size):
                remaining_ns = deadline - time.monotonic_ns()
                if remaining_ns <= 0:
                    raise BufferExhaustedError(
                        f"no {size} bytes of buffer memory came free within max.block.ms ({max_block_ms:g} ms); "
                        f"buffer.memory is {self.total_bytes} bytes, {self._available} available")
                condition.wait(remaining_ns / 1e9)
            if self._closed:
                raise ProducerClosedError("the producer was closed while allocating memory")
            self._available -= size
            return size
        finally:
            self.wait_time_ns_total += time.monotonic_ns() - started
            self._waiters.remove(condition)
            if self._waiters and self._available > 0:
                self._waiters[0].notify()

    def deallocate(self, size: int) -> None:
        if size <= 0:
            return
        with self._lock:
            self._available += size
            if self._waiters:
                self._waiters[0].notify()

    def close(self) -> None:
        """Wakes every waiter, which then fails."""
        with self._lock:
            self._closed = True
            for condition in self._waiters:
                condition.notify()
