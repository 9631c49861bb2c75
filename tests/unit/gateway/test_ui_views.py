"""The console's views: pages of names, topic and partition rows, groups with --describe's lag."""

from __future__ import annotations

from services.clients.admin_types import ConsumerGroupDescription, MemberDescription, TopicDescription
from services.clients.cli_groups import partition_offsets
from services.clients.cluster import PartitionInfo
from services.clients.consumer.records import OffsetAndMetadata
from services.clients.partition_requests import ListOffsetsResult
from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition
from services.gateway.ui import views


def info(partition: int, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]) -> PartitionInfo:
    return PartitionInfo("t", partition, leader, 0, replicas, isr)


def offsets(*values: int) -> dict[TopicPartition, ListOffsetsResult]:
    return {TopicPartition("t", p): ListOffsetsResult(v, -1) for p, v in enumerate(values)}


def test_a_page_filters_sorts_and_slices():
    names = ["orders", "Payments", "audit", "orders-dlq"]
    assert views.page(names, "ORD", 0, 10) == (2, ["orders", "orders-dlq"])
    assert views.page(names, "", 1, 2) == (4, ["audit", "orders"])  # "Payments" sorts first
    assert views.page(names, "x", 0, 10) == (0, [])


def test_a_topic_row_counts_under_replicated_offline_partitions_and_messages():
    topic = TopicDescription("t", False, (info(0, 1, (1, 2, 3), (1, 2, 3)), info(1, 2, (2, 3, 1), (2,)),
                                          info(2, -1, (3, 1, 2), (3,))))
    row = views.topic_row(topic, offsets(0, 5, 10), offsets(10, 25, 10))
    assert row == {"name": "t", "partitions": 3, "replication_factor": 3, "under_replicated": 2, "offline": 1,
                   "messages": 10 + 20 + 0}


def test_a_topic_row_without_every_offset_has_no_message_count():
    topic = TopicDescription("t", False, (info(0, 1, (1,), (1,)), info(1, 1, (1,), (1,))))
    latest = {**offsets(4), TopicPartition("t", 1): KafkaError("down", error=Errors.NOT_LEADER_OR_FOLLOWER)}
    assert views.topic_row(topic, offsets(0, 0), latest)["messages"] is None


def test_a_partition_row_marks_under_replication_and_no_leader():
    assert views.partition_row(info(0, 2, (2, 3), (2,))) == {
        "partition": 0, "leader": 2, "replicas": [2, 3], "isr": [2], "under_replicated": True, "offline": False}
    assert views.partition_row(info(1, -1, (1,), ()))["offline"] is True


def test_a_group_view_uses_the_describe_rows_and_totals_known_lags():
    member = MemberDescription("m-1", None, "worker", "/10.0.0.7", (TopicPartition("t", 1), TopicPartition("t", 0)))
    group = ConsumerGroupDescription("g", False, (member,), "range", "Stable")
    committed = {TopicPartition("t", 0): OffsetAndMetadata(4, ""), TopicPartition("t", 2): OffsetAndMetadata(1, "")}
    rows = partition_offsets(group, committed, offsets(10, 7, 3))
    view = views.group_view(group, rows)
    assert view["members"] == [{"member_id": "m-1", "client_id": "worker", "host": "/10.0.0.7",
                                "assignment": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]}]
    assert [(lag["partition"], lag["current_offset"], lag["log_end_offset"], lag["lag"], lag["client_id"])
            for lag in view["lags"]] == [(0, 4, 10, 6, "worker"), (1, None, 7, None, "worker"), (2, 1, 3, 2, None)]
    assert view["total_lag"] == 8
    assert view["state"] == "Stable"


def test_cluster_health_names_brokers_that_replicas_name_but_are_not_live():
    topic = TopicDescription("t", False, (info(0, 1, (1, 4), (1,)), info(1, -1, (4,), ())))
    assert views.cluster_health([1, 2, 3], [topic]) == {
        "offline_broker_ids": [4], "partitions": 2, "under_replicated_partitions": 2, "offline_partitions": 1}
