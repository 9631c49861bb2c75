"""Tests for services.clients.transport.routing, partition_requests and lowlevel: grouping partitions per
leader, one request per broker, and which errors are retried, against fake brokers."""

from __future__ import annotations

import pytest

from services.clients.cluster import Cluster
from services.clients.lowlevel import LowLevelClient
from services.clients.partition_requests import offset_spec_timestamp, produce_request
from services.clients.transport import group_by_leader, unroutable_error
from services.common.clock import ManualClock
from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.records import build_batch
from services.common.shared_types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from services.common.topic_partition import TopicPartition
from tests.unit.clients.support import metadata_response, node_proto, partition


def produce_answer(topic: str, results: dict[int, tuple[int, int]]) -> broker_pb2.ProduceResponse:
    """results: partition -> (error code, base offset)."""
    response = broker_pb2.ProduceResponse()
    response.responses.add(name=topic, partition_responses=[
        broker_pb2.ProduceResponse.PartitionProduceResponse(index=p, error_code=code, base_offset=offset,
                                                            log_append_time_ms=-1, log_start_offset=0)
        for p, (code, offset) in results.items()])
    return response


def echo_produce(base_offset: int = 0):
    """A Produce handler answering NONE with `base_offset` for every partition asked."""
    def handler(request, _context):
        response = broker_pb2.ProduceResponse()
        for topic in request.topic_data:
            response.responses.add(name=topic.name, partition_responses=[
                broker_pb2.ProduceResponse.PartitionProduceResponse(index=p.index, base_offset=base_offset)
                for p in topic.partition_data])
        return response
    return handler


def client_for(*nodes, clock: ManualClock, **config) -> LowLevelClient:
    return LowLevelClient(bootstrap_servers=",".join(n.address for n in nodes), clock=clock, **config)


# --------------------------------------------------------------------------------------------- pure functions

def test_group_by_leader_and_reasons_for_unroutable_partitions():
    cluster = Cluster.from_response(metadata_response(
        [node_proto(1, 9092), node_proto(2, 9192)],
        topics={"t": [partition(0, 1), partition(1, 2), partition(2, 1), partition(3, -1), partition(4, 7)]},
        topic_errors={"gone": Errors.UNKNOWN_TOPIC_OR_PARTITION}))
    tps = [TopicPartition("t", p) for p in range(6)] + [TopicPartition("gone", 0), TopicPartition("x", 0)]
    groups, unroutable = group_by_leader(cluster, tps)
    assert {leader.node_id: [tp.partition for tp in g] for leader, g in groups.items()} == {1: [0, 2], 2: [1]}
    assert {str(tp): e.error_name for tp, e in unroutable.items()} == {
        "t-3": "LEADER_NOT_AVAILABLE", "t-4": "LEADER_NOT_AVAILABLE", "t-5": "UNKNOWN_TOPIC_OR_PARTITION",
        "gone-0": "UNKNOWN_TOPIC_OR_PARTITION", "x-0": "UNKNOWN_TOPIC_OR_PARTITION"}
    assert unroutable_error(cluster, TopicPartition("t", 3)).retriable


def test_offset_specs():
    assert offset_spec_timestamp("earliest") == EARLIEST_TIMESTAMP == -2
    assert offset_spec_timestamp(" Latest ") == LATEST_TIMESTAMP == -1
    assert offset_spec_timestamp(1_600_000_000_000) == 1_600_000_000_000
    assert offset_spec_timestamp("1234") == 1234
    for bad in ("first", -3, True, 1.5):
        with pytest.raises(ValueError):
            offset_spec_timestamp(bad)


def test_produce_request_groups_partitions_by_topic():
    request = produce_request({TopicPartition("a", 1): b"x", TopicPartition("b", 0): b"y",
                               TopicPartition("a", 0): b"z"}, acks=-1, timeout_ms=123)
    assert (request.acks, request.timeout_ms, request.HasField("transactional_id")) == (-1, 123, False)
    assert [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in request.topic_data] == [
        ("a", [(1, b"x"), (0, b"z")]), ("b", [(0, b"y")])]


# --------------------------------------------------------------------------------------------- produce

