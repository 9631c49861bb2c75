"""Services killed with SIGKILL and started again at once, through the launcher (the code behind
`odradek dev kill` and `odradek dev start`), while ZooKeeper still holds the killed process's
session: each restarted process waits for that session to expire instead of failing to register.

What must hold, on one cluster (two controllers, three brokers, one coordinator):
- a broker bounced three times in a row stays up every time, registers with a new broker epoch
  and takes its replicas back into the ISR (acks=all with min.insync.replicas=3 succeeds again);
- a broker whose session expires while it is paused (SIGSTOP) registers again in a new session
  when it resumes, and rejoins the same way;
- the active controller, restarted, stays up as the active controller or a standby, never taking
  its predecessor's `/controller` for its own, and the cluster still creates topics;
- the coordinator, restarted, serves its group again: a committed offset survives, and a new
  commit is accepted.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from services.clients.admin import Admin
from services.clients.admin_types import NewTopic
from services.clients.consumer import OffsetAndMetadata
from services.clients.lowlevel import LowLevelClient
from services.common.errors import Errors
from services.common.pb.odradek.controller.v1 import controller_pb2 as pb
from services.common.pb.odradek.controller.v1 import controller_pb2_grpc
from services.common.records import build_batch
from services.common.service import node_channel
from services.common.topic_partition import TopicPartition
from services.common.zk import OdradekZkClient
from services.common.zk.controller import CONTROLLER_PATH
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import module_cluster

START_TIMEOUT_S = 60.0
REJOIN_TIMEOUT_S = 60.0
BOUNCES = 3
TOPIC = "bounced"
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "restarts", brokers=3,
                        controllers=2, coordinators=1) as local:
        yield local


@pytest.fixture(scope="module")
def zk_raw(cluster: LocalCluster, zookeeper) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zookeeper.connect_string + cluster.chroot, timeout=10)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


@pytest.fixture(scope="module")
def zk(zk_raw: KazooClient) -> OdradekZkClient:
    return OdradekZkClient(zk_raw)


@pytest.fixture(scope="module")
def topic(admin: Admin) -> str:
    """Three replicas of every partition, all required in the ISR for acks=all."""
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "3"})])
    admin.wait_for_topic(TOPIC, 30, partitions=PARTITIONS)
    return TOPIC


def restart_at_once(cluster: LocalCluster, name: str) -> int:
    """SIGKILL, then start again with the same config; returns the new pid once it serves."""
    cluster.kill_service(name)
    return cluster.start_service(name, timeout_s=START_TIMEOUT_S)


def produce_to_all_replicas(writer: LowLevelClient, partition: int, value: str) -> bool:
    """An acks=all append to a topic with min.insync.replicas=3: it succeeds only with all three
    replicas in the leader's ISR."""
    result = writer.produce(TOPIC, partition, build_batch([value.encode()]), acks=-1, timeout_ms=10000)
    return result.error_code == 0


def test_a_broker_killed_and_restarted_at_once_rejoins_each_time(cluster, zk, topic, writer):
    name = cluster.broker_names[1]
    broker_id = cluster.services[name].node_id
    epochs = [zk.get_broker(broker_id).broker_epoch]
    for bounce in range(BOUNCES):
        pid = restart_at_once(cluster, name)

        registered = zk.get_broker(broker_id)      # it serves only once registered
        assert registered is not None and registered.broker_epoch > epochs[-1]
        epochs.append(registered.broker_epoch)
        value = f"after bounce {bounce}"
        for partition in range(PARTITIONS):
            wait_until(lambda p=partition, v=value: produce_to_all_replicas(writer, p, v), REJOIN_TIMEOUT_S, 0.2,
                       message=f"{name} back in the ISR of {TOPIC}-{partition}")
            assert broker_id in zk.get_partition_state(TopicPartition(TOPIC, partition)).value.isr
        assert cluster.running_pid(name) == pid
    assert zk.get_broker(broker_id).broker_epoch == epochs[-1]


def test_a_broker_whose_session_expired_registers_again(cluster, zk, topic, writer):
    name = cluster.broker_names[2]
    broker_id = cluster.services[name].node_id
    before = zk.get_broker(broker_id).broker_epoch
    cluster.signal_service(name, signal.SIGSTOP)
    try:
        wait_until(lambda: zk.get_broker(broker_id) is None, REJOIN_TIMEOUT_S, 0.2,
                   message=f"the session of the paused {name} to expire")
    finally:
        cluster.signal_service(name, signal.SIGCONT)

    registered = wait_until(lambda: zk.get_broker(broker_id), REJOIN_TIMEOUT_S, 0.2,
                            message=f"{name} to register again")
    assert registered.broker_epoch > before
    for partition in range(PARTITIONS):
        wait_until(lambda p=partition: produce_to_all_replicas(writer, p, "after expiry"), REJOIN_TIMEOUT_S, 0.2,
                   message=f"{name} back in the ISR of {TOPIC}-{partition}")


def describe(cluster: LocalCluster, name: str) -> pb.DescribeClusterResponse:
    channel = node_channel(cluster.endpoint(name))
    try:
        return controller_pb2_grpc.ControllerServiceStub(channel).DescribeCluster(pb.DescribeClusterRequest(),
                                                                                  timeout=10)
    finally:
        channel.close()


def test_the_active_controller_killed_and_restarted_at_once_is_active_or_standby(cluster, zk, zk_raw, admin):
    active = wait_until(zk.get_controller, 15, message="an active controller")
    name = f"controller-{active.controller_id}"
    old_session = zk_raw.exists(CONTROLLER_PATH).ephemeralOwner

    pid = restart_at_once(cluster, name)

    def settled() -> bool:
        """A controller is elected in a live session and the restarted one answers as what it is."""
        stat = zk_raw.exists(CONTROLLER_PATH)
        elected = zk.get_controller() if stat is not None and stat.ephemeralOwner != old_session else None
        if elected is None:
            return False
        answer = describe(cluster, name)
        if elected.controller_id == active.controller_id:
            return (answer.error_code, answer.controller_id) == (0, active.controller_id)
        return answer.error_code == Errors.NOT_CONTROLLER

    wait_until(settled, REJOIN_TIMEOUT_S, 0.2, message=f"{name} to be the active controller or a standby")
    admin.create_topics([NewTopic("after-controller-restart", 2, 3)])
    admin.wait_for_topic("after-controller-restart", 30, partitions=2)
    assert cluster.running_pid(name) == pid


def test_the_coordinator_killed_and_restarted_at_once_serves_its_groups_again(cluster, admin, topic):
    (name,) = cluster.coordinator_names
    committed = {TopicPartition(TOPIC, 0): 7}
    admin.alter_consumer_group_offsets("restarted-group", committed)

    pid = restart_at_once(cluster, name)

    assert admin.list_consumer_group_offsets("restarted-group") == {TopicPartition(TOPIC, 0): OffsetAndMetadata(7)}
    admin.alter_consumer_group_offsets("restarted-group", {TopicPartition(TOPIC, 0): 8})
    assert admin.list_consumer_group_offsets("restarted-group") == {TopicPartition(TOPIC, 0): OffsetAndMetadata(8)}
    assert cluster.running_pid(name) == pid
