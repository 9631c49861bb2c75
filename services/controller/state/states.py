"""Partition and replica states and their valid previous states (Kafka 2.8's state machine tables).

Partition states:
    NewPartition         <- NonExistentPartition
    OnlinePartition      <- NewPartition, OnlinePartition, OfflinePartition
    OfflinePartition     <- NewPartition, OnlinePartition, OfflinePartition
    NonExistentPartition <- OfflinePartition

Replica states:
    NewReplica                <- NonExistentReplica
    OnlineReplica             <- NewReplica, OnlineReplica, OfflineReplica, ReplicaDeletionIneligible
    OfflineReplica            <- NewReplica, OnlineReplica, OfflineReplica, ReplicaDeletionIneligible
    ReplicaDeletionStarted    <- OfflineReplica
    ReplicaDeletionSuccessful <- ReplicaDeletionStarted
    ReplicaDeletionIneligible <- OfflineReplica, ReplicaDeletionStarted
    NonExistentReplica        <- ReplicaDeletionSuccessful

Enum values are Kafka's state bytes; `str()` gives Kafka's state names.
"""

from __future__ import annotations

import enum


class PartitionState(enum.Enum):
    NEW_PARTITION = 0
    ONLINE_PARTITION = 1
    OFFLINE_PARTITION = 2
    NON_EXISTENT_PARTITION = 3

    @property
    def valid_previous_states(self) -> frozenset[PartitionState]:
        return _PARTITION_PREVIOUS[self]

    def can_follow(self, current: PartitionState) -> bool:
        """True if a partition in `current` may move to this state."""
        return current in _PARTITION_PREVIOUS[self]

    def __str__(self) -> str:
        return _camel(self.name)


class ReplicaState(enum.Enum):
    NEW_REPLICA = 1
    ONLINE_REPLICA = 2
    OFFLINE_REPLICA = 3
    REPLICA_DELETION_STARTED = 4
    REPLICA_DELETION_SUCCESSFUL = 5
    REPLICA_DELETION_INELIGIBLE = 6
    NON_EXISTENT_REPLICA = 7

    @property
    def valid_previous_states(self) -> frozenset[ReplicaState]:
        return _REPLICA_PREVIOUS[self]

    def can_follow(self, current: ReplicaState) -> bool:
        """True if a replica in `current` may move to this state."""
        return current in _REPLICA_PREVIOUS[self]

    def __str__(self) -> str:
        return _camel(self.name)


def _camel(name: str) -> str:
    return "".join(word.capitalize() for word in name.split("_"))


_P = PartitionState
_PARTITION_PREVIOUS: dict[PartitionState, frozenset[PartitionState]] = {
    _P.NEW_PARTITION: frozenset({_P.NON_EXISTENT_PARTITION}),
    _P.ONLINE_PARTITION: frozenset({_P.NEW_PARTITION, _P.ONLINE_PARTITION, _P.OFFLINE_PARTITION}),
    _P.OFFLINE_PARTITION: frozenset({_P.NEW_PARTITION, _P.ONLINE_PARTITION, _P.OFFLINE_PARTITION}),
    _P.NON_EXISTENT_PARTITION: frozenset({_P.OFFLINE_PARTITION}),
}

_R = ReplicaState
_LIVE_REPLICA_PREVIOUS = frozenset(
    {_R.NEW_REPLICA, _R.ONLINE_REPLICA, _R.OFFLINE_REPLICA, _R.REPLICA_DELETION_INELIGIBLE}
)
_REPLICA_PREVIOUS: dict[ReplicaState, frozenset[ReplicaState]] = {
    _R.NEW_REPLICA: frozenset({_R.NON_EXISTENT_REPLICA}),
    _R.ONLINE_REPLICA: _LIVE_REPLICA_PREVIOUS,
    _R.OFFLINE_REPLICA: _LIVE_REPLICA_PREVIOUS,
    _R.REPLICA_DELETION_STARTED: frozenset({_R.OFFLINE_REPLICA}),
    _R.REPLICA_DELETION_SUCCESSFUL: frozenset({_R.REPLICA_DELETION_STARTED}),
    _R.REPLICA_DELETION_INELIGIBLE: frozenset({_R.OFFLINE_REPLICA, _R.REPLICA_DELETION_STARTED}),
    _R.NON_EXISTENT_REPLICA: frozenset({_R.REPLICA_DELETION_SUCCESSFUL}),
}
