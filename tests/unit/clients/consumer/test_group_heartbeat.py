"""The heartbeat: its timers, and the heartbeat thread's rounds driven by hand with a manual
clock against a fake coordinator: rebalance and membership errors make the next poll rejoin
(losing the partitions when the generation was reset), coordinator errors and session expiry
make it look the coordinator up again, and exceeding max.poll.interval.ms leaves the group
(static members only stop)."""

from __future__ import annotations

import pytest

from services.clients.consumer import FencedInstanceIdError
from services.clients.consumer.heartbeat import NO_GENERATION, Heartbeat, MemberState
from services.common.errors import Errors
from services.common.topic_partition import TopicPartition
from services.devcluster.proc import wait_until
from tests.unit.clients.consumer.test_group_fakes import (
    GroupHarness,
    RecordingListener,
    group_clusters,
)


@pytest.fixture
def group_cluster(fake_nodes):
    yield from group_clusters(fake_nodes)


T0 = TopicPartition("t", 0)


def test_heartbeat_timers():
    heartbeat = Heartbeat(session_timeout_ms=100, heartbeat_interval_ms=30, max_poll_interval_ms=500,
                          retry_backoff_ms=5, now_ms=0)
    heartbeat.reset_timeouts(0)
    assert not heartbeat.should_heartbeat(29) and heartbeat.should_heartbeat(30)
    heartbeat.sent_heartbeat(30)
    assert heartbeat.in_flight and heartbeat.time_to_next_heartbeat(40) == 20
    heartbeat.fail_heartbeat(40)
    assert not heartbeat.in_flight and heartbeat.time_to_next_heartbeat(40) == 5  # retry after the back-off
    assert heartbeat.session_timeout_expired(100)
    heartbeat.receive_heartbeat(90)
    assert not heartbeat.session_timeout_expired(189) and heartbeat.session_timeout_expired(190)
    assert not heartbeat.poll_timeout_expired(499) and heartbeat.poll_timeout_expired(500)
    heartbeat.poll(450)
    assert not heartbeat.poll_timeout_expired(949) and heartbeat.last_poll_ms == 450


def joined(cluster, clock, **config) -> tuple[GroupHarness, RecordingListener]:
    harness = GroupHarness(cluster, clock, client_id="c", **config)
    listener = RecordingListener()
    harness.subscribe("t", listener=listener)
    harness.join()
    return harness, listener


def test_heartbeats_carry_the_generation_and_keep_the_session(group_cluster, clock):
    cluster = group_cluster({"t": 1})
    harness, _listener = joined(cluster, clock, group_instance_id="i-1")
    try:
        assert harness.coordinator.heartbeat_thread.enabled
        harness.heartbeat_round()
        assert cluster.groups.requests("Heartbeat") == []  # not due before heartbeat.interval.ms
        clock.advance(3000)
        harness.heartbeat_round()
        (sent,) = cluster.groups.requests("Heartbeat")
        member_id = harness.coordinator.group_metadata().member_id
        assert (sent.group_id, sent.generation_id, sent.member_id, sent.group_instance_id) == ("g", 1, member_id, "i-1")
        clock.advance(9000)  # 12 s after joining, but 9 s after the answered heartbeat
        assert not harness.membership.heartbeat.session_timeout_expired(clock.monotonic_ms())
    finally:
        harness.close()


def test_an_unknown_member_loses_its_partitions_and_joins_again_as_a_new_member(group_cluster, clock):
    cluster = group_cluster({"t": 1})
    harness, listener = joined(cluster, clock)
    try:
        first_id = harness.coordinator.group_metadata().member_id
        cluster.groups.expire_session(first_id)
        clock.advance(3000)
        harness.heartbeat_round()
        assert harness.membership.snapshot() == (NO_GENERATION, MemberState.UNJOINED)
        assert harness.coordinator.rejoin_needed_or_pending()
        assert not harness.coordinator.heartbeat_thread.run_once() and not harness.coordinator.heartbeat_thread.enabled
        harness.join()
        assert listener.events == [("assigned", ["t-0"]), ("lost", ["t-0"]), ("assigned", ["t-0"])]
        again = [j.member_id for j in cluster.groups.requests("JoinGroup")][2:]
        assert again[0] == "" and again[1].startswith("c-") and again[1] != first_id
    finally:
        harness.close()


