"""Tests for services.clients.admin against fake brokers and controllers: requests sent, results
returned, per-topic errors raised, and the NOT_CONTROLLER / unavailable retry with fresh metadata."""

from __future__ import annotations

import pytest

from services.clients.admin import Admin
from services.clients.admin_types import ClusterDescription, NewPartitions, NewTopic
from services.common.clock import ManualClock
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.controller.v1 import controller_pb2 as pb
from services.common.topic_partition import TopicPartition
from tests.unit.clients.support import FakeNode, metadata_response, node_proto, partition


def created(*names: str, codes: dict[str, int] | None = None, top_level: int = 0) -> pb.CreateTopicsResponse:
    codes = codes or {}
    return pb.CreateTopicsResponse(error_code=top_level, topics=[
        pb.CreateTopicsResponse.CreatableTopicResult(name=n, error_code=codes.get(n, 0), num_partitions=3,
                                                     replication_factor=2)
        for n in names])


def cluster_of(broker: FakeNode, controller: FakeNode | None, **topics) -> broker_pb2.MetadataResponse:
    return metadata_response([broker.node()], controller=controller.node() if controller else None, **topics)


def admin_for(broker: FakeNode, clock: ManualClock, **config) -> Admin:
    return Admin(bootstrap_servers=broker.address, clock=clock, **config)


# --------------------------------------------------------------------------------------------- topics

def test_create_topics_sends_the_request_to_the_controller(fake_nodes, clock):
    broker, controller = fake_nodes(2)
    broker.on("Metadata", cluster_of(broker, controller))
    controller.on("CreateTopics", created("a", "b"))
    with admin_for(broker, clock) as admin:
        results = admin.create_topics([
            NewTopic("a", 3, 2, configs={"cleanup.policy": "compact"}),
            NewTopic("b", replica_assignment={1: [2, 1], 0: [1, 2]}),
        ], validate_only=True)
    assert results["a"].num_partitions == 3 and results["b"].replication_factor == 2
    (request,) = controller.requests("CreateTopics")
    assert request.validate_only and request.timeout_ms > 0
    a, b = request.topics
    assert (a.name, a.num_partitions, a.replication_factor) == ("a", 3, 2)
    assert [(c.name, c.value) for c in a.configs] == [("cleanup.policy", "compact")]
    assert (b.num_partitions, b.replication_factor) == (-1, -1)
    assert [(x.partition_index, list(x.broker_ids)) for x in b.assignments] == [(0, [1, 2]), (1, [2, 1])]


def test_per_topic_errors_raise_or_are_returned(fake_nodes, clock):
    broker, controller = fake_nodes(2)
    broker.on("Metadata", cluster_of(broker, controller))
    answer = created("a", "b", codes={"b": Errors.TOPIC_ALREADY_EXISTS})
    answer.topics[1].error_message = "Topic 'b' already exists."
    controller.on("CreateTopics", answer)
    with admin_for(broker, clock) as admin:
        with pytest.raises(KafkaError) as raised:
            admin.create_topics([NewTopic("a"), NewTopic("b")])
        assert raised.value.error_name == "TOPIC_ALREADY_EXISTS"
        assert raised.value.args[0] == "Topic 'b' already exists."
        results = admin.create_topics([NewTopic("a"), NewTopic("b")], raise_errors=False)
    assert results["a"].name == "a" and isinstance(results["b"], KafkaError)


def test_empty_topic_name_is_rejected_before_any_call(fake_nodes, clock):
    (broker,) = fake_nodes(1)
    with admin_for(broker, clock) as admin, pytest.raises(KafkaError) as raised:
        admin.create_topics([NewTopic("")])
    assert raised.value.error_name == "INVALID_TOPIC_EXCEPTION"
    assert broker.requests("Metadata") == []


def test_not_controller_is_retried_against_the_new_controller(fake_nodes, clock):
    broker, standby, active = fake_nodes(3)
    views = {"controller": standby}
    broker.on("Metadata", lambda _r, _c: cluster_of(broker, views["controller"]))

    def standby_answer(_request, _context):
        views["controller"] = active  # the election finished; metadata now names the winner
        return pb.CreateTopicsResponse(error_code=Errors.NOT_CONTROLLER, error_message="standby")

    standby.on("CreateTopics", standby_answer)
    active.on("CreateTopics", created("t"))
    with admin_for(broker, clock, retry_backoff_ms=100) as admin:
        assert admin.create_topics([NewTopic("t", 1, 1)])["t"].name == "t"
    assert len(standby.requests("CreateTopics")) == 1 and len(active.requests("CreateTopics")) == 1
    assert len(broker.requests("Metadata")) == 2
    assert clock.monotonic_ms() >= 100  # backed off before retrying


