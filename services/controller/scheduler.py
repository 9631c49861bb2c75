"""`EventScheduler`: puts controller events on the event queue after a delay (the controller's
KafkaScheduler: the periodic leader imbalance check, and retries after ZooKeeper trouble).

Delayed events are keyed: scheduling a key again replaces its pending event, so at most one
event per key is ever pending. `cancel` drops one; `close` drops all and refuses new ones. The
delayed work itself runs on the event thread, as the event it queues.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from services.controller.state.events import ControllerEvent

logger = logging.getLogger(__name__)


class EventScheduler:
    def __init__(self, put: Callable[[ControllerEvent], object]) -> None:
        self._put = put
        self._timers: dict[str, threading.Timer] = {}
        self._lock = threading.Lock()
        self._closed = False

    def schedule(self, key: str, delay_s: float, event: ControllerEvent) -> None:
        with self._lock:
            if self._closed:
                return
            old = self._timers.pop(key, None)
            if old is not None:
                old.cancel()
            timer = threading.Timer(max(0.0, delay_s), self._fire, (key, event))
            timer.name = f"controller-scheduler-{key}"
            timer.daemon = True
            self._timers[key] = timer
            timer.start()

    def cancel(self, key: str) -> None:
        with self._lock:
            timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def is_scheduled(self, key: str) -> bool:
        with self._lock:
            return key in self._timers

    def close(self) -> None:
        with self._lock:
            self._closed = True
            timers, self._timers = list(self._timers.values()), {}
        for timer in timers:
            timer.cancel()

    def _fire(self, key: str, event: ControllerEvent) -> None:
        with self._lock:
            if self._timers.get(key) is not threading.current_thread():
                return
            del self._timers[key]
        try:
            self._put(event)
        except Exception:
            logger.exception("Could not queue scheduled event %r", event)
