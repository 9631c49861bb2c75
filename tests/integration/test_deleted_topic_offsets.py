"""A deleted topic's committed offsets leave every group, as in Kafka: the group coordinator writes
their tombstones to `__consumer_offsets`; describe, lag and the console's groups API answer at
once without the topic; ListOffsets of the deleted topic answers UNKNOWN_TOPIC_OR_PARTITION at
once; and the offsets do not come back when another coordinator loads the groups, nor when a topic
was deleted while no coordinator ran."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.clients.admin import Admin
from services.clients.cli_groups import describe_partition_offsets
from services.clients.lowlevel import LowLevelClient
from services.common.errors import KafkaError
from services.common.hashing import coordinator_partition
from services.common.topic_names import GROUP_METADATA_TOPIC
from services.common.topic_partition import TopicPartition
from services.coordinator.group.records import OffsetCommitKey, RecordFormatError, decode_key
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, create_topic, gateway_module_cluster

ANSWER_S = 2.0  # describe, lag and the console answer within this
LIST_OFFSETS_S = 1.0  # ListOffsets of a deleted topic answers within this
QUICK_CLIENT = {"request_timeout_ms": int(ANSWER_S * 1000), "retry_backoff_ms": 50,
                "default_api_timeout_ms": int(ANSWER_S * 1000)}
WAIT_S = 60
COMMITTED_METRIC, LAG_METRIC = "odradek_consumer_group_committed_offset", "odradek_consumer_group_lag"


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "deletedoffsets",
                                coordinators=2) as cluster:
        yield cluster


def partitions_of(topic: str, count: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(count)]


def commit_everywhere(admin: Admin, groups: list[str], tps: list[TopicPartition]) -> None:
    for group in groups:
        admin.alter_consumer_group_offsets(group, {tp: 7 for tp in tps})


def delete_and_wait(admin: Admin, topics: list[str]) -> None:
    admin.delete_topics(topics)
    wait_until(lambda: not set(topics) & set(admin.list_topics()), WAIT_S, 0.2,
               message=f"{topics} to leave the metadata")


def committed_topics(admin: Admin, group: str) -> set[str]:
    return {tp.topic for tp in admin.list_consumer_group_offsets(group)}


def tombstoned(cluster: LocalCluster, groups: list[str]) -> set[tuple[str, TopicPartition]]:
    """(group, partition) of every offset tombstone in the groups' partitions of `__consumer_offsets`."""
    found = set()
    with LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as reader:
        for partition in {coordinator_partition(group) for group in groups}:
            offset, end = 0, None
            while end is None or offset < end:
                records, result = reader.fetch_records(GROUP_METADATA_TOPIC, partition, offset, max_wait_ms=0)
                end = result.high_watermark
                for record in records:
                    offset = record.offset + 1
                    if record.value is not None:
                        continue
                    try:
                        key = decode_key(record.key)
                    except RecordFormatError:  # the owner's fence record
                        continue
                    if isinstance(key, OffsetCommitKey):
                        found.add((key.group, key.topic_partition))
                if not records:
                    break
    return found


