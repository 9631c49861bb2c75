"""Controller events: what the single-threaded controller loop processes, as plain dataclasses.

ZooKeeper watches, RPC handlers and timers only enqueue these (Kafka's ControllerEvent case
classes); the event thread processes them one at a time. Each event names the `ControllerState`
the controller is in while processing it (Kafka's state values). Events that answer a caller
carry a `callback`; it receives the result, or a `KafkaError`. When an event is preempted
(dropped by `clear_and_put`, or left in the queue at shutdown) its callback receives
NOT_CONTROLLER, as Kafka answers a caller whose controller moved.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition
from services.controller.state.model import LeaderAndIsr
from services.controller.state.topic_admin import NewPartitions, NewTopic

Callback = Callable[[Any], None]


class ControllerState(enum.Enum):
    IDLE = 0
    CONTROLLER_CHANGE = 1
    BROKER_CHANGE = 2
    TOPIC_CHANGE = 3
    TOPIC_DELETION = 4
    ALTER_PARTITION_REASSIGNMENT = 5
    AUTO_LEADER_BALANCE = 6
    MANUAL_LEADER_BALANCE = 7
    CONTROLLED_SHUTDOWN = 8
    ISR_CHANGE = 9
    LEADER_AND_ISR_RESPONSE_RECEIVED = 10
    LOG_DIR_CHANGE = 11
    CONTROLLER_SHUTDOWN = 12
    UNCLEAN_LEADER_ELECTION_ENABLE = 13
    TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE = 14
    LIST_PARTITION_REASSIGNMENT = 15
    UPDATE_METADATA_RESPONSE_RECEIVED = 16
    UPDATE_FEATURES = 17


class ElectionType(enum.Enum):
    PREFERRED = 0
    UNCLEAN = 1


class ElectionTrigger(enum.Enum):
    ZK_TRIGGERED = "zk"
    AUTO_TRIGGERED = "auto"
    ADMIN_CLIENT_TRIGGERED = "admin"


def controller_moved() -> KafkaError:
    return KafkaError("Controller moved to another broker", error=Errors.NOT_CONTROLLER)


@dataclass(frozen=True)
class ControllerEvent:
    state: ClassVar[ControllerState] = ControllerState.IDLE

    def preempt(self) -> None:
        """Answer a waiting caller that this controller will not process the event."""
        callback = getattr(self, "callback", None)
        if callback is not None:
            callback(controller_moved())


# --- controllership ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Startup(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True)
class ControllerChange(ControllerEvent):
    """`/controller` was created or changed: resign if this instance no longer leads."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True)
class Reelect(ControllerEvent):
    """`/controller` was deleted: resign if needed, then try to become controller."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True)
class RegisterBrokerAndReelect(ControllerEvent):
    """A new ZooKeeper session: register again and run for controller."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True)
class Expire(ControllerEvent):
    """The ZooKeeper session expired: resign before a new session starts."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True)
class ShutdownEventThread(ControllerEvent):
    """Wakes the event thread so it can stop; never processed."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_SHUTDOWN


# --- brokers ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerChange(ControllerEvent):
    """Children of `/brokers/ids` changed."""

    state: ClassVar[ControllerState] = ControllerState.BROKER_CHANGE


@dataclass(frozen=True)
class BrokerModifications(ControllerEvent):
    """`/brokers/ids/<id>` data changed (endpoints or rack)."""

    state: ClassVar[ControllerState] = ControllerState.BROKER_CHANGE
    broker_id: int


