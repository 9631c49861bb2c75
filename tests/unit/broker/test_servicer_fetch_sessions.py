"""Fetch sessions through the broker's gRPC Fetch: the session fields open, continue and close a
session, session errors answer the fetch as a whole, and a fetch without them is answered in full
outside any session."""

from __future__ import annotations

import pytest

from services.broker.log.config import LogConfig, LogManagerConfig
from services.broker.log.manager import LogManager
from services.broker.metadata_cache import MetadataCache
from services.broker.replica_manager import ReplicaManager
from services.broker.servicer import BrokerServicer
from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2, broker_pb2_grpc
from services.common.records import build_batch
from services.common.shared_types import PartitionStateInfo
from services.common.topic_partition import TopicPartition
from tests.unit.runtime_support import serving

PARTITIONS = 8


@pytest.fixture
def broker(tmp_path):
    logs = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "logs"),)), LogConfig())
    logs.startup()
    manager = ReplicaManager(1, logs, MetadataCache())
    manager.become_leader_or_follower(1001, 1, [
        PartitionStateInfo(TopicPartition("t", i), 1, 1, 0, (1,), 0, (1,), is_new=True) for i in range(PARTITIONS)])
    servicer = BrokerServicer(1, manager, MetadataCache(), fetch_max_bytes=1 << 20)
    try:
        with serving(broker_pb2_grpc.add_BrokerServiceServicer_to_server, servicer) as channel:
            yield manager, broker_pb2_grpc.BrokerServiceStub(channel)
    finally:
        manager.shutdown()
        logs.shutdown()


def request(partitions=range(PARTITIONS), offset=0, **session) -> broker_pb2.FetchRequest:
    fetch = broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, **session)
    if partitions:
        topic = fetch.topics.add(topic="t")
        for index in partitions:
            topic.partitions.add(partition=index, fetch_offset=offset, partition_max_bytes=1 << 20,
                                 current_leader_epoch=-1)
    return fetch


def answered(response) -> list[int]:
    return sorted(p.partition_index for topic in response.responses for p in topic.partitions)


def test_a_fetch_without_session_fields_is_answered_in_full_outside_any_session(broker):
    manager, stub = broker
    response = stub.Fetch(request(), timeout=10)
    assert response.session_id == 0 and answered(response) == list(range(PARTITIONS))
    assert manager.fetch_sessions.size == 0


def test_a_session_answers_only_what_changed_and_closes(broker):
    manager, stub = broker
    opened = stub.Fetch(request(session_id=0, session_epoch=0), timeout=10)
    assert opened.error_code == 0 and opened.session_id > 0 and answered(opened) == list(range(PARTITIONS))
    session_id = opened.session_id
    idle = stub.Fetch(request((), session_id=session_id, session_epoch=1), timeout=10)
    assert idle.error_code == 0 and idle.session_id == session_id and answered(idle) == []
    manager.append_records(1, 1000, {("t", 6): build_batch([b"v"])}, lambda results: None)
    changed = stub.Fetch(request((), session_id=session_id, session_epoch=2), timeout=10)
    assert answered(changed) == [6] and changed.responses[0].partitions[0].high_watermark == 1
    assert changed.responses[0].partitions[0].records
    stale = stub.Fetch(request((), session_id=session_id, session_epoch=2), timeout=10)
    assert stale.error_code == Errors.INVALID_FETCH_SESSION_EPOCH and "epoch" in stale.error_message
    unknown = stub.Fetch(request((), session_id=session_id + 1, session_epoch=1), timeout=10)
    assert unknown.error_code == Errors.FETCH_SESSION_ID_NOT_FOUND
    closed = stub.Fetch(request(session_id=session_id, session_epoch=-1), timeout=10)
    assert closed.error_code == 0 and closed.session_id == 0 and answered(closed) == list(range(PARTITIONS))
    assert manager.fetch_sessions.size == 0


def test_forgotten_partitions_travel_in_the_request(broker):
    manager, stub = broker
    session_id = stub.Fetch(request(session_id=0, session_epoch=0), timeout=10).session_id
    forget = request((), session_id=session_id, session_epoch=1)
    forget.forgotten_topics_data.add(topic="t", partitions=[0, 1])
    assert stub.Fetch(forget, timeout=10).error_code == 0
    assert len(manager.fetch_sessions.holders(("t", 0))) == 0
    assert len(manager.fetch_sessions.holders(("t", 2))) == 1
