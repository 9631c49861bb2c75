"""Idempotent producers against real brokers: producer ids from InitProducerId on any broker (blocks
claimed in ZooKeeper never overlap), a re-sent batch written once and answered with its first
offset, a sequence gap refused, and the dedupe state surviving a SIGKILL of the leader."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from services.clients.admin import Admin
from services.clients.admin_types import NewTopic
from services.clients.lowlevel import LowLevelClient
from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2_grpc
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.producer_id_manager import ProducerIdManager
from services.common.records import build_batch, iter_records
from services.common.service import node_channel
from services.common.zk import OdradekZkClient
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import SESSION_TIMEOUT_S, module_cluster


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    """Two controllers and three brokers for the module: the tests use topics and ids of their own."""
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "idempotent", brokers=3,
                        controllers=2) as local:
        yield local


def init_producer_id(cluster: LocalCluster, broker: str, **fields) -> common_pb2.InitProducerIdResponse:
    request = common_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1, **fields)
    channel = node_channel(cluster.endpoint(broker))
    try:
        return broker_pb2_grpc.BrokerServiceStub(channel).InitProducerId(request, timeout=10)
    finally:
        channel.close()


def values_of(client: LowLevelClient, topic: str) -> list[tuple[int, bytes]]:
    found, offset = [], 0
    while True:
        result = client.fetch(topic, 0, offset, max_wait_ms=0)
        assert result.error_code == 0, result
        records = list(iter_records(result.records))
        if not records:
            return found
        found += [(r.offset, r.value) for r in records]
        offset = records[-1].offset + 1


def leader_of(admin: Admin, topic: str) -> int:
    (description,) = admin.describe_topics([topic]).values()
    return description.partitions[0].leader


def test_init_producer_id_from_any_broker_gives_ids_from_disjoint_blocks(cluster: LocalCluster):
    ids_by_broker = {}
    for name in cluster.broker_names:
        replies = [init_producer_id(cluster, name) for _ in range(3)]
        assert [(r.error_code, r.producer_epoch) for r in replies] == [(0, 0)] * 3
        ids_by_broker[name] = [r.producer_id for r in replies]
    every_id = [pid for ids in ids_by_broker.values() for pid in ids]
    assert len(set(every_id)) == len(every_id)
    blocks = {name: {pid // 1000 for pid in ids} for name, ids in ids_by_broker.items()}
    assert all(len(b) == 1 for b in blocks.values())  # each broker hands out ids of its own block
    assert len(set.union(*blocks.values())) == len(cluster.broker_names)
    name = cluster.broker_names[0]
    assert init_producer_id(cluster, name, transactional_id="txn").error_code == Errors.NOT_COORDINATOR
    assert init_producer_id(cluster, name, transactional_id="").error_code == Errors.INVALID_REQUEST
    bad = common_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=3)
    channel = node_channel(cluster.endpoint(name))
    try:
        reply = broker_pb2_grpc.BrokerServiceStub(channel).InitProducerId(bad, timeout=10)
    finally:
        channel.close()
    assert reply.error_code == Errors.INVALID_REQUEST


def test_producer_id_managers_sharing_zookeeper_never_repeat_an_id(zk_client):
    zk = OdradekZkClient(zk_client)
    zk.ensure_paths()
    managers = [ProducerIdManager(lambda broker=broker: zk.allocate_producer_id_block(broker, size=7))
                for broker in (1, 2)]
    found: list[list[int]] = [[] for _ in range(4)]

    def take(i: int) -> None:
        manager = managers[i % 2]
        found[i].extend(manager.generate_producer_id() for _ in range(50))

    threads = [threading.Thread(target=take, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    every_id = [pid for ids in found for pid in ids]
    assert len(every_id) == 200 and len(set(every_id)) == 200
    assert sorted(every_id)[-1] < 200 + 2 * 7  # whole blocks are used before new ones are claimed


def test_resent_batches_are_written_once_gaps_are_refused_and_a_restart_keeps_the_state(cluster: LocalCluster):
    with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin, \
            LowLevelClient(bootstrap_servers=cluster.bootstrap_servers) as client:
        admin.create_topics([NewTopic("idem", 1, 1)])
        admin.wait_for_topic("idem", 30)
        reply = init_producer_id(cluster, cluster.broker_names[-1])
        pid, epoch = reply.producer_id, reply.producer_epoch

        def batch(sequence: int, values: list[bytes]) -> bytes:
            return build_batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=sequence)

        first = batch(0, [b"a0", b"a1", b"a2"])
        second = batch(3, [b"b0"])
        assert client.produce("idem", 0, first, acks=-1)[:2] == (0, 0)
        assert client.produce("idem", 0, second, acks=-1)[:2] == (3, 0)
        assert client.produce("idem", 0, first, acks=-1)[:2] == (0, 0)  # a retry: the same offset
        assert client.produce("idem", 0, second, acks=1)[:2] == (3, 0)
        gap = client.produce("idem", 0, batch(9, [b"gap"]), acks=-1)
        assert gap.error_code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        expected = [(0, b"a0"), (1, b"a1"), (2, b"a2"), (3, b"b0")]
        assert values_of(client, "idem") == expected

        leader = leader_of(admin, "idem")
        cluster.kill_service(cluster.broker_name(leader))
        wait_until(lambda: leader_of(admin, "idem") == -1, SESSION_TIMEOUT_S + 10, 0.2,
                   message="the partition to go offline")
        cluster.start_service(cluster.broker_name(leader))
        wait_until(lambda: leader_of(admin, "idem") == leader, 30, 0.2,
                   message="the restarted broker to lead the partition again")

        assert client.produce("idem", 0, second, acks=-1, retry_timeout_ms=30000)[:2] == (3, 0)
        assert client.produce("idem", 0, first, acks=-1)[:2] == (0, 0)
        assert client.produce("idem", 0, batch(9, [b"gap"]), acks=-1).error_code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert client.produce("idem", 0, batch(4, [b"c0"]), acks=-1)[:2] == (4, 0)
        assert values_of(client, "idem") == expected + [(4, b"c0")]
