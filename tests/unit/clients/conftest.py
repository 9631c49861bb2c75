"""Fixtures of the client unit tests: fake gRPC peers (see support.py) and a manual clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from services.common.clock import ManualClock
from tests.unit.clients.support import FakeNode


@pytest.fixture
def fake_nodes() -> Iterator[Callable[..., list[FakeNode]]]:
    """`fake_nodes(3)` starts three fake servers with node ids 1..3 on free ports (or on `port`);
    all are stopped after the test."""
    started: list[FakeNode] = []

    def make(count: int = 1, first_id: int = 1, port: int = 0) -> list[FakeNode]:
        nodes = [FakeNode(first_id + i, port) for i in range(count)]
        started.extend(nodes)
        return nodes

    yield make
    for node in started:
        node.stop()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()
