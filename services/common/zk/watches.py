"""Turning ZooKeeper watch notifications into events for a single-threaded event loop.

kazoo calls a watch on its own thread. `enqueue_watch(events, kind)` makes a watch that does
nothing but put a `ZkEvent` on the loop's queue, so ZooKeeper callbacks never touch service state
(Kafka's handlers do the same: they only enqueue a ControllerEvent). Watches are one-shot; the loop
re-registers one each time it rereads the znode, so the events pending are bounded by the watches
registered, and the queue may be unbounded (`put_nowait` on a full bounded queue would lose the
event inside kazoo's thread).
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.protocol.states import WatchedEvent


@dataclass(frozen=True, slots=True)
class ZkEvent:
    """`kind` names the handler (e.g. "controller_change", "broker_change"); `type` is kazoo's
    EventType (CREATED, DELETED, CHANGED, CHILD, NONE); `path` is the watched znode."""

    kind: str
    type: str
    path: str


def enqueue_watch(events: queue.Queue[ZkEvent], kind: str) -> Callable[[WatchedEvent], None]:
    def watch(event: WatchedEvent) -> None:
        events.put_nowait(ZkEvent(kind, event.type, event.path))

    return watch
