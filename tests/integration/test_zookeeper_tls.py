"""ZooKeeper over TLS: a secured cluster with its own ZooKeeper (`odradek dev up --secure`) serves
ZooKeeper on a TLS port only, requiring client certificates; every service connects with its
own. The cluster creates a topic, confluent-kafka produces to it and consumes it in a group over
SASL_SSL; the administrator reaches ZooKeeper with `--zk-tls-config-file`; a ZooKeeper client
without a certificate, or in plaintext, is refused by the port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.handlers.threading import KazooTimeoutError

from services.clients import cli
from services.common.zk.connect import ZkClientTls, zk_client
from services.devcluster import secure as secure_layout
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import TEST_BROKER_CONFIG, TEST_CONTROLLER_CONFIG, TEST_COORDINATOR_CONFIG
from tests.integration.test_tls import produce_and_consume_in_a_group

pytest.importorskip("confluent_kafka")

REFUSED_WITHIN_S = 3.0


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("zk-tls-cluster"), brokers=1, controllers=1, coordinators=1,
                           free_ports=True, secure=True, broker_config=TEST_BROKER_CONFIG,
                           controller_config=TEST_CONTROLLER_CONFIG, coordinator_config=TEST_COORDINATOR_CONFIG)
    failures_before = request.session.testsfailed
    try:
        cluster.start(timeout_s=45)
        yield cluster
    finally:
        if request.session.testsfailed > failures_before:
            print(f"\n===== service logs of {cluster.base_dir} =====\n{cluster.dump_logs()}")
        cluster.stop()


def test_zookeeper_serves_tls_only_and_every_service_connects_with_its_certificate(cluster: LocalCluster) -> None:
    assert cluster.zookeeper_tls and cluster.zookeeper is not None
    config = cluster.zookeeper.config_path.read_text()
    assert "secureClientPort=" in config and "\nclientPort=" not in config and "ssl.clientAuth=need" in config
    for name in cluster.all_names:
        service_config = cluster.service_config(name)
        assert service_config["zookeeper.ssl.client.enable"] == "true"
        assert service_config["zookeeper.ssl.keystore.location"].endswith(f"{name}.keystore.pem")
        assert "use_ssl: True" in cluster.log_path(name).read_text(), f"{name} did not connect over TLS"


def test_a_secured_cluster_on_tls_zookeeper_creates_produces_and_consumes(cluster: LocalCluster) -> None:
    produce_and_consume_in_a_group(cluster, "zk-tls-topic", "zk-tls-group")
    zk = zk_client(cluster.zookeeper_connect, cluster.admin_zk_tls)
    zk.start(timeout=10)
    try:
        assert "zk-tls-topic" in zk.get_children("/brokers/topics")
    finally:
        zk.stop()
        zk.close()


def test_tools_reach_tls_zookeeper_with_a_zk_tls_config_file(cluster: LocalCluster, capsys) -> None:
    tls_file = cluster.base_dir / secure_layout.ZOOKEEPER_TLS_CONFIG_NAME
    code = cli.main(["configs", "--zookeeper", cluster.zookeeper_connect, "--zk-tls-config-file", str(tls_file),
                     "--entity-type", "users", "--entity-name", secure_layout.ADMIN_USER, "--describe",
                     "--timeout", "10000"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert f"Configs for user-principal '{secure_layout.ADMIN_USER}' are SCRAM-SHA-512=" in printed


@pytest.mark.parametrize("tls", ["no certificate", "plaintext"])
def test_a_zookeeper_client_without_a_certificate_is_refused(cluster: LocalCluster, tls: str) -> None:
    client_tls = ZkClientTls(None, str(secure_layout.ca_path(cluster.base_dir))) if tls == "no certificate" else None
    zk = zk_client(cluster.zookeeper_connect, client_tls)
    try:
        with pytest.raises(KazooTimeoutError):
            zk.start(timeout=REFUSED_WITHIN_S)
    finally:
        zk.stop()
        zk.close()

