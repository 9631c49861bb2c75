"""Tests for services.clients.admin_groups against fake brokers and coordinators: the coordinator
found with FindCoordinator, groups listed, described and deleted, committed offsets read,
altered and deleted, and a moved coordinator found again."""

from __future__ import annotations

import pytest

from services.clients.admin import Admin
from services.clients.consumer import OffsetAndMetadata
from services.clients.consumer.protocol import Assignment, encode_assignment
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.topic_partition import TopicPartition
from tests.unit.clients.support import FakeNode, metadata_response

T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def found(coordinator: FakeNode, error_code: int = Errors.NONE) -> common_pb2.FindCoordinatorResponse:
    return common_pb2.FindCoordinatorResponse(error_code=error_code, coordinator=coordinator.node())


def cluster(fake_nodes, coordinators: int = 1) -> tuple[FakeNode, list[FakeNode]]:
    broker, *found_coordinators = fake_nodes(1 + coordinators)
    response = metadata_response([broker.node()])
    response.coordinators.extend(c.node() for c in found_coordinators)
    broker.on("Metadata", response)
    broker.on("FindCoordinator", found(found_coordinators[0]))
    return broker, found_coordinators


def admin_for(broker: FakeNode, clock) -> Admin:
    return Admin(bootstrap_servers=broker.address, clock=clock)


def test_find_group_coordinator_asks_a_broker(fake_nodes, clock):
    broker, (coordinator,) = cluster(fake_nodes)
    with admin_for(broker, clock) as admin:
        node = admin.find_group_coordinator("g")
    assert (node.node_id, node.address) == (coordinator.node_id, coordinator.address)
    (request,) = broker.requests("FindCoordinator")
    assert (request.key, request.key_type) == ("g", common_pb2.GROUP)


def test_list_consumer_groups_asks_every_coordinator(fake_nodes, clock):
    broker, (first, second) = cluster(fake_nodes, coordinators=2)
    listed = pb.ListGroupsResponse.ListedGroup
    first.on("ListGroups", pb.ListGroupsResponse(groups=[listed(group_id="b", protocol_type="consumer",
                                                                group_state="Stable")]))
    second.on("ListGroups", pb.ListGroupsResponse(groups=[listed(group_id="a", protocol_type="",
                                                                 group_state="Empty")]))
    with admin_for(broker, clock) as admin:
        groups = admin.list_consumer_groups(states=["Stable", "Empty"])
    assert [(g.group_id, g.is_simple_consumer_group, g.state) for g in groups] == [
        ("a", True, "Empty"), ("b", False, "Stable")]
    assert list(first.requests("ListGroups")[0].states_filter) == ["Stable", "Empty"]


def test_describe_consumer_groups_decodes_member_assignments(fake_nodes, clock):
    broker, (coordinator,) = cluster(fake_nodes)
    member = pb.DescribeGroupsResponse.DescribedGroupMember(
        member_id="m-1", client_id="c", client_host="/127.0.0.1",
        member_assignment=encode_assignment(Assignment([T1, T0])))
    coordinator.on("DescribeGroups", pb.DescribeGroupsResponse(groups=[pb.DescribeGroupsResponse.DescribedGroup(
        group_id="g", group_state="Stable", protocol_type="consumer", protocol_data="range", members=[member])]))
    with admin_for(broker, clock) as admin:
        description = admin.describe_consumer_groups(["g"])["g"]
    assert (description.state, description.partition_assignor, description.protocol_type) == (
        "Stable", "range", "consumer")
    assert not description.is_simple_consumer_group
    assert description.coordinator.address == coordinator.address
    (m,) = description.members
    assert (m.member_id, m.group_instance_id, m.client_id, m.host) == ("m-1", None, "c", "/127.0.0.1")
    assert m.assignment == (T0, T1)
    assert list(coordinator.requests("DescribeGroups")[0].groups) == ["g"]


