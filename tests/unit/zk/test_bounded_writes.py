"""Writes that grow with partitions go to ZooKeeper in bounded multis: the packing itself, the
partition states of a new topic and a topic's deletion (sizes measured with kazoo's own jute
encoding, order, fencing, and a successor finishing what a controller that died between multis
left), ISR change notifications, and requests that can never fit being refused unsent."""

from __future__ import annotations

import pytest
from kazoo.exceptions import ConnectionLoss

from services.common.errors import Errors
from services.common.topic_partition import TopicPartition
from services.common.zk import (
    ControllerMovedError,
    OdradekZkClient,
    PartitionStateZnode,
    TopicAssignment,
    Versioned,
    admin,
    bounded,
    isr_change,
    partition_state,
    topics,
)
from services.common.zk.bounded import MULTI_MAX_BYTES, MULTI_MAX_OPS, Group, ZkRequestTooLargeError, pack
from tests.unit.zk.fake_kazoo import FakeKazoo

TOPIC = "wide"
PARTITIONS = 4000


def assignment(count: int = PARTITIONS, topic: str = TOPIC) -> TopicAssignment:
    return TopicAssignment.of(topic, {p: [(p + i) % 3 + 1 for i in range(3)] for p in range(count)})


def states(count: int = PARTITIONS, controller_epoch: int = 1) -> dict[TopicPartition, PartitionStateZnode]:
    return {
        TopicPartition(TOPIC, p): PartitionStateZnode(p % 3 + 1, 0, (1, 2, 3), controller_epoch) for p in range(count)
    }


@pytest.fixture
def kazoo() -> FakeKazoo:
    fake = FakeKazoo()
    fake.ensure_path("/brokers/topics")
    fake.ensure_path("/config/topics")
    fake.ensure_path("/admin/delete_topics")
    fake.create("/controller_epoch", b"1")
    return fake


@pytest.fixture
def zk(kazoo: FakeKazoo) -> OdradekZkClient:
    client = OdradekZkClient(kazoo)
    client.create_topic(assignment())
    kazoo.committed.clear()
    return client


def elect_successor(kazoo: FakeKazoo) -> int:
    """Another controller is elected: `/controller_epoch` moves on; its new zk version."""
    data, version = kazoo.nodes["/controller_epoch"]
    kazoo.nodes["/controller_epoch"] = (str(int(data) + 1).encode(), version + 1)
    return version + 1


def state_paths(kazoo: FakeKazoo) -> set[str]:
    return {p for p in kazoo.nodes if p.endswith("/state")}


def assert_bounded(kazoo: FakeKazoo) -> None:
    assert kazoo.committed
    for ops, size_bytes in kazoo.committed:
        assert ops <= MULTI_MAX_OPS
        assert size_bytes <= MULTI_MAX_BYTES


# --- packing ---------------------------------------------------------------------------------


def test_pack_keeps_order_and_groups_and_respects_both_bounds():
    groups = [Group(i, 2, 1000) for i in range(1000)]

    chunks = pack(groups, reserved_ops=1, reserved_bytes=100, max_ops=101, max_bytes=30_000)

    assert [i for chunk in chunks for i in chunk] == list(range(1000))
    for chunk in chunks:
        assert 1 + 2 * len(chunk) <= 101
        assert bounded.REQUEST_OVERHEAD_BYTES + 100 + 1000 * len(chunk) <= 30_000
    assert len(chunks[0]) == 29  # the byte bound binds before the op bound (50 groups)


def test_pack_gives_a_group_larger_than_a_multi_a_chunk_of_its_own():
    chunks = pack([Group("a", 1, 10), Group("huge", 1, 10_000), Group("b", 1, 10)], max_bytes=1_000)

    assert chunks == [["a"], ["huge"], ["b"]]
    assert pack([]) == []


