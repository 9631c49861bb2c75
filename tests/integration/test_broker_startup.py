"""A broker's start-up and fencing, on one cluster (one controller, one broker):

- its log dir holds `meta.properties` with version 0, its broker.id and ZooKeeper's cluster id;
- started on a log dir of another cluster, or of another broker id, it refuses to start (exit,
  nothing served, nothing registered) with an error naming the file and both ids; with its own
  meta.properties back it starts again;
- restarted, it registers with a new broker epoch (the czxid of `/brokers/ids/<id>`), and a
  LeaderAndIsr stamped with its previous epoch, sent straight over gRPC, is refused with
  STALE_BROKER_EPOCH (77), while its current epoch passes the fence.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.broker.log.meta_properties import MetaProperties, read_meta_properties, write_meta_properties
from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2, broker_pb2_grpc
from services.common.service import node_channel
from services.common.zk import OdradekZkClient
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import module_cluster, zk_session

START_TIMEOUT_S = 30.0
BROKER_ID = 1
BROKER = f"broker-{BROKER_ID}"


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "startup", brokers=1,
                        controllers=1) as local:
        yield local


@pytest.fixture(scope="module")
def zk(cluster: LocalCluster, zookeeper) -> Iterator[OdradekZkClient]:
    with zk_session(zookeeper.connect_string + cluster.chroot) as client:
        yield client


def broker_epoch(zk: OdradekZkClient) -> int:
    registered = zk.get_broker(BROKER_ID)
    return -1 if registered is None else registered.broker_epoch


def refused_start(cluster: LocalCluster) -> str:
    """Starts the broker, waits for it to exit, returns what it logged."""
    log = cluster.log_path(BROKER)
    logged_before = log.stat().st_size if log.exists() else 0
    cluster.start_service(BROKER, wait=False)
    wait_until(lambda: cluster.running_pid(BROKER) is None, START_TIMEOUT_S, 0.1,
               message=lambda: f"{BROKER} to refuse to start:\n{log.read_text()[logged_before:]}")
    return log.read_bytes()[logged_before:].decode(errors="replace")


def test_meta_properties_holds_the_broker_and_zookeeper_cluster_id(cluster: LocalCluster, zk: OdradekZkClient):
    log_dir = cluster.data_dir(BROKER)
    text = (log_dir / "meta.properties").read_text()
    assert "version=0\n" in text and f"broker.id={BROKER_ID}\n" in text
    assert read_meta_properties(str(log_dir)) == MetaProperties(BROKER_ID, zk.get_cluster_id())


def test_log_dir_of_another_cluster_or_broker_refuses_the_start(cluster: LocalCluster, zk: OdradekZkClient):
    log_dir = str(cluster.data_dir(BROKER))
    own = read_meta_properties(log_dir)
    cluster_id = zk.get_cluster_id()
    assert own is not None and own.cluster_id == cluster_id
    cluster.stop_service(BROKER)
    wait_until(lambda: zk.get_broker(BROKER_ID) is None, START_TIMEOUT_S, message="the broker to deregister")
    path = f"{log_dir}/meta.properties"
    try:
        write_meta_properties(log_dir, MetaProperties(BROKER_ID, "another-cluster"))
        logged = refused_start(cluster)
        assert "INCONSISTENT_CLUSTER_ID" in logged and "broker cannot start" in logged
        assert cluster_id in logged and "another-cluster" in logged and path in logged
        assert zk.get_broker(BROKER_ID) is None
        assert read_meta_properties(log_dir) == MetaProperties(BROKER_ID, "another-cluster")  # left as found

        write_meta_properties(log_dir, MetaProperties(BROKER_ID + 6, cluster_id))
        logged = refused_start(cluster)
        assert f"broker.id {BROKER_ID}" in logged and f"broker.id {BROKER_ID + 6}" in logged and path in logged
        assert zk.get_broker(BROKER_ID) is None
    finally:
        write_meta_properties(log_dir, own)
    cluster.start_service(BROKER, timeout_s=START_TIMEOUT_S)
    wait_until(lambda: zk.get_broker(BROKER_ID) is not None, START_TIMEOUT_S, message="the broker to register")
    assert read_meta_properties(log_dir) == own


def test_restart_gets_a_new_epoch_and_the_old_epoch_is_refused(cluster: LocalCluster, zk: OdradekZkClient):
    wait_until(lambda: broker_epoch(zk) > 0, START_TIMEOUT_S, message="the broker to register")
    old_epoch = broker_epoch(zk)
    cluster.restart_service(BROKER, timeout_s=START_TIMEOUT_S)
    new_epoch = wait_until(lambda: broker_epoch(zk) if broker_epoch(zk) > old_epoch else None,
                           START_TIMEOUT_S, message="the restarted broker to register with a new epoch")
    assert new_epoch > old_epoch
    controller_epoch = zk.get_controller_epoch().epoch

    def leader_and_isr(epoch: int) -> broker_pb2.LeaderAndIsrResponse:
        request = broker_pb2.LeaderAndIsrRequest(controller_id=0, controller_epoch=controller_epoch,
                                                 broker_epoch=epoch)
        with node_channel(cluster.endpoint(BROKER)) as channel:
            return broker_pb2_grpc.BrokerServiceStub(channel).LeaderAndIsr(request, timeout=10)

    stale = leader_and_isr(old_epoch)
    assert stale.error_code == Errors.STALE_BROKER_EPOCH == 77
    assert str(old_epoch) in stale.error_message and str(new_epoch) in stale.error_message
    # the current epoch, and a newer one the controller may already know, pass the fence
    assert leader_and_isr(new_epoch).error_code == Errors.NONE
    assert leader_and_isr(new_epoch + 1).error_code == Errors.NONE
