"""The controller event queue: order, one processing thread, preemption, bounds and shutdown.

Threads are coordinated with events and deadlines, never with sleeps.
"""

from __future__ import annotations

import logging
import queue
import threading

import pytest

from services.common.clock import ManualClock
from services.common.errors import Errors, KafkaError
from services.controller.state.event_manager import ControllerEventManager, QueuedEvent
from services.controller.state.events import (
    BrokerChange,
    ControlledShutdown,
    ControllerEvent,
    ControllerState,
    Expire,
    PartitionModifications,
    TopicChange,
)

TIMEOUT_S = 10.0


class Recorder:
    """A processor that records events and the thread it ran on, and can be held on an event."""

    def __init__(self, hold_on: type | None = None) -> None:
        self.events: list[ControllerEvent] = []
        self.threads: set[str] = set()
        self.states: list[ControllerState] = []
        self.hold_on = hold_on
        self.holding = threading.Event()
        self.release = threading.Event()
        self.seen = threading.Condition()
        self.manager: ControllerEventManager | None = None

    def __call__(self, event: ControllerEvent) -> None:
        self.threads.add(threading.current_thread().name)
        if self.manager is not None:
            self.states.append(self.manager.state)
        if self.hold_on is not None and isinstance(event, self.hold_on):
            self.holding.set()
            assert self.release.wait(TIMEOUT_S)
        with self.seen:
            self.events.append(event)
            self.seen.notify_all()

    def wait_for(self, count: int) -> None:
        with self.seen:
            assert self.seen.wait_for(lambda: len(self.events) >= count, TIMEOUT_S)


@pytest.fixture
def managers():
    started: list[ControllerEventManager] = []
    yield started
    for manager in started:
        manager.close(TIMEOUT_S)


def start(managers, recorder, processor=None, **kwargs) -> ControllerEventManager:
    manager = ControllerEventManager(processor or recorder, **kwargs)
    recorder.manager = manager
    manager.start()
    managers.append(manager)
    return manager


def test_events_are_processed_in_order_on_one_thread(managers):
    recorder = Recorder()
    manager = ControllerEventManager(recorder)
    recorder.manager = manager
    events = [PartitionModifications(f"t{i}") for i in range(50)]
    for event in events:
        manager.put(event)
    manager.start()
    managers.append(manager)
    recorder.wait_for(50)
    assert recorder.events == events
    assert recorder.threads == {"controller-event-thread"}


