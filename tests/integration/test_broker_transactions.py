"""The brokers' side of transactions against a real cluster: transactional produce, the last stable
offset, WriteTxnMarkers (acks=all, fenced by coordinator epoch), read_committed Fetch and
ListOffsets with aborted transactions, DescribeProducers, and the same answers after a SIGKILL of
the leader, from the new leader and from the restarted broker once it leads again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.clients.admin import Admin
from services.clients.lowlevel import LowLevelClient
from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2, broker_pb2_grpc
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.records import build_batch, iter_batches
from services.common.service import node_channel
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, SESSION_TIMEOUT_S, create_topic, module_cluster

TOPIC = "txn"


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    # a one-second imbalance check gives the restarted broker its preferred leadership back quickly
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "txn-broker", brokers=3,
                        controllers=1,
                        controller_config={"zookeeper.session.timeout.ms": 6000,
                                           "leader.imbalance.check.interval.seconds": 1}) as local:
        yield local


def call(cluster: LocalCluster, broker_id: int, method: str, request):
    channel = node_channel(cluster.endpoint(cluster.broker_name(broker_id)))
    try:
        return getattr(broker_pb2_grpc.BrokerServiceStub(channel), method)(request, timeout=20)
    finally:
        channel.close()


def fetch(cluster: LocalCluster, broker_id: int, offset: int, committed: bool = True):
    level = common_pb2.READ_COMMITTED if committed else common_pb2.READ_UNCOMMITTED
    request = broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                      isolation_level=level, topics=[broker_pb2.FetchRequest.FetchTopic(
                                          topic=TOPIC, partitions=[broker_pb2.FetchRequest.FetchPartition(
                                              partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                              partition_max_bytes=1 << 20)])])
    part = call(cluster, broker_id, "Fetch", request).responses[0].partitions[0]
    if part.error_code:
        return f"error {part.error_code}"
    batches = [(h.base_offset, h.last_offset) for h, _ in iter_batches(part.records)]
    aborted = [(a.producer_id, a.first_offset) for a in part.aborted_transactions]
    return part.high_watermark, part.last_stable_offset, batches, aborted


def latest(cluster: LocalCluster, broker_id: int, committed: bool = True) -> int:
    level = common_pb2.READ_COMMITTED if committed else common_pb2.READ_UNCOMMITTED
    request = broker_pb2.ListOffsetsRequest(replica_id=-1, isolation_level=level, topics=[
        broker_pb2.ListOffsetsRequest.ListOffsetsTopic(name=TOPIC, partitions=[
            broker_pb2.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                               timestamp=-1)])])
    part = call(cluster, broker_id, "ListOffsets", request).topics[0].partitions[0]
    assert part.error_code == 0, part
    return part.offset


def write_marker(cluster: LocalCluster, broker_id: int, pid: int, epoch: int, commit: bool,
                 coordinator_epoch: int, topic: str = TOPIC) -> int:
    request = common_pb2.WriteTxnMarkersRequest(markers=[common_pb2.WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
        topics=[common_pb2.WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])])
    response = call(cluster, broker_id, "WriteTxnMarkers", request)
    (marker,) = response.markers
    assert marker.producer_id == pid
    return marker.topics[0].partitions[0].error_code


def open_transactions(cluster: LocalCluster, broker_id: int) -> dict[int, int]:
    request = broker_pb2.DescribeProducersRequest(topics=[
        broker_pb2.DescribeProducersRequest.TopicRequest(name=TOPIC, partition_indexes=[0])])
    part = call(cluster, broker_id, "DescribeProducers", request).topics[0].partitions[0]
    assert part.error_code == 0, part
    return {p.producer_id: p.current_txn_start_offset for p in part.active_producers}


def partition_state(admin: Admin) -> tuple[int, tuple[int, ...]]:
    (description,) = admin.describe_topics([TOPIC]).values()
    return description.partitions[0].leader, description.partitions[0].isr


def test_transactions_stable_offsets_markers_and_a_killed_leader(cluster: LocalCluster):
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin, \
            LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as client:
        create_topic(admin, TOPIC, 1, 3)
        leader = partition_state(admin)[0]
        wait_until(lambda: len(partition_state(admin)[1]) == 3, 20, 0.1, message="a full ISR")
        reply = call(cluster, leader, "InitProducerId",
                     common_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1))
        pid, epoch = reply.producer_id, reply.producer_epoch

        def produce(sequence: int, values: list[bytes], transactional: bool = True) -> int:
            batch = build_batch(values, producer_id=pid if transactional else -1,
                                producer_epoch=epoch if transactional else -1,
                                base_sequence=sequence if transactional else -1, is_transactional=transactional)
            result = client.produce(TOPIC, 0, batch, acks=-1, timeout_ms=10000)
            assert result.error_code == 0, result
            return result.base_offset

        assert produce(0, [b"t0", b"t1"]) == 0  # 0-1, open
        assert produce(-1, [b"plain"], transactional=False) == 2
        assert fetch(cluster, leader, 0) == (3, 0, [], [])  # nothing past the open transaction
        assert fetch(cluster, leader, 0, committed=False)[:3] == (3, 0, [(0, 1), (2, 2)])
        assert (latest(cluster, leader), latest(cluster, leader, committed=False)) == (0, 3)
        assert open_transactions(cluster, leader) == {pid: 0}

        assert write_marker(cluster, leader, pid, epoch, True, coordinator_epoch=1) == 0  # 3: commit
        assert fetch(cluster, leader, 0) == (4, 4, [(0, 1), (2, 2), (3, 3)], [])
        assert produce(2, [b"doomed"]) == 4
        assert write_marker(cluster, leader, pid, epoch, False, coordinator_epoch=1) == 0  # 5: abort
        assert produce(3, [b"open"]) == 6  # left open
        expected = (7, 6, [(0, 1), (2, 2), (3, 3), (4, 4), (5, 5)], [(pid, 4)])
        assert fetch(cluster, leader, 0) == expected
        assert latest(cluster, leader) == 6
        assert open_transactions(cluster, leader) == {pid: 6}
        fenced = write_marker(cluster, leader, pid, epoch, True, coordinator_epoch=0)
        assert fenced == Errors.TRANSACTION_COORDINATOR_FENCED == 52
        assert write_marker(cluster, leader, pid, epoch, True, coordinator_epoch=1, topic="nope") == \
            Errors.UNKNOWN_TOPIC_OR_PARTITION

        cluster.kill_service(cluster.broker_name(leader))
        wait_until(lambda: partition_state(admin)[0] not in (-1, leader), SESSION_TIMEOUT_S + 15, 0.2,
                   message="a new leader")
        new_leader = partition_state(admin)[0]
        wait_until(lambda: fetch(cluster, new_leader, 0) == expected, 15, 0.2,
                   message=lambda: f"the new leader's answers {fetch(cluster, new_leader, 0)}")
        assert latest(cluster, new_leader) == 6
        assert open_transactions(cluster, new_leader) == {pid: 6}
        assert write_marker(cluster, new_leader, pid, epoch, True, 0) == 52

        cluster.start_service(cluster.broker_name(leader))
        wait_until(lambda: partition_state(admin)[0] == leader, 30, 0.2,
                   message="the restarted broker to lead again")
        wait_until(lambda: fetch(cluster, leader, 0) == expected, 15, 0.2,
                   message=lambda: f"the restarted broker's answers {fetch(cluster, leader, 0)}")
        assert latest(cluster, leader) == 6
        assert open_transactions(cluster, leader) == {pid: 6}
        assert write_marker(cluster, leader, pid, epoch, True, coordinator_epoch=2) == 0  # 7: commit
        assert fetch(cluster, leader, 6)[:3] == (8, 8, [(6, 6), (7, 7)])