def test_op_bytes_bounds_kazoo_s_encoding_from_above(kazoo):
    tx = OdradekZkClient(kazoo).fenced(0)
    path = partition_state.partition_state_path(TopicPartition(TOPIC, 3999))
    data = partition_state.encode_partition_state(PartitionStateZnode(1, 0, (1, 2, 3), 1))
    kazoo.ensure_path(partition_state.partition_path(TopicPartition(TOPIC, 3999)))
    tx.create(path, data).commit()

    ((_, encoded_bytes),) = kazoo.committed
    assert encoded_bytes <= tx.size_bytes


# --- partition states of a new topic ---------------------------------------------------------


def test_the_states_of_4000_partitions_go_in_bounded_fenced_multis_in_partition_order(kazoo, zk):
    result = zk.create_partition_states(states(), epoch_zk_version=0)

    assert sorted(result.updated) == sorted(states()) and not result.retry and not result.failed
    assert len(state_paths(kazoo)) == PARTITIONS
    assert len(kazoo.committed) > 1
    assert_bounded(kazoo)


def test_a_successor_creates_only_the_states_a_controller_that_died_between_multis_left_out(kazoo, zk):
    kazoo.die_after_commits = 2
    with pytest.raises(ConnectionLoss):
        zk.create_partition_states(states(controller_epoch=1), epoch_zk_version=0)
    written = {int(p.split("/")[-2]) for p in state_paths(kazoo)}
    assert 0 < len(written) < PARTITIONS
    assert written == set(range(len(written)))  # a prefix, in partition order

    kazoo.die_after_commits = None
    successor = elect_successor(kazoo)
    result = zk.create_partition_states(states(controller_epoch=2), epoch_zk_version=successor)

    assert sorted(result.retry) == [TopicPartition(TOPIC, p) for p in sorted(written)]
    assert len(result.updated) == PARTITIONS - len(written) and not result.failed
    assert len(state_paths(kazoo)) == PARTITIONS
    first = zk.get_partition_state(TopicPartition(TOPIC, 0))
    last = zk.get_partition_state(TopicPartition(TOPIC, PARTITIONS - 1))
    assert (first.value.controller_epoch, last.value.controller_epoch) == (1, 2)  # kept, created
    assert_bounded(kazoo)


def test_a_deposed_controller_writes_no_partition_state(kazoo, zk):
    elect_successor(kazoo)

    with pytest.raises(ControllerMovedError):
        zk.create_partition_states(states(), epoch_zk_version=0)
    assert not state_paths(kazoo)


def test_states_of_a_topic_that_is_gone_fail_without_stopping_the_others(kazoo, zk):
    other = {TopicPartition("gone", 0): PartitionStateZnode(1, 0, (1,), 1)}

    result = zk.create_partition_states({**states(10), **other}, epoch_zk_version=0)

    assert list(result.failed) == [TopicPartition("gone", 0)]
    assert len(result.updated) == 10


