"""Broker request batching (Kafka's ControllerBrokerRequestBatch) and effect filtering."""

from __future__ import annotations

from services.common.shared_types import ReplicaAssignment
from services.controller.state.effects import (
    CreatePartitionState,
    DeleteTopic,
    Outcome,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    UpdatePartitionState,
    without_partitions,
)
from services.controller.state.model import LeaderAndIsr, LeaderIsrAndControllerEpoch
from services.controller.state.records import TopicDeletionQueued
from services.controller.state.request_batch import RequestBatch, update_metadata_effects
from tests.unit.controller.cluster import (
    CONTROLLER_EPOCH,
    add_topic,
    broker,
    make_context,
    of_type,
    online_topic,
    set_leadership,
    tp,
)


def leadership(leader, isr, epoch=1, version=2):
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, tuple(isr), version), CONTROLLER_EPOCH)


def test_leader_and_isr_goes_to_live_brokers_with_their_epochs_and_leader_endpoints():
    context = make_context(live=[1, 2], shutting_down=[2])
    add_topic(context, "t", {0: [1, 2, 3]})
    batch = RequestBatch(context)
    batch.add_leader_and_isr(
        [1, 2, 3, -1], tp("t", 0), leadership(2, [1, 2]), ReplicaAssignment((1, 2, 3)), False
    )
    effects = batch.build()
    sends = of_type(effects, SendLeaderAndIsr)
    assert [(e.broker_id, e.broker_epoch, e.controller_epoch) for e in sends] == [
        (1, 101, CONTROLLER_EPOCH),
        (2, 102, CONTROLLER_EPOCH),
    ]
    assert sends[0].live_leaders == (broker(2),)
    state = sends[0].partition_states[0]
    assert (state.leader, state.leader_epoch, state.isr, state.zk_version, state.replicas) == (
        2,
        1,
        (1, 2),
        2,
        (1, 2, 3),
    )
    assert batch.is_empty()


def test_adding_leader_and_isr_schedules_update_metadata_for_every_live_broker():
    context = make_context(live=[1, 2, 3])
    online_topic(context, "t", {0: [1, 2]})
    batch = RequestBatch(context)
    batch.add_leader_and_isr([1], tp("t", 0), leadership(1, [1, 2]), ReplicaAssignment((1, 2)), False)
    effects = batch.build()
    assert [type(e) for e in effects] == [
        SendLeaderAndIsr,
        SendUpdateMetadata,
        SendUpdateMetadata,
        SendUpdateMetadata,
    ]
    assert [e.broker_id for e in of_type(effects, SendUpdateMetadata)] == [1, 2, 3]
    assert of_type(effects, SendUpdateMetadata)[0].live_brokers == (broker(1), broker(2), broker(3))


def test_is_new_sticks_once_set():
    context = make_context(live=[1])
    add_topic(context, "t", {0: [1]})
    batch = RequestBatch(context)
    batch.add_leader_and_isr([1], tp("t", 0), leadership(1, [1]), ReplicaAssignment((1,)), True)
    batch.add_leader_and_isr([1], tp("t", 0), leadership(1, [1], epoch=2), ReplicaAssignment((1,)), False)
    state = of_type(batch.build(), SendLeaderAndIsr)[0].partition_states[0]
    assert state.is_new and state.leader_epoch == 2


def test_stop_replica_epochs_and_delete_flag():
    context = make_context(live=[1])
    online_topic(context, "t", {0: [1]})
    add_topic(context, "fresh", {0: [1]})
    online_topic(context, "gone", {0: [1]})
    context.apply(TopicDeletionQueued(frozenset({"gone"})))
    batch = RequestBatch(context)
    batch.add_stop_replica([1], tp("t", 0), delete_partition=True)
    batch.add_stop_replica([1], tp("t", 0), delete_partition=False)  # delete stays set
    batch.add_stop_replica([1], tp("fresh", 0), delete_partition=False)
    batch.add_stop_replica([1], tp("gone", 0), delete_partition=True)
    (stop,) = of_type(batch.build(), SendStopReplica)
    assert [(s.partition, s.leader_epoch, s.delete_partition) for s in stop.partitions] == [
        (tp("fresh", 0), -1, False),  # no leadership: NoEpoch
        (tp("gone", 0), -2, True),  # topic being deleted: EpochDuringDelete
        (tp("t", 0), 3, True),
    ]


def test_update_metadata_states_offline_replicas_and_deletion():
    context = make_context(live=[1, 2], shutting_down=[2])
    online_topic(context, "t", {0: [1, 2, 3]})
    online_topic(context, "gone", {0: [1]})
    add_topic(context, "fresh", {0: [1]})
    context.apply(TopicDeletionQueued(frozenset({"gone"})))
    effects = update_metadata_effects(context, [1, 9], [tp("t", 0), tp("gone", 0), tp("fresh", 0)])
    (update,) = effects  # broker 9 is not live
    states = {s.partition: s for s in update.partition_states}
    assert set(states) == {tp("t", 0), tp("gone", 0)}  # no leadership yet: skipped
    assert states[tp("t", 0)].offline_replicas == (2, 3)  # shutting-down brokers count as offline
    gone = states[tp("gone", 0)]
    assert (gone.leader, gone.leader_epoch, gone.zk_version) == (-2, 0, 0)


def test_update_metadata_without_partitions_announces_brokers():
    context = make_context(live=[1, 2])
    effects = update_metadata_effects(context, [1, 2], [])
    assert [(e.broker_id, e.partition_states) for e in effects] == [(1, ()), (2, ())]


def test_without_partitions_drops_writes_and_request_entries():
    context = make_context(live=[1, 2])
    online_topic(context, "t", {0: [1, 2], 1: [2, 1]})
    batch = RequestBatch(context)
    for p in (0, 1):
        lead = context.partition_leadership(tp("t", p))
        batch.add_leader_and_isr(
            [1, 2], tp("t", p), lead, context.partition_full_replica_assignment(tp("t", p)), False
        )
    batch.add_stop_replica([1], tp("t", 1), False)
    lai = LeaderAndIsr(1, 4, (1,), 8)
    effects = [
        UpdatePartitionState(tp("t", 1), lai, 5, 4, 7),
        CreatePartitionState(tp("t", 0), lai, 5, 4),
        DeleteTopic("x", 4),
        *batch.build(),
        *update_metadata_effects(context, [1], []),
    ]
    kept = without_partitions(effects, [tp("t", 1)])
    assert [type(e) for e in kept] == [
        CreatePartitionState,
        DeleteTopic,
        SendLeaderAndIsr,
        SendLeaderAndIsr,
        SendUpdateMetadata,
        SendUpdateMetadata,
        SendUpdateMetadata,  # the broker-only UpdateMetadata stays
    ]
    assert all(s.partition == tp("t", 0) for e in kept[2:6] for s in e.partition_states)
    assert without_partitions(effects, [tp("t", 0), tp("t", 1)])[-1].partition_states == ()


def test_outcome_helpers():
    context = make_context(live=[1])
    set_leadership(context, tp("t", 0), 1, [1])
    outcome = Outcome(effects=[DeleteTopic("x", 1), *update_metadata_effects(context, [1], [])])
    assert outcome.writes() == [DeleteTopic("x", 1)]
    assert [type(e) for e in outcome.requests()] == [SendUpdateMetadata]
    merged = Outcome().extend(outcome).extend(outcome)
    assert len(merged.effects) == 4