@dataclass(frozen=True)
class ControlledShutdown(ControllerEvent):
    """A broker asks to shut down; the callback gets the partitions it still leads."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLED_SHUTDOWN
    broker_id: int
    broker_epoch: int
    callback: Callback | None = field(default=None, compare=False)


# --- topics and partitions --------------------------------------------------------------------


@dataclass(frozen=True)
class TopicChange(ControllerEvent):
    """Children of `/brokers/topics` changed."""

    state: ClassVar[ControllerState] = ControllerState.TOPIC_CHANGE


@dataclass(frozen=True)
class PartitionModifications(ControllerEvent):
    """`/brokers/topics/<t>` data changed (partitions added)."""

    state: ClassVar[ControllerState] = ControllerState.TOPIC_CHANGE
    topic: str


@dataclass(frozen=True)
class TopicDeletion(ControllerEvent):
    """Children of `/admin/delete_topics` changed."""

    state: ClassVar[ControllerState] = ControllerState.TOPIC_DELETION


@dataclass(frozen=True)
class TopicDeletionStopReplicaResponseReceived(ControllerEvent):
    """A broker answered a StopReplica (delete_partition) for topic deletion."""

    state: ClassVar[ControllerState] = ControllerState.TOPIC_DELETION
    replica_id: int
    request_error_code: int
    partition_error_codes: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True)
class CreateTopics(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.TOPIC_CHANGE
    topics: tuple[NewTopic, ...]
    validate_only: bool = False
    callback: Callback | None = field(default=None, compare=False)


@dataclass(frozen=True)
class DeleteTopics(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.TOPIC_DELETION
    topics: tuple[str, ...]
    callback: Callback | None = field(default=None, compare=False)


@dataclass(frozen=True)
class CreatePartitions(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.TOPIC_CHANGE
    topics: tuple[NewPartitions, ...]
    validate_only: bool = False
    callback: Callback | None = field(default=None, compare=False)


# --- leadership and ISR -----------------------------------------------------------------------


@dataclass(frozen=True)
class IsrChangeNotification(ControllerEvent):
    """Children of `/isr_change_notification` changed (leaders changed ISRs)."""

    state: ClassVar[ControllerState] = ControllerState.ISR_CHANGE


@dataclass(frozen=True)
class LogDirEventNotification(ControllerEvent):
    """Children of `/log_dir_event_notification` changed (a broker's log dir went offline)."""

    state: ClassVar[ControllerState] = ControllerState.LOG_DIR_CHANGE


@dataclass(frozen=True)
class AlterIsrReceived(ControllerEvent):
    """A leader asks to change ISRs (`LeaderAndIsr.zk_version` is the version it last saw)."""

    state: ClassVar[ControllerState] = ControllerState.ISR_CHANGE
    broker_id: int
    broker_epoch: int
    isrs_to_alter: Mapping[TopicPartition, LeaderAndIsr]
    callback: Callback | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ReplicaLeaderElection(ControllerEvent):
    """Preferred or unclean election for `partitions` (None: those listed in
    `/admin/preferred_replica_election`)."""

    state: ClassVar[ControllerState] = ControllerState.MANUAL_LEADER_BALANCE
    partitions: frozenset[TopicPartition] | None
    election_type: ElectionType = ElectionType.PREFERRED
    trigger: ElectionTrigger = ElectionTrigger.ADMIN_CLIENT_TRIGGERED
    callback: Callback | None = field(default=None, compare=False)


@dataclass(frozen=True)
class AutoPreferredReplicaLeaderElection(ControllerEvent):
    """The periodic leader imbalance check (`leader.imbalance.check.interval.seconds`)."""

    state: ClassVar[ControllerState] = ControllerState.AUTO_LEADER_BALANCE


@dataclass(frozen=True)
class UncleanLeaderElectionEnable(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.UNCLEAN_LEADER_ELECTION_ENABLE


@dataclass(frozen=True)
class TopicUncleanLeaderElectionEnable(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE
    topic: str


# --- reassignments ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiPartitionReassignment(ControllerEvent):
    """AlterPartitionReassignments: a target per partition, or None to cancel; the callback gets
    each partition's KafkaError or None."""

    state: ClassVar[ControllerState] = ControllerState.ALTER_PARTITION_REASSIGNMENT
    reassignments: Mapping[TopicPartition, tuple[int, ...] | None]
    callback: Callback | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ZkPartitionReassignment(ControllerEvent):
    """`/admin/reassign_partitions` was created or changed (a legacy tool's request)."""

    state: ClassVar[ControllerState] = ControllerState.ALTER_PARTITION_REASSIGNMENT


@dataclass(frozen=True)
class ListPartitionReassignments(ControllerEvent):
    """The callback gets the partitions (of `partitions`, or all) being reassigned, with their
    `ReplicaAssignment`s."""

    state: ClassVar[ControllerState] = ControllerState.LIST_PARTITION_REASSIGNMENT
    partitions: frozenset[TopicPartition] | None = None
    callback: Callback | None = field(default=None, compare=False)


# --- broker responses -------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaderAndIsrResponseReceived(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.LEADER_AND_ISR_RESPONSE_RECEIVED
    broker_id: int
    error_code: int
    partition_error_codes: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True)
class UpdateMetadataResponseReceived(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED
    broker_id: int
    error_code: int