@pytest.mark.parametrize("stale_count", [1, 3, 200])
def test_4000_leader_and_isr_writes_go_in_bounded_multis_and_only_stale_ones_fail(kazoo, zk, stale_count):
    zk.create_partition_states(states(), epoch_zk_version=0)
    stale = [TopicPartition(TOPIC, p) for p in range(7, PARTITIONS, PARTITIONS // stale_count)][:stale_count]
    for tp in stale:  # a leader rewrote these since
        kazoo.nodes[partition_state.partition_state_path(tp)] = (b"{}", 7)
    kazoo.committed.clear()
    elected = PartitionStateZnode(2, 1, (2, 3), 1)

    result = zk.set_partition_states({tp: Versioned(elected, 0) for tp in states()}, epoch_zk_version=0)

    assert sorted(result.retry) == stale and not result.failed
    assert len(result.updated) == PARTITIONS - stale_count and set(result.updated.values()) == {1}
    assert zk.get_partition_state(TopicPartition(TOPIC, 0)).value == elected
    assert_bounded(kazoo)
    if stale_count <= 3:  # multis, not a transaction per partition
        assert len(kazoo.committed) < 20
    with pytest.raises(ControllerMovedError):
        zk.set_partition_states({stale[0]: Versioned(elected, 7)}, epoch_zk_version=elect_successor(kazoo) - 1)


# --- topic deletion --------------------------------------------------------------------------


def test_a_topic_of_4000_partitions_is_deleted_in_bounded_multis_assignment_last(kazoo, zk):
    zk.create_partition_states(states(), epoch_zk_version=0)
    zk.request_topic_deletion(TOPIC)
    kazoo.committed.clear()

    zk.delete_topic(TOPIC, epoch_zk_version=0)

    assert not [p for p in kazoo.nodes if p.startswith(topics.topic_path(TOPIC))]
    assert kazoo.exists(admin.delete_topic_path(TOPIC)) is None
    assert kazoo.exists("/config/topics/wide") is None
    assert len(kazoo.committed) > 1
    assert_bounded(kazoo)


def test_a_successor_finishes_a_deletion_its_predecessor_left_half_done(kazoo, zk):
    zk.create_partition_states(states(), epoch_zk_version=0)
    zk.request_topic_deletion(TOPIC)
    kazoo.committed.clear()
    kazoo.die_after_commits = 2

    with pytest.raises(ConnectionLoss):
        zk.delete_topic(TOPIC, epoch_zk_version=0)
    assert 0 < len(state_paths(kazoo)) < PARTITIONS
    assert zk.get_topic_assignment(TOPIC) is not None  # the successor sees the topic ...
    assert zk.get_topic_deletions() == [TOPIC]  # ... and that it is being deleted

    kazoo.die_after_commits = None
    zk.delete_topic(TOPIC, epoch_zk_version=elect_successor(kazoo))

    assert zk.get_all_topics() == [] and zk.get_topic_deletions() == []
    assert not [p for p in kazoo.nodes if p.startswith(topics.topic_path(TOPIC))]


# --- single znodes and guards ----------------------------------------------------------------


def test_a_topic_whose_assignment_cannot_fit_a_znode_is_refused_before_anything_is_written(kazoo):
    zk = OdradekZkClient(kazoo)

    with pytest.raises(ZkRequestTooLargeError) as refused:
        zk.create_topic(assignment(60_000, "too-wide"))
    assert refused.value.code == Errors.INVALID_REQUEST
    assert "60000 partitions" in str(refused.value)
    assert zk.get_all_topics() == [] and not kazoo.committed


def test_a_transaction_too_large_for_zookeeper_is_never_sent(kazoo):
    tx = OdradekZkClient(kazoo).fenced(0)
    for i in range(100):
        tx.create(f"/big-{i}", b"x" * 10_000)

    with pytest.raises(ZkRequestTooLargeError):
        tx.commit()
    assert not kazoo.committed and kazoo.exists("/big-0") is None


def test_isr_changes_of_many_partitions_are_announced_in_several_bounded_notifications(kazoo):
    zk = OdradekZkClient(kazoo)
    changed = [TopicPartition(f"topic-with-a-long-name-{t}", p) for t in range(10) for p in range(2000)]

    zk.create_isr_change_notification(changed)

    pending = zk.get_isr_change_notifications()
    assert len(pending) > 1
    sizes = [len(kazoo.nodes[isr_change.isr_change_path(s)][0]) for s in pending]
    assert max(sizes) <= MULTI_MAX_BYTES
    assert zk.get_isr_change_partitions(pending) == set(changed)


def test_a_preferred_replica_election_of_too_many_partitions_is_refused(kazoo):
    zk = OdradekZkClient(kazoo)
    many = [TopicPartition(f"topic-with-a-long-name-{t}", p) for t in range(10) for p in range(2000)]

    with pytest.raises(ZkRequestTooLargeError):
        zk.request_preferred_replica_election(many)
    assert zk.get_preferred_replica_election() is None


def test_a_state_znode_that_does_not_decode_is_left_out_of_a_batch_read(kazoo, zk):
    zk.create_partition_states(states(3), epoch_zk_version=0)
    bad = TopicPartition(TOPIC, 1)
    kazoo.nodes[partition_state.partition_state_path(bad)] = (b"not json", 3)

    found = zk.get_partition_states(states(3))

    assert sorted(found) == [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 2)]
