"""Subscribing: the group configuration keys and their checks, subscribe's validation (group
id, topics, patterns, mixing with assign), pattern subscriptions matched against metadata
(internal topics excluded, a new matching topic triggering a rejoin), and records of partitions
revoked by a rebalance never being returned."""

from __future__ import annotations

import re

import pytest

from services.clients.consumer import Consumer, ConsumerConfig, IllegalStateError, InvalidGroupIdError
from services.clients.consumer.config import load_consumer_config
from services.clients.consumer.protocol import Assignment, decode_subscription, encode_assignment
from services.clients.transport import Deadline
from services.common.config import ConfigError
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.topic_partition import TopicPartition
from services.devcluster.proc import wait_until
from tests.unit.clients.consumer.test_group_fakes import (
    FAST,
    GroupHarness,
    RecordingListener,
    group_clusters,
)


@pytest.fixture
def group_cluster(fake_nodes):
    yield from group_clusters(fake_nodes)


T0 = TopicPartition("t", 0)


def test_group_config_defaults_are_kafkas_and_checked():
    config = ConsumerConfig(bootstrap_servers="h:1")
    assert (config.group_id, config.group_instance_id, config.session_timeout_ms, config.heartbeat_interval_ms) == (
        None, None, 10000, 3000)
    assert (config.max_poll_interval_ms, config.enable_auto_commit, config.auto_commit_interval_ms) == (
        300000, True, 5000)
    assert (config.partition_assignment_strategy, config.exclude_internal_topics, config.allow_auto_create_topics) \
        == ("range", True, True)
    assert not config.auto_commit_enabled  # no group, no auto-commit
    assert ConsumerConfig(bootstrap_servers="h:1", group_id="g").auto_commit_enabled
    loaded = load_consumer_config({"bootstrap.servers": "h:1", "group.id": "g",
                                   "partition.assignment.strategy": "roundrobin, range"}, {})
    assert loaded.partition_assignment_strategy == "roundrobin, range"
    for settings, key in [({"group.id": "g", "heartbeat.interval.ms": 10000}, "heartbeat.interval.ms"),
                          ({"enable.auto.commit": "true"}, "enable.auto.commit"),
                          ({"group.instance.id": "no spaces"}, "group.instance.id"),
                          ({"session.timeout.ms": 0}, "session.timeout.ms")]:
        with pytest.raises(ConfigError, match=re.escape(key)):
            load_consumer_config({"bootstrap.servers": "h:1", **settings}, {})
    with pytest.raises(ConfigError, match="partition.assignment.strategy"):
        Consumer(bootstrap_servers="h:1", group_id="g", partition_assignment_strategy="fastest")


def test_group_methods_need_a_group_id():
    with Consumer(bootstrap_servers="127.0.0.1:1") as consumer:
        for call in (lambda: consumer.subscribe(["t"]), lambda: consumer.commit_sync({T0: 1}),
                     lambda: consumer.commit_async(), lambda: consumer.committed([T0]), consumer.group_metadata):
            with pytest.raises(InvalidGroupIdError, match="group.id"):
                call()


def test_subscribe_validates_and_replaces_the_subscription():
    with Consumer(bootstrap_servers="127.0.0.1:1", group_id="g") as consumer:
        with pytest.raises(ValueError, match="cannot be null"):
            consumer.subscribe()
        with pytest.raises(ValueError, match="null or empty topic"):
            consumer.subscribe(["t", " "])
        with pytest.raises(ValueError, match="not both"):
            consumer.subscribe(["t"], pattern="t.*")
        with pytest.raises(ValueError, match="cannot be empty"):
            consumer.subscribe(pattern="")
        consumer.subscribe(["a", "b"])
        consumer.subscribe("c")
        assert consumer.subscription() == {"c"}
        with pytest.raises(IllegalStateError, match="mutually exclusive"):
            consumer.assign([T0])
        with pytest.raises(IllegalStateError, match="mutually exclusive"):
            consumer.subscribe(pattern="t.*")
        consumer.subscribe([])  # unsubscribes
        assert consumer.subscription() == set()
        consumer.assign([T0])
        with pytest.raises(IllegalStateError, match="mutually exclusive"):
            consumer.subscribe(["t"])
        consumer.unsubscribe()
        consumer.subscribe(pattern=re.compile("t.*"))
        assert consumer.subscription() == set()  # nothing matched yet
    with Consumer(bootstrap_servers="127.0.0.1:1", group_id="g", partition_assignment_strategy=[]) as consumer:
        with pytest.raises(IllegalStateError, match="assignor"):
            consumer.subscribe(["t"])


