"""Where a broker's Kafka protocol listener is configured, registered and announced: the
`kafka.listeners` keys, the `/brokers/ids/<id>` endpoint, the controller's UpdateMetadata node, the
broker's metadata cache, and the development cluster's ports."""

from __future__ import annotations

import io

from services.broker.config import BrokerConfig
from services.broker.servicer import node_from_proto, node_to_proto
from services.common.shared_types import KAFKA_LISTENER_NAME, PLAINTEXT, BrokerInfo, EndPoint
from services.common.zk.brokers import decode_broker, encode_broker
from services.controller.broker_requests import node
from services.devcluster.cli import print_endpoints
from services.devcluster.launcher import LocalCluster


def test_kafka_listener_keys_and_the_advertised_address():
    config = BrokerConfig.load({"broker.id": 1, "zookeeper.connect": "zk", "kafka.listeners": "PLAINTEXT://:0"})
    assert config.kafka_listener.port == 0 and config.socket_request_max_bytes == 104857600
    assert config.socket_listen_backlog_size == 50
    assert BrokerConfig.load({"broker.id": 1, "zookeeper.connect": "zk",
                              "socket.listen.backlog.size": "4096"}).socket_listen_backlog_size == 4096
    assert config.kafka_advertised_listener(19092).host == "127.0.0.1"
    assert config.kafka_advertised_listener(19092).port == 19092
    advertised = BrokerConfig.load({"broker.id": 1, "zookeeper.connect": "zk", "kafka.listeners": "PLAINTEXT://:19092",
                                    "kafka.advertised.listeners": "PLAINTEXT://broker-1:19092"})
    assert (advertised.kafka_advertised_listener(19092).host, advertised.kafka_advertised_listener(19092).port) == (
        "broker-1", 19092)
    assert BrokerConfig.load({"broker.id": 1, "zookeeper.connect": "zk"}).kafka_listener is None


def test_the_kafka_endpoint_travels_from_registration_to_the_metadata_cache():
    info = BrokerInfo(2, (EndPoint("h2", 9192), EndPoint("h2", 19192, KAFKA_LISTENER_NAME, PLAINTEXT)), rack="r")
    registered = decode_broker(2, encode_broker(info))
    assert registered.endpoint(KAFKA_LISTENER_NAME) == EndPoint("h2", 19192, KAFKA_LISTENER_NAME, PLAINTEXT)
    announced = node(registered)
    assert (announced.host, announced.port, announced.kafka_host, announced.kafka_port) == ("h2", 9192, "h2", 19192)
    cached = node_from_proto(announced)
    assert (cached.kafka_host, cached.kafka_port, cached.rack) == ("h2", 19192, "r")
    assert node_from_proto(node_to_proto(cached)) == cached
    grpc_only = node_from_proto(node(BrokerInfo(3, (EndPoint("h3", 9292),))))
    assert (grpc_only.kafka_host, grpc_only.kafka_port) == (None, -1)


def test_the_development_cluster_gives_each_broker_a_kafka_listener(tmp_path):
    cluster = LocalCluster(tmp_path, brokers=3, controllers=1)
    assert [cluster.service_config(name)["kafka.listeners"] for name in cluster.broker_names] == [
        "PLAINTEXT://127.0.0.1:19092", "PLAINTEXT://127.0.0.1:19192", "PLAINTEXT://127.0.0.1:19292"]
    cluster.status = lambda: {}
    out = io.StringIO()
    print_endpoints(cluster, out)
    assert "Kafka protocol bootstrap servers (Kafka clients): 127.0.0.1:19092,127.0.0.1:19192,127.0.0.1:19292" in (
        out.getvalue())
