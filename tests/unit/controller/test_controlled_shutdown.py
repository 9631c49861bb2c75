"""Controlled shutdown: leadership moves off the broker, it leaves follower ISRs, RF=1 stays."""

from __future__ import annotations

import pytest

from services.common.errors import Errors, KafkaError
from services.controller.state.controlled_shutdown import controlled_shutdown
from services.controller.state.effects import UpdatePartitionState
from services.controller.state.model import LeaderAndIsr, PartitionAndReplica
from services.controller.state.partition_state_machine import PartitionStateMachine
from services.controller.state.records import TopicDeletionQueued
from services.controller.state.replica_state_machine import ReplicaStateMachine
from services.controller.state.states import ReplicaState
from tests.unit.controller.cluster import (
    add_topic,
    config,
    leader_and_isr_targets,
    make_context,
    online_topic,
    set_leadership,
    stop_replicas,
    tp,
    writes,
)


def shut_down(context, broker_id, broker_epoch=-1):
    psm = PartitionStateMachine(context, config())
    rsm = ReplicaStateMachine(context)
    return controlled_shutdown(context, psm, rsm, broker_id, broker_epoch)


def cluster():
    context = make_context(live=[1, 2, 3])
    online_topic(
        context,
        "t",
        {
            0: [1, 2, 3],  # led by 1
            1: [2, 1, 3],  # followed by 1
            2: [2, 3],  # no replica on 1
        },
    )
    online_topic(context, "single", {0: [1]})  # RF = 1, led by 1
    return context


def test_led_partitions_move_and_followed_partitions_drop_the_broker():
    context = cluster()
    outcome = shut_down(context, 1, broker_epoch=101)

    assert context.shutting_down_broker_ids == {1}
    assert context.partition_leadership(tp("t", 0)).leader_and_isr == LeaderAndIsr(2, 4, (2, 3), 8)
    assert context.partition_leadership(tp("t", 1)).leader_and_isr == LeaderAndIsr(2, 4, (2, 3), 8)
    assert context.partition_leadership(tp("t", 2)).leader_and_isr == LeaderAndIsr(2, 3, (2, 3), 7)
    assert context.replica_state(PartitionAndReplica(tp("t", 1), 1)) == ReplicaState.OFFLINE_REPLICA
    assert set(writes(outcome.effects)) == {tp("t", 0), tp("t", 1)}
    assert all(isinstance(w, UpdatePartitionState) for w in writes(outcome.effects).values())
    # the shutting-down broker is told it is a follower of t-0, and stops fetching t-1
    assert 1 in leader_and_isr_targets(outcome.effects)[tp("t", 0)]
    assert (1, tp("t", 1), False) in stop_replicas(outcome.effects)
    assert 1 not in leader_and_isr_targets(outcome.effects)[tp("t", 1)]
    # single-replica partitions stay where they are and are reported as still led
    assert context.partition_leadership(tp("single", 0)).leader_and_isr.leader == 1
    assert outcome.remaining_partitions == []  # partition_leaders_on_broker leaves out RF=1
    assert outcome.failures == []


def test_partition_without_another_in_sync_replica_remains():
    context = make_context(live=[1, 2])
    online_topic(context, "t", {0: [1, 2]}, isr={0: [1]})
    outcome = shut_down(context, 1)
    assert outcome.remaining_partitions == [tp("t", 0)]
    assert context.partition_leadership(tp("t", 0)).leader_and_isr.leader == 1
    assert len(outcome.failures) == 1


def test_two_brokers_shutting_down_avoid_each_other():
    context = make_context(live=[1, 2, 3])
    online_topic(context, "t", {0: [1, 2, 3]})
    shut_down(context, 2)
    outcome = shut_down(context, 1)
    assert context.partition_leadership(tp("t", 0)).leader_and_isr.leader == 3
    assert context.partition_leadership(tp("t", 0)).leader_and_isr.isr == (3,)
    assert outcome.remaining_partitions == []


def test_partitions_of_topics_being_deleted_and_without_leadership_are_left_alone():
    context = make_context(live=[1, 2])
    online_topic(context, "deleting", {0: [1, 2]})
    context.apply(TopicDeletionQueued(frozenset({"deleting"})))
    add_topic(context, "new", {0: [1, 2]})
    outcome = shut_down(context, 1)
    assert outcome.effects == []
    assert context.partition_leadership(tp("deleting", 0)).leader_and_isr.leader == 1


def test_stale_broker_epoch_is_refused():
    context = cluster()
    with pytest.raises(KafkaError) as raised:
        shut_down(context, 1, broker_epoch=100)
    assert raised.value.code == Errors.STALE_BROKER_EPOCH
    assert context.shutting_down_broker_ids == set()


@pytest.mark.parametrize("broker_epoch", [500, -1])
def test_newer_or_unknown_broker_epoch_is_accepted(broker_epoch):
    context = cluster()
    outcome = shut_down(context, 1, broker_epoch=broker_epoch)
    assert context.shutting_down_broker_ids == {1}
    assert context.partition_leadership(tp("t", 0)).leader_and_isr.leader == 2
    assert outcome.remaining_partitions == [] and outcome.failures == []


def test_unknown_broker_is_refused():
    with pytest.raises(KafkaError) as raised:
        shut_down(cluster(), 9)
    assert raised.value.code == Errors.BROKER_NOT_AVAILABLE


def test_retry_is_idempotent():
    context = cluster()
    shut_down(context, 1)
    outcome = shut_down(context, 1)
    assert outcome.remaining_partitions == []
    assert writes(outcome.effects) == {}
    assert context.partition_leadership(tp("t", 0)).leader_and_isr.leader == 2


def test_leader_with_shutting_down_follower_keeps_rf1_partition_listed():
    context = make_context(live=[1, 2])
    online_topic(context, "t", {0: [1, 2]})
    set_leadership(context, tp("t", 0), leader=1, isr=[1, 2])
    outcome = shut_down(context, 2)
    assert context.partition_leadership(tp("t", 0)).leader_and_isr == LeaderAndIsr(1, 4, (1,), 8)
    assert outcome.remaining_partitions == []
