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
    CommittedOffset,
    GroupConfig,
    GroupCoordinator,
    JoinGroupResult,
    ManualScheduler,
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
    """Records every append (and transaction marker) in log order, each record at the next log
    offset of its partition; answers at once with `fail_code` (0 = success) unless `hold` is
    set, in which case the callbacks wait for `release`. `marker_codes` answers markers."""

    def __init__(self) -> None:
        self.appends: list[tuple[int, list[tuple[bytes, bytes | None]]]] = []
        self.log: list[tuple[int, str, Any]] = []  # (partition, "records" | "marker", payload)
        self.fail_code = 0
        self.hold = False
        self.held: list[tuple[int, Callable[..., None], int]] = []
        self.next_offset: dict[int, int] = {}
        self.marker_codes: dict[int, int] = {}

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]], callback: Callable[..., None],
               transaction: tuple[int, int] | None = None):  # fmt: skip
        first = self.next_offset.get(partition, 0)
        self.next_offset[partition] = first + len(records)
        self.appends.append((partition, list(records)))
        self.log.append((partition, "records", (transaction, first, list(records))))
        if self.hold:
            self.held.append((partition, callback, first))
        else:
            callback(self.fail_code, first if self.fail_code == 0 else None)

    def write_txn_marker(self, partitions, producer_id, producer_epoch, commit, coordinator_epoch, callback):
        codes = {p: self.marker_codes.get(p, 0) for p in partitions}
        for partition in partitions:
            if codes[partition] == 0:
                offset = self.next_offset.get(partition, 0)
                self.next_offset[partition] = offset + 1
                self.log.append((partition, "marker", (producer_id, commit, offset)))
        callback(codes)

    def release(self, error_code: int = 0) -> None:
        held, self.held = self.held, []
        for _, callback, first in held:
            callback(error_code, first if error_code == 0 else None)

    def replay_into(self, coordinator: Any, partition: int) -> None:
        """Replay what this store holds for `partition` into a loading `coordinator`, as the offsets log does."""
        for log_partition, kind, payload in self.log:
            if log_partition != partition:
                continue
            if kind == "marker":
                producer_id, commit, _ = payload
                coordinator.replay_marker(partition, producer_id, commit)
                continue
            transaction, first, batch = payload
            producer = None if transaction is None else transaction[0]
            for index, (key, value) in enumerate(batch):
                coordinator.replay(partition, key, value, first + index, 0, producer)

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
        offsets: dict[TopicPartition, int | CommittedOffset],
        member_id: str = "",
        generation: int = -1,
        group: str = GROUP,
        instance_id: str | None = None,
    ) -> Box:
        box = Box()
        full = {tp: o if isinstance(o, CommittedOffset) else CommittedOffset(o) for tp, o in offsets.items()}
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

    def static_member(self, instance_id: str, assignment: bytes = b"x", group: str = GROUP) -> JoinGroupResult:
        """A static member joined alone, synced with `assignment` and Stable; its JoinGroup answer."""
        box = self.join(instance_id=instance_id, group=group)
        self.tick()
        result = box.value
        self.sync(result.member_id, result.generation_id, {result.member_id: assignment}, group, instance_id)
        return result

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
