"""Joining a group against a fake coordinator: the JoinGroup / SyncGroup loop with
MEMBER_ID_REQUIRED, the leader's range assignment, the listener's order around rebalances
(EAGER and COOPERATIVE), listener errors raised after the rebalance, two consumers sharing a
topic, and wakeup while a rebalance is pending."""

from __future__ import annotations

import threading

import pytest

from services.clients.consumer import Consumer, RebalanceCallbackError, WakeupError
from services.clients.consumer.heartbeat import MemberState
from services.clients.consumer.protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.topic_partition import TopicPartition
from services.devcluster.proc import wait_until
from tests.unit.clients.consumer.test_group_fakes import (
    FAST,
    GroupHarness,
    RecordingListener,
    group_clusters,
)


@pytest.fixture
def group_cluster(fake_nodes):
    yield from group_clusters(fake_nodes)


T0, T1, T2 = (TopicPartition("t", i) for i in range(3))


def test_a_new_member_joins_again_with_the_member_id_it_was_given_then_syncs(group_cluster):
    cluster = group_cluster({"t": 3})
    harness = GroupHarness(cluster, client_id="c")
    try:
        harness.subscribe("t")
        harness.join()
        first, second = cluster.groups.requests("JoinGroup")
        member_id = second.member_id
        assert first.member_id == "" and member_id.startswith("c-")  # client.id-<uuid>, as Kafka gives it
        assert (second.group_id, second.protocol_type, second.session_timeout_ms, second.rebalance_timeout_ms) == (
            "g", "consumer", 10000, 300000)
        assert [p.name for p in second.protocols] == ["range"]
        assert decode_subscription(second.protocols[0].metadata).topics == ["t"]
        (sync,) = cluster.groups.requests("SyncGroup")
        assert (sync.generation_id, sync.member_id, sync.protocol_name) == (1, member_id, "range")
        assert harness.coordinator.group_metadata() == ("g", 1, member_id, None)
        assert harness.subscriptions.assigned_partitions() == {T0, T1, T2}
        assert harness.membership.state is MemberState.STABLE
        assert not harness.coordinator.rejoin_needed_or_pending()
    finally:
        harness.close()


def test_the_leader_runs_the_range_assignor_over_every_members_subscription(group_cluster):
    cluster = group_cluster({"t": 5, "u": 2})
    other = Subscription(["t"], owned_partitions=[])
    cluster.groups.script("JoinGroup", lambda request: pb.JoinGroupResponse(
        generation_id=7, protocol_type="consumer", protocol_name="range", leader="a", member_id="a",
        members=[pb.JoinGroupResponse.JoinGroupResponseMember(member_id="a", metadata=request.protocols[0].metadata),
                 pb.JoinGroupResponse.JoinGroupResponseMember(member_id="b", metadata=encode_subscription(other))]))
    cluster.groups.script("SyncGroup", lambda request: pb.SyncGroupResponse(
        protocol_name="range", assignment=next(a.assignment for a in request.assignments if a.member_id == "a")))
    harness = GroupHarness(cluster)
    try:
        harness.subscribe("t", "u")
        harness.join()
        (sync,) = cluster.groups.requests("SyncGroup")
        sent = {a.member_id: set(decode_assignment(a.assignment).partitions) for a in sync.assignments}
        # range: per topic, members sorted; 5 partitions over 2 members -> 3 + 2; "u" only "a" wants
        assert sent == {"a": {TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2),
                              TopicPartition("u", 0), TopicPartition("u", 1)},
                        "b": {TopicPartition("t", 3), TopicPartition("t", 4)}}
        assert harness.subscriptions.assigned_partitions() == set(sent["a"])
        assert harness.subscriptions.metadata_topics() == {"t", "u"}
    finally:
        harness.close()


def test_eager_members_revoke_everything_before_rejoining_and_hear_of_assignments_after(group_cluster, clock):
    cluster = group_cluster({"t": 2})
    listener = RecordingListener(cluster.groups.events)
    harness = GroupHarness(cluster, clock, client_id="c")
    try:
        harness.subscribe("t", listener=listener)
        harness.join()
        cluster.groups.start_rebalance()
        clock.advance(3000)
        harness.heartbeat_round()  # REBALANCE_IN_PROGRESS: rejoin at the next poll
        assert harness.coordinator.rejoin_needed_or_pending()
        harness.join()
        story = [e for e in cluster.groups.events if e[0] in ("revoked", "assigned", "JoinGroup", "SyncGroup")]
        m = harness.coordinator.group_metadata().member_id
        assert story == [
            ("JoinGroup", ""), ("JoinGroup", m), ("SyncGroup", m), ("assigned", ["t-0", "t-1"]),
            ("revoked", ["t-0", "t-1"]), ("JoinGroup", m), ("SyncGroup", m), ("assigned", ["t-0", "t-1"])]
        assert harness.coordinator.group_metadata().generation_id == 2
    finally:
        harness.close()


