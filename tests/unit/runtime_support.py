"""Support for tests of servicers on the shared runtime: a runtime serving one servicer on a free
port, and `Parked`, a recorder of the core calls that wait until the test answers them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc

from services.common.service import ServiceRuntime, node_channel


@contextmanager
def serving(register: Callable[[object, grpc.Server], None], servicer: object) -> Iterator[grpc.Channel]:
    """A channel to a runtime with one executor thread serving `servicer`."""
    runtime = ServiceRuntime("servicer-test", "127.0.0.1:0", max_workers=1)
    runtime.add_servicer(register, servicer)
    channel = node_channel(f"127.0.0.1:{runtime.start()}")
    try:
        yield channel
    finally:
        channel.close()
        runtime.shutdown(grace_s=0.1)


class Parked:
    """Core calls held until `answer_all`: each is a request and the callback that answers it."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, Callable[[Any], None]]] = []
        self._lock = threading.Lock()

    def hold(self, request: Any, respond: Callable[[Any], None]) -> None:
        with self._lock:
            self.calls.append((request, respond))

    def __len__(self) -> int:
        with self._lock:
            return len(self.calls)

    def answer_all(self, answer: Callable[[Any], Any]) -> None:
        """Calls each held callback with `answer(request)`."""
        with self._lock:
            calls, self.calls = self.calls, []
        for request, respond in calls:
            respond(answer(request))
