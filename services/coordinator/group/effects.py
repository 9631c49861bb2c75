"""`Outcome`: what one group coordinator command asks of the world, as plain data.

The core decides and never acts; the runtime (runtime.py) carries an outcome out in this order:

- `timers`: `ScheduleTimer(delay_ms, event)` and `CancelTimer(event)`. A timer is named by its
  event (a frozen value); when it fires, the runtime hands the event back to the core's
  `on_timer`. Events that are stale by then (a newer heartbeat, a finished rebalance) are ignored.
- `appends`: `Append(append_id, partition, records, transaction)`, records for a partition of
  `__consumer_offsets` with acks=all, in the order the core produced them (the order replay must
  see); with `transaction` set they are one transactional batch of that producer id and epoch
  (TxnOffsetCommit). The runtime hands each write's error code, and the log offset of its first
  record, back to the core's `on_append_done`.
- `responses`: `(reply, result)` pairs: answers to requests, including parked ones (a JoinGroup
  answered when its rebalance completes). `reply` is the opaque value the runtime passed with the
  request; the core stores it while a request is parked, and never calls it.
- `result`: the immediate answer of a command that answers at once (Heartbeat, LeaveGroup, ...).

The follow-ups below are kept by the core while an append is in flight: what to do once it is
written (or failed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.coordinator.group.api import CommittedOffset, TopicPartition
from services.coordinator.group.records import GroupMetadataValue

Records = list[tuple[bytes, bytes | None]]


# ------------------------------------------------------------------------------------------------
# timer events


@dataclass(frozen=True, slots=True)
class HeartbeatExpired:
    """A member's session (or first-join) timeout; `token` tells the current timer from old ones."""

    group_id: str
    member_id: str
    token: int


@dataclass(frozen=True, slots=True)
class PendingMemberExpired:
    """A MEMBER_ID_REQUIRED member that has not rejoined within its session timeout."""

    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class JoinDeadline:
    """A rebalance's join timeout or (initial) delay."""

    group_id: str
    token: int


@dataclass(frozen=True, slots=True)
class OffsetsCleanupDue:
    """offsets.retention.check.interval.ms passed."""


TimerEvent = HeartbeatExpired | PendingMemberExpired | JoinDeadline | OffsetsCleanupDue


@dataclass(frozen=True, slots=True)
class ScheduleTimer:
    delay_ms: float
    event: TimerEvent


@dataclass(frozen=True, slots=True)
class CancelTimer:
    event: TimerEvent


# ------------------------------------------------------------------------------------------------
# appends and their follow-ups


@dataclass(frozen=True, slots=True)
class TxnProducer:
    """The transaction a transactional batch belongs to."""

    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class Append:
    append_id: int
    partition: int
    records: Records
    transaction: TxnProducer | None = None


@dataclass(frozen=True, slots=True)
class GroupWritten:
    """A GroupMetadata record: `assignment` ends the leader's SyncGroup of `generation_id`."""

    group_id: str
    generation_id: int
    value: GroupMetadataValue
    assignment: bool = False


@dataclass(frozen=True, slots=True)
class StaticMemberWritten:
    """A static member rejoined with a new member id and the group kept its generation."""

    group_id: str
    member_id: str
    old_member_id: str
    old_protocols: list[tuple[str, bytes]]
    leader_id: str
    group_instance_id: str
    reply: Any


@dataclass(frozen=True, slots=True)
class OffsetsWritten:
    """Offset commits; `too_large` are the partitions refused without writing."""

    group_id: str
    offsets: dict[TopicPartition, CommittedOffset]
    too_large: tuple[TopicPartition, ...]
    reply: Any


@dataclass(frozen=True, slots=True)
class TombstonesWritten:
    """Tombstones of expired or deleted offsets (and groups); `delete_id` names a DeleteGroups or an
    OffsetDelete."""

    group_id: str
    delete_id: int | None = None


@dataclass(frozen=True, slots=True)
class TxnOffsetsWritten:
    """Offsets committed in the transaction of `producer_id` (TxnOffsetCommit)."""

    group_id: str
    producer_id: int
    offsets: dict[TopicPartition, CommittedOffset]
    too_large: tuple[TopicPartition, ...]
    reply: Any


FollowUp = GroupWritten | StaticMemberWritten | OffsetsWritten | TombstonesWritten | TxnOffsetsWritten


@dataclass
class Outcome:
    responses: list[tuple[Any, Any]] = field(default_factory=list)
    appends: list[Append] = field(default_factory=list)
    timers: list[ScheduleTimer | CancelTimer] = field(default_factory=list)
    result: Any = None

    def respond(self, reply: Any, result: Any) -> None:
        """Answer `reply` (nothing to answer when it is None)."""
        if reply is not None:
            self.responses.append((reply, result))

    def schedule(self, delay_ms: float, event: TimerEvent) -> None:
        self.timers.append(ScheduleTimer(delay_ms, event))

    def cancel(self, event: TimerEvent | None) -> None:
        if event is not None:
            self.timers.append(CancelTimer(event))
