"""Controller election with a real ZooKeeper and real controller processes (no brokers).

Two controllers start; one wins `/controller`, the other stays standby and answers NOT_CONTROLLER.
After the active one is killed with SIGKILL, the standby takes over once ZooKeeper expires the
dead session, with the next controller epoch; a write
fenced by the deposed controller's epoch znode version is then refused. A controller stopped with
SIGTERM hands over at once, since closing its session removes `/controller`.
"""

from __future__ import annotations

import pytest

from services.common.errors import Errors
from services.common.pb.odradek.controller.v1 import controller_pb2 as pb
from services.common.pb.odradek.controller.v1 import controller_pb2_grpc
from services.common.service import node_channel
from services.common.topic_partition import TopicPartition
from services.common.zk import ControllerMovedError, OdradekZkClient, PartitionStateZnode
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import SESSION_TIMEOUT_S

TAKEOVER_TIMEOUT_S = SESSION_TIMEOUT_S + 30
START_TIMEOUT_S = 60.0
RPC_TIMEOUT_S = 10.0


@pytest.fixture
def cluster(cluster_factory) -> LocalCluster:
    return cluster_factory(brokers=0, controllers=2)


@pytest.fixture
def zk(zk_client) -> OdradekZkClient:
    return OdradekZkClient(zk_client)


def call(cluster: LocalCluster, name: str, method: str, request):
    channel = node_channel(cluster.endpoint(name))
    try:
        stub = controller_pb2_grpc.ControllerServiceStub(channel)
        return getattr(stub, method)(request, timeout=RPC_TIMEOUT_S)
    finally:
        channel.close()


def describe(cluster: LocalCluster, name: str) -> pb.DescribeClusterResponse:
    return call(cluster, name, "DescribeCluster", pb.DescribeClusterRequest())


def active_and_standby(cluster: LocalCluster, zk: OdradekZkClient) -> tuple[str, str]:
    """The names of the controller `/controller` names and of the other one, once it answers."""
    info = wait_until(zk.get_controller, 15, message="a controller to be elected")
    active = f"controller-{info.controller_id}"
    assert active in cluster.controller_names
    assert info.endpoint == cluster.endpoint(active)
    wait_until(lambda: describe(cluster, active).error_code == 0, 15, message=f"{active} to serve")
    (standby,) = [n for n in cluster.controller_names if n != active]
    return active, standby


def test_one_controller_is_active_and_the_standby_answers_not_controller(cluster, zk):
    active, standby = active_and_standby(cluster, zk)
    epoch = zk.get_controller_epoch()
    assert epoch is not None and epoch.epoch >= 1

    answer = describe(cluster, active)
    assert answer.controller_id == cluster.services[active].node_id
    assert answer.cluster_id == zk.get_cluster_id()
    assert list(answer.brokers) == []

    assert describe(cluster, standby).error_code == Errors.NOT_CONTROLLER
    request = pb.CreateTopicsRequest(timeout_ms=5000)
    request.topics.add(name="events", num_partitions=1, replication_factor=1)
    assert call(cluster, standby, "CreateTopics", request).error_code == Errors.NOT_CONTROLLER

    created = call(cluster, active, "CreateTopics", request)
    assert created.error_code == 0
    assert [(t.name, t.error_code) for t in created.topics] == [("events", Errors.INVALID_REPLICATION_FACTOR)]
    assert "events" not in zk.get_all_topics()


def test_standby_takes_over_when_the_active_controller_is_killed(cluster, zk):
    active, standby = active_and_standby(cluster, zk)
    before = zk.get_controller_epoch()
    assert before is not None

    cluster.kill_service(active)
    standby_id = cluster.services[standby].node_id

    def standby_elected() -> bool:
        info = zk.get_controller()
        return info is not None and info.controller_id == standby_id

    wait_until(standby_elected, TAKEOVER_TIMEOUT_S, message=f"{standby} to take over")
    after = zk.get_controller_epoch()
    assert after is not None and after.epoch == before.epoch + 1
    assert after.zk_version > before.zk_version
    wait_until(lambda: describe(cluster, standby).controller_id == standby_id, 10, message="the new view")

    # the deposed controller's writes are fenced: nothing is applied
    partition = TopicPartition("fenced", 0)
    with pytest.raises(ControllerMovedError):
        zk.create_partition_states(
            {partition: PartitionStateZnode(1, 0, (1,), before.epoch)}, epoch_zk_version=before.zk_version
        )
    assert zk.get_partition_state(partition) is None
    assert "fenced" not in zk.get_all_topics()

    # the old controller comes back as a standby
    cluster.start_service(active, timeout_s=START_TIMEOUT_S)
    wait_until(
        lambda: describe(cluster, active).error_code == Errors.NOT_CONTROLLER, 10, message=f"{active} standby"
    )
    assert zk.get_controller().controller_id == standby_id


def test_a_controller_stopped_gracefully_hands_over_at_once(cluster, zk):
    active, standby = active_and_standby(cluster, zk)
    before = zk.get_controller_epoch()
    cluster.stop_service(active)
    standby_id = cluster.services[standby].node_id
    info = wait_until(
        lambda: (c := zk.get_controller()) is not None and c.controller_id == standby_id,
        SESSION_TIMEOUT_S / 2,
        message=f"{standby} to take over before the session timeout",
    )
    assert info
    assert zk.get_controller_epoch().epoch == before.epoch + 1
    wait_until(lambda: describe(cluster, standby).error_code == 0, 10, message=f"{standby} to serve")
