"""Delayed operations for the broker: Kafka's hierarchical timing wheel and purgatory, as a pure library.

Produce requests with acks=all and fetches that wait for `fetch.min.bytes` become `DelayedOperation`s
parked in a `DelayedOperationPurgatory` under watch keys such as `(topic, partition)`; appends and
high-watermark moves call `check_and_complete(key)`, and a `SystemTimer` over a `TimingWheel`
expires the rest. No thread sleeps per request: one reaper per purgatory waits on a delay queue of
wheel buckets. Time comes from an injected `Clock`; tests drive a `ManualClock` and call
`advance_clock(0)` themselves.

    timer_task         TimerTask: delay_ms, cancel(), run()
    task_list          TimerTaskEntry, TimerTaskList (a wheel bucket)
    delay_queue        BucketDelayQueue: buckets by due time
    timing_wheel       TimingWheel: the hierarchical wheel
    executors          InlineExecutor, BoundedExecutor: where expired tasks run
    system_timer       SystemTimer: thread-safe add / advance_clock / size / shutdown
    delayed_operation  DelayedOperation: try_complete, force_complete, on_complete, on_expiration
    watchers           Watchers: operations waiting on one key
    purgatory          DelayedOperationPurgatory: try_complete_else_watch, check_and_complete, reaper
"""

from services.broker.purgatory.delay_queue import BucketDelayQueue
from services.broker.purgatory.delayed_operation import DelayedOperation
from services.broker.purgatory.executors import BoundedExecutor, InlineExecutor, TaskExecutor
from services.broker.purgatory.purgatory import DelayedOperationPurgatory
from services.broker.purgatory.system_timer import SystemTimer
from services.broker.purgatory.task_list import TimerTaskEntry, TimerTaskList
from services.broker.purgatory.timer_task import TimerTask
from services.broker.purgatory.timing_wheel import TimingWheel

__all__ = [
    "BoundedExecutor",
    "BucketDelayQueue",
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "InlineExecutor",
    "SystemTimer",
    "TaskExecutor",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
]
