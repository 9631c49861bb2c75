"""TimerTaskList and TimerTaskEntry: linking, moving, cancelling and flushing bucket entries."""

from __future__ import annotations

from services.broker.purgatory import TimerTaskEntry, TimerTaskList

from .support import CallbackTask


def task(delay_ms: int = 10) -> CallbackTask:
    return CallbackTask(delay_ms, lambda: None)


def test_add_keeps_insertion_order_and_counts() -> None:
    bucket = TimerTaskList()
    tasks = [task(i) for i in range(5)]
    entries = [TimerTaskEntry(t, 100) for t in tasks]
    for entry in entries:
        bucket.add(entry)
    assert len(bucket) == 5
    assert bucket.tasks() == tasks
    assert all(entry.list is bucket for entry in entries)


def test_remove_unlinks_only_from_its_own_list() -> None:
    first, second = TimerTaskList(), TimerTaskList()
    entry = TimerTaskEntry(task(), 5)
    first.add(entry)
    second.remove(entry)
    assert len(first) == 1
    first.remove(entry)
    assert len(first) == 0
    assert entry.list is None
    first.remove(entry)
    assert len(first) == 0


def test_adding_an_entry_moves_it_from_its_old_list() -> None:
    first, second = TimerTaskList(), TimerTaskList()
    entry = TimerTaskEntry(task(), 5)
    first.add(entry)
    second.add(entry)
    assert (len(first), len(second)) == (0, 1)
    assert entry.list is second


def test_a_new_entry_for_the_same_task_unlinks_the_old_one() -> None:
    bucket = TimerTaskList()
    the_task = task()
    old = TimerTaskEntry(the_task, 5)
    bucket.add(old)
    new = TimerTaskEntry(the_task, 9)
    assert old.cancelled and not new.cancelled
    assert len(bucket) == 0


def test_cancel_unlinks_and_marks_cancelled() -> None:
    bucket = TimerTaskList()
    tasks = [task() for _ in range(3)]
    entries = [TimerTaskEntry(t, 5) for t in tasks]
    for entry in entries:
        bucket.add(entry)
    tasks[1].cancel()
    assert entries[1].cancelled
    assert len(bucket) == 2
    assert bucket.tasks() == [tasks[0], tasks[2]]
    tasks[1].cancel()
    assert len(bucket) == 2


def test_flush_detaches_everything_in_order_and_unschedules() -> None:
    bucket = TimerTaskList()
    assert bucket.set_expiration(40)
    assert not bucket.set_expiration(40)
    entries = [TimerTaskEntry(task(), 40) for _ in range(4)]
    for entry in entries:
        bucket.add(entry)
    flushed = bucket.flush()
    assert flushed == entries
    assert len(bucket) == 0
    assert bucket.expiration_ms == -1
    assert all(e.list is None and e.next is None and e.prev is None for e in flushed)
    assert bucket.set_expiration(40)
    bucket.add(entries[0])
    assert bucket.tasks() == [entries[0].task]
