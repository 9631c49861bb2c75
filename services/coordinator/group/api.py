"""The values the group coordinator takes and returns, and the `GroupStore` the runtime writes through.

Results mirror Kafka's JoinGroup / SyncGroup / LeaveGroup / OffsetFetch / ListGroups /
DescribeGroups responses field for field, with error codes from `services.common.errors.Errors`.
`GroupStore` is the runtime's one way out: appending records to a partition of
`__consumer_offsets` with acks=all (plain or as a transaction's batch), and writing transaction
markers to its partitions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from services.common.errors import Errors
from services.common.shared_types import NO_LEADER_EPOCH, NO_OFFSET
from services.common.topic_partition import TopicPartition
from services.coordinator.append_queue import InternalTopicStore

NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""
NO_GROUP_LEADER = ""  # a group without a leader member
NO_PROTOCOL = ""
NO_PROTOCOL_TYPE = ""


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A committed offset as the coordinator stores it (Kafka's server-side OffsetAndMetadata).
    `commit_timestamp_ms=-1` means "now" when committed;
    `expire_timestamp_ms` is set only by clients asking for an explicit retention."""

    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    offset: int = NO_OFFSET
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    error_code: int = Errors.NONE


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    error_code: int
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = NO_GROUP_LEADER
    member_id: str = UNKNOWN_MEMBER_ID
    members: list[JoinGroupMember] = field(default_factory=list)

    @classmethod
    def error(cls, member_id: str, error_code: int) -> JoinGroupResult:
        return cls(error_code=error_code, member_id=member_id)


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error_code: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class MemberLeaveResult(NamedTuple):
    member_id: str
    group_instance_id: str | None
    error_code: int


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    error_code: int
    member_errors: list[MemberLeaveResult] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    error_code: int
    group_id: str
    state: str
    protocol_type: str
    protocol_name: str
    members: list[DescribedMember] = field(default_factory=list)


Reply = Any
"""What the core answers a parked request through: opaque to it, given back in `Outcome.responses`."""
JoinCallback = Callable[[JoinGroupResult], None]
SyncCallback = Callable[[SyncGroupResult], None]
CommitCallback = Callable[[dict[TopicPartition, int]], None]
DeleteGroupsCallback = Callable[[dict[str, int]], None]
OffsetDeleteCallback = Callable[[tuple[int, dict[TopicPartition, int]]], None]


TxnOffsetCallback = Callable[[dict[TopicPartition, int]], None]
MarkerCallback = Callable[[dict[int, int]], None]


class GroupStore(InternalTopicStore, Protocol):
    """The store of `__consumer_offsets`: appends (see `InternalTopicStore.append`), and the
    transaction markers of the offsets committed in transactions."""

    def write_txn_marker(
        self, partitions: list[int], producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
        callback: MarkerCallback,
    ) -> None:  # fmt: skip
        """Write a COMMIT or ABORT marker of the producer to these partitions of __consumer_offsets
        (through their leaders, acks=all); calls callback({partition: error_code}) once, later."""
        ...