def test_cooperative_members_revoke_only_what_the_new_assignment_takes_away(group_cluster, clock):
    cluster = group_cluster({"t": 2})
    listener = RecordingListener()
    harness = GroupHarness(cluster, clock, client_id="c", partition_assignment_strategy="cooperative-sticky")
    try:
        harness.subscribe("t", listener=listener)
        harness.join()
        assert listener.events == [("assigned", ["t-0", "t-1"])]
        # the next assignment keeps t-0 only: t-1 is revoked after SyncGroup, then the member rejoins
        keep_first = encode_assignment(Assignment([T0]))
        cluster.groups.script("SyncGroup", lambda request: pb.SyncGroupResponse(protocol_name="cooperative-sticky",
                                                                              assignment=keep_first))
        cluster.groups.start_rebalance()
        clock.advance(3000)
        harness.heartbeat_round()
        harness.join()
        assert listener.events[1:3] == [("revoked", ["t-1"]), ("assigned", [])]
        assert harness.subscriptions.assigned_partitions() == {T0}
        joins = cluster.groups.requests("JoinGroup")
        owned = [decode_subscription(j.protocols[0].metadata).owned_partitions for j in joins]
        assert owned[2:4] == [[T0, TopicPartition("t", 1)], [T0]]  # rejoined owning only t-0
    finally:
        harness.close()


def test_a_listener_error_is_raised_after_the_rebalance_completed(group_cluster):
    cluster = group_cluster({"t": 1})
    harness = GroupHarness(cluster)
    try:
        harness.subscribe("t", listener=RecordingListener(fail_on="assigned"))
        with pytest.raises(RebalanceCallbackError, match="on_partitions_assigned") as raised:
            harness.join()
        assert isinstance(raised.value.__cause__, RuntimeError)
        assert harness.subscriptions.assigned_partitions() == {T0}
        assert harness.membership.state is MemberState.STABLE
        assert not harness.coordinator.rejoin_needed_or_pending()
    finally:
        harness.close()


def test_two_consumers_share_a_topic_and_take_it_all_back_when_one_leaves(group_cluster):
    cluster = group_cluster({"t": 4})
    config = {**FAST, "heartbeat_interval_ms": 50, "session_timeout_ms": 6000,  # group.min.session.timeout.ms
              "auto_offset_reset": "earliest"}
    first = Consumer(bootstrap_servers=cluster.bootstrap, group_id="g", client_id="a", **config)
    second = Consumer(bootstrap_servers=cluster.bootstrap, group_id="g", client_id="b", **config)
    try:
        first.subscribe(["t"])
        wait_until(lambda: first.poll(20) is not None and len(first.assignment()) == 4, 10, 0)
        second.subscribe(["t"])
        stop = threading.Event()
        poller = threading.Thread(target=lambda: [first.poll(20) for _ in iter(stop.is_set, True)])
        poller.start()
        try:
            wait_until(lambda: second.poll(20) is not None and len(second.assignment()) == 2, 10, 0,
                       message="the second consumer to get half of the partitions")
            wait_until(lambda: cluster.groups.state() == "Stable", 10, 0.01)
        finally:
            stop.set()
            poller.join(10)
        assert first.assignment() | second.assignment() == {TopicPartition("t", i) for i in range(4)}
        assert len(first.assignment()) == 2
        assert first.group_metadata().generation_id == second.group_metadata().generation_id == 2
        leaving = second.group_metadata().member_id
        second.close()
        assert cluster.groups.requests("LeaveGroup")[0].members[0].member_id == leaving
        wait_until(lambda: first.poll(20) is not None and len(first.assignment()) == 4, 10, 0,
                   message="the remaining consumer to take every partition back")
    finally:
        first.close()
        second.close()


def test_wakeup_interrupts_a_poll_waiting_for_the_rebalance(group_cluster):
    cluster = group_cluster({"t": 1})
    groups = cluster.groups
    ghost = groups.add_member()  # it never rejoins: the rebalance waits for it
    with Consumer(bootstrap_servers=cluster.bootstrap, group_id="g", **FAST) as consumer:
        consumer.subscribe(["t"])
        timer = threading.Timer(0.3, consumer.wakeup)
        timer.start()
        with pytest.raises(WakeupError):
            consumer.poll(timeout_ms=20000)
        timer.join()
        assert consumer.assignment() == set()
        groups.leave(ghost)  # the ghost leaves; the pending join completes
        wait_until(lambda: consumer.poll(20) is not None and consumer.assignment() == {T0}, 10, 0)
        assert len(cluster.groups.requests("SyncGroup")) == 1
