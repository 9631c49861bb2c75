"""Topics of thousands of partitions on three brokers and two controllers: a 4,000-partition
topic at replication factor 3 is created and usable (its partition states go to ZooKeeper in
bounded multis) and a small topic created right after works; a controller killed with SIGKILL
while such a creation is half written leaves work that the next controller finishes; a request
adding more partitions than one request may (10,000) is refused before anything is written."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from services.clients.admin_types import NewTopic
from services.clients.lowlevel import LowLevelClient
from services.common.errors import KafkaError
from services.common.records import build_batch
from services.common.zk import OdradekZkClient
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import SCALE_CLIENT_CONFIG, module_cluster, zk_session

PARTITIONS = 4000
READY_TIMEOUT_S = 90


@pytest.fixture(scope="module")
def client_config() -> dict[str, int]:
    return SCALE_CLIENT_CONFIG


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "partition-scale", brokers=3,
                        controllers=2) as local:
        yield local
        # killed, not shut down: controlled shutdowns would move thousands of leaderships for nothing,
        # and then a controller would handle the brokers' exits
        for name in local.broker_names + local.controller_names:
            if local.running_pid(name) is not None:
                local.kill_service(name)


@pytest.fixture(scope="module")
def zk(cluster: LocalCluster, zookeeper) -> Iterator[OdradekZkClient]:
    with zk_session(f"{zookeeper.connect_string}{cluster.chroot}") as client:
        yield client


def produce_and_fetch(cluster: LocalCluster, topic: str, partitions: list[int]) -> None:
    with LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **SCALE_CLIENT_CONFIG) as client:
        for partition in partitions:
            value = f"{topic}-{partition}".encode()
            result = client.produce(topic, partition, build_batch([value]), acks=-1, timeout_ms=30000)
            assert result.error_code == 0, (partition, result)
            records, _ = client.fetch_records(topic, partition, result.base_offset)
            assert [r.value for r in records][:1] == [value], partition


def partition_states(zk: OdradekZkClient, topic: str) -> int:
    return len(zk.get_partitions(topic))


def test_a_topic_of_4000_partitions_is_created_and_usable(cluster, admin, zk):
    admin.create_topics([NewTopic("wide", PARTITIONS, 3)])
    description = admin.wait_for_topic("wide", READY_TIMEOUT_S, partitions=PARTITIONS)
    assert len(description.partitions) == PARTITIONS
    assert partition_states(zk, "wide") == PARTITIONS
    produce_and_fetch(cluster, "wide", [0, 1, PARTITIONS // 2, PARTITIONS - 1])

    admin.create_topics([NewTopic("small-after-wide", 3, 3)])
    admin.wait_for_topic("small-after-wide", 30, partitions=3)
    produce_and_fetch(cluster, "small-after-wide", [0, 1, 2])


def test_a_topic_of_more_partitions_than_a_request_may_add_is_refused_before_anything_is_written(admin, zk):
    with pytest.raises(KafkaError) as refused:
        admin.create_topics([NewTopic("too-wide", 60000, 3)])
    assert refused.value.error_name == "POLICY_VIOLATION"
    assert "at most 10000" in str(refused.value)
    assert "too-wide" not in zk.get_all_topics()
    admin.create_topics([NewTopic("small-after-too-wide", 1, 3)])
    admin.wait_for_topic("small-after-too-wide", 30, partitions=1)


def test_the_next_controller_finishes_a_creation_its_killed_predecessor_left_half_written(cluster, admin, zk):
    topic = "wide-interrupted"
    active = wait_until(zk.get_controller, 15, message="an active controller")
    victim = f"controller-{active.controller_id}"
    creator = threading.Thread(
        target=lambda: admin.create_topics([NewTopic(topic, PARTITIONS, 3)], timeout_ms=5000, raise_errors=False),
        daemon=True)
    creator.start()

    def kill_when_half_written() -> int:
        """Kills the active controller once some but not all partition states are written."""
        written = partition_states(zk, topic)
        if 0 < written < PARTITIONS:
            cluster.kill_service(victim)
            return written
        return 0

    written_at_kill = wait_until(kill_when_half_written, 60, 0.002,
                                 message="some but not all partition states of the topic to be written")
    assert partition_states(zk, topic) < PARTITIONS, f"all written after the kill at {written_at_kill}"

    successor = wait_until(lambda: (c := zk.get_controller()) and c.controller_id != active.controller_id and c,
                           30, message="another controller to take over")
    assert successor
    wait_until(lambda: partition_states(zk, topic) == PARTITIONS, READY_TIMEOUT_S, 0.5,
               message=lambda: f"all {PARTITIONS} partition states, have {partition_states(zk, topic)}")
    admin.wait_for_topic(topic, READY_TIMEOUT_S, partitions=PARTITIONS)
    produce_and_fetch(cluster, topic, [0, PARTITIONS - 1])
    creator.join(timeout=30)
    cluster.start_service(victim)
