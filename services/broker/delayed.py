"""The broker's delayed operations: a fetch waiting for `fetch.min.bytes` and a produce waiting for
acks=all. Both park in purgatories keyed by (topic, partition) and complete when an append or a
high-watermark move makes them satisfiable, when leadership changes, or when they time out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from services.broker.purgatory import DelayedOperation
from services.common.errors import Errors

if TYPE_CHECKING:
    from services.broker.replica_fetch import FetchParams
    from services.broker.replica_manager import ReplicaManager


class DelayedFetch(DelayedOperation):
    """Completes once the partitions asked for hold `min_bytes` new bytes (or one of them errs).
    A check is skipped when nothing changed since the last one (the manager's `fetch_generation`
    is the same): a follower's fetch asks for thousands of partitions, and the purgatory checks
    it once before and once after it starts watching. An incremental session fetch looks only at
    its session's changed partitions."""

    def __init__(self, manager: ReplicaManager, params: FetchParams,
                 respond: Callable[[dict], None]) -> None:
        super().__init__(params.max_wait_ms)
        self.manager = manager
        self.params = params
        self.respond = respond
        self._checked_generation = -1

    def try_complete(self) -> bool:
        generation = self.manager.fetch_generation
        if generation == self._checked_generation:
            return False
        if self.params.incremental and not self.params.session.changed:
            return False  # nothing of its session changed (the generation is not kept: it may)
        self._checked_generation = generation
        if self.manager.fetch_is_satisfied(self.params):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.respond(self.manager.read_for_fetch(self.params))

    def on_expiration(self) -> None:
        self.manager.metrics_delayed_fetch_expired()


class DelayedProduce(DelayedOperation):
    """Completes once every partition's high watermark passes its appended offsets (acks=all)."""

    def __init__(self, manager: ReplicaManager, timeout_ms: int, pending: dict[tuple[str, int], int],
                 results: dict, respond: Callable[[dict], None]) -> None:
        super().__init__(timeout_ms)
        self.manager = manager
        self.pending = pending  # (topic, partition) -> required high watermark
        self.results = results
        self.respond = respond

    def try_complete(self) -> bool:
        for key in list(self.pending):
            error = self.manager.produce_acked(key, self.pending[key])
            if error is None:
                continue
            if error != Errors.NONE:
                self.results[key] = self.results[key]._replace(error_code=error)
            del self.pending[key]
        if not self.pending:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        for key in self.pending:
            self.results[key] = self.results[key]._replace(error_code=Errors.REQUEST_TIMED_OUT)
        self.respond(self.results)

    def on_expiration(self) -> None:
        self.manager.metrics_delayed_produce_expired()
