"""`ControllerEventManager`: a bounded queue of controller events and the one thread that
processes them in order (Kafka's ControllerEventManager and ControllerEventThread).

`put` may be called from any thread; it blocks while the queue is full (up to its timeout, then
`queue.Full`), except on the event thread itself, which would wait for itself and so gets
`queue.Full` at once. `clear_and_put` preempts every queued event (see `ControllerEvent.preempt`)
before queuing its own, atomically with respect to other `put` calls; Kafka uses it to queue
Expire ahead of everything on session expiry and `QueuedEvent.await_processing` to wait until it
has started. An exception from the processor is logged and the loop goes on. `close` preempts
what is still queued, lets the current event finish and stops the thread; events put after
`close` are preempted at once. `state` is the
`ControllerState` of the event being processed (IDLE between events).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from services.common.clock import SYSTEM_CLOCK, Clock
from services.controller.state.events import ControllerEvent, ControllerState, ShutdownEventThread

logger = logging.getLogger(__name__)

DEFAULT_QUEUE_CAPACITY = 10_000
THREAD_NAME = "controller-event-thread"

Processor = Callable[[ControllerEvent], None]


class QueuedEvent:
    """An event in the queue; it is either processed or preempted, never both, at most once."""

    def __init__(self, event: ControllerEvent, enqueue_time_ms: int) -> None:
        self.event = event
        self.enqueue_time_ms = enqueue_time_ms
        self._processing_started = threading.Event()
        self._spent = False
        self._lock = threading.Lock()

    def _claim(self) -> bool:
        with self._lock:
            if self._spent:
                return False
            self._spent = True
            return True

    def process(self, processor: Processor) -> None:
        if not self._claim():
            return
        self._processing_started.set()
        processor(self.event)

    def preempt(self, preempter: Processor) -> None:
        if self._claim():
            preempter(self.event)

    def await_processing(self, timeout_s: float | None = None) -> bool:
        """Block until processing of this event has started; False on timeout."""
        return self._processing_started.wait(timeout_s)

    def __repr__(self) -> str:
        return f"QueuedEvent(event={self.event!r}, enqueue_time_ms={self.enqueue_time_ms})"


def _preempt_event(event: ControllerEvent) -> None:
    event.preempt()


class ControllerEventManager:
    def __init__(
        self,
        processor: Processor,
        *,
        preempter: Processor = _preempt_event,
        capacity: int = DEFAULT_QUEUE_CAPACITY,
        clock: Clock = SYSTEM_CLOCK,
        thread_name: str = THREAD_NAME,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._processor = processor
        self._preempter = preempter
        self._clock = clock
        self._queue: queue.Queue[QueuedEvent] = queue.Queue(maxsize=capacity)
        self._put_lock = threading.Lock()
        self._state = ControllerState.IDLE
        self._running = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)
        self.last_queue_time_ms = 0

    @property
    def state(self) -> ControllerState:
        return self._state

    @property
    def queue_size(self) -> int:
        return self._queue.qsize()

    def is_empty(self) -> bool:
        return self._queue.empty()

    def start(self) -> None:
        self._running = True
        self._thread.start()

    def put(self, event: ControllerEvent, timeout_s: float | None = None) -> QueuedEvent:
        """Queue `event`; blocks while the queue is full (raises `queue.Full` after `timeout_s`)."""
        on_event_thread = threading.current_thread() is self._thread
        with self._put_lock:
            queued = QueuedEvent(event, self._clock.monotonic_ms())
            if self._closed:
                queued.preempt(self._preempter)
                return queued
            self._queue.put(queued, block=not on_event_thread, timeout=timeout_s)
            return queued

    def clear_and_put(self, event: ControllerEvent) -> QueuedEvent:
        """Preempt everything queued, then queue `event`."""
        with self._put_lock:
            for queued in self._drain():
                queued.preempt(self._preempter)
            queued = QueuedEvent(event, self._clock.monotonic_ms())
            self._queue.put_nowait(queued)
            return queued

    def close(self, timeout_s: float | None = None) -> bool:
        """Stop the event thread after the current event; True once it has stopped."""
        self._running = False
        self.clear_and_put(ShutdownEventThread())
        self._closed = True
        if self._thread.ident is not None and threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _drain(self) -> list[QueuedEvent]:
        drained = []
        while True:
            try:
                drained.append(self._queue.get_nowait())
            except queue.Empty:
                return drained

    def _run(self) -> None:
        while self._running:
            queued = self._queue.get()
            if isinstance(queued.event, ShutdownEventThread):
                continue
            self._state = queued.event.state
            self.last_queue_time_ms = self._clock.monotonic_ms() - queued.enqueue_time_ms
            try:
                queued.process(self._processor)
            except Exception:
                logger.exception("Uncaught error processing event %r", queued.event)
            finally:
                self._state = ControllerState.IDLE