def test_produce_goes_to_the_leader_and_returns_its_offsets(fake_nodes, clock):
    b1, b2 = fake_nodes(2)
    metadata = metadata_response([b1.node(), b2.node()], topics={"t": [partition(0, 2)]})
    for broker in (b1, b2):
        broker.on("Metadata", metadata)
    b2.on("Produce", produce_answer("t", {0: (0, 42)}))
    batch = build_batch([b"a", b"b"])
    with client_for(b1, clock=clock) as client:
        result = client.produce("t", 0, batch, acks=-1, timeout_ms=1500)
    assert (result.base_offset, result.error_code) == (42, 0)
    base_offset, error_code, *_ = result
    assert (base_offset, error_code) == (42, 0)
    (request,) = b2.requests("Produce")
    assert (request.acks, request.timeout_ms) == (-1, 1500)
    assert request.topic_data[0].partition_data[0].records == batch
    assert b1.requests("Produce") == []


def test_produce_retries_not_leader_with_fresh_metadata(fake_nodes, clock):
    b1, b2 = fake_nodes(2)
    views = [metadata_response([b1.node(), b2.node()], topics={"t": [partition(0, 1, epoch=1)]}),
             metadata_response([b1.node(), b2.node()], topics={"t": [partition(0, 2, epoch=2)]})]
    for broker in (b1, b2):
        broker.on("Metadata", lambda _r, _c: views[0] if len(b1.requests("Produce")) == 0 else views[1])
    b1.on("Produce", produce_answer("t", {0: (Errors.NOT_LEADER_OR_FOLLOWER, -1)}))
    b2.on("Produce", produce_answer("t", {0: (0, 7)}))
    with client_for(b1, clock=clock) as client:
        result = client.produce("t", 0, build_batch([b"v"]))
    assert (result.base_offset, result.error_code) == (7, 0)
    assert len(b1.requests("Produce")) == 1 and len(b2.requests("Produce")) == 1


def test_unknown_topic_is_retried_until_the_deadline_then_returned(fake_nodes, clock):
    (b1,) = fake_nodes(1)
    b1.on("Metadata", metadata_response([b1.node()], topic_errors={"t": Errors.UNKNOWN_TOPIC_OR_PARTITION}))
    with client_for(b1, clock=clock, retry_backoff_ms=100) as client:
        result = client.produce("t", 0, build_batch([b"v"]), retry_timeout_ms=1000)
    assert result.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION and result.base_offset == -1
    assert 5 <= len(b1.requests("Metadata")) <= 12
    assert clock.monotonic_ms() >= 1000


def test_non_retriable_produce_errors_are_returned_without_retry(fake_nodes, clock):
    (b1,) = fake_nodes(1)
    b1.on("Metadata", metadata_response([b1.node()], topics={"t": [partition(0, 1)]}))
    response = produce_answer("t", {0: (Errors.MESSAGE_TOO_LARGE, -1)})
    response.responses[0].partition_responses[0].error_message = "too big"
    b1.on("Produce", response)
    with client_for(b1, clock=clock) as client:
        result = client.produce("t", 0, build_batch([b"v"]))
    assert (result.error_code, result.error_message) == (Errors.MESSAGE_TOO_LARGE, "too big")
    assert len(b1.requests("Produce")) == 1


def test_produce_many_sends_one_request_per_leader(fake_nodes, clock):
    b1, b2 = fake_nodes(2)
    metadata = metadata_response([b1.node(), b2.node()], topics={
        "a": [partition(0, 1), partition(1, 2)], "b": [partition(0, 1)]})
    for broker in (b1, b2):
        broker.on("Metadata", metadata)
    b1.on("Produce", echo_produce(10))
    b2.on("Produce", echo_produce(20))
    with client_for(b1, b2, clock=clock) as client:
        results = client.produce_many({("a", 0): b"x", ("a", 1): b"y", ("b", 0): b"z"}, acks=1)
    assert {str(tp): r.base_offset for tp, r in results.items()} == {"a-0": 10, "a-1": 20, "b-0": 10}
    (to_b1,) = b1.requests("Produce")
    sent = sorted((t.name, p.index) for t in to_b1.topic_data for p in t.partition_data)
    assert sent == [("a", 0), ("b", 0)]
    assert len(b2.requests("Produce")) == 1


