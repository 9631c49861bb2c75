"""Prometheus metrics of a running cluster (two controllers, three brokers, a coordinator, an HTTP
gateway), scraped from every service's `/metrics` and parsed as Prometheus parses them: per-API
request counts, per-topic traffic and log gauges, the active controller, under-replicated
partitions and ISR shrinks while a follower is stopped, and consumer lag equal to what
`odradek consumer-groups --describe` prints."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.clients.consumer import Consumer, OffsetAndMetadata
from services.common.records import build_batch
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import (
    CLIENT_CONFIG,
    TEST_BROKER_CONFIG,
    create_topic,
    gateway_module_cluster,
    produce_values,
)
from tests.integration.test_replication import paused

# A short lag time, so a stopped follower leaves the ISR within seconds; a long ZooKeeper session,
# so it is the leader that shrinks the ISR (not the controller, on the follower's session expiry).
BROKER_CONFIG = {**TEST_BROKER_CONFIG, "replica.lag.time.max.ms": 2000, "zookeeper.session.timeout.ms": 30000}

Samples = list[tuple[str, dict[str, str], float]]


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "metrics", brokers=3,
                                controllers=2, coordinators=1, broker_config=BROKER_CONFIG) as cluster:
        yield cluster


def scrape(cluster: LocalCluster, name: str) -> Samples:
    url = cluster.metrics_url(name)
    assert url is not None, f"{name} serves no metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples]


def values(samples: Samples, name: str, **labels: str) -> list[float]:
    return [value for sample, found, value in samples
            if sample == name and all(found.get(k) == v for k, v in labels.items())]


def total(cluster: LocalCluster, names: list[str], metric: str, **labels: str) -> float:
    return sum(sum(values(scrape(cluster, name), metric, **labels)) for name in names)


def broker_value(cluster: LocalCluster, broker_id: int, metric: str, **labels: str) -> float:
    found = values(scrape(cluster, cluster.broker_name(broker_id)), metric, **labels)
    assert len(found) == 1, (metric, labels, found)
    return found[0]


def test_every_service_serves_its_families(cluster, admin, writer):
    topic = create_topic(admin, "metered", 1, 3)
    for round_ in range(5):
        produce_values(writer, topic, 0, [b"value-%d-%d" % (round_, i) for i in range(10)])
    fetched = writer.fetch(topic, 0, 0)
    assert fetched.records
    leader = admin.describe_topics([topic])[topic].partitions[0].leader
    with httpx.Client(base_url=cluster.gateway_url(), timeout=20) as http:
        assert http.get("/topics").status_code == 200

    brokers = cluster.broker_names
    assert total(cluster, brokers, "odradek_request_total", service="broker", api="Produce", error="NONE") >= 5
    assert total(cluster, brokers, "odradek_request_total", service="broker", api="Fetch") >= 1
    assert total(cluster, brokers, "odradek_request_seconds_count", service="broker", api="Produce") >= 5
    controllers = cluster.controller_names
    assert total(cluster, controllers, "odradek_controller_active_controller_count") == 1
    assert total(cluster, controllers, "odradek_request_total", service="controller", api="CreateTopics") >= 1
    wait_until(lambda: total(cluster, cluster.coordinator_names, "odradek_coordinator_owned_partitions") == 50, 30,
               0.2, message="the coordinator to load every __consumer_offsets partition")

    on_leader = scrape(cluster, cluster.broker_name(leader))
    assert values(on_leader, "odradek_broker_topic_messages_in_total", topic=topic) == [50]
    assert values(on_leader, "odradek_broker_topic_bytes_in_total", topic=topic)[0] > 0
    assert values(on_leader, "odradek_broker_topic_bytes_out_total", topic=topic)[0] >= len(fetched.records)
    assert values(on_leader, "odradek_broker_topic_messages_out_total", topic=topic)[0] >= 50
    assert values(on_leader, "odradek_replica_manager_leader_count")[0] >= 1
    assert len(values(on_leader, "odradek_delayed_operation_purgatory_purgatory_size")) == 2
    for broker_id in (1, 2, 3):
        wait_until(lambda b=broker_id: broker_value(cluster, b, "odradek_log_log_end_offset",
                                                    topic=topic, partition="0") == 50, 15,
                   message=f"broker {broker_id}'s replica to reach offset 50")
        assert broker_value(cluster, broker_id, "odradek_log_size", topic=topic, partition="0") > 0
        assert broker_value(cluster, broker_id, "odradek_log_num_log_segments", topic=topic, partition="0") == 1
    on_leader = scrape(cluster, cluster.broker_name(leader))
    assert values(on_leader, "odradek_broker_topic_replication_bytes_out_total")[0] > 0

    gateway = scrape(cluster, "gateway-1")
    assert values(gateway, "odradek_gateway_requests_total", method="GET", route="/topics", status="200") == [1]
    assert values(gateway, "odradek_gateway_request_seconds_count", method="GET", route="/topics") == [1]
    assert values(gateway, "odradek_gateway_consumer_instances") == [0]


def test_a_stopped_follower_is_under_replicated_on_the_leader_then_rejoins(cluster, admin, writer):
    topic = create_topic(admin, "shrinking", 1, 3)
    produce_values(writer, topic, 0, [b"before"])
    info = admin.describe_topics([topic])[topic].partitions[0]
    leader, follower = info.leader, sorted(set(info.replicas) - {info.leader})[0]
    shrinks_before = broker_value(cluster, leader, "odradek_replica_manager_isr_shrinks_total")
    expands_before = broker_value(cluster, leader, "odradek_replica_manager_isr_expands_total")
    wait_until(lambda: broker_value(cluster, leader, "odradek_replica_manager_under_replicated_partitions") == 0,
               30, 0.2, message="every partition the leader leads to have its full ISR before the pause")
    with paused(cluster, follower):
        writer.produce(topic, 0, build_batch([b"while the follower is stopped"]), acks=1)
        wait_until(lambda: broker_value(cluster, leader, "odradek_replica_manager_under_replicated_partitions") >= 1,
                   20, 0.2, message="the leader to count the partition under-replicated")
        assert broker_value(cluster, leader, "odradek_replica_manager_isr_shrinks_total") > shrinks_before
    wait_until(lambda: broker_value(cluster, leader, "odradek_replica_manager_under_replicated_partitions") == 0,
               30, 0.2, message="the follower to rejoin the ISR")
    assert broker_value(cluster, leader, "odradek_replica_manager_isr_expands_total") > expands_before


def describe_lags(cluster: LocalCluster, group: str) -> dict[tuple[str, int], int]:
    """LAG per partition as the real `odradek consumer-groups --describe` prints it."""
    command = [sys.executable, "-m", "services.clients.cli", "consumer-groups", "--bootstrap-server",
               cluster.bootstrap_servers, "--describe", "--group", group]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=cluster.env)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.strip() and not line.startswith("Consumer")]
    header = rows[0]
    lags = {}
    for row in rows[1:]:
        fields = dict(zip(header, row, strict=False))
        lags[(fields["TOPIC"], int(fields["PARTITION"]))] = int(fields["LAG"])
    return lags


def metric_lags(cluster: LocalCluster, group: str) -> dict[tuple[str, int], float]:
    lags = {}
    for name in cluster.coordinator_names:
        for sample, labels, value in scrape(cluster, name):
            if sample == "odradek_consumer_group_lag" and labels["group"] == group:
                lags[(labels["topic"], int(labels["partition"]))] = value
    return lags


def test_consumer_lag_per_partition_equals_the_describe_tool(cluster, admin, writer):
    topic = create_topic(admin, "lagged", 2, 3)
    for partition, count in ((0, 30), (1, 40)):
        produce_values(writer, topic, partition, [b"v%d" % i for i in range(count)])
    group = "metered-group"
    consumer = Consumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group, enable_auto_commit=False,
                        **CLIENT_CONFIG)
    try:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        consumer.commit_sync({TopicPartition(topic, 0): OffsetAndMetadata(10),
                              TopicPartition(topic, 1): OffsetAndMetadata(35)})
    finally:
        consumer.close()
    expected = describe_lags(cluster, group)
    assert expected == {(topic, 0): 20, (topic, 1): 5}
    wait_until(lambda: metric_lags(cluster, group) == expected, 20, 0.5,
               message=lambda: f"the coordinator's lag {metric_lags(cluster, group)} to equal {expected}")
    coordinators = cluster.coordinator_names
    assert total(cluster, coordinators, "odradek_consumer_group_committed_offset", group=group, partition="1") == 35
    assert total(cluster, coordinators, "odradek_coordinator_num_groups") >= 1
    assert total(cluster, coordinators, "odradek_request_total", service="coordinator", api="OffsetCommit") >= 1
