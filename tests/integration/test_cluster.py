"""A whole cluster on loopback (ZooKeeper, two controllers, three brokers as real processes):
topics across brokers, produce and fetch on every partition, broker and controller crashes, topic
deletion, and Kafka's error codes for bad requests."""

from __future__ import annotations

import grpc
import pytest

from services.clients.admin import Admin
from services.clients.admin_types import NewTopic
from services.clients.lowlevel import LowLevelClient
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.broker.v1 import broker_pb2, broker_pb2_grpc
from services.common.records import build_batch, iter_records
from services.common.service import node_channel
from services.common.zk import ControllerMovedError, OdradekZkClient
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import SESSION_TIMEOUT_S


def records_of(client: LowLevelClient, topic: str, partition: int) -> list[bytes]:
    out, offset = [], 0
    while True:
        result = client.fetch(topic, partition, offset, max_wait_ms=0)
        assert result.error_code == 0, result
        batch = list(iter_records(result.records))
        if not batch:
            return out
        out += [r.value for r in batch]
        offset = batch[-1].offset + 1


def leaders(admin: Admin, topic: str) -> dict[int, int]:
    (description,) = admin.describe_topics([topic]).values()
    return {p.partition: p.leader for p in description.partitions}


def test_topic_over_three_brokers_survives_broker_crash(cluster: LocalCluster):
    with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin, \
            LowLevelClient(bootstrap_servers=cluster.bootstrap_servers) as client:
        admin.create_topics([NewTopic("orders", 6, 1)])
        admin.wait_for_topic("orders", 30)
        placement = leaders(admin, "orders")
        assert sorted(set(placement.values())) == [1, 2, 3]  # spread over every broker
        for partition in range(6):
            for round_ in range(3):
                values = [b"p%d-r%d-%d" % (partition, round_, i) for i in range(10)]
                result = client.produce("orders", partition, build_batch(values))
                assert (result.error_code, result.base_offset) == (0, round_ * 10)
        for partition in range(6):
            assert len(records_of(client, "orders", partition)) == 30

        victim = placement[0]
        victim_partitions = [p for p, leader in placement.items() if leader == victim]
        cluster.kill_service(cluster.broker_name(victim))
        wait_until(lambda: all(leaders(admin, "orders")[p] == -1 for p in victim_partitions),
                   SESSION_TIMEOUT_S + 10, 0.2, message="the dead broker's partitions to go offline")
        offline = client.produce("orders", victim_partitions[0], build_batch([b"lost?"]),
                                 retry_timeout_ms=1000)
        assert offline.error_code != 0
        others = [p for p in range(6) if p not in victim_partitions]
        assert client.produce("orders", others[0], build_batch([b"still fine"])).error_code == 0

        cluster.start_service(cluster.broker_name(victim))
        wait_until(lambda: all(leaders(admin, "orders")[p] == victim for p in victim_partitions),
                   30, 0.2, message="the restarted broker to lead its partitions again")
        for partition in victim_partitions:
            values = records_of(client, "orders", partition)
            assert values == [b"p%d-r%d-%d" % (partition, r, i) for r in range(3) for i in range(10)]


def active_controller(zk: OdradekZkClient) -> tuple[int, int]:
    info = zk.get_controller()
    epoch = zk.get_controller_epoch()
    return (info.controller_id if info else -1), (epoch.epoch if epoch else -1)


def test_controller_failover_and_fencing(cluster: LocalCluster, zk_client):
    zk = OdradekZkClient(zk_client)
    first, epoch = wait_until(lambda: (c := active_controller(zk))[0] > 0 and c, 30,
                              message="a controller to be elected")
    old_epoch_version = zk.get_controller_epoch().zk_version
    cluster.kill_service(f"controller-{first}")
    # how long the takeover takes is measured by bench/partitions.py, not bounded here
    second, new_epoch = wait_until(lambda: (c := active_controller(zk))[0] not in (-1, first) and c,
                                   SESSION_TIMEOUT_S + 30, 0.05, message="the standby to take over")
    assert new_epoch == epoch + 1
    # a deposed controller's write, fenced by its old epoch version, is refused atomically
    with pytest.raises(ControllerMovedError):
        zk.delete_topic_deletions(["nonexistent"], epoch_zk_version=old_epoch_version)
    # the new controller serves admin requests
    with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic("after-failover", 2, 1)])
        admin.wait_for_topic("after-failover", 30)


def test_delete_topic_removes_every_directory(cluster: LocalCluster):
    with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin, \
            LowLevelClient(bootstrap_servers=cluster.bootstrap_servers) as client:
        admin.create_topics([NewTopic("doomed", 6, 2)])
        admin.wait_for_topic("doomed", 30)
        for partition in range(6):
            assert client.produce("doomed", partition, build_batch([b"x"])).error_code == 0

        def partition_dirs():
            return [p for name in cluster.broker_names for p in cluster.data_dir(name).glob("doomed-*")
                    if not p.name.endswith("-delete")]

        assert len(partition_dirs()) == 12
        admin.delete_topics(["doomed"])
        wait_until(lambda: not any(any(cluster.data_dir(n).glob("doomed-*")) for n in cluster.broker_names),
                   30, 0.2, message="every broker to remove the topic's directories")
        wait_until(lambda: "doomed" not in admin.list_topics(), 30, 0.2, message="the topic to vanish")