def test_describe_raises_the_groups_error(fake_nodes, clock):
    broker, (coordinator,) = cluster(fake_nodes)
    coordinator.on("DescribeGroups", pb.DescribeGroupsResponse(groups=[pb.DescribeGroupsResponse.DescribedGroup(
        group_id="g", error_code=Errors.GROUP_AUTHORIZATION_FAILED)]))
    with admin_for(broker, clock) as admin, pytest.raises(KafkaError) as raised:
        admin.describe_consumer_groups(["g"])
    assert raised.value.error_name == "GROUP_AUTHORIZATION_FAILED"


def test_a_moved_coordinator_is_found_again(fake_nodes, clock):
    broker, (old, new) = cluster(fake_nodes, coordinators=2)
    old.on("DeleteGroups", pb.DeleteGroupsResponse(results=[pb.DeleteGroupsResponse.DeletableGroupResult(
        group_id="g", error_code=Errors.NOT_COORDINATOR)]))
    new.on("DeleteGroups", pb.DeleteGroupsResponse(results=[pb.DeleteGroupsResponse.DeletableGroupResult(
        group_id="g")]))

    def find(_request, _context):
        return found(new if old.requests("DeleteGroups") else old)

    broker.on("FindCoordinator", find)
    with admin_for(broker, clock) as admin:
        assert admin.delete_consumer_groups(["g"]) == {"g": None}
    assert len(old.requests("DeleteGroups")) == 1 and len(new.requests("DeleteGroups")) == 1
    assert list(new.requests("DeleteGroups")[0].groups_names) == ["g"]


def test_delete_errors_raise_or_are_returned(fake_nodes, clock):
    broker, (coordinator,) = cluster(fake_nodes)
    coordinator.on("DeleteGroups", pb.DeleteGroupsResponse(results=[pb.DeleteGroupsResponse.DeletableGroupResult(
        group_id="g", error_code=Errors.NON_EMPTY_GROUP)]))
    with admin_for(broker, clock) as admin:
        results = admin.delete_consumer_groups(["g"], raise_errors=False)
        with pytest.raises(KafkaError) as raised:
            admin.delete_consumer_groups(["g"])
    assert results["g"].error_name == "NON_EMPTY_GROUP" and raised.value.error_name == "NON_EMPTY_GROUP"


def offsets_answer(request, _context) -> pb.OffsetFetchResponse:
    partition = pb.OffsetFetchResponse.OffsetFetchResponsePartition
    return pb.OffsetFetchResponse(topics=[
        pb.OffsetFetchResponse.OffsetFetchResponseTopic(name="t", partitions=[
            partition(partition_index=0, committed_offset=5, committed_leader_epoch=3, metadata="m"),
            partition(partition_index=1, committed_offset=-1, committed_leader_epoch=-1)]),
        pb.OffsetFetchResponse.OffsetFetchResponseTopic(name="u", partitions=[
            partition(partition_index=0, committed_offset=7, committed_leader_epoch=-1)])])


def test_list_consumer_group_offsets_of_all_or_some_partitions(fake_nodes, clock):
    broker, (coordinator,) = cluster(fake_nodes)
    coordinator.on("OffsetFetch", offsets_answer)
    with admin_for(broker, clock) as admin:
        every = admin.list_consumer_group_offsets("g")
        admin.list_consumer_group_offsets("g", [U0, T1, T0])
    assert every == {T0: OffsetAndMetadata(5, "m", 3), U0: OffsetAndMetadata(7, "", None)}
    all_topics, some = coordinator.requests("OffsetFetch")
    assert all_topics.group_id == "g" and all_topics.all_topics
    assert not some.all_topics
    assert sorted((t.name, sorted(t.partition_indexes)) for t in some.topics) == [("t", [0, 1]), ("u", [0])]


def partition_error(answer: type, code: int):
    """An OffsetFetch or OffsetCommit answer whose one partition, t-0, carries `code`."""
    topic, partition = (getattr(answer, f"{answer.__name__}{part}") for part in ("Topic", "Partition"))
    return answer(topics=[topic(name="t", partitions=[partition(partition_index=0, error_code=code)])])