def test_only_topics_answered_not_controller_are_retried(fake_nodes, clock):
    broker, controller = fake_nodes(2)
    broker.on("Metadata", cluster_of(broker, controller))
    answers = [created("a", "b", codes={"b": Errors.NOT_CONTROLLER}), created("b")]
    controller.on("CreateTopics", lambda _r, _c: answers.pop(0))
    with admin_for(broker, clock) as admin:
        assert sorted(admin.create_topics([NewTopic("a"), NewTopic("b")])) == ["a", "b"]
    first, second = controller.requests("CreateTopics")
    assert [t.name for t in first.topics] == ["a", "b"] and [t.name for t in second.topics] == ["b"]


def test_unknown_controller_or_unreachable_controller_times_out(fake_nodes, clock):
    (broker,) = fake_nodes(1)
    broker.on("Metadata", metadata_response([broker.node()]))
    with admin_for(broker, clock, default_api_timeout_ms=1000) as admin, pytest.raises(KafkaError) as raised:
        admin.delete_topics(["t"])
    assert raised.value.error_name == "REQUEST_TIMED_OUT"
    assert "NOT_CONTROLLER" in str(raised.value)
    broker.on("Metadata", metadata_response([broker.node()], controller=node_proto(1001, 1)))
    with admin_for(broker, clock, default_api_timeout_ms=1000) as admin, pytest.raises(KafkaError) as raised:
        admin.describe_cluster()
    assert raised.value.error_name == "REQUEST_TIMED_OUT"
    assert "NETWORK_EXCEPTION" in str(raised.value)


def test_non_retriable_top_level_errors_raise_at_once(fake_nodes, clock):
    broker, controller = fake_nodes(2)
    broker.on("Metadata", cluster_of(broker, controller))
    controller.on("DeleteTopics", pb.DeleteTopicsResponse(error_code=Errors.INVALID_REQUEST))
    with admin_for(broker, clock) as admin, pytest.raises(KafkaError) as raised:
        admin.delete_topics(["t"])
    assert raised.value.error_name == "INVALID_REQUEST"
    assert len(controller.requests("DeleteTopics")) == 1


def test_delete_topics_and_create_partitions(fake_nodes, clock):
    broker, controller = fake_nodes(2)
    broker.on("Metadata", cluster_of(broker, controller))
    controller.on("DeleteTopics", pb.DeleteTopicsResponse(responses=[
        pb.DeleteTopicsResponse.DeletableTopicResult(name="a")]))
    controller.on("CreatePartitions", pb.CreatePartitionsResponse(results=[
        pb.CreatePartitionsResponse.CreatePartitionsTopicResult(name="a"),
        pb.CreatePartitionsResponse.CreatePartitionsTopicResult(
            name="b", error_code=Errors.INVALID_PARTITIONS, error_message="Topic currently has 3 partitions")]))
    with admin_for(broker, clock) as admin:
        assert admin.delete_topics(["a", "a"]) == {"a": None}
        results = admin.create_partitions({"a": 6, "b": NewPartitions(2, [[1]])}, raise_errors=False)
        with pytest.raises(KafkaError, match="currently has 3"):
            admin.create_partitions({"a": 6, "b": 2})
    assert list(controller.requests("DeleteTopics")[0].topic_names) == ["a"]
    assert results["a"] is None and results["b"].error_name == "INVALID_PARTITIONS"
    request = controller.requests("CreatePartitions")[0]
    assert [(t.name, t.count, [list(a.broker_ids) for a in t.assignments]) for t in request.topics] == [
        ("a", 6, []), ("b", 2, [[1]])]


