"""`EventScheduler`: puts controller events on the event queue after a delay (the controller's
KafkaScheduler: the periodic leader imbalance check, and retries after ZooKeeper trouble).

A thin adapter on `services.common.scheduler.Scheduler`, whose thread (`controller-scheduler-0`)
only queues the event: the delayed work itself runs on the event thread, as the event. Delayed
events are keyed: scheduling a key again replaces its pending event, so at most one event per key
is ever pending. `cancel` drops one; `close` drops all and refuses new ones.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from services.common.scheduler import Scheduler
from services.controller.state.events import ControllerEvent


class EventScheduler:
    def __init__(self, put: Callable[[ControllerEvent], object], scheduler: Scheduler | None = None) -> None:
        """Runs on `scheduler` if given (the caller drives it), else on one of its own, started."""
        self._put = put
        if scheduler is None:
            scheduler = Scheduler(name="controller-scheduler")
            scheduler.startup()
        self._scheduler = scheduler

    def schedule(self, key: str, delay_s: float, event: ControllerEvent) -> None:
        self._scheduler.schedule(delay_s * 1000, partial(self._put, event), name=f"queue {event!r}", key=key)

    def cancel(self, key: str) -> None:
        self._scheduler.cancel(key)

    def is_scheduled(self, key: str) -> bool:
        return self._scheduler.is_scheduled(key)

    def close(self) -> None:
        """Drops pending events; does not wait for a queueing that is blocked on a full queue."""
        self._scheduler.shutdown(timeout_s=0)