def check_answers(cluster: LocalCluster, groups: list[str], deleted: set[str], live: set[str]) -> dict[str, float]:
    """Describe and lag (`odradek groups describe`), the console's groups API, the coordinators'
    lag metrics, and describe and ListOffsets of the deleted topics, each bounded by its deadline
    and checked; returns the seconds each took."""
    took = {}
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **QUICK_CLIENT) as quick:
        start = time.monotonic()
        described = quick.describe_consumer_groups(groups, timeout_ms=int(ANSWER_S * 1000))
        rows = {group: describe_partition_offsets(quick, group, described[group]) for group in groups}
        took["describe and lag"] = time.monotonic() - start
        for group in groups:
            assert {row.partition.topic for row in rows[group]} == live
            assert all(row.lag == row.log_end_offset - 7 for row in rows[group])

        start = time.monotonic()
        answer = httpx.get(f"{cluster.gateway_url()}/ui/api/groups", params={"limit": 500}, timeout=ANSWER_S)
        took["console groups"] = time.monotonic() - start
        assert answer.status_code == 200, answer.text
        shown = {view["group_id"]: {lag["topic"] for lag in view["lags"]} for view in answer.json()["groups"]}
        assert all(shown[group] == live for group in groups), shown

        start = time.monotonic()
        exported: dict[str, set[tuple[str, str]]] = {COMMITTED_METRIC: set(), LAG_METRIC: set()}
        for name in cluster.coordinator_names:
            scraped = httpx.get(cluster.metrics_url(name), timeout=ANSWER_S)
            for family in text_string_to_metric_families(scraped.text):
                for sample in family.samples:
                    if sample.name in exported and sample.labels["group"] in groups:
                        exported[sample.name].add((sample.labels["group"], sample.labels["topic"]))
        took["coordinator lag metrics"] = time.monotonic() - start
        assert exported[COMMITTED_METRIC] == {(group, topic) for group in groups for topic in live}
        assert exported[LAG_METRIC] <= exported[COMMITTED_METRIC]

        start = time.monotonic()
        topics = quick.describe_topics(deleted, timeout_ms=int(LIST_OFFSETS_S * 1000), raise_errors=False)
        took["describe deleted topics"] = time.monotonic() - start
        assert all(isinstance(t, KafkaError) and t.error_name == "UNKNOWN_TOPIC_OR_PARTITION"
                   for t in topics.values()), topics

        start = time.monotonic()
        answers = quick.list_offsets({TopicPartition(topic, 0): "latest" for topic in deleted},
                                     timeout_ms=int(LIST_OFFSETS_S * 1000), raise_errors=False)
        took["list offsets of deleted"] = time.monotonic() - start
        assert all(isinstance(a, KafkaError) and a.error_name == "UNKNOWN_TOPIC_OR_PARTITION"
                   for a in answers.values()), answers
    for call, limit_s in (("describe and lag", ANSWER_S), ("console groups", ANSWER_S),
                          ("coordinator lag metrics", ANSWER_S), ("describe deleted topics", LIST_OFFSETS_S),
                          ("list offsets of deleted", LIST_OFFSETS_S)):
        assert took[call] < limit_s, took
    return took


def check_deleted_topic_offsets(cluster: LocalCluster, admin: Admin, prefix: str, groups: int, deleted: int,
                                partitions: int) -> dict[str, float]:
    """`groups` groups commit to one live topic and `deleted` topics of `partitions` partitions each;
    the latter are deleted: all but one while the coordinators run (then the answers are checked
    and timed, see `check_answers`, which returns how long each took), the last while none runs."""
    group_ids = [f"{prefix}-group-{i}" for i in range(groups)]
    live = create_topic(admin, f"{prefix}-live", partitions)
    doomed = [create_topic(admin, f"{prefix}-doomed-{i}", partitions) for i in range(deleted)]
    commit_everywhere(admin, group_ids, [tp for t in [live, *doomed] for tp in partitions_of(t, partitions)])
    gone_later, gone_now = doomed[-1], doomed[:-1]

    delete_and_wait(admin, gone_now)
    wait_until(lambda: all(committed_topics(admin, g) == {live, gone_later} for g in group_ids), WAIT_S, 0.2,
               message="the deleted topics' offsets to leave every group")
    expected = {(g, tp) for g in group_ids for t in gone_now for tp in partitions_of(t, partitions)}
    assert expected <= tombstoned(cluster, group_ids)
    took = check_answers(cluster, group_ids, set(gone_now), {live, gone_later})

    coordinators = cluster.coordinator_names
    for name in coordinators:  # every group is loaded by another coordinator, then by the restarted one
        cluster.kill_service(name)
        assert all(committed_topics(admin, g) == {live, gone_later} for g in group_ids)
        cluster.start_service(name)
        assert all(committed_topics(admin, g) == {live, gone_later} for g in group_ids)
    for name in coordinators:
        cluster.stop_service(name)
    delete_and_wait(admin, [gone_later])   # no coordinator runs: nobody writes its tombstones now
    for name in coordinators:
        cluster.start_service(name)
    wait_until(lambda: all(committed_topics(admin, g) == {live} for g in group_ids), WAIT_S, 0.2,
               message="the offsets of a topic deleted while no coordinator ran to be removed on load")
    expected |= {(g, tp) for g in group_ids for tp in partitions_of(gone_later, partitions)}
    assert expected <= tombstoned(cluster, group_ids)
    # a commit for a deleted topic, or for a partition a live topic does not have, is refused
    for refused in (TopicPartition(gone_later, 0), TopicPartition(live, partitions)):
        with pytest.raises(KafkaError) as error:
            admin.alter_consumer_group_offsets(group_ids[0], {refused: 9})
        assert error.value.error_name == "UNKNOWN_TOPIC_OR_PARTITION", error.value
    assert committed_topics(admin, group_ids[0]) == {live}
    return took


def test_a_deleted_topics_offsets_leave_every_group_and_do_not_come_back(cluster, admin):
    check_deleted_topic_offsets(cluster, admin, "small", groups=2, deleted=2, partitions=2)