def test_list_and_describe_topics_use_broker_metadata(fake_nodes, clock):
    broker, controller = fake_nodes(2)
    answer = cluster_of(broker, controller, topics={
        "t": [partition(1, 1, replicas=[1, 2], isr=[1]), partition(0, -1, replicas=[2], offline=[2])],
        "__consumer_offsets": [partition(0, 1)]},
        topic_errors={"creating": Errors.LEADER_NOT_AVAILABLE}, internal=("__consumer_offsets",))
    broker.on("Metadata", answer)
    with admin_for(broker, clock) as admin:
        assert admin.list_topics() == ["creating", "t"]
        assert admin.list_topics(include_internal=True) == ["__consumer_offsets", "creating", "t"]
        description = admin.describe_topics(["t"])["t"]
        with pytest.raises(KafkaError, match="Topic 'missing' not found.") as raised:
            admin.describe_topics(["t", "missing"])
        assert raised.value.error_name == "UNKNOWN_TOPIC_OR_PARTITION"
    assert not description.internal and description.replication_factor == 1
    p0, p1 = description.partitions
    assert (p0.partition, p0.has_leader, p0.offline_replicas) == (0, False, (2,))
    assert (p1.leader, p1.replicas, p1.isr) == (1, (1, 2), (1,))
    assert any(r.all_topics for r in broker.requests("Metadata"))


def test_wait_for_topic_polls_until_every_partition_has_a_live_leader(fake_nodes, clock):
    (broker,) = fake_nodes(1)
    views = [metadata_response([broker.node()], topic_errors={"t": Errors.UNKNOWN_TOPIC_OR_PARTITION}),
             metadata_response([broker.node()], topics={"t": [partition(0, 1), partition(1, -1)]}),
             metadata_response([broker.node()], topics={"t": [partition(0, 1), partition(1, 1)]})]
    broker.on("Metadata", lambda request, _c: views.pop(0) if request.topics and len(views) > 1 else views[0])
    with admin_for(broker, clock) as admin:
        description = admin.wait_for_topic("t", timeout_s=10)
        assert [p.leader for p in description.partitions] == [1, 1]
        with pytest.raises(TimeoutError, match="'t'"):
            admin.wait_for_topic("t", timeout_s=1, partitions=3)


def test_describe_cluster(fake_nodes, clock):
    broker, controller = fake_nodes(2, first_id=1)
    broker.on("Metadata", cluster_of(broker, controller))
    controller.on("DescribeCluster", pb.DescribeClusterResponse(
        cluster_id="abc", controller_id=1000, brokers=[node_proto(2, 9192), node_proto(1, 9092)]))
    with admin_for(broker, clock) as admin:
        description = admin.describe_cluster()
    assert isinstance(description, ClusterDescription)
    assert description.cluster_id == "abc" and description.controller_id == 1000
    assert description.controller.address == controller.address
    assert [n.node_id for n in description.nodes] == [1, 2]


def test_configs_describe_alter_and_incremental_alter(fake_nodes, clock):
    broker, controller = fake_nodes(2)
    broker.on("Metadata", cluster_of(broker, controller))
    result = pb.DescribeConfigsResponse.DescribeConfigsResult
    entry = pb.DescribeConfigsResponse.DescribeConfigsResourceResult
    controller.on("DescribeConfigs", pb.DescribeConfigsResponse(results=[result(
        resource_type=2, resource_name="t", configs=[
            entry(name="retention.ms", value="1000", config_source=1),
            entry(name="segment.bytes", value="1073741824", config_source=5),
            entry(name="secret", config_source=1, is_sensitive=True)])]))
    done = pb.AlterConfigsResourceResponse(resource_type=2, resource_name="t")
    ok = pb.AlterConfigsResponse(responses=[done])
    controller.on("AlterConfigs", ok)
    controller.on("IncrementalAlterConfigs", pb.IncrementalAlterConfigsResponse(responses=ok.responses))
    with admin_for(broker, clock) as admin:
        configs = admin.describe_configs(["t"])["t"]
        admin.alter_configs("t", {"retention.ms": "5"})
        admin.incremental_alter_configs("t", {"retention.ms": "6", "cleanup.policy": None})
    assert configs["retention.ms"].value == "1000" and not configs["retention.ms"].is_default
    assert configs["retention.ms"].source_name == "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.bytes"].is_default and configs["secret"].value is None
    (resource,) = controller.requests("AlterConfigs")[0].resources
    assert [(c.name, c.value) for c in resource.configs] == [("retention.ms", "5")]
    (resource,) = controller.requests("IncrementalAlterConfigs")[0].resources
    ops = [(c.name, c.config_operation, c.HasField("value")) for c in resource.configs]
    assert ops == [("retention.ms", 0, True), ("cleanup.policy", 1, False)]


