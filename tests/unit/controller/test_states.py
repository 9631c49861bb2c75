"""The partition and replica state machines' transition tables: every (current, target) pair."""

from __future__ import annotations

import itertools

import pytest

from services.controller.state.election import OfflinePartitionLeaderElectionStrategy
from services.controller.state.model import PartitionAndReplica
from services.controller.state.partition_state_machine import PartitionStateMachine
from services.controller.state.replica_state_machine import ReplicaStateMachine
from services.controller.state.states import PartitionState, ReplicaState
from tests.unit.controller.cluster import (
    add_topic,
    config,
    make_context,
    set_leadership,
    set_partition_state,
    set_replica_state,
    tp,
)

P = PartitionState
R = ReplicaState

VALID_PARTITION_TRANSITIONS = {
    (P.NON_EXISTENT_PARTITION, P.NEW_PARTITION),
    (P.NEW_PARTITION, P.ONLINE_PARTITION),
    (P.ONLINE_PARTITION, P.ONLINE_PARTITION),
    (P.OFFLINE_PARTITION, P.ONLINE_PARTITION),
    (P.NEW_PARTITION, P.OFFLINE_PARTITION),
    (P.ONLINE_PARTITION, P.OFFLINE_PARTITION),
    (P.OFFLINE_PARTITION, P.OFFLINE_PARTITION),
    (P.OFFLINE_PARTITION, P.NON_EXISTENT_PARTITION),
}

_LIVE = {R.NEW_REPLICA, R.ONLINE_REPLICA, R.OFFLINE_REPLICA, R.REPLICA_DELETION_INELIGIBLE}
VALID_REPLICA_TRANSITIONS = (
    {(R.NON_EXISTENT_REPLICA, R.NEW_REPLICA)}
    | {(s, R.ONLINE_REPLICA) for s in _LIVE}
    | {(s, R.OFFLINE_REPLICA) for s in _LIVE}
    | {(R.OFFLINE_REPLICA, R.REPLICA_DELETION_STARTED)}
    | {(R.REPLICA_DELETION_STARTED, R.REPLICA_DELETION_SUCCESSFUL)}
    | {
        (R.OFFLINE_REPLICA, R.REPLICA_DELETION_INELIGIBLE),
        (R.REPLICA_DELETION_STARTED, R.REPLICA_DELETION_INELIGIBLE),
    }
    | {(R.REPLICA_DELETION_SUCCESSFUL, R.NON_EXISTENT_REPLICA)}
)

ALL_PARTITION_PAIRS = list(itertools.product(PartitionState, PartitionState))
ALL_REPLICA_PAIRS = list(itertools.product(ReplicaState, ReplicaState))


def test_state_values_and_names_are_kafkas():
    assert [(s.value, str(s)) for s in PartitionState] == [
        (0, "NewPartition"),
        (1, "OnlinePartition"),
        (2, "OfflinePartition"),
        (3, "NonExistentPartition"),
    ]
    assert [(s.value, str(s)) for s in ReplicaState] == [
        (1, "NewReplica"),
        (2, "OnlineReplica"),
        (3, "OfflineReplica"),
        (4, "ReplicaDeletionStarted"),
        (5, "ReplicaDeletionSuccessful"),
        (6, "ReplicaDeletionIneligible"),
        (7, "NonExistentReplica"),
    ]


@pytest.mark.parametrize(("current", "target"), ALL_PARTITION_PAIRS, ids=lambda s: str(s))
def test_partition_transition_table(current, target):
    assert target.can_follow(current) == ((current, target) in VALID_PARTITION_TRANSITIONS)
    assert (current in target.valid_previous_states) == target.can_follow(current)


@pytest.mark.parametrize(("current", "target"), ALL_REPLICA_PAIRS, ids=lambda s: str(s))
def test_replica_transition_table(current, target):
    assert target.can_follow(current) == ((current, target) in VALID_REPLICA_TRANSITIONS)
    assert (current in target.valid_previous_states) == target.can_follow(current)


@pytest.mark.parametrize(("current", "target"), ALL_PARTITION_PAIRS, ids=lambda s: str(s))
def test_partition_state_machine_applies_valid_and_skips_invalid_transitions(current, target):
    context = make_context(live=[1, 2])
    add_topic(context, "t", {0: [1, 2]})
    partition = tp("t", 0)
    if current != P.NON_EXISTENT_PARTITION:
        set_partition_state(context, partition, current)
    if current in (P.ONLINE_PARTITION, P.OFFLINE_PARTITION):
        set_leadership(context, partition, leader=1, isr=[1, 2])
    machine = PartitionStateMachine(context, config())

    outcome = machine.handle_state_changes([partition], target, OfflinePartitionLeaderElectionStrategy())

    if (current, target) in VALID_PARTITION_TRANSITIONS:
        assert context.partition_state(partition) == target
        assert outcome.invalid == []
        assert outcome.failures == []
    else:
        assert context.partition_state(partition) == current
        assert outcome.invalid == [partition]
        assert outcome.effects == []
        assert outcome.records == []
        assert len(outcome.failures) == 1
        assert "should be in one of" in str(outcome.failures[0][1])


@pytest.mark.parametrize(("current", "target"), ALL_REPLICA_PAIRS, ids=lambda s: str(s))
def test_replica_state_machine_applies_valid_and_skips_invalid_transitions(current, target):
    context = make_context(live=[1, 2])
    add_topic(context, "t", {0: [1, 2]}, P.ONLINE_PARTITION)
    partition = tp("t", 0)
    set_leadership(context, partition, leader=1, isr=[1, 2])
    replica = PartitionAndReplica(partition, 2)
    if current != R.NON_EXISTENT_REPLICA:
        set_replica_state(context, partition, 2, current)
    machine = ReplicaStateMachine(context)

    outcome = machine.handle_state_changes([replica], target)

    if (current, target) in VALID_REPLICA_TRANSITIONS:
        assert outcome.failures == []
        if target == R.NON_EXISTENT_REPLICA:
            assert not context.has_replica_state(replica)
            assert context.partition_replica_assignment(partition) == (1,)
        else:
            assert context.replica_state(replica) == target
    else:
        assert context.replica_state(replica) == current
        assert outcome.effects == []
        assert len(outcome.failures) == 1
        assert "should be in the" in str(outcome.failures[0][1])
