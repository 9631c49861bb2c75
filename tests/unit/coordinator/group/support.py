"""Test doubles for the group coordinator core: an in-memory `GroupStore` that records appends and
can fail or hold them, result boxes for callbacks, and `Harness`, a coordinator on a manual clock
and scheduler that owns every partition of `__consumer_offsets` from the start."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from services.common.clock import ManualClock
from services.common.errors import Errors
from services.coordinator.group import (
    GroupConfig,
    GroupCoordinator,
    JoinGroupResult,
    ManualScheduler,
    OffsetAndMetadata,
    SyncGroupResult,
    TopicPartition,
)

GROUP = "group-a"


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = [struct.pack(">hi", 0, len(topics))]
    for topic in topics:
        data = topic.encode()
        out.append(struct.pack(">h", len(data)) + data)
    out.append(struct.pack(">i", -1))
    return b"".join(out)


class FakeStore:
    """Records every append; answers at once with `fail_code` (0 = success) unless `hold` is set,
    in which case the callbacks wait for `release`."""

    def __init__(self) -> None:
        self.appends: list[tuple[int, list[tuple[bytes, bytes | None]]]] = []
        self.fail_code = 0
        self.hold = False
        self.held: list[tuple[int, Callable[[int], None]]] = []

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]], callback: Callable[[int], None]):
        self.appends.append((partition, list(records)))
        if self.hold:
            self.held.append((partition, callback))
        else:
            callback(self.fail_code)

    def release(self, error_code: int = 0) -> None:
        held, self.held = self.held, []
        for _, callback in held:
            callback(error_code)

    def records(self, partition: int | None = None) -> list[tuple[bytes, bytes | None]]:
        return [r for p, batch in self.appends for r in batch if partition is None or p == partition]


class Box:
    """Collects the answers given to one callback."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def __call__(self, value: Any) -> None:
        self.calls.append(value)

    @property
    def done(self) -> bool:
        return bool(self.calls)

    @property
    def value(self) -> Any:
        assert len(self.calls) == 1, f"expected exactly one answer, got {self.calls}"
        return self.calls[0]


DEFAULT_PROTOCOLS = [("range", b"range-meta")]


class Harness:
    def __init__(self, own_all: bool = True, **config: Any) -> None:
        config.setdefault("group_initial_rebalance_delay_ms", 0)
        self.config = GroupConfig(**config)
        self.clock = ManualClock()
        self.scheduler = ManualScheduler(self.clock)
        self.store = FakeStore()
        self.coordinator = GroupCoordinator(self.config, self.clock, self.scheduler, self.store)
        self.coordinator.start()
        if own_all:
            for partition in range(self.config.offsets_topic_num_partitions):
                self.coordinator.begin_loading(partition)
                self.coordinator.complete_loading(partition)

    def tick(self, ms: float = 0) -> None:
        self.scheduler.advance(ms)

    # requests

    def join(
        self,
        member_id: str = "",
        group: str = GROUP,
        instance_id: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        session_timeout_ms: int = 10000,
        rebalance_timeout_ms: int = 30000,
        client_id: str = "client",
        protocol_type: str = "consumer",
    ) -> Box:
        box = Box()
        self.coordinator.handle_join_group(
            group, member_id, instance_id, client_id, "/127.0.0.1", rebalance_timeout_ms, session_timeout_ms,
            protocol_type, protocols if protocols is not None else DEFAULT_PROTOCOLS, box,
        )  # fmt: skip
        return box

    def join_dynamic(self, group: str = GROUP, **kwargs: Any) -> tuple[str, Box]:
        """The MEMBER_ID_REQUIRED round trip: returns the assigned member id and the parked join."""
        first = self.join(group=group, **kwargs).value
        assert first.error_code == Errors.MEMBER_ID_REQUIRED
        return first.member_id, self.join(first.member_id, group=group, **kwargs)

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        group: str = GROUP,
        instance_id: str | None = None,
        protocol_type: str | None = "consumer",
        protocol_name: str | None = None,
    ) -> Box:
        box = Box()
        self.coordinator.handle_sync_group(
            group, generation, member_id, instance_id, protocol_type, protocol_name, assignments or {}, box
        )
        return box

    def heartbeat(self, member_id: str, generation: int, group: str = GROUP, instance_id: str | None = None) -> int:
        return self.coordinator.handle_heartbeat(group, member_id, instance_id, generation)

    def commit(
        self,
        offsets: dict[TopicPartition, int | OffsetAndMetadata],
        member_id: str = "",
        generation: int = -1,
        group: str = GROUP,
        instance_id: str | None = None,
    ) -> Box:
        box = Box()
        full = {tp: o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o) for tp, o in offsets.items()}
        self.coordinator.handle_commit_offsets(group, member_id, instance_id, generation, full, box)
        return box

    def fetch(self, partitions: list[TopicPartition] | None = None, group: str = GROUP) -> dict[TopicPartition, int]:
        error, fetched = self.coordinator.handle_fetch_offsets(group, partitions)
        assert error == Errors.NONE
        return {tp: f.offset for tp, f in fetched.items()}

    def describe(self, group: str = GROUP):
        return self.coordinator.handle_describe_group(group)

    def state(self, group: str = GROUP) -> str:
        return self.describe(group).state

    # whole flows

    def stable_group(self, count: int = 1, group: str = GROUP, **kwargs: Any) -> tuple[list[str], int]:
        """`count` dynamic members joined, synced (the leader assigning b"a-<i>") and Stable."""
        boxes = []
        ids = []
        for _ in range(count):
            member_id, box = self.join_dynamic(group=group, **kwargs)
            ids.append(member_id)
            boxes.append(box)
        self.tick(0)
        results: list[JoinGroupResult] = [b.value for b in boxes]
        generation = results[0].generation_id
        leader = results[0].leader_id
        assignments = {m: f"a-{i}".encode() for i, m in enumerate(ids)}
        sync_boxes = [self.sync(m, generation, assignments if m == leader else None, group=group) for m in ids]
        for box in sync_boxes:
            result: SyncGroupResult = box.value
            assert result.error_code == Errors.NONE, result
        return ids, generation
