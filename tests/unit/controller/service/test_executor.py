"""EffectsExecutor: writes in order before requests, the retry after version conflicts, fencing."""

from __future__ import annotations

import pytest
from kazoo.exceptions import ConnectionLoss

from services.common.shared_types import PartitionStateInfo
from services.common.topic_partition import TopicPartition
from services.common.zk import ControllerEpoch, ControllerMovedError
from services.common.zk.bounded import ZkRequestTooLargeError
from services.controller.executor import EffectsExecutor
from services.controller.state.context import ControllerContext
from services.controller.state.effects import (
    CreatePartitionState,
    DeleteTopicDeletionMarkers,
    Outcome,
    SendLeaderAndIsr,
    SendUpdateMetadata,
    UpdatePartitionState,
)
from services.controller.state.model import LeaderAndIsr, LeaderIsrAndControllerEpoch
from services.controller.state.records import ControllerEpochChanged, PartitionLeadershipChanged
from tests.unit.controller.service.fakes import FakeZooKeeper

EPOCH, EPOCH_ZK_VERSION = 3, 2
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.fixture
def zk() -> FakeZooKeeper:
    zk = FakeZooKeeper()
    zk.epoch = ControllerEpoch(EPOCH, EPOCH_ZK_VERSION)
    zk.add_topic("t", {0: (1, 2), 1: (2, 1)})
    return zk


@pytest.fixture
def context() -> ControllerContext:
    context = ControllerContext()
    context.apply(ControllerEpochChanged(EPOCH, EPOCH_ZK_VERSION))
    return context


def state_info(partition: TopicPartition, lai: LeaderAndIsr) -> PartitionStateInfo:
    return PartitionStateInfo(partition, EPOCH, lai.leader, lai.leader_epoch, lai.isr, lai.zk_version, (1, 2))


def update(
    partition: TopicPartition, leader: int, isr: tuple[int, ...], expected: int
) -> UpdatePartitionState:
    return UpdatePartitionState(
        partition, LeaderAndIsr(leader, 1, isr, expected + 1), EPOCH, EPOCH_ZK_VERSION, expected
    )


def leader_and_isr(broker_id: int, *partitions: tuple[TopicPartition, LeaderAndIsr]) -> SendLeaderAndIsr:
    return SendLeaderAndIsr(
        broker_id, 100 + broker_id, EPOCH, tuple(state_info(p, lai) for p, lai in partitions), ()
    )


def executor(zk, context, sent, max_attempts=5) -> EffectsExecutor:
    return EffectsExecutor(zk, context, sent.extend, max_attempts)


def test_writes_happen_in_order_before_any_request(zk, context):
    zk.set_state("t", 1, 2, (2, 1), version=4)
    order: list[str] = []
    real_create, real_set = zk.create_partition_states, zk.set_partition_states
    zk.create_partition_states = lambda *a, **k: (order.append("create"), real_create(*a, **k))[1]
    zk.set_partition_states = lambda *a, **k: (order.append("set"), real_set(*a, **k))[1]
    created = LeaderAndIsr.initial(1, (1, 2))
    updated = update(T1, 1, (1, 2), expected=4)
    request = leader_and_isr(1, (T0, created), (T1, updated.leader_and_isr))
    outcome = Outcome(
        effects=[
            CreatePartitionState(T0, created, EPOCH, EPOCH_ZK_VERSION),
            request,
            updated,
            DeleteTopicDeletionMarkers(("gone",), EPOCH_ZK_VERSION),
        ]
    )

    def send(requests):
        order.append("send")
        sent.extend(requests)

    sent: list = []
    execution = EffectsExecutor(zk, context, send).execute(outcome)

    assert order == ["create", "set", "send"]
    assert sent == [request]
    assert zk.states[TopicPartition("t", 0)].version == 0
    assert zk.states[TopicPartition("t", 1)].version == 5
    assert ("delete_topic_deletions", ["gone"]) in zk.calls
    assert execution.missing == execution.conflicted == set()


def test_consecutive_updates_of_distinct_partitions_are_written_together(zk, context):
    zk.set_state("t", 0, 1, (1, 2), version=0)
    zk.set_state("t", 1, 2, (2, 1), version=0)
    first = update(T0, 2, (2,), expected=0)
    again = UpdatePartitionState(T0, LeaderAndIsr(2, 2, (2, 1), 2), EPOCH, EPOCH_ZK_VERSION, 1)
    executor(zk, context, []).execute(Outcome(effects=[first, update(T1, 1, (1,), 0), again]))
    sets = [args for name, args in zk.calls if name == "set_partition_states"]
    assert sets == [[TopicPartition("t", 0), TopicPartition("t", 1)], [TopicPartition("t", 0)]]
    assert zk.states[TopicPartition("t", 0)].version == 2