def test_puts_from_many_threads_are_each_processed_once(managers):
    recorder = Recorder()
    manager = start(managers, recorder)

    def producer(n: int) -> None:
        for i in range(100):
            manager.put(PartitionModifications(f"{n}-{i}"))

    threads = [threading.Thread(target=producer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT_S)
    recorder.wait_for(400)
    assert sorted(e.topic for e in recorder.events) == sorted(
        f"{n}-{i}" for n in range(4) for i in range(100)
    )
    for n in range(4):  # each producer's events keep their order
        mine = [int(e.topic.split("-")[1]) for e in recorder.events if e.topic.startswith(f"{n}-")]
        assert mine == list(range(100))


def test_state_is_the_events_state_while_processing_and_idle_after(managers):
    recorder = Recorder()
    manager = start(managers, recorder)
    manager.put(BrokerChange())
    manager.put(TopicChange())
    recorder.wait_for(2)
    assert recorder.states == [ControllerState.BROKER_CHANGE, ControllerState.TOPIC_CHANGE]
    manager.close(TIMEOUT_S)
    assert manager.state == ControllerState.IDLE


def test_processor_errors_are_logged_and_the_loop_goes_on(managers, caplog):
    recorder = Recorder()

    def processor(event):
        if isinstance(event, BrokerChange):
            raise RuntimeError("boom")
        recorder(event)

    manager = start(managers, recorder, processor)
    with caplog.at_level(logging.ERROR):
        manager.put(BrokerChange())
        manager.put(TopicChange())
        recorder.wait_for(1)
    assert recorder.events == [TopicChange()]
    assert "Uncaught error processing event BrokerChange()" in caplog.text


def test_clear_and_put_preempts_queued_events(managers):
    recorder = Recorder(hold_on=BrokerChange)
    manager = start(managers, recorder)
    answers: list[object] = []
    manager.put(BrokerChange())
    assert recorder.holding.wait(TIMEOUT_S)
    dropped = manager.put(ControlledShutdown(1, 10, callback=answers.append))
    manager.put(TopicChange())

    expire = manager.clear_and_put(Expire())
    assert not expire.await_processing(0)
    recorder.release.set()
    assert expire.await_processing(TIMEOUT_S)
    recorder.wait_for(2)

    assert recorder.events == [BrokerChange(), Expire()]
    assert len(answers) == 1 and isinstance(answers[0], KafkaError)
    assert answers[0].code == Errors.NOT_CONTROLLER
    dropped.process(recorder)  # a preempted event is spent
    assert len(recorder.events) == 2


def test_queue_is_bounded(managers):
    recorder = Recorder(hold_on=BrokerChange)
    manager = start(managers, recorder, capacity=2)
    manager.put(BrokerChange())
    assert recorder.holding.wait(TIMEOUT_S)
    manager.put(TopicChange())
    manager.put(TopicChange())
    assert manager.queue_size == 2
    with pytest.raises(queue.Full):
        manager.put(TopicChange(), timeout_s=0)
    recorder.release.set()
    recorder.wait_for(3)


def test_a_put_waits_for_room(managers):
    recorder = Recorder(hold_on=BrokerChange)
    manager = start(managers, recorder, capacity=1)
    manager.put(BrokerChange())
    assert recorder.holding.wait(TIMEOUT_S)
    manager.put(TopicChange())
    done = threading.Event()
    blocked = threading.Thread(target=lambda: (manager.put(PartitionModifications("x")), done.set()))
    blocked.start()
    assert not done.is_set()
    recorder.release.set()
    assert done.wait(TIMEOUT_S)
    recorder.wait_for(3)
    assert recorder.events[-1] == PartitionModifications("x")


def test_event_thread_never_blocks_on_its_own_full_queue(managers):
    outcomes: list[object] = []
    recorder = Recorder()

    def processor(event):
        if isinstance(event, BrokerChange):
            try:
                manager.put(TopicChange())
                manager.put(TopicChange())
            except queue.Full as e:
                outcomes.append(e)
        recorder(event)

    manager = start(managers, recorder, processor, capacity=1)
    manager.put(BrokerChange())
    recorder.wait_for(2)
    assert len(outcomes) == 1 and isinstance(outcomes[0], queue.Full)


def test_close_finishes_the_current_event_and_preempts_the_rest(managers):
    recorder = Recorder(hold_on=BrokerChange)
    manager = start(managers, recorder)
    answers: list[object] = []
    manager.put(BrokerChange())
    assert recorder.holding.wait(TIMEOUT_S)
    manager.put(ControlledShutdown(2, 20, callback=answers.append))

    closer = threading.Thread(target=manager.close, args=(TIMEOUT_S,))
    closer.start()
    recorder.release.set()
    closer.join(TIMEOUT_S)

    assert not closer.is_alive()
    assert recorder.events == [BrokerChange()]
    assert [a.error_name for a in answers] == ["NOT_CONTROLLER"]
    late: list[object] = []
    queued = manager.put(ControlledShutdown(3, 30, callback=late.append))
    assert [a.error_name for a in late] == ["NOT_CONTROLLER"]
    assert not queued.await_processing(0)


def test_close_before_start_and_twice():
    manager = ControllerEventManager(Recorder())
    assert manager.close(TIMEOUT_S)
    assert manager.close(TIMEOUT_S)


def test_queue_time_uses_the_injected_clock(managers):
    clock = ManualClock()
    recorder = Recorder(hold_on=BrokerChange)
    manager = start(managers, recorder, clock=clock)
    manager.put(BrokerChange())
    assert recorder.holding.wait(TIMEOUT_S)
    manager.put(TopicChange())
    clock.advance(250)
    recorder.release.set()
    recorder.wait_for(2)
    assert manager.last_queue_time_ms == 250


def test_queued_event_is_processed_or_preempted_once():
    calls: list[str] = []
    queued = QueuedEvent(TopicChange(), 0)
    queued.process(lambda e: calls.append("process"))
    queued.process(lambda e: calls.append("process"))
    queued.preempt(lambda e: calls.append("preempt"))
    assert calls == ["process"]
    assert queued.await_processing(0)


def test_capacity_must_be_positive():
    with pytest.raises(ValueError):
        ControllerEventManager(Recorder(), capacity=0)
