"""Timer buckets: `TimerTaskList`, a doubly-linked ring of `TimerTaskEntry`s sharing one expiration.

Each entry pairs a task with its absolute expiration (ms on the timer's clock) and knows the list it
sits in, so removing it is O(1) from any thread. A list guards its links with its own lock; an entry
moving between lists is first unlinked from the old one (`TimerTaskList.add` retries until the entry
is free), which is how re-adding a task moves it. `expiration_ms` is the bucket's due time, -1 while
the bucket is empty and unscheduled; it is written only by the timing wheel, under the timer's lock.
"""

from __future__ import annotations

import threading

from services.broker.purgatory.timer_task import TimerTask


class TimerTaskEntry:
    """One slot of a task in a bucket; `list` is None while the entry is in no bucket."""

    __slots__ = ("task", "expiration_ms", "list", "next", "prev")

    def __init__(self, task: TimerTask | None, expiration_ms: int) -> None:
        self.task = task
        self.expiration_ms = expiration_ms
        self.list: TimerTaskList | None = None
        self.next: TimerTaskEntry | None = None
        self.prev: TimerTaskEntry | None = None
        if task is not None:
            task._set_entry(self)

    @property
    def cancelled(self) -> bool:
        """True once the task was cancelled or added again (a newer entry replaced this one)."""
        return self.task is None or not self.task._owns(self)

    def run_if_live(self) -> None:
        """Run the task unless it was cancelled or re-added since this entry fell due."""
        task = self.task
        if task is not None and task._release(self):
            task.run()

    def remove(self) -> None:
        """Unlink from whatever list holds the entry, following it if another thread moves it."""
        current = self.list
        while current is not None:
            current.remove(self)
            current = self.list


class TimerTaskList:
    """A bucket of the timing wheel; thread-safe for add, remove and flush."""

    __slots__ = ("_root", "_lock", "_size", "expiration_ms")

    def __init__(self) -> None:
        root = TimerTaskEntry(None, -1)
        root.next = root
        root.prev = root
        self._root = root
        self._lock = threading.Lock()
        self._size = 0
        self.expiration_ms = -1

    def __len__(self) -> int:
        return self._size

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the due time; True when it changed, i.e. the bucket must be (re)queued."""
        changed = self.expiration_ms != expiration_ms
        self.expiration_ms = expiration_ms
        return changed

    def add(self, entry: TimerTaskEntry) -> None:
        """Append `entry` at the tail, first unlinking it from any list it is in."""
        while True:
            if entry.list is not None:
                entry.remove()
            with self._lock:
                if entry.list is None:
                    root = self._root
                    tail = root.prev
                    entry.next = root
                    entry.prev = tail
                    entry.list = self
                    tail.next = entry
                    root.prev = entry
                    self._size += 1
                    return

    def remove(self, entry: TimerTaskEntry) -> None:
        """Unlink `entry` if it is in this list; otherwise do nothing."""
        with self._lock:
            if entry.list is self:
                self._unlink(entry)

    def flush(self) -> list[TimerTaskEntry]:
        """Detach every entry, in insertion order, and mark the bucket unscheduled."""
        entries: list[TimerTaskEntry] = []
        with self._lock:
            root = self._root
            entry = root.next
            while entry is not root:
                following = entry.next
                entry.next = None
                entry.prev = None
                entry.list = None
                entries.append(entry)
                entry = following
            root.next = root
            root.prev = root
            self._size = 0
            self.expiration_ms = -1
        return entries

    def tasks(self) -> list[TimerTask]:
        """The live (not cancelled) tasks, oldest first, as a snapshot."""
        with self._lock:
            snapshot: list[TimerTaskEntry] = []
            entry = self._root.next
            while entry is not self._root:
                snapshot.append(entry)
                entry = entry.next
        return [e.task for e in snapshot if not e.cancelled]

    def _unlink(self, entry: TimerTaskEntry) -> None:
        entry.next.prev = entry.prev
        entry.prev.next = entry.next
        entry.next = None
        entry.prev = None
        entry.list = None
        self._size -= 1

    def __repr__(self) -> str:
        return f"TimerTaskList(expiration_ms={self.expiration_ms}, size={self._size})"
