"""Offsets of a group against a fake coordinator: what commits carry, how commit errors map
(CommitFailedError and friends, retried coordinator errors, timeouts), asynchronous commits and
their callbacks' order, committed offsets as starting positions (also with manual assignment),
auto-commit (its interval on a manual clock, before a rebalance and on close), and kafka-python's
`commit` and `commit_async` calls."""

from __future__ import annotations

import threading

import pytest

from services.clients.consumer import (
    CommitFailedError,
    Consumer,
    FencedInstanceIdError,
    OffsetAndMetadata,
    RebalanceInProgressError,
    RetriableCommitFailedError,
)
from services.clients.consumer.heartbeat import NO_GENERATION, MemberState
from services.clients.consumer.subscription import FetchPosition
from services.common.errors import Errors, KafkaError
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


T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def joined(cluster, clock=None, **config) -> GroupHarness:
    harness = GroupHarness(cluster, clock, client_id="c", **config) if clock else \
        GroupHarness(cluster, client_id="c", **config)
    harness.subscribe("t")
    harness.join()
    return harness


def committed_partitions(request: pb.OffsetCommitRequest) -> dict[str, tuple[int, int, str]]:
    return {f"{t.name}-{p.partition_index}": (p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
            for t in request.topics for p in t.partitions}


def test_commits_carry_the_generation_member_and_leader_epoch_and_read_back(group_cluster):
    cluster = group_cluster({"t": 2})
    harness = joined(cluster, group_instance_id="i-1")
    try:
        harness.subscriptions.seek_validated(T0, FetchPosition(42, 3))
        harness.coordinator.commit_sync(None, 5000)  # every consumed position
        (request,) = cluster.groups.requests("OffsetCommit")
        member_id = harness.coordinator.group_metadata().member_id
        assert member_id.startswith("i-1-")  # a static member's id starts with its group.instance.id
        assert (request.group_id, request.generation_id, request.member_id, request.group_instance_id) == (
            "g", 1, member_id, "i-1")
        assert committed_partitions(request) == {"t-0": (42, 3, "")}
        harness.coordinator.commit_sync({T1: OffsetAndMetadata(7, "note")}, 5000)
        assert harness.coordinator.committed([T0, T1], 5000) == {
            T0: OffsetAndMetadata(42, "", 3), T1: OffsetAndMetadata(7, "note", None)}
    finally:
        harness.close()


@pytest.mark.parametrize("error, raised, resets", [
    ("ILLEGAL_GENERATION", CommitFailedError, True),
    ("UNKNOWN_MEMBER_ID", CommitFailedError, True),
    ("REBALANCE_IN_PROGRESS", RebalanceInProgressError, False),
    ("FENCED_INSTANCE_ID", FencedInstanceIdError, False),
])
def test_membership_errors_fail_the_commit(group_cluster, error, raised, resets):
    cluster = group_cluster({"t": 1})
    harness = joined(cluster)
    try:
        cluster.groups.fail("OffsetCommit", Errors[error])
        with pytest.raises(raised) as failure:
            harness.coordinator.commit_sync({T0: OffsetAndMetadata(1)}, 5000)
        assert failure.value.error_name == error
        if raised is CommitFailedError:
            assert "max.poll.interval.ms" in str(failure.value)
        assert len(cluster.groups.requests("OffsetCommit")) == 1  # not retried
        assert (harness.membership.snapshot()[0] == NO_GENERATION) is resets
        assert harness.coordinator.rejoin_needed_or_pending() is (error != "FENCED_INSTANCE_ID")
    finally:
        harness.close()


def test_a_partition_error_fails_the_commit_as_itself(group_cluster):
    cluster = group_cluster({"t": 1})
    harness = joined(cluster)
    try:
        response = pb.OffsetCommitResponse()
        response.topics.add(name="t").partitions.add(partition_index=0,
                                                     error_code=Errors.OFFSET_METADATA_TOO_LARGE)
        cluster.groups.script("OffsetCommit", lambda _request: response)
        with pytest.raises(KafkaError) as failure:
            harness.coordinator.commit_sync({T0: OffsetAndMetadata(1, "x" * 5000)}, 5000)
        assert failure.value.error_name == "OFFSET_METADATA_TOO_LARGE"
        assert not isinstance(failure.value, CommitFailedError)
    finally:
        harness.close()


@pytest.mark.parametrize("error", ["NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS"])
def test_coordinator_errors_are_retried(group_cluster, clock, error):
    cluster = group_cluster({"t": 1})
    harness = joined(cluster, clock)
    try:
        lookups = len(cluster.broker.requests("FindCoordinator"))
        cluster.groups.fail("OffsetCommit", Errors[error], Errors[error])
        harness.coordinator.commit_sync({T0: OffsetAndMetadata(5)}, 5000)
        assert len(cluster.groups.requests("OffsetCommit")) == 3
        assert cluster.groups.committed(T0) == 5
        found_again = len(cluster.broker.requests("FindCoordinator")) - lookups
        assert found_again == (0 if error == "COORDINATOR_LOAD_IN_PROGRESS" else 2)
    finally:
        harness.close()


def test_a_commit_that_keeps_failing_times_out(group_cluster, clock):
    cluster = group_cluster({"t": 1})
    harness = joined(cluster, clock)
    try:
        cluster.groups.fail("OffsetCommit", *[Errors.COORDINATOR_LOAD_IN_PROGRESS] * 100)
        with pytest.raises(KafkaError, match="expired before successfully committing") as failure:
            harness.coordinator.commit_sync({T0: OffsetAndMetadata(5)}, 55)
        assert failure.value.error_name == "REQUEST_TIMED_OUT"
        assert 5 <= len(cluster.groups.requests("OffsetCommit")) <= 7  # one try per 10 ms back-off
    finally:
        harness.close()


def test_a_member_out_of_the_group_cannot_commit(group_cluster):
    cluster = group_cluster({"t": 1})
    harness = joined(cluster)
    try:
        harness.membership.reset_state_and_rejoin("dropped by the test")
        with pytest.raises(CommitFailedError, match="not an active member"):
            harness.coordinator.commit_sync({T0: OffsetAndMetadata(5)}, 5000)
        with harness.membership.lock:
            harness.membership.state = MemberState.PREPARING_REBALANCE
        with pytest.raises(RebalanceInProgressError):
            harness.coordinator.commit_sync({T0: OffsetAndMetadata(5)}, 5000)
        assert cluster.groups.requests("OffsetCommit") == []
    finally:
        harness.close()


def test_async_commit_callbacks_run_later_and_in_commit_order(group_cluster):
    cluster = group_cluster({"t": 2})
    harness = joined(cluster)
    release = threading.Event()
    groups = cluster.groups

    def slow_first(request):
        if request.topics[0].partitions[0].committed_offset == 1:
            release.wait(10)
        return groups.answer("OffsetCommit", request)

    groups.script("OffsetCommit", slow_first)
    done = []
    callback = lambda offsets, error: done.append((dict(offsets), error))  # noqa: E731
    try:
        first = harness.coordinator.commit_offsets_async({T0: OffsetAndMetadata(1)}, callback)
        second = harness.coordinator.commit_offsets_async({T1: OffsetAndMetadata(2)}, callback)
        wait_until(lambda: harness.requests.poll(10) is not None and second.done(), 5, 0)
        harness.coordinator.invoke_completed_offset_commit_callbacks()
        assert done == []  # the second finished first, but waits for the first
        release.set()
        wait_until(lambda: harness.requests.poll(10) is not None and first.done(), 5, 0)
        harness.coordinator.invoke_completed_offset_commit_callbacks()
        assert done == [({T0: OffsetAndMetadata(1)}, None), ({T1: OffsetAndMetadata(2)}, None)]
        groups.scripted.clear()
        groups.fail("OffsetCommit", Errors.COORDINATOR_LOAD_IN_PROGRESS)
        third = harness.coordinator.commit_offsets_async({T0: OffsetAndMetadata(3)}, callback)
        wait_until(lambda: harness.requests.poll(10) is not None and third.done(), 5, 0)
        harness.join()  # a poll runs completed callbacks
        assert isinstance(done[2][1], RetriableCommitFailedError)
        assert done[2][1].error_name == "COORDINATOR_LOAD_IN_PROGRESS" and done[2][1].retriable
        assert len(groups.requests("OffsetCommit")) == 3  # asynchronous commits are not retried
    finally:
        release.set()
        harness.close()


def test_auto_commit_runs_every_interval_from_poll(group_cluster, clock):
    cluster = group_cluster({"t": 1})
    harness = joined(cluster, clock, auto_commit_interval_ms=5000)
    try:
        harness.subscriptions.seek_validated(T0, FetchPosition(11, 2))
        clock.advance(4999)
        harness.join()  # a poll
        assert cluster.groups.requests("OffsetCommit") == []
        clock.advance(1)
        harness.join()
        (commit,) = wait_until(lambda: cluster.groups.requests("OffsetCommit"), 5, 0.001)
        assert committed_partitions(commit) == {"t-0": (11, 2, "")}
        clock.advance(4999)
        harness.join()
        assert len(cluster.groups.requests("OffsetCommit")) == 1
    finally:
        harness.close()


def test_auto_commit_is_off_without_being_enabled(group_cluster, clock):
    cluster = group_cluster({"t": 1})
    harness = joined(cluster, clock, enable_auto_commit=False)
    try:
        harness.subscriptions.seek_validated(T0, FetchPosition(11))
        clock.advance(60000)
        harness.join()
        assert cluster.groups.requests("OffsetCommit") == []
    finally:
        harness.close()


def test_positions_are_committed_before_the_partitions_are_revoked_for_a_rebalance(group_cluster, clock):
    cluster = group_cluster({"t": 1})
    harness = GroupHarness(cluster, clock, client_id="c")
    try:
        harness.subscribe("t", listener=RecordingListener(cluster.groups.events))
        harness.join()
        member_id = harness.coordinator.group_metadata().member_id
        harness.subscriptions.seek_validated(T0, FetchPosition(8))
        cluster.groups.start_rebalance()
        clock.advance(3000)
        harness.heartbeat_round()
        harness.join()
        story = [e for e in cluster.groups.events if e[0] in ("OffsetCommit", "revoked", "JoinGroup")]
        assert story[-3:] == [("OffsetCommit", member_id), ("revoked", ["t-0"]), ("JoinGroup", member_id)]
        assert cluster.groups.requests("OffsetCommit")[0].generation_id == 1
        assert cluster.groups.committed(T0) == 8
    finally:
        harness.close()


def test_a_joined_member_starts_from_the_committed_offsets(group_cluster):
    cluster = group_cluster({"t": 2})
    cluster.groups.seed_offset(T0, 4)
    with Consumer(bootstrap_servers=cluster.bootstrap, group_id="g", auto_offset_reset="latest", **FAST) as consumer:
        consumer.subscribe(["t"])
        wait_until(lambda: consumer.poll(20) is not None and consumer.assignment(), 10, 0)
        assert consumer.position(T0) == 4
        assert consumer.position(T1) == 0  # no committed offset: auto.offset.reset (latest, empty log)
        assert cluster.groups.requests("OffsetFetch")[0].group_id == "g"


def test_close_commits_revokes_and_leaves(group_cluster):
    cluster = group_cluster({"t": 1})
    consumer = Consumer(bootstrap_servers=cluster.bootstrap, group_id="g", client_id="c", **FAST)
    try:
        consumer.subscribe(["t"], listener=RecordingListener(cluster.groups.events))
        wait_until(lambda: consumer.poll(20) is not None and consumer.assignment(), 10, 0)
        consumer.seek(T0, 3)
    finally:
        consumer.close()
    story = [e for e in cluster.groups.events if e[0] in ("OffsetCommit", "revoked", "LeaveGroup")]
    member_id = cluster.groups.requests("OffsetCommit")[0].member_id
    assert member_id.startswith("c-")
    assert story == [("OffsetCommit", member_id), ("revoked", ["t-0"]), ("LeaveGroup", None)]
    assert cluster.groups.committed(T0) == 3


def test_a_static_member_does_not_leave_on_close(group_cluster):
    cluster = group_cluster({"t": 1})
    with Consumer(bootstrap_servers=cluster.bootstrap, group_id="g", group_instance_id="i-1", **FAST) as consumer:
        consumer.subscribe(["t"])
        wait_until(lambda: consumer.poll(20) is not None and consumer.assignment(), 10, 0)
        assert cluster.groups.requests("JoinGroup")[0].group_instance_id == "i-1"
        assert cluster.groups.requests("SyncGroup")[0].group_instance_id == "i-1"
    assert cluster.groups.requests("LeaveGroup") == []


def test_manual_assignment_commits_outside_the_membership(group_cluster):
    cluster = group_cluster({"t": 2})
    cluster.groups.seed_offset(T0, 5)
    with Consumer(bootstrap_servers=cluster.bootstrap, group_id="g", **FAST) as consumer:
        consumer.assign([T0])
        assert consumer.position(T0) == 5  # from the committed offset
        consumer.commit_sync({T0: OffsetAndMetadata(9, "m")})
        consumer.commit_sync({T1: 2})
        request = cluster.groups.requests("OffsetCommit")[0]
        assert (request.generation_id, request.member_id, request.HasField("group_instance_id")) == (-1, "", False)
        assert consumer.committed([T0, T1, ("t", 5)]) == {
            T0: OffsetAndMetadata(9, "m"), T1: OffsetAndMetadata(2), TopicPartition("t", 5): None}
        results = []
        consumer.commit_async(callback=lambda offsets, error: results.append((offsets, error)))
        wait_until(lambda: consumer.poll(20) is not None and results, 10, 0)
        assert results == [({T0: OffsetAndMetadata(5)}, None)]
        with pytest.raises(ValueError, match="negative offset"):
            consumer.commit_sync({T0: -1})
    assert cluster.groups.requests("JoinGroup") == []


def test_kafka_pythons_commit_is_commit_sync_and_its_commit_async_call_works(group_cluster):
    cluster = group_cluster({"t": 2})
    with Consumer(bootstrap_servers=cluster.bootstrap, group_id="g", **FAST) as consumer:
        consumer.assign([T0, T1])
        consumer.seek(T0, 4)
        consumer.commit({T1: OffsetAndMetadata(6, "m")}, 5000)
        consumer.commit()  # every consumed position: T0's
        assert consumer.committed([T0, T1]) == {T0: OffsetAndMetadata(4), T1: OffsetAndMetadata(6, "m")}
        consumer.commit(offsets={T0: 5}, timeout_ms=5000)
        assert consumer.committed([T0]) == {T0: OffsetAndMetadata(5)}
        with pytest.raises(ValueError, match="negative offset"):
            consumer.commit({T0: -1})
        results = []
        consumer.commit_async({T1: OffsetAndMetadata(9)}, lambda offsets, error: results.append((offsets, error)))
        wait_until(lambda: consumer.poll(20) is not None and results, 10, 0)
        assert results == [({T1: OffsetAndMetadata(9)}, None)]
        assert len(cluster.groups.requests("OffsetCommit")) == 4