def test_a_pattern_matches_metadata_topics_and_a_new_match_triggers_a_rejoin(group_cluster):
    cluster = group_cluster({"t1": 1, "t2": 2, "other": 1, "__consumer_offsets": 1}, internal=("__consumer_offsets",))
    harness = GroupHarness(cluster, client_id="c")
    try:
        harness.coordinator.subscribe(None, re.compile("t.*|__.*"), None)
        harness.join()
        assert harness.subscriptions.subscription() == {"t1", "t2"}  # internal topics excluded
        assert decode_subscription(cluster.groups.requests("JoinGroup")[-1].protocols[0].metadata).topics == [
            "t1", "t2"]
        assert harness.subscriptions.assigned_partitions() == {
            TopicPartition("t1", 0), TopicPartition("t2", 0), TopicPartition("t2", 1)}
        assert harness.metadata.all_topics
        cluster.set_topics({"t1": 1, "t2": 2, "t3": 1, "other": 1})
        harness.metadata.refresh(harness.pool)
        assert harness.coordinator.poll(harness_deadline(harness), wait_for_join=True)
        assert harness.subscriptions.subscription() == {"t1", "t2", "t3"}
        assert decode_subscription(cluster.groups.requests("JoinGroup")[-1].protocols[0].metadata).topics == [
            "t1", "t2", "t3"]
        assert TopicPartition("t3", 0) in harness.subscriptions.assigned_partitions()
    finally:
        harness.close()


def harness_deadline(harness: GroupHarness) -> Deadline:
    return Deadline(5000, harness.clock)


def test_internal_topics_match_when_not_excluded(group_cluster):
    cluster = group_cluster({"t": 1, "__consumer_offsets": 1}, internal=("__consumer_offsets",))
    harness = GroupHarness(cluster, exclude_internal_topics=False)
    try:
        harness.coordinator.subscribe(None, "__.*", None)
        harness.join()
        assert harness.subscriptions.subscription() == {"__consumer_offsets"}
    finally:
        harness.close()


def test_the_consumer_subscribes_by_pattern(group_cluster):
    cluster = group_cluster({"orders": 2, "audit": 1})
    with Consumer(bootstrap_servers=cluster.bootstrap, group_id="g", **FAST) as consumer:
        consumer.subscribe(pattern="ord.*")
        wait_until(lambda: consumer.poll(20) is not None and consumer.assignment(), 10, 0)
        assert consumer.subscription() == {"orders"}
        assert consumer.assignment() == {TopicPartition("orders", 0), TopicPartition("orders", 1)}
        requests = cluster.broker.requests("Metadata")
        assert any(r.all_topics for r in requests)


def test_records_of_revoked_partitions_are_never_returned(group_cluster):
    cluster = group_cluster({"t": 1})
    cluster.logs.append(T0, b"a", b"b")
    cluster.logs.append(T0, b"c")
    config = {**FAST, "heartbeat_interval_ms": 20, "auto_offset_reset": "earliest", "max_poll_records": 2}
    with Consumer(bootstrap_servers=cluster.bootstrap, group_id="g", **config) as consumer:
        consumer.subscribe(["t"])
        values = []
        wait_until(lambda: values.extend(r.value for r in consumer.poll(20)) or values, 10, 0)
        assert values == [b"a", b"b"]  # "c" came in the same answer and waits in the consumer
        nothing = encode_assignment(Assignment([]))
        cluster.groups.script("SyncGroup", lambda _request: pb.SyncGroupResponse(protocol_name="range",
                                                                              assignment=nothing))
        cluster.groups.start_rebalance()
        wait_until(consumer._coordinator.rejoin_needed_or_pending, 10, 0.005,
                   message="the heartbeat thread to hear of the rebalance")
        returned = list(consumer.poll(20))
        wait_until(lambda: returned.extend(consumer.poll(20)) or not consumer.assignment(), 10, 0,
                   message="the rebalance that takes t-0 away")
        assert returned == []


def test_a_listener_given_where_the_pattern_goes_is_refused():
    with Consumer(bootstrap_servers="127.0.0.1:1", group_id="g") as consumer:
        with pytest.raises(TypeError, match="listener="):
            consumer.subscribe(["t"], RecordingListener())
        with pytest.raises(TypeError, match="on_partitions_revoked"):
            consumer.subscribe(["t"], listener=object())


def test_changing_the_subscription_rejoins_with_the_new_topics(group_cluster):
    cluster = group_cluster({"t": 1, "u": 1})
    harness = GroupHarness(cluster)
    try:
        harness.subscribe("t")
        harness.join()
        assert not harness.coordinator.rejoin_needed_or_pending()
        harness.subscribe("t", "u")
        assert harness.coordinator.rejoin_needed_or_pending()
        harness.join()
        assert decode_subscription(cluster.groups.requests("JoinGroup")[-1].protocols[0].metadata).topics == ["t", "u"]
        assert harness.subscriptions.assigned_partitions() == {T0, TopicPartition("u", 0)}
    finally:
        harness.close()


def test_the_leader_rejoins_when_a_subscribed_topic_gains_partitions(group_cluster):
    cluster = group_cluster({"t": 1})
    harness = GroupHarness(cluster)
    try:
        harness.subscribe("t")
        harness.join()
        cluster.set_topics({"t": 2})
        harness.metadata.refresh(harness.pool)
        assert harness.coordinator.poll(harness_deadline(harness), wait_for_join=True)
        assert harness.subscriptions.assigned_partitions() == {T0, TopicPartition("t", 1)}
        assert harness.coordinator.group_metadata().generation_id == 2
    finally:
        harness.close()