def test_an_illegal_generation_resets_the_generation_too(group_cluster, clock):
    cluster = group_cluster({"t": 1})
    harness, listener = joined(cluster, clock)
    try:
        old_id = harness.coordinator.group_metadata().member_id
        cluster.groups.fail("Heartbeat", Errors.ILLEGAL_GENERATION)
        clock.advance(3000)
        harness.heartbeat_round()
        assert harness.membership.snapshot() == (NO_GENERATION, MemberState.UNJOINED)
        cluster.groups.expire_session(old_id)  # the old member id is not coming back
        harness.join()
        assert listener.events[1] == ("lost", ["t-0"])
    finally:
        harness.close()


def test_a_fenced_static_member_raises_from_the_next_poll(group_cluster, clock):
    cluster = group_cluster({"t": 1})
    harness, _listener = joined(cluster, clock, group_instance_id="i-1")
    try:
        cluster.groups.fail("Heartbeat", Errors.FENCED_INSTANCE_ID)
        clock.advance(3000)
        harness.heartbeat_round()
        assert harness.membership.snapshot()[0] == NO_GENERATION
        with pytest.raises(FencedInstanceIdError):
            harness.join()
    finally:
        harness.close()


@pytest.mark.parametrize("error", ["NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"])
def test_coordinator_errors_make_the_heartbeat_thread_find_the_coordinator_again(group_cluster, clock, error):
    cluster = group_cluster({"t": 1})
    harness, _listener = joined(cluster, clock)
    try:
        lookups = len(cluster.broker.requests("FindCoordinator"))
        cluster.groups.fail("Heartbeat", Errors[error])
        clock.advance(3000)
        harness.heartbeat_round()
        assert harness.coordinator.coordinator_unknown()
        assert harness.membership.state is MemberState.STABLE  # still a member
        harness.heartbeat_round()  # looks the coordinator up
        assert not harness.coordinator.coordinator_unknown()
        assert len(cluster.broker.requests("FindCoordinator")) == lookups + 1
        clock.advance(10)
        harness.heartbeat_round()  # after retry.backoff.ms, heartbeats go out again
        assert len(cluster.groups.requests("Heartbeat")) == 2
    finally:
        harness.close()


def test_an_expired_session_forgets_the_coordinator(group_cluster, clock):
    cluster = group_cluster({"t": 1})
    harness, _listener = joined(cluster, clock)
    try:
        clock.advance(10000)
        harness.coordinator.heartbeat_thread.run_once()
        assert harness.coordinator.coordinator_unknown()
    finally:
        harness.close()


def test_a_dynamic_member_that_stops_polling_leaves_the_group_and_rejoins_at_the_next_poll(group_cluster, clock):
    cluster = group_cluster({"t": 1})
    harness, listener = joined(cluster, clock, max_poll_interval_ms=5000)
    try:
        clock.advance(3000)
        harness.heartbeat_round()
        clock.advance(2000)  # 5 s without a poll
        harness.heartbeat_round()
        (leave,) = wait_until(lambda: cluster.groups.requests("LeaveGroup"), 5, 0.001)
        assert [m.member_id for m in leave.members] == [cluster.groups.requests("JoinGroup")[1].member_id]
        assert harness.membership.snapshot() == (NO_GENERATION, MemberState.UNJOINED)
        harness.join()
        assert listener.events == [("assigned", ["t-0"]), ("lost", ["t-0"]), ("assigned", ["t-0"])]
    finally:
        harness.close()


def test_a_static_member_that_stops_polling_sends_no_leave_group(group_cluster, clock):
    cluster = group_cluster({"t": 1})
    harness, _listener = joined(cluster, clock, max_poll_interval_ms=5000, group_instance_id="i-1")
    try:
        clock.advance(3000)
        harness.heartbeat_round()
        clock.advance(2000)
        harness.heartbeat_round()
        assert harness.membership.state is MemberState.UNJOINED
        assert cluster.groups.requests("LeaveGroup") == []
        harness.join()  # rejoins under the same group.instance.id
        assert cluster.groups.requests("JoinGroup")[-1].group_instance_id == "i-1"
    finally:
        harness.close()


def test_polling_keeps_the_member_in_the_group(group_cluster, clock):
    cluster = group_cluster({"t": 1})
    harness, _listener = joined(cluster, clock, max_poll_interval_ms=5000)
    try:
        for _ in range(4):
            clock.advance(3000)
            harness.join()  # a poll: resets the poll timer
            harness.heartbeat_round()
        assert cluster.groups.requests("LeaveGroup") == []
        assert harness.membership.state is MemberState.STABLE
    finally:
        harness.close()