def test_bad_requests_get_kafka_error_codes(cluster: LocalCluster):
    with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic("strict", 1, 1)])
        admin.wait_for_topic("strict", 30)
        for bad, name in ((NewTopic("strict", 1, 1), "TOPIC_ALREADY_EXISTS"),
                          (NewTopic("bad name!", 1, 1), "INVALID_TOPIC_EXCEPTION"),
                          (NewTopic("zero", 0, 1), "INVALID_PARTITIONS"),
                          (NewTopic("too-wide", 1, 4), "INVALID_REPLICATION_FACTOR")):
            with pytest.raises(KafkaError) as caught:
                admin.create_topics([bad])
            assert caught.value.error_name == name
        (description,) = admin.describe_topics(["strict"]).values()
        leader = description.partitions[0].leader
        not_leader = next(n for n in cluster.broker_names if n != cluster.broker_name(leader))

    def produce_to(name: str, topic: str, records: bytes, acks: int = 1) -> int:
        stub = broker_pb2_grpc.BrokerServiceStub(node_channel(cluster.endpoint(name)))
        request = broker_pb2.ProduceRequest(acks=acks, timeout_ms=5000)
        request.topic_data.add(name=topic).partition_data.add(index=0, records=records)
        return stub.Produce(request, timeout=10).responses[0].partition_responses[0].error_code

    good = build_batch([b"ok"])
    damaged = bytearray(good)
    damaged[-1] ^= 0x01
    leader_name = cluster.broker_name(leader)
    assert produce_to(leader_name, "strict", bytes(damaged)) == Errors.CORRUPT_MESSAGE
    assert produce_to(leader_name, "strict", b"not a batch at all") == Errors.CORRUPT_MESSAGE
    assert produce_to(leader_name, "strict", build_batch([b"x" * 1_100_000])) == Errors.MESSAGE_TOO_LARGE
    assert produce_to(leader_name, "strict", good, acks=5) == Errors.INVALID_REQUIRED_ACKS
    assert produce_to(leader_name, "no-such-topic", good) == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert produce_to(leader_name, "__consumer_offsets", good) == Errors.INVALID_TOPIC_EXCEPTION
    assert produce_to(not_leader, "strict", good) == Errors.NOT_LEADER_OR_FOLLOWER
    assert produce_to(leader_name, "strict", good) == 0  # and the log took nothing bad

    stub = broker_pb2_grpc.BrokerServiceStub(node_channel(cluster.endpoint(leader_name)))
    fetch = broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20)
    fetch.topics.add(topic="strict").partitions.add(partition=0, fetch_offset=99, current_leader_epoch=-1,
                                                    log_start_offset=-1, partition_max_bytes=1 << 20)
    out_of_range = stub.Fetch(fetch, timeout=10).responses[0].partitions[0]
    assert out_of_range.error_code == Errors.OFFSET_OUT_OF_RANGE
    fetch.topics[0].partitions[0].fetch_offset = 0
    data = stub.Fetch(fetch, timeout=10).responses[0].partitions[0]
    assert [r.value for r in iter_records(data.records)] == [b"ok"]
    # garbage on the wire is a whole-request failure, not a crash
    raw = node_channel(cluster.endpoint(leader_name)).unary_unary(
        "/odradek.broker.v1.BrokerService/Produce")
    with pytest.raises(grpc.RpcError) as caught:
        raw(b"\xff\xff\xff\xff garbage", timeout=10)
    assert caught.value.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT,
                                   grpc.StatusCode.UNKNOWN)
    assert produce_to(leader_name, "strict", good) == 0


def test_sigterm_moves_leadership_away_before_the_broker_exits(cluster: LocalCluster):
    with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin, \
            LowLevelClient(bootstrap_servers=cluster.bootstrap_servers) as client:
        admin.create_topics([NewTopic("moving", 3, 3)])
        admin.wait_for_topic("moving", 30)
        placement = leaders(admin, "moving")
        leaving = placement[0]
        led = [p for p, leader in placement.items() if leader == leaving]
        for partition in range(3):
            assert client.produce("moving", partition, build_batch([b"before"]), acks=-1).error_code == 0
        assert cluster.stop_service(cluster.broker_name(leaving))  # SIGTERM, waits for the exit
        log = cluster.log_path(cluster.broker_name(leaving)).read_text()
        assert f"controlled shutdown of broker {leaving} succeeded" in log
        moved = leaders(admin, "moving")
        assert all(moved[p] not in (leaving, -1) for p in led), moved
        (description,) = admin.describe_topics(["moving"]).values()
        assert all(leaving not in p.isr for p in description.partitions)
        for partition in range(3):
            result = client.produce("moving", partition, build_batch([b"after"]), acks=-1)
            assert result.error_code == 0 and result.base_offset == 1
