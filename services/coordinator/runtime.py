"""`CoordinatorRuntime`: runs a pure coordinator core (the group coordinator's or the transaction
coordinator's) for the service: one lock, the store of its internal topic, and the outcomes of its
commands carried out. `GroupCoordinator` and `TransactionCoordinator` are this runtime over their
cores, with their request methods.

Each call runs one core command under the lock and carries its outcome out:

- effects that must follow the core's order (the group coordinator's timers) are applied under
  the lock, by `_apply_locked`;
- appends join an `AppendQueue` under the lock and are handed to the store after it is released,
  in the order replay must see; an append whose partition was unloaded meanwhile is skipped, and
  its write's result goes back to the core as `on_append_done(append_id, error_code, first_offset)`;
- effects that call out (the transaction coordinator's markers) run after the lock is released, by
  `_apply_released`;
- replies (the request callbacks) are called after the lock is released, each at most once.

Partitions of the internal topic are loaded by replay: `begin_loading`, then `replay` for each
record in log order, then `complete_loading`; `unload` drops a partition when ownership moves.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from services.coordinator.append_queue import AppendQueue, InternalTopicStore

logger = logging.getLogger(__name__)


class CoordinatorOutcome(Protocol):
    responses: list[tuple[Any, Any]]
    appends: list[Any]
    result: Any


class CoordinatorCore(Protocol):
    def start(self) -> Any: ...
    def shutdown(self) -> Any: ...
    def complete_loading(self, partition: int) -> Any: ...
    def unload(self, partition: int) -> Any: ...
    def is_append_wanted(self, append_id: int) -> bool: ...
    def on_append_done(self, append_id: int, error_code: int, first_offset: int | None = None) -> Any: ...


CoreT = TypeVar("CoreT", bound=CoordinatorCore)


class CoordinatorRuntime(Generic[CoreT]):
    def __init__(self, core: CoreT, store: InternalTopicStore, topic: str) -> None:
        self.core = core
        self._store = store
        self._lock = threading.Lock()
        self._appends = AppendQueue(
            store, self._lock, core.is_append_wanted,
            lambda append_id, *written: self._run(self.core.on_append_done, append_id, *written), topic)

    # ---------------------------------------------------------------------------------------------
    # running commands

    def _run(self, command: Callable[..., CoordinatorOutcome], *args: Any) -> Any:
        with self._lock:
            outcome = command(*args)
            self._apply_locked(outcome)
            self._appends.extend(outcome.appends)
        self._appends.drain()
        self._apply_released(outcome)
        for reply, result in outcome.responses:
            try:
                reply(result)
            except Exception:
                logger.exception("%s reply %r failed", type(self).__name__, reply)
        return outcome.result

    def _apply_locked(self, outcome: Any) -> None:
        """Effects of `outcome` carried out under the lock, in the core's order."""

    def _apply_released(self, outcome: Any) -> None:
        """Effects of `outcome` carried out after the lock is released, before the replies."""

    def run(self, command: Callable[[CoreT], CoordinatorOutcome]) -> Any:
        """Run `command(core)` as one command: under the lock, its outcome carried out; returns
        the outcome's result. For acting on the coordinator's side where no request does it."""
        return self._run(command, self.core)

    # ---------------------------------------------------------------------------------------------
    # lifecycle and the internal topic's partitions

    def start(self) -> None:
        self._run(self.core.start)

    def shutdown(self) -> None:
        """Stop serving: every parked request is answered NOT_COORDINATOR."""
        self._run(self.core.shutdown)

    def begin_loading(self, partition: int, *args: Any) -> None:
        self._run(self.core.begin_loading, partition, *args)

    def replay_record(self, partition: int, *record: Any) -> None:
        """One record of a loading partition, in log order, as the core's `replay` takes it."""
        with self._lock:
            self.core.replay(partition, *record)

    def complete_loading(self, partition: int) -> None:
        self._run(self.core.complete_loading, partition)

    def unload(self, partition: int) -> None:
        self._run(self.core.unload, partition)

    def served_partitions(self) -> set[int]:
        with self._lock:
            return self.core.served_partitions()