def test_list_consumer_group_offsets_raises_partition_errors(fake_nodes, clock):
    broker, (coordinator,) = cluster(fake_nodes)
    coordinator.on("OffsetFetch", partition_error(pb.OffsetFetchResponse, Errors.TOPIC_AUTHORIZATION_FAILED))
    with admin_for(broker, clock) as admin, pytest.raises(KafkaError) as raised:
        admin.list_consumer_group_offsets("g", [T0])
    assert raised.value.error_name == "TOPIC_AUTHORIZATION_FAILED"


def test_alter_consumer_group_offsets_commits_outside_any_generation(fake_nodes, clock):
    broker, (coordinator,) = cluster(fake_nodes)

    def committed(request, _context):
        partition = pb.OffsetCommitResponse.OffsetCommitResponsePartition
        return pb.OffsetCommitResponse(topics=[pb.OffsetCommitResponse.OffsetCommitResponseTopic(
            name=t.name, partitions=[partition(partition_index=p.partition_index) for p in t.partitions])
            for t in request.topics])

    coordinator.on("OffsetCommit", committed)
    with admin_for(broker, clock) as admin:
        admin.alter_consumer_group_offsets("g", {T0: 4, T1: OffsetAndMetadata(9, "x", 2),
                                                 U0: OffsetAndMetadata(1, "", 0)})
    (request,) = coordinator.requests("OffsetCommit")
    assert (request.group_id, request.generation_id, request.member_id) == ("g", -1, "")
    rows = sorted((t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
                  for t in request.topics for p in t.partitions)
    assert rows == [("t", 0, 4, -1, ""), ("t", 1, 9, 2, "x"), ("u", 0, 1, 0, "")]


def test_alter_consumer_group_offsets_raises_a_partition_error(fake_nodes, clock):
    broker, (coordinator,) = cluster(fake_nodes)
    coordinator.on("OffsetCommit", partition_error(pb.OffsetCommitResponse, Errors.UNKNOWN_MEMBER_ID))
    with admin_for(broker, clock) as admin, pytest.raises(KafkaError) as raised:
        admin.alter_consumer_group_offsets("g", {T0: 4})
    assert raised.value.error_name == "UNKNOWN_MEMBER_ID"


def offset_delete_answer(request, _context) -> pb.OffsetDeleteResponse:
    """GROUP_SUBSCRIBED_TO_TOPIC for topic "t", deleted for any other."""
    response = pb.OffsetDeleteResponse()
    for topic in request.topics:
        code = Errors.GROUP_SUBSCRIBED_TO_TOPIC if topic.name == "t" else Errors.NONE
        answered = response.topics.add(name=topic.name)
        for partition in topic.partition_indexes:
            answered.partitions.add(partition_index=partition, error_code=code)
    return response


def test_delete_consumer_group_offsets_answers_each_partition(fake_nodes, clock):
    broker, (coordinator,) = cluster(fake_nodes)
    coordinator.on("OffsetDelete", offset_delete_answer)
    with admin_for(broker, clock) as admin:
        assert admin.delete_consumer_group_offsets("g", [U0]) == {U0: None}
        results = admin.delete_consumer_group_offsets("g", [U0, T1, T0], raise_errors=False)
        with pytest.raises(KafkaError) as raised:
            admin.delete_consumer_group_offsets("g", [T0])
    assert results[U0] is None
    assert [results[tp].error_name for tp in (T0, T1)] == ["GROUP_SUBSCRIBED_TO_TOPIC"] * 2
    assert raised.value.error_name == "GROUP_SUBSCRIBED_TO_TOPIC"
    request = coordinator.requests("OffsetDelete")[1]
    assert request.group_id == "g"
    assert [(t.name, list(t.partition_indexes)) for t in request.topics] == [("t", [0, 1]), ("u", [0])]


def test_delete_consumer_group_offsets_raises_the_groups_error(fake_nodes, clock):
    broker, (coordinator,) = cluster(fake_nodes)
    coordinator.on("OffsetDelete", pb.OffsetDeleteResponse(error_code=Errors.GROUP_ID_NOT_FOUND))
    with admin_for(broker, clock) as admin, pytest.raises(KafkaError) as raised:
        admin.delete_consumer_group_offsets("g", [T0], raise_errors=False)
    assert raised.value.error_name == "GROUP_ID_NOT_FOUND"
