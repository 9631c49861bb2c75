"""`DelayedOperationPurgatory`: parks delayed operations by watch key until completed or timed out.

    try_complete_else_watch(op, keys)  complete `op` now, or watch it on every key and arm its timeout
    check_and_complete(key)            something changed for `key` (an append, an HW move): try the
                                       operations watching it; returns how many completed
    advance_clock(timeout_ms)          expire due operations, then purge if needed (the reaper's loop
                                       body; tests with `reaper_enabled=False` call it themselves)

The reaper sleeps until the earliest timer bucket falls due (or an earlier one is added), so an
idle purgatory wakes it once every `REAPER_IDLE_TIMEOUT_MS`, not five times a second; on a clock
that is not the system's, whose time moves without notice, it looks every `REAPER_TIMEOUT_MS`.

Watch keys are any hashable values, e.g. `(topic, partition)`. Watch lists live in `SHARDS` shards,
each a dict of key -> `Watchers` under its own lock, as Kafka shards them to cut contention.

Memory bound: an operation leaves the watch lists of all its keys as soon as it completes, however
it completes (through any key, expiry, or directly), and a key's entry is deleted once its list is
empty; a follower's fetch watches thousands of partitions, and thousands of such entries per fetch
must not wait for a purge. As a fallback (an operation completed while still being watched),
whenever the operations watched since the last purge minus those still pending exceed
`purge_interval` (a count of operations, Kafka's `*.purgatory.purge.interval.requests`),
`advance_clock` sweeps every watch list. Pending operations are bounded by the callers' request
limits.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

from services.broker.purgatory.delayed_operation import DelayedOperation
from services.broker.purgatory.system_timer import SystemTimer
from services.broker.purgatory.watchers import Watchers
from services.common.clock import SYSTEM_CLOCK

log = logging.getLogger(__name__)

SHARDS = 16
REAPER_TIMEOUT_MS = 200
REAPER_IDLE_TIMEOUT_MS = 10_000
DEFAULT_PURGE_INTERVAL = 1000
REAPER_JOIN_TIMEOUT_S = 5.0

Op = TypeVar("Op", bound=DelayedOperation)


class _Shard:
    __slots__ = ("lock", "watchers_by_key")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.watchers_by_key: dict[Hashable, Watchers] = {}


class DelayedOperationPurgatory(Generic[Op]):
    """Kafka's purgatory over a `SystemTimer` (owned: `shutdown` shuts it down too)."""

    def __init__(
        self,
        name: str,
        timer: SystemTimer | None = None,
        purge_interval: int = DEFAULT_PURGE_INTERVAL,
        reaper_enabled: bool = True,
        broker_id: int = 0,
    ) -> None:
        self.name = name
        self.purge_interval = purge_interval
        self._timer = timer if timer is not None else SystemTimer(name)
        self._shards = [_Shard() for _ in range(SHARDS)]
        self._estimated_operations = 0
        self._counter_lock = threading.Lock()
        self._stopping = threading.Event()
        self._reaper: threading.Thread | None = None
        if reaper_enabled:
            self._reaper = threading.Thread(
                target=self._reap, name=f"ExpirationReaper-{broker_id}-{name}", daemon=True
            )
            self._reaper.start()

    @property
    def timer(self) -> SystemTimer:
        return self._timer

    def try_complete_else_watch(self, operation: Op, watch_keys: Iterable[Hashable]) -> bool:
        """True if `operation` completed now; otherwise it is watched on every key and its timeout armed.

        The check, the watching and a final check run under the operation's lock, so a
        `check_and_complete` racing with this call cannot miss the operation.
        """
        keys = tuple(watch_keys)
        if not keys:
            raise ValueError("an operation needs at least one watch key")

        def watch_all() -> None:
            operation.when_completed(lambda op: self._unwatch(keys, op))
            for key in keys:
                self._watch(key, operation)
            with self._counter_lock:
                self._estimated_operations += 1

        if operation.safe_try_complete_or_else(watch_all):
            return True
        if not operation.is_completed:
            self._timer.add(operation)
            if operation.is_completed:
                operation.cancel()
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete the operations watching `key`; return how many this call completed."""
        shard = self._shard(key)
        with shard.lock:
            watchers = shard.watchers_by_key.get(key)
        if watchers is None:
            return 0
        completed = watchers.try_complete_watched()
        if watchers.is_empty:
            self._remove_if_empty(key, watchers)
        return completed

    def cancel_for_key(self, key: Hashable) -> list[Op]:
        """Stop watching `key` and cancel its operations' timeouts; they are not completed."""
        shard = self._shard(key)
        with shard.lock:
            watchers = shard.watchers_by_key.pop(key, None)
        return watchers.cancel() if watchers is not None else []

    @property
    def watched(self) -> int:
        """Entries in all watch lists (an operation counts once per key; completed ones until purged)."""
        total = 0
        for shard in self._shards:
            with shard.lock:
                total += sum(len(w) for w in shard.watchers_by_key.values())
        return total

    @property
    def delayed(self) -> int:
        """Operations whose timeout is armed (not completed, not expired)."""
        return self._timer.size

    @property
    def watch_keys(self) -> int:
        """Keys that currently have a watch list."""
        return sum(len(shard.watchers_by_key) for shard in self._shards)

    def advance_clock(self, timeout_ms: float) -> None:
        """Expire due operations (waiting up to `timeout_ms`), then purge watch lists if due."""
        self._timer.advance_clock(timeout_ms)
        delayed = self.delayed
        with self._counter_lock:
            if self._estimated_operations - delayed <= self.purge_interval:
                return
            self._estimated_operations = delayed
        purged = self.purge_completed()
        log.debug("purgatory %s purged %d completed operations from watch lists", self.name, purged)

    def purge_completed(self) -> int:
        """Drop completed operations from every watch list and delete emptied keys; return how many."""
        purged = 0
        for shard in self._shards:
            with shard.lock:
                all_watchers = list(shard.watchers_by_key.values())
            for watchers in all_watchers:
                purged += watchers.purge_completed()
                if watchers.is_empty:
                    self._remove_if_empty(watchers.key, watchers)
        return purged

    def shutdown(self) -> None:
        """Stop the reaper and the timer; operations still pending are neither completed nor expired."""
        self._stopping.set()
        self._timer.shutdown()
        reaper = self._reaper
        if reaper is not None and reaper is not threading.current_thread():
            reaper.join(REAPER_JOIN_TIMEOUT_S)

    def _reap(self) -> None:
        timeout_ms = REAPER_IDLE_TIMEOUT_MS if self._timer.clock is SYSTEM_CLOCK else REAPER_TIMEOUT_MS
        while not self._stopping.is_set() and not self._timer.is_shut_down:
            try:
                self.advance_clock(timeout_ms)
            except Exception:
                log.exception("expiration reaper of purgatory %s failed", self.name)
                self._stopping.wait(REAPER_TIMEOUT_MS / 1000)

    def _shard(self, key: Hashable) -> _Shard:
        return self._shards[hash(key) % SHARDS]

    def _watch(self, key: Hashable, operation: Op) -> None:
        shard = self._shard(key)
        with shard.lock:
            watchers = shard.watchers_by_key.get(key)
            if watchers is None:
                watchers = shard.watchers_by_key[key] = Watchers(key, shard.lock)
            watchers.watch_locked(operation)

    def _unwatch(self, keys: tuple[Hashable, ...], operation: Op) -> None:
        for key in keys:
            shard = self._shard(key)
            with shard.lock:
                watchers = shard.watchers_by_key.get(key)
                if watchers is not None:
                    watchers.unwatch_locked(operation)
                    if watchers.is_empty:
                        del shard.watchers_by_key[key]

    def _remove_if_empty(self, key: Hashable, watchers: Watchers) -> None:
        shard = self._shard(key)
        with shard.lock:
            if shard.watchers_by_key.get(key) is watchers and watchers.is_empty:
                del shard.watchers_by_key[key]

    def __repr__(self) -> str:
        return f"DelayedOperationPurgatory(name={self.name!r}, delayed={self.delayed})"
