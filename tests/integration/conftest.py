"""Cluster fixtures: real controller and broker processes on loopback, started by the same
`LocalCluster` launcher as `make up`, in a temporary directory, against the session's ZooKeeper in
the test's own chroot. Every process is stopped by its pid at teardown; on failure the tail of
every service log is printed."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from services.clients.admin import Admin
from services.clients.admin_types import NewTopic
from services.clients.lowlevel import LowLevelClient
from services.common.errors import Errors
from services.common.health import http_ready
from services.common.records import build_batch
from services.common.zk import OdradekZkClient
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import free_port, stop_process, wait_until
from tests.conftest import delete_tree

# Short timeouts so failure handling shows within a test's patience.
TEST_BROKER_CONFIG = {
    "zookeeper.session.timeout.ms": 6000,
    "log.segment.delete.delay.ms": 0,
    "controlled.shutdown.retry.backoff.ms": 500,
}
TEST_CONTROLLER_CONFIG = {
    "zookeeper.session.timeout.ms": 6000,
}
# At teardown a service gets this long to exit on SIGTERM before SIGKILL: a broker's controlled
# shutdown normally takes a few seconds, and nothing checks it then.
TEARDOWN_STOP_TIMEOUT_S = 5.0
SESSION_TIMEOUT_MS = TEST_BROKER_CONFIG["zookeeper.session.timeout.ms"]
SESSION_TIMEOUT_S = SESSION_TIMEOUT_MS / 1000
TEST_COORDINATOR_CONFIG = {
    "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
    "group.initial.rebalance.delay.ms": 300,
    "offsets.commit.timeout.ms": 5000,
}

# Settings of the tests' clients: short request timeouts and backoffs, so a retry shows quickly.
CLIENT_CONFIG = {"request_timeout_ms": 5000, "retry_backoff_ms": 50, "default_api_timeout_ms": 30000}
# For topics of thousands of partitions, whose creation and deletion take many seconds.
SCALE_CLIENT_CONFIG = {"request_timeout_ms": 30000, "retry_backoff_ms": 100, "default_api_timeout_ms": 120000}

ClusterFactory = Callable[..., LocalCluster]


@pytest.fixture
def cluster_factory(request: pytest.FixtureRequest, zookeeper, zk_chroot: str,
                    tmp_path) -> Iterator[ClusterFactory]:
    clusters: list[LocalCluster] = []

    def make(brokers: int = 3, controllers: int = 2, broker_config: dict | None = None,
             controller_config: dict | None = None, start: bool = True, coordinators: int = 0,
             coordinator_config: dict | None = None) -> LocalCluster:
        cluster = LocalCluster(
            tmp_path / f"cluster-{len(clusters)}", brokers=brokers, controllers=controllers,
            coordinators=coordinators,
            coordinator_config={**TEST_COORDINATOR_CONFIG, **(coordinator_config or {})},
            free_ports=True, zookeeper_connect=zookeeper.connect_string, zookeeper_chroot=zk_chroot,
            broker_config={**TEST_BROKER_CONFIG, **(broker_config or {})},
            controller_config={**TEST_CONTROLLER_CONFIG, **(controller_config or {})},
        )
        clusters.append(cluster)
        if start:
            cluster.start()
        return cluster

    yield make
    report = getattr(request.node, "rep_call", None)
    for cluster in clusters:
        if report is None or report.failed:
            print(f"\n===== service logs of {cluster.base_dir} =====\n{cluster.dump_logs()}")
        cluster.stop(timeout_s=TEARDOWN_STOP_TIMEOUT_S)


@pytest.fixture
def cluster(cluster_factory: ClusterFactory) -> LocalCluster:
    """Two controllers and three brokers."""
    return cluster_factory()


@contextlib.contextmanager
def module_cluster(request: pytest.FixtureRequest, zookeeper, zk_root_client, tmp_path_factory, name: str,
                   **layout) -> Iterator[LocalCluster]:
    """A cluster for a whole test module (starting clusters is what costs), in its own chroot:
    `layout` is LocalCluster's (brokers, controllers, coordinators, *_config; the test configs are
    the defaults). Service logs are printed if any test of the module failed."""
    chroot = f"/odradek-test-{name}-{id(request)}"
    zk_root_client.ensure_path(chroot)
    layout = {"broker_config": TEST_BROKER_CONFIG, "controller_config": TEST_CONTROLLER_CONFIG,
              "coordinator_config": TEST_COORDINATOR_CONFIG, **layout}
    cluster = LocalCluster(tmp_path_factory.mktemp(f"{name}-cluster"), free_ports=True,
                           zookeeper_connect=zookeeper.connect_string, zookeeper_chroot=chroot, **layout)
    cluster.chroot = chroot
    failures_before = request.session.testsfailed
    try:
        cluster.start()
        yield cluster
    finally:
        if request.session.testsfailed > failures_before:
            print(f"\n===== service logs of {cluster.base_dir} =====\n{cluster.dump_logs()}")
        cluster.stop(timeout_s=TEARDOWN_STOP_TIMEOUT_S)
        delete_tree(zk_root_client, chroot)


@pytest.fixture(scope="module")
def client_config() -> dict[str, int]:
    """Settings of the module's `admin` and `writer`; a module overrides this fixture with its own."""
    return CLIENT_CONFIG


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster, client_config: dict[str, int]) -> Iterator[Admin]:
    """An Admin of the module's cluster: for modules whose `cluster` fixture is module-scoped."""
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **client_config) as client:
        yield client


