"""Transactional offset commits against a real cluster (one controller, one broker, two group
coordinators, shared by the module): TxnOffsetCommit with a producer id from a broker's
InitProducerId stays invisible to OffsetFetch (UNSTABLE_OFFSET_COMMIT with require_stable) until
the coordinator's WriteTxnMarkers COMMIT; ABORT drops another; after a SIGKILL of the group's
coordinator the coordinator that loads the partition shows the same offsets and pending state.
Requests are raw gRPC calls through the client transport, as the transaction coordinator and the
transactional producer send them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.clients.admin import Admin
from services.clients.transport import BROKER, COORDINATOR, ChannelPool
from services.common.errors import Errors, KafkaError
from services.common.hashing import coordinator_partition
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.topic_names import GROUP_METADATA_TOPIC
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, create_topic, module_cluster

TOPIC = "txn-input"
CALL_TIMEOUT_MS = 20000


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "txn-offsets", brokers=1,
                        controllers=1, coordinators=2) as local:
        with Admin(bootstrap_servers=local.bootstrap_servers, **CLIENT_CONFIG) as admin:
            create_topic(admin, TOPIC, 2)   # the offsets of a topic that does not exist go on loading
        yield local


@pytest.fixture(scope="module")
def pool() -> Iterator[ChannelPool]:
    with ChannelPool(request_timeout_ms=CALL_TIMEOUT_MS) as channels:
        yield channels


def coordinator_of(cluster: LocalCluster, pool: ChannelPool, group: str) -> tuple[int, str]:
    """(node id, address) of the coordinator that serves the group, once its offsets are loaded."""
    found: list = []

    def served() -> bool:
        request = common_pb2.FindCoordinatorRequest(key=group, key_type=0)
        response = pool.call(cluster.endpoint(cluster.broker_names[0]), BROKER, "FindCoordinator", request,
                             CALL_TIMEOUT_MS)
        if response.error_code != Errors.NONE:
            return False
        node = response.coordinator
        address = f"{node.host}:{node.port}"
        try:
            fetched = call(pool, address, "OffsetFetch", pb.OffsetFetchRequest(group_id=group, all_topics=True))
        except KafkaError:
            return False
        found[:] = [(node.node_id, address)]
        return fetched.error_code == Errors.NONE

    wait_until(served, 30, 0.2, message=f"a coordinator serving {group}")
    return found[0]


def init_producer_id(cluster: LocalCluster, pool: ChannelPool) -> tuple[int, int]:
    request = common_pb2.InitProducerIdRequest(transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)
    response = pool.call(cluster.endpoint(cluster.broker_names[0]), BROKER, "InitProducerId", request,
                         CALL_TIMEOUT_MS)
    assert response.error_code == Errors.NONE, response
    return response.producer_id, response.producer_epoch


def call(pool: ChannelPool, address: str, method: str, request):
    return pool.call(address, COORDINATOR, method, request, CALL_TIMEOUT_MS)


def txn_commit(pool: ChannelPool, address: str, group: str, producer: tuple[int, int],
               offsets: dict[int, int]) -> dict[int, int]:  # fmt: skip
    partitions = [pb.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
        partition_index=p, committed_offset=o, committed_leader_epoch=-1) for p, o in offsets.items()]
    request = pb.TxnOffsetCommitRequest(
        transactional_id="txn-app", group_id=group, producer_id=producer[0], producer_epoch=producer[1],
        generation_id=-1, member_id="", topics=[pb.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
            name=TOPIC, partitions=partitions)])
    response = call(pool, address, "TxnOffsetCommit", request)
    return {p.partition_index: p.error_code for t in response.topics for p in t.partitions}


def fetch(pool: ChannelPool, address: str, group: str, partitions: list[int],
          require_stable: bool = False) -> dict[int, tuple[int, int]]:  # fmt: skip
    """{partition: (committed offset, error code)}."""
    request = pb.OffsetFetchRequest(group_id=group, require_stable=require_stable, topics=[
        pb.OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=partitions)])
    response = call(pool, address, "OffsetFetch", request)
    assert response.error_code == Errors.NONE, response
    return {p.partition_index: (p.committed_offset, p.error_code) for t in response.topics for p in t.partitions}


def write_marker(pool: ChannelPool, address: str, group: str, producer: tuple[int, int], commit: bool) -> int:
    partition = coordinator_partition(group)
    request = common_pb2.WriteTxnMarkersRequest(markers=[common_pb2.WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=producer[0], producer_epoch=producer[1], transaction_result=commit, coordinator_epoch=1,
        topics=[common_pb2.WriteTxnMarkersRequest.WritableTxnMarkerTopic(
            name=GROUP_METADATA_TOPIC, partition_indexes=[partition])])])
    response = call(pool, address, "WriteTxnMarkers", request)
    (marker,) = response.markers
    (topic,) = marker.topics
    (result,) = topic.partitions
    assert (marker.producer_id, topic.name, result.partition_index) == (producer[0], GROUP_METADATA_TOPIC, partition)
    return result.error_code


def test_committed_transaction_offsets_become_visible_and_aborted_ones_never_do(cluster, pool):
    producer = init_producer_id(cluster, pool)
    _, address = coordinator_of(cluster, pool, "txn-commit")
    assert txn_commit(pool, address, "txn-commit", producer, {0: 10, 1: 11}) == {0: Errors.NONE, 1: Errors.NONE}
    assert fetch(pool, address, "txn-commit", [0, 1]) == {0: (-1, 0), 1: (-1, 0)}
    unstable = Errors.UNSTABLE_OFFSET_COMMIT
    assert fetch(pool, address, "txn-commit", [0, 1], require_stable=True) == {0: (-1, unstable), 1: (-1, unstable)}
    assert write_marker(pool, address, "txn-commit", producer, commit=True) == Errors.NONE
    assert fetch(pool, address, "txn-commit", [0, 1], require_stable=True) == {0: (10, 0), 1: (11, 0)}

    other = init_producer_id(cluster, pool)
    _, address = coordinator_of(cluster, pool, "txn-abort")
    assert txn_commit(pool, address, "txn-abort", other, {0: 7}) == {0: Errors.NONE}
    assert write_marker(pool, address, "txn-abort", other, commit=False) == Errors.NONE
    assert fetch(pool, address, "txn-abort", [0], require_stable=True) == {0: (-1, 0)}


def test_a_marker_for_a_partition_the_coordinator_does_not_own_is_not_coordinator(cluster, pool):
    producer = init_producer_id(cluster, pool)
    owner, _ = coordinator_of(cluster, pool, "txn-elsewhere")
    (other,) = [n for n in cluster.coordinator_names if n != f"coordinator-{owner}"]
    assert write_marker(pool, cluster.endpoint(other), "txn-elsewhere", producer, True) == Errors.NOT_COORDINATOR


def test_the_coordinator_that_loads_the_partition_after_a_kill_shows_the_same_offsets(cluster, pool):
    group = "txn-durable"
    committed, still_open = init_producer_id(cluster, pool), init_producer_id(cluster, pool)
    owner, address = coordinator_of(cluster, pool, group)
    assert txn_commit(pool, address, group, committed, {0: 20}) == {0: Errors.NONE}
    assert write_marker(pool, address, group, committed, commit=True) == Errors.NONE
    assert txn_commit(pool, address, group, still_open, {1: 30}) == {1: Errors.NONE}
    before = fetch(pool, address, group, [0, 1], require_stable=True)
    assert before == {0: (20, 0), 1: (-1, Errors.UNSTABLE_OFFSET_COMMIT)}
    name = f"coordinator-{owner}"
    cluster.kill_service(name)
    try:
        wait_until(lambda: coordinator_of(cluster, pool, group)[0] != owner, 30, 0.2,
                   message="another coordinator to take the group over")
        _, address = coordinator_of(cluster, pool, group)
        assert fetch(pool, address, group, [0, 1], require_stable=True) == before
        assert write_marker(pool, address, group, still_open, commit=True) == Errors.NONE
        assert fetch(pool, address, group, [0, 1], require_stable=True) == {0: (20, 0), 1: (30, 0)}
    finally:
        cluster.start_service(name)