def test_a_version_conflict_reloads_the_state_drops_its_requests_and_runs_the_change_again(zk, context):
    zk.set_state("t", 0, 1, (1, 2), version=0)
    zk.set_state("t", 1, 2, (2, 1), version=0)
    zk.bump("t", 0, isr=(1,))  # a leader shrank the ISR: version 1 now
    stale = update(T0, 2, (2,), expected=0)
    fine = update(T1, 1, (1,), expected=0)
    outcome = Outcome(
        effects=[
            stale,
            fine,
            leader_and_isr(2, (T0, stale.leader_and_isr), (T1, fine.leader_and_isr)),
            SendUpdateMetadata(3, 103, EPOCH, (state_info(T0, stale.leader_and_isr),), ()),
        ]
    )
    retried_with: list[list[TopicPartition]] = []

    def retry(partitions):
        retried_with.append(partitions)
        current = context.partition_leadership(T0).leader_and_isr
        assert (current.isr, current.zk_version) == ((1,), 1)  # reloaded before the retry
        redo = UpdatePartitionState(
            T0,
            LeaderAndIsr(2, current.leader_epoch + 1, (2,), 2),
            EPOCH,
            EPOCH_ZK_VERSION,
            current.zk_version,
        )
        return Outcome(effects=[redo, leader_and_isr(2, (T0, redo.leader_and_isr))])

    sent: list = []
    execution = executor(zk, context, sent).execute(outcome, retry)

    assert retried_with == [[T0]]
    first, second = sent
    assert [s.partition for s in first.partition_states] == [T1]  # T0 dropped; the UpdateMetadata too
    assert [(s.partition, s.zk_version) for s in second.partition_states] == [(T0, 2)]
    assert zk.states[TopicPartition("t", 0)].version == 2
    assert execution.conflicted == set() and len(execution.outcomes) == 2
    assert [r.partition for r in execution.reloads] == [T0]


def test_conflicts_are_retried_a_bounded_number_of_times(zk, context):
    zk.set_state("t", 0, 1, (1, 2), version=5)
    stale = update(T0, 2, (2,), expected=0)
    calls = []

    def retry(partitions):
        calls.append(partitions)
        return Outcome(effects=[stale])

    execution = executor(zk, context, [], max_attempts=3).execute(Outcome(effects=[stale]), retry)
    assert len(calls) == 2
    assert execution.conflicted == {T0}


def test_a_vanished_state_znode_drops_the_partition_without_retry(zk, context):
    gone = update(T0, 2, (2,), expected=0)
    sent: list = []
    execution = executor(zk, context, sent).execute(
        Outcome(effects=[gone, leader_and_isr(2, (T0, gone.leader_and_isr))]),
        lambda p: pytest.fail("retried"),
    )
    assert execution.missing == {T0}
    assert sent == []


def test_an_existing_state_znode_of_a_new_partition_is_a_conflict_and_others_are_still_created(zk, context):
    zk.set_state("t", 1, 2, (2,), leader_epoch=4, version=3)
    created = LeaderAndIsr.initial(1, (1, 2))
    effects = [
        CreatePartitionState(T0, created, EPOCH, EPOCH_ZK_VERSION),
        CreatePartitionState(T1, LeaderAndIsr.initial(2, (2, 1)), EPOCH, EPOCH_ZK_VERSION),
    ]
    context.apply(
        PartitionLeadershipChanged(T1, LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(2, (2, 1)), EPOCH))
    )
    execution = executor(zk, context, []).execute(Outcome(effects=effects))
    assert zk.states[TopicPartition("t", 0)].version == 0
    assert execution.conflicted == {T1}
    assert context.partition_leadership(T1).leader_and_isr == LeaderAndIsr(2, 4, (2,), 3)


def test_a_fenced_write_raises_before_any_request_is_sent(zk, context):
    zk.set_state("t", 0, 1, (1, 2), version=0)
    zk.elect_other(2000)
    change = update(T0, 2, (2,), expected=0)
    sent: list = []
    with pytest.raises(ControllerMovedError):
        executor(zk, context, sent).execute(
            Outcome(effects=[change, leader_and_isr(2, (T0, change.leader_and_isr))])
        )
    assert sent == []
    assert zk.states[TopicPartition("t", 0)].version == 0


def test_a_write_that_fails_for_its_own_reason_is_counted_and_the_others_go_on(zk, context):
    zk.add_topic("u", {0: (1, 2)})
    u0 = TopicPartition("u", 0)
    created = LeaderAndIsr.initial(1, (1, 2))
    real_create = zk.create_partition_states

    def create(states, *, epoch_zk_version):
        if any(tp.topic == "t" for tp in states):
            raise ZkRequestTooLargeError("too large")
        return real_create(states, epoch_zk_version=epoch_zk_version)

    zk.create_partition_states = create
    outcome = Outcome(
        effects=[
            CreatePartitionState(T0, created, EPOCH, EPOCH_ZK_VERSION),
            DeleteTopicDeletionMarkers(("gone",), EPOCH_ZK_VERSION),
            CreatePartitionState(u0, created, EPOCH, EPOCH_ZK_VERSION),
            leader_and_isr(1, (T0, created), (u0, created)),
        ]
    )
    sent: list = []
    run = executor(zk, context, sent)

    execution = run.execute(outcome)

    assert run.failed_writes == 1
    assert execution.missing == {T0}
    assert TopicPartition("u", 0) in zk.states and TopicPartition("t", 0) not in zk.states
    assert [[s.partition for s in request.partition_states] for request in sent] == [[u0]]


def test_a_zookeeper_failure_still_stops_the_decision(zk, context):
    def create(states, *, epoch_zk_version):
        raise ConnectionLoss()

    zk.create_partition_states = create
    outcome = Outcome(effects=[CreatePartitionState(T0, LeaderAndIsr.initial(1, (1, 2)), EPOCH, EPOCH_ZK_VERSION)])

    with pytest.raises(ConnectionLoss):
        executor(zk, context, []).execute(outcome)