def test_unreachable_leader_is_retried_then_reported(fake_nodes, clock):
    (b1,) = fake_nodes(1)
    b1.on("Metadata", metadata_response([b1.node(), node_proto(2, 1)], topics={"t": [partition(0, 2)]}))
    with client_for(b1, clock=clock, request_timeout_ms=2000) as client:
        result = client.produce("t", 0, build_batch([b"v"]), retry_timeout_ms=500)
    assert result.error_code == Errors.NETWORK_EXCEPTION


# ---------------------------------------------------------------------------------------- fetch and offsets

def fetch_answer(records: bytes, *, error_code: int = 0, high_watermark: int = 3) -> broker_pb2.FetchResponse:
    response = broker_pb2.FetchResponse()
    response.responses.add(topic="t", partitions=[broker_pb2.FetchResponse.PartitionData(
        partition_index=0, error_code=error_code, high_watermark=high_watermark, last_stable_offset=3,
        log_start_offset=0, records=records, preferred_read_replica=-1)])
    return response


def test_fetch_returns_raw_bytes_and_fetch_records_skips_earlier_offsets(fake_nodes, clock):
    (b1,) = fake_nodes(1)
    b1.on("Metadata", metadata_response([b1.node()], topics={"t": [partition(0, 1)]}))
    batch = build_batch([b"a", b"b", b"c"], [None, b"k", None])
    b1.on("Fetch", fetch_answer(batch))
    with client_for(b1, clock=clock) as client:
        result = client.fetch("t", 0, 1, max_bytes=4096, max_wait_ms=100, min_bytes=5)
        records, _ = client.fetch_records("t", 0, 1)
    assert result[:4] == (batch, 3, 0, 0)  # records, high watermark, log start offset, error code
    assert [(r.offset, r.key, r.value) for r in records] == [(1, b"k", b"b"), (2, None, b"c")]
    request = b1.requests("Fetch")[0]
    assert (request.replica_id, request.max_wait_ms, request.min_bytes) == (-1, 100, 5)
    assert request.max_bytes == 4096
    fetched = request.topics[0].partitions[0]
    assert (fetched.fetch_offset, fetched.partition_max_bytes, fetched.current_leader_epoch) == (1, 4096, -1)


def test_fetch_returns_offset_out_of_range_without_retry(fake_nodes, clock):
    (b1,) = fake_nodes(1)
    b1.on("Metadata", metadata_response([b1.node()], topics={"t": [partition(0, 1)]}))
    b1.on("Fetch", fetch_answer(b"", error_code=Errors.OFFSET_OUT_OF_RANGE))
    with client_for(b1, clock=clock) as client:
        assert client.fetch("t", 0, 99).error_code == Errors.OFFSET_OUT_OF_RANGE
    assert len(b1.requests("Fetch")) == 1


def test_list_offset_translates_specs(fake_nodes, clock):
    (b1,) = fake_nodes(1)
    b1.on("Metadata", metadata_response([b1.node()], topics={"t": [partition(0, 1)]}))

    def answer(request, _context):
        asked = request.topics[0].partitions[0]
        response = broker_pb2.ListOffsetsResponse()
        response.topics.add(name="t", partitions=[broker_pb2.ListOffsetsResponse.ListOffsetsPartitionResponse(
            partition_index=0, offset=100 + asked.timestamp, timestamp=-1, leader_epoch=3)])
        return response

    b1.on("ListOffsets", answer)
    with client_for(b1, clock=clock) as client:
        assert client.list_offset("t", 0, "earliest").offset == 98
        assert client.list_offset("t", 0, "latest") == (99, -1, 3, 0)
        assert client.list_offset("t", 0, 5).offset == 105


def test_acks_zero_needs_no_partition_answer(fake_nodes, clock):
    (b1,) = fake_nodes(1)
    b1.on("Metadata", metadata_response([b1.node()], topics={"t": [partition(0, 1)]}))
    b1.on("Produce", broker_pb2.ProduceResponse())
    with client_for(b1, clock=clock) as client:
        assert client.produce("t", 0, build_batch([b"v"]), acks=0)[:2] == (-1, 0)
        unanswered = client.produce("t", 0, build_batch([b"v"]), acks=1, retry_timeout_ms=100)
        assert unanswered.error_code == Errors.UNKNOWN_SERVER_ERROR
    assert b1.requests("Produce")[0].acks == 0
