"""The broker servicer's transaction RPCs over a real ReplicaManager: WriteTxnMarkers answers per
marker, topic and partition; Fetch and ListOffsets honour isolation_level and carry the last stable
offset and aborted transactions; DescribeProducers lists active producers."""

from __future__ import annotations

import time

import pytest

from services.broker.servicer import BrokerServicer
from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2, broker_pb2_grpc
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.records import build_batch
from tests.unit.runtime_support import serving

from .test_replica_manager import lead, produce

PID = 5
Marker = common_pb2.WriteTxnMarkersRequest.WritableTxnMarker
MarkerTopic = common_pb2.WriteTxnMarkersRequest.WritableTxnMarkerTopic


@pytest.fixture
def stub(manager):
    servicer = BrokerServicer(1, manager, manager.metadata_cache, fetch_max_bytes=1 << 20,
                              request_timeout_ms=2000)
    with serving(broker_pb2_grpc.add_BrokerServiceServicer_to_server, servicer) as channel:
        yield broker_pb2_grpc.BrokerServiceStub(channel)


def fetch(stub, level):
    request = broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                      isolation_level=level, topics=[broker_pb2.FetchRequest.FetchTopic(
                                          topic="t", partitions=[broker_pb2.FetchRequest.FetchPartition(
                                              partition=0, current_leader_epoch=-1, fetch_offset=0,
                                              partition_max_bytes=1 << 20)])])
    return stub.Fetch(request, timeout=10).responses[0].partitions[0]


def latest(stub, level) -> int:
    request = broker_pb2.ListOffsetsRequest(replica_id=-1, isolation_level=level, topics=[
        broker_pb2.ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[
            broker_pb2.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                               timestamp=-1)])])
    return stub.ListOffsets(request, timeout=10).topics[0].partitions[0].offset


def test_transaction_rpcs(manager, stub):
    lead(manager)
    now = int(time.time() * 1000)
    produce(manager, {("t", 0): build_batch([b"a"], timestamps=now, producer_id=PID, producer_epoch=0,
                                            base_sequence=0, is_transactional=True)})
    open_fetch = fetch(stub, common_pb2.READ_COMMITTED)
    assert (open_fetch.high_watermark, open_fetch.last_stable_offset, open_fetch.records) == (1, 0, b"")
    assert fetch(stub, common_pb2.READ_UNCOMMITTED).last_stable_offset == 0
    assert (latest(stub, common_pb2.READ_COMMITTED), latest(stub, common_pb2.READ_UNCOMMITTED)) == (0, 1)

    described = stub.DescribeProducers(broker_pb2.DescribeProducersRequest(topics=[
        broker_pb2.DescribeProducersRequest.TopicRequest(name="t", partition_indexes=[0, 9])]), timeout=10)
    known, unknown = described.topics[0].partitions
    assert [(p.producer_id, p.producer_epoch, p.last_sequence, p.current_txn_start_offset)
            for p in known.active_producers] == [(PID, 0, 0, 0)]
    assert unknown.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION

    request = common_pb2.WriteTxnMarkersRequest(markers=[
        Marker(producer_id=PID, producer_epoch=0, transaction_result=False, coordinator_epoch=3,
               topics=[MarkerTopic(name="t", partition_indexes=[0]), MarkerTopic(name="x", partition_indexes=[1])]),
        Marker(producer_id=PID, producer_epoch=0, transaction_result=True, coordinator_epoch=2,
               topics=[MarkerTopic(name="t", partition_indexes=[0])]),
    ])
    response = stub.WriteTxnMarkers(request, timeout=10)
    answers = [(m.producer_id, [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
                                for t in m.topics]) for m in response.markers]
    assert answers == [(PID, [("t", [(0, 0)]), ("x", [(1, Errors.UNKNOWN_TOPIC_OR_PARTITION)])]),
                       (PID, [("t", [(0, Errors.TRANSACTION_COORDINATOR_FENCED)])])]

    aborted = fetch(stub, common_pb2.READ_COMMITTED)
    assert (aborted.high_watermark, aborted.last_stable_offset) == (2, 2)
    assert [(a.producer_id, a.first_offset) for a in aborted.aborted_transactions] == [(PID, 0)]
    assert list(fetch(stub, common_pb2.READ_UNCOMMITTED).aborted_transactions) == []
