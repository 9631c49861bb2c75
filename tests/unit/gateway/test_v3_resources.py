"""REST Proxy v3's shapes: resource URLs and CRNs, group states, lag summaries, and the Kafka
errors as v3 answers them."""

from __future__ import annotations

from types import SimpleNamespace

from services.clients.admin_types import ClusterDescription, ConsumerGroupDescription, MemberDescription
from services.clients.cluster import Node, PartitionInfo
from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition
from services.gateway.errors import from_kafka_error_v3
from services.gateway.routes.v3 import cluster_data, replica_data
from services.gateway.routes.v3_groups import PartitionLag, group_data, lag_summary_data, state_name
from services.gateway.routes.v3_resources import Links

AT = Links(SimpleNamespace(base_url="http://gw:8080/"), "c-1")


def test_urls_and_resource_names():
    assert AT.url("consumer-groups", "a/b c", "lags") == "http://gw:8080/v3/clusters/c-1/consumer-groups/a%2Fb%20c/lags"
    assert AT.crn(("topic", "t"), ("partition", 0)) == "crn:///kafka=c-1/topic=t/partition=0"
    assert AT.crn(("consumer-group", "g"), ("lag-summary", None)) == "crn:///kafka=c-1/consumer-group=g/lag-summary"
    topic = AT.resource("KafkaTopic", ("topics", "t"), (("topic", "t"),), topic_name="t")
    assert topic == {"kind": "KafkaTopic", "metadata": {"self": "http://gw:8080/v3/clusters/c-1/topics/t",
                                                        "resource_name": "crn:///kafka=c-1/topic=t"},
                     "cluster_id": "c-1", "topic_name": "t"}
    assert AT.collection("KafkaTopicList", ("topics",), [])["metadata"] == {
        "self": "http://gw:8080/v3/clusters/c-1/topics", "next": None}


def test_group_states_are_named_as_rest_proxy_names_them():
    assert [state_name(s) for s in ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead", "")] == \
        ["STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE", "EMPTY", "DEAD", "UNKNOWN"]


def test_the_lag_summary_names_the_first_largest_lag_and_the_total():
    member = MemberDescription("m-1", "i-1", "client-1", "/127.0.0.1")
    lags = [PartitionLag(TopicPartition("t", 0), 5, 5, None), PartitionLag(TopicPartition("t", 1), 2, 9, member),
            PartitionLag(TopicPartition("u", 0), 1, 8, None), PartitionLag(TopicPartition("u", 1), 9, 4, None)]
    summary = lag_summary_data(AT, "g", lags)
    assert {k: v for k, v in summary.items() if k.startswith(("max_lag", "total"))} == {
        "max_lag_consumer_id": "m-1", "max_lag_instance_id": "i-1", "max_lag_client_id": "client-1",
        "max_lag_topic_name": "t", "max_lag_partition_id": 1, "max_lag": 7, "total_lag": 14,
        "max_lag_consumer": {"related": "http://gw:8080/v3/clusters/c-1/consumer-groups/g/consumers/m-1"},
        "max_lag_partition": {"related": "http://gw:8080/v3/clusters/c-1/topics/t/partitions/1"}}
    assert summary["metadata"]["resource_name"] == "crn:///kafka=c-1/consumer-group=g/lag-summary"


def test_a_group_without_offsets_lags_by_nothing_and_links_nothing_missing():
    summary = lag_summary_data(AT, "g", [])
    assert {k: v for k, v in summary.items() if k.startswith(("max_lag", "total"))} == {
        "max_lag_consumer_id": "", "max_lag_instance_id": None, "max_lag_client_id": "",
        "max_lag_topic_name": None, "max_lag_partition_id": None, "max_lag": 0, "total_lag": 0}
    unheld = lag_summary_data(AT, "g", [PartitionLag(TopicPartition("t", 0), 1, 4, None)])
    assert "max_lag_consumer" not in unheld and unheld["max_lag_partition"] == {
        "related": "http://gw:8080/v3/clusters/c-1/topics/t/partitions/0"}


def test_only_brokers_are_linked_as_brokers():
    brokers = (Node(1, "h", 9092), Node(2, "h", 9192))
    assert "controller" not in cluster_data(AT, ClusterDescription("c-1", Node(1001, "h", 9093), brokers))
    assert cluster_data(AT, ClusterDescription("c-1", brokers[1], brokers))["controller"] == {
        "related": "http://gw:8080/v3/clusters/c-1/brokers/2"}
    group = ConsumerGroupDescription("g", False, (), "range", "Stable", coordinator=Node(2001, "h", 9094))
    assert "coordinator" not in group_data(AT, group)
    partition = PartitionInfo("t", 0, leader=1, leader_epoch=0, replicas=(1, 3), isr=(1,))
    assert replica_data(AT, partition, 1, {1, 2}) | {"metadata": None} == {
        "kind": "KafkaReplica", "metadata": None, "cluster_id": "c-1", "topic_name": "t", "partition_id": 0,
        "broker_id": 1, "is_leader": True, "is_in_sync": True,
        "broker": {"related": "http://gw:8080/v3/clusters/c-1/brokers/1"}}
    assert "broker" not in replica_data(AT, partition, 3, {1, 2})  # broker 3 is not live


def test_kafka_errors_as_v3_answers_them():
    def answer(name: str) -> tuple[int, int]:
        error = from_kafka_error_v3(KafkaError("x", error=Errors[name]))
        return error.status, error.error_code

    assert answer("UNKNOWN_TOPIC_OR_PARTITION") == (404, 40403)
    assert answer("TOPIC_ALREADY_EXISTS") == (400, 40002)
    assert answer("INVALID_REPLICATION_FACTOR") == (400, 40002)
    assert answer("BROKER_NOT_AVAILABLE") == (503, 50302)
    assert answer("REQUEST_TIMED_OUT") == (500, 50003)
    assert answer("CORRUPT_MESSAGE") == (500, 50003)
    assert answer("MESSAGE_TOO_LARGE") == (500, 50002)
    assert "REQUEST_TIMED_OUT" in from_kafka_error_v3(KafkaError("x", error=Errors.REQUEST_TIMED_OUT)).message