def test_list_offsets_asks_leaders_and_raises_partition_errors(fake_nodes, clock):
    (broker,) = fake_nodes(1)
    two = [partition(0, 1), partition(1, 1)]
    broker.on("Metadata", metadata_response([broker.node()], topics={"t": two}))

    def answer(request, _context):
        response = broker_pb2.ListOffsetsResponse()
        rows = [broker_pb2.ListOffsetsResponse.ListOffsetsPartitionResponse(
            partition_index=p.partition_index, offset=10 * p.partition_index, timestamp=p.timestamp,
            error_code=Errors.OFFSET_OUT_OF_RANGE if p.timestamp == 99 else 0)
            for p in request.topics[0].partitions]
        response.topics.add(name="t", partitions=rows)
        return response

    broker.on("ListOffsets", answer)
    with admin_for(broker, clock) as admin:
        offsets = admin.list_offsets({TopicPartition("t", 0): "earliest", TopicPartition("t", 1): 1234})
        with pytest.raises(KafkaError) as raised:
            admin.list_offsets({TopicPartition("t", 1): 99})
    assert offsets[TopicPartition("t", 0)].offset == 0 and offsets[TopicPartition("t", 0)].timestamp == -2
    assert offsets[TopicPartition("t", 1)].offset == 10
    assert raised.value.error_name == "OFFSET_OUT_OF_RANGE"
    assert len(broker.requests("ListOffsets")) == 2


def test_a_deleted_or_unknown_topic_leaves_later_calls_without_refreshes_or_back_off(fake_nodes, clock):
    broker, controller = fake_nodes(2)
    existing = {"t"}

    def metadata(request, _context):
        names = sorted(existing) if request.all_topics else list(request.topics)
        return cluster_of(broker, controller, topics={n: [partition(0, 1)] for n in names if n in existing},
                          topic_errors={n: Errors.UNKNOWN_TOPIC_OR_PARTITION for n in names if n not in existing})

    def offsets(request, _context):
        response = broker_pb2.ListOffsetsResponse()
        for topic in request.topics:
            response.topics.add(name=topic.name, partitions=[
                broker_pb2.ListOffsetsResponse.ListOffsetsPartitionResponse(partition_index=p.partition_index)
                for p in topic.partitions])
        return response

    broker.on("Metadata", metadata)
    broker.on("ListOffsets", offsets)
    controller.on("DeleteTopics", pb.DeleteTopicsResponse(responses=[
        pb.DeleteTopicsResponse.DeletableTopicResult(name="t")]))
    with admin_for(broker, clock) as admin:
        admin.list_offsets({TopicPartition("t", 0): "latest"})
        admin.list_offsets({TopicPartition("never", 0): "latest"}, raise_errors=False)
        admin.delete_topics(["t"])
        existing.clear()
        assert admin.metadata.topics == frozenset()
        start_ms, asked = clock.monotonic_ms(), len(broker.requests("Metadata"))
        for _ in range(5):
            assert admin.list_topics() == []
            admin.describe_topics(["t"], raise_errors=False)
        assert clock.monotonic_ms() - start_ms == 0  # no back-off slept
        assert len(broker.requests("Metadata")) - asked == 10  # the calls' own, no refresh before each


def test_list_offsets_of_a_partition_the_metadata_lacks_answers_unknown_at_once(fake_nodes, clock):
    (broker,) = fake_nodes(1)
    broker.on("Metadata", metadata_response([broker.node()], topics={"t": [partition(0, 1)]},
                                            topic_errors={"gone": Errors.UNKNOWN_TOPIC_OR_PARTITION}))
    start_ms = clock.monotonic_ms()
    with admin_for(broker, clock) as admin:
        answers = admin.list_offsets({TopicPartition("gone", 0): "latest", TopicPartition("t", 7): "latest"},
                                     raise_errors=False)
    assert {tp: a.error_name for tp, a in answers.items()} == {
        TopicPartition("gone", 0): "UNKNOWN_TOPIC_OR_PARTITION", TopicPartition("t", 7): "UNKNOWN_TOPIC_OR_PARTITION"}
    assert clock.monotonic_ms() - start_ms < 1000
    assert broker.requests("ListOffsets") == []
