"""The coordinator's gRPC servicer on the shared runtime: JoinGroup, SyncGroup and commits wait
without holding a thread, and beyond `parked.max.requests` are refused at once."""

from __future__ import annotations

import threading

import pytest

from services.common.errors import Errors
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2_grpc
from services.common.zk.coordinator_directory import DirectorySnapshot
from services.coordinator.group.api import JoinGroupResult, SyncGroupResult
from services.coordinator.servicer import CoordinatorServicer
from services.devcluster.proc import wait_until
from tests.unit.runtime_support import Parked, serving

LIMIT = 3
ANSWERS = {"join": JoinGroupResult(0, generation_id=1, leader_id="m", member_id="m"),
           "sync": SyncGroupResult(0, assignment=b"a"), "commit": 0, "marker": 0,
           "delete-offsets": 0}


class ParkingGroups(Parked):
    """Holds every JoinGroup, SyncGroup and commit until the test answers it."""

    def handle_join_group(self, *args) -> None:
        self.hold("join", args[-1])

    def handle_sync_group(self, *args) -> None:
        self.hold("sync", args[-1])

    def handle_commit_offsets(self, group_id, member_id, instance_id, generation_id, offsets, callback) -> None:
        self.hold("commit", lambda code: callback({tp: code for tp in offsets}))

    def handle_txn_commit_offsets(self, group_id, producer_id, producer_epoch, member_id, instance_id, generation_id,
                                  offsets, callback) -> None:  # fmt: skip
        self.txn_commits.append((group_id, producer_id, producer_epoch, member_id, generation_id, dict(offsets)))
        self.hold("commit", lambda code: callback({tp: code for tp in offsets}))

    def handle_write_txn_marker(self, partitions, producer_id, producer_epoch, commit, coordinator_epoch,
                                callback) -> None:  # fmt: skip
        self.markers.append((list(partitions), producer_id, producer_epoch, commit, coordinator_epoch))
        self.hold("marker", lambda code: callback(dict.fromkeys(partitions, code)))

    def handle_delete_offsets(self, group_id, partitions, callback) -> None:
        subscribed = {tp: Errors.GROUP_SUBSCRIBED_TO_TOPIC if tp.topic == "t" else Errors.NONE for tp in partitions}
        self.hold("delete-offsets", lambda code: callback((code, subscribed)))

    def handle_heartbeat(self, *args) -> int:
        return 0

    def answer(self) -> None:
        self.answer_all(ANSWERS.get)


@pytest.fixture
def coordinator():
    groups = ParkingGroups()
    groups.txn_commits, groups.markers = [], []
    servicer = CoordinatorServicer(groups, DirectorySnapshot, parked_max_requests=LIMIT)
    with serving(coordinator_pb2_grpc.add_CoordinatorServiceServicer_to_server, servicer) as channel:
        yield groups, coordinator_pb2_grpc.CoordinatorServiceStub(channel)


def join_request() -> pb.JoinGroupRequest:
    return pb.JoinGroupRequest(group_id="g", member_id="", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                               protocol_type="consumer")


def commit_request() -> pb.OffsetCommitRequest:
    request = pb.OffsetCommitRequest(group_id="g", member_id="m", generation_id=1)
    request.topics.add(name="t").partitions.add(partition_index=0, committed_offset=5)
    return request


def test_waiting_calls_hold_no_thread_and_complete_from_another_thread(coordinator):
    groups, stub = coordinator
    join = stub.JoinGroup.future(join_request(), timeout=30)
    sync = stub.SyncGroup.future(pb.SyncGroupRequest(group_id="g", member_id="m", generation_id=1), timeout=30)
    commit = stub.OffsetCommit.future(commit_request(), timeout=30)
    wait_until(lambda: len(groups) == LIMIT, 10, 0.01, message="the calls to wait")
    # the executor has one thread; a call that runs there is still answered
    assert stub.Heartbeat(pb.HeartbeatRequest(group_id="g", member_id="m"), timeout=10).error_code == 0
    threading.Thread(target=groups.answer).start()
    assert join.result(timeout=10).generation_id == 1
    assert sync.result(timeout=10).assignment == b"a"
    assert commit.result(timeout=10).topics[0].partitions[0].error_code == 0


def test_waiting_calls_beyond_the_limit_are_refused_at_once(coordinator):
    groups, stub = coordinator
    parked = [stub.JoinGroup.future(join_request(), timeout=30) for _ in range(LIMIT)]
    wait_until(lambda: len(groups) == LIMIT, 10, 0.01, message="the joins to wait")
    refused = stub.JoinGroup(join_request(), timeout=10)
    assert refused.error_code == Errors.THROTTLING_QUOTA_EXCEEDED and "parked.max.requests=3" in refused.error_message
    assert stub.SyncGroup(pb.SyncGroupRequest(group_id="g"), timeout=10).error_code == Errors.THROTTLING_QUOTA_EXCEEDED
    committed = stub.OffsetCommit(commit_request(), timeout=10).topics[0].partitions[0]
    assert committed.error_code == Errors.THROTTLING_QUOTA_EXCEEDED
    groups.answer()
    assert [f.result(timeout=10).error_code for f in parked] == [0] * LIMIT
    admitted = stub.OffsetCommit.future(commit_request(), timeout=30)
    wait_until(lambda: len(groups) == 1, 10, 0.01, message="a commit to wait again")
    groups.answer()
    assert admitted.result(timeout=10).topics[0].partitions[0].error_code == 0