@pytest.fixture(scope="module")
def writer(cluster: LocalCluster, client_config: dict[str, int]) -> Iterator[LowLevelClient]:
    """A LowLevelClient of the module's cluster that tests produce with."""
    with LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **client_config) as client:
        yield client


def create_topic(admin: Admin, name: str, partitions: int = 1, replication: int = 1, *,
                 configs: dict[str, str] | None = None, assignment: dict[int, list[int]] | None = None,
                 timeout_s: float = 30.0) -> str:
    """Creates the topic (by counts, or by `assignment`) and waits until metadata shows every partition."""
    if assignment is not None:
        admin.create_topics([NewTopic(name, replica_assignment=assignment, configs=configs)])
        partitions = len(assignment)
    else:
        admin.create_topics([NewTopic(name, partitions, replication, configs=configs)])
    admin.wait_for_topic(name, timeout_s, partitions=partitions)
    return name


def produce_values(writer: LowLevelClient, topic: str, partition: int, values: list[bytes], **batch) -> int:
    """Appends one batch of `values` with acks=all; returns its base offset."""
    result = writer.produce(topic, partition, build_batch(values, **batch), acks=-1, timeout_ms=15000)
    assert result.error_code == Errors.NONE, result
    return result.base_offset


@contextlib.contextmanager
def zk_session(connect_string: str) -> Iterator[OdradekZkClient]:
    """Odradek's ZooKeeper layer over a session of its own, closed however the block ends."""
    client = KazooClient(hosts=connect_string)
    client.start()
    try:
        yield OdradekZkClient(client)
    finally:
        client.stop()
        client.close()


# Short timeouts for the gateway's own clients, so a request to a stopped cluster fails quickly.
TEST_GATEWAY_CONFIG = {"request.timeout.ms": 10000, "consumer.request.timeout.ms": 500}


@contextlib.contextmanager
def gateway_module_cluster(request: pytest.FixtureRequest, zookeeper, zk_root_client, tmp_path_factory,
                           name: str, **layout) -> Iterator[LocalCluster]:
    """`module_cluster` with one HTTP gateway (a real uvicorn process, `cluster.gateway_url()`), one
    controller, one broker and one group coordinator unless `layout` says otherwise."""
    layout = {"brokers": 1, "controllers": 1, "coordinators": 1, "gateways": 1,
              **layout, "gateway_config": {**TEST_GATEWAY_CONFIG, **layout.get("gateway_config", {})}}
    with module_cluster(request, zookeeper, zk_root_client, tmp_path_factory, name, **layout) as cluster:
        yield cluster


@contextlib.contextmanager
def worker_gateway(cluster: LocalCluster, log: Path, workers: int, **settings) -> Iterator[dict]:
    """`python -m services.gateway` with `workers` worker processes against the cluster, serving on
    the front port and every worker's own port: {"front": url, "workers": [url of worker i],
    "process": the supervisor}; stopped by SIGTERM to its pid."""
    front = free_port()
    worker_base = free_port()
    while not all(port != front and _port_free(port) for port in range(worker_base, worker_base + workers)):
        worker_base = free_port()
    overrides = {"bootstrap.servers": cluster.bootstrap_servers, "listeners": f"http://127.0.0.1:{front}",
                 "num.workers": workers, "worker.base.port": worker_base, **settings}
    command = [sys.executable, "-m", "services.gateway"]
    for key, value in overrides.items():
        command += ["--override", f"{key}={value}"]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    urls = [f"http://127.0.0.1:{port}" for port in (front, *range(worker_base, worker_base + workers))]
    try:
        wait_until(lambda: all(http_ready(f"{url}/health") for url in urls), 60,
                   message=lambda: f"the {workers}-worker gateway to serve:\n{log.read_text()[-3000:]}")
        yield {"front": urls[0], "workers": urls[1:], "process": process}
    finally:
        stop_process(process, timeout_s=20)


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