def test_txn_offset_commit_waits_for_its_write(coordinator):
    groups, stub = coordinator
    request = pb.TxnOffsetCommitRequest(transactional_id="app", group_id="g", producer_id=42, producer_epoch=3,
                                        generation_id=-1, member_id="")
    request.topics.add(name="t").partitions.add(partition_index=1, committed_offset=8)
    future = stub.TxnOffsetCommit.future(request, timeout=30)
    wait_until(lambda: len(groups) == 1, 10, 0.01, message="the commit to wait")
    (group, producer_id, epoch, member, generation, offsets), = groups.txn_commits
    assert (group, producer_id, epoch, member, generation) == ("g", 42, 3, "", -1)
    assert [(tp.topic, tp.partition, o.offset) for tp, o in offsets.items()] == [("t", 1, 8)]
    groups.answer()
    answer = future.result(timeout=10).topics[0]
    assert (answer.name, answer.partitions[0].partition_index, answer.partitions[0].error_code) == ("t", 1, 0)


def test_markers_for_consumer_offsets_wait_for_the_coordinator_and_other_topics_are_not_coordinator(coordinator):
    groups, stub = coordinator
    request = common_pb2.WriteTxnMarkersRequest()
    marker = request.markers.add(producer_id=42, producer_epoch=3, transaction_result=True, coordinator_epoch=7)
    marker.topics.add(name="__consumer_offsets", partition_indexes=[4, 9])
    marker.topics.add(name="orders", partition_indexes=[0])
    future = stub.WriteTxnMarkers.future(request, timeout=30)
    wait_until(lambda: len(groups) == 1, 10, 0.01, message="the marker to wait")
    assert groups.markers == [([4, 9], 42, 3, True, 7)]
    groups.answer()
    (answer,) = future.result(timeout=10).markers
    codes = {(t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions}
    assert answer.producer_id == 42
    assert codes == {("__consumer_offsets", 4): 0, ("__consumer_offsets", 9): 0, ("orders", 0): Errors.NOT_COORDINATOR}


def test_commits_of_unknown_topics_or_partitions_are_refused_and_the_rest_committed():
    groups = ParkingGroups()
    groups.txn_commits, groups.markers = [], []
    servicer = CoordinatorServicer(groups, DirectorySnapshot, parked_max_requests=LIMIT,
                                   unknown_partitions=lambda tps: {tp for tp in tps if tp.topic == "gone"})
    with serving(coordinator_pb2_grpc.add_CoordinatorServiceServicer_to_server, servicer) as channel:
        stub = coordinator_pb2_grpc.CoordinatorServiceStub(channel)
        request = commit_request()
        request.topics.add(name="gone").partitions.add(partition_index=0, committed_offset=1)
        mixed = stub.OffsetCommit.future(request, timeout=30)
        wait_until(lambda: len(groups) == 1, 10, 0.01, message="the known partition's commit to wait")
        groups.answer()
        assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
                for t in mixed.result(timeout=10).topics] == [
            ("t", [(0, Errors.NONE)]), ("gone", [(0, Errors.UNKNOWN_TOPIC_OR_PARTITION)])]

        only_unknown = pb.TxnOffsetCommitRequest(transactional_id="app", group_id="g", producer_id=42,
                                                 producer_epoch=3, generation_id=-1, member_id="")
        only_unknown.topics.add(name="gone").partitions.add(partition_index=2, committed_offset=8)
        answer = stub.TxnOffsetCommit(only_unknown, timeout=10).topics[0].partitions[0]
        assert answer.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert groups.txn_commits == []  # nothing reached the group coordinator


def test_offset_delete_waits_for_its_tombstones_and_answers_by_topic(coordinator):
    groups, stub = coordinator
    request = pb.OffsetDeleteRequest(group_id="g")
    request.topics.add(name="u", partition_indexes=[1, 0])
    request.topics.add(name="t", partition_indexes=[0])
    future = stub.OffsetDelete.future(request, timeout=30)
    wait_until(lambda: len(groups) == 1, 10, 0.01, message="the delete to wait")
    groups.answer()
    answer = future.result(timeout=10)
    assert answer.error_code == Errors.NONE
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.topics] == [
        ("t", [(0, Errors.GROUP_SUBSCRIBED_TO_TOPIC)]), ("u", [(0, Errors.NONE), (1, Errors.NONE)])]
