"""Conversions: ControllerService protos <-> core types, Send* effects -> BrokerService requests,
ZooKeeper layer types <-> core types, and the mapping of errors to codes."""

from __future__ import annotations

from services.common import zk
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.controller.v1 import controller_pb2 as pb
from services.common.shared_types import BrokerInfo, EndPoint, PartitionStateInfo, ReplicaAssignment
from services.common.topic_partition import TopicPartition
from services.controller import broker_requests, controller_protos, zk_convert
from services.controller.state.context import ControllerContext
from services.controller.state.effects import (
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    StopReplicaPartition,
)
from services.controller.state.events import ElectionType
from services.controller.state.model import LeaderAndIsr
from services.controller.state.records import PartitionAssignmentChanged, TopicAdded
from services.controller.state.topic_admin import NewPartitions, TopicCreation

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
BROKER = BrokerInfo(1, (EndPoint("h1", 9092, "PLAINTEXT"),), "r1", 55)


def test_create_topics_request_to_new_topics():
    request = pb.CreateTopicsRequest(timeout_ms=10, validate_only=True)
    topic = request.topics.add(name="a", num_partitions=-1, replication_factor=-1)
    topic.assignments.add(partition_index=0, broker_ids=[1, 2])
    topic.configs.add(name="retention.ms", value="1000")
    topic.configs.add(name="cleanup.policy")  # no value: null, as Kafka's
    (new,) = controller_protos.new_topics(request)
    assert (new.name, new.num_partitions, new.replication_factor) == ("a", -1, -1)
    assert new.assignments == {0: (1, 2)}
    assert new.configs == {"retention.ms": "1000", "cleanup.policy": None}


def test_create_topics_response_keeps_request_order_and_kafka_fields():
    results = {
        "b": TopicCreation("b", {0: (1, 2), 1: (2, 1)}, {}),
        "a": KafkaError("no brokers", error=Errors.INVALID_REPLICATION_FACTOR),
    }
    response = controller_protos.create_topics_response(["a", "b", "a"], results)
    assert [(t.name, t.error_code, t.num_partitions, t.replication_factor) for t in response.topics] == [
        ("a", Errors.INVALID_REPLICATION_FACTOR, -1, -1),
        ("b", 0, 2, 2),
    ]
    assert response.topics[0].error_message == "no brokers"


def test_create_partitions_request_and_response():
    request = pb.CreatePartitionsRequest()
    request.topics.add(name="t", count=3).assignments.add(broker_ids=[2, 1])
    request.topics.add(name="u", count=2)
    assert controller_protos.new_partitions(request) == (
        NewPartitions("t", 3, [(2, 1)]),
        NewPartitions("u", 2, None),
    )
    response = controller_protos.create_partitions_response(
        ["t", "u"], {"t": None, "u": KafkaError(error=Errors.INVALID_PARTITIONS)}
    )
    assert [(r.name, r.error_code) for r in response.results] == [
        ("t", 0),
        ("u", Errors.INVALID_PARTITIONS),
    ]


def test_alter_isr_round_trip():
    request = pb.AlterIsrRequest(broker_id=2, broker_epoch=9)
    topic = request.topics.add(name="t")
    topic.partitions.add(partition_index=0, leader_epoch=4, new_isr=[2, 3], current_isr_version=7)
    topic.partitions.add(partition_index=1, leader_epoch=1, new_isr=[2], current_isr_version=1)
    isrs = controller_protos.isrs_to_alter(request)
    assert isrs == {T0: LeaderAndIsr(2, 4, (2, 3), 7), T1: LeaderAndIsr(2, 1, (2,), 1)}
    response = controller_protos.alter_isr_response(
        {T0: LeaderAndIsr(2, 4, (2, 3), 8), T1: KafkaError(error=Errors.FENCED_LEADER_EPOCH)}
    )
    (topic_result,) = response.topics
    ok, fenced = topic_result.partitions
    assert (ok.error_code, ok.leader_id, ok.leader_epoch, list(ok.isr), ok.current_isr_version) == (
        0,
        2,
        4,
        [2, 3],
        8,
    )
    assert fenced.error_code == Errors.FENCED_LEADER_EPOCH


def test_elect_leaders_request_and_response():
    request = pb.ElectLeadersRequest(election_type=pb.UNCLEAN)
    request.topic_partitions.add(topic="t", partitions=[0, 1])
    assert controller_protos.election_type(request) == ElectionType.UNCLEAN
    assert controller_protos.election_partitions(request) == frozenset({T0, T1})
    assert controller_protos.election_partitions(pb.ElectLeadersRequest(all_partitions=True)) is None
    response = controller_protos.elect_leaders_response(
        {T1: KafkaError(error=Errors.ELECTION_NOT_NEEDED), T0: 3}
    )
    (result,) = response.replica_election_results
    assert [(p.partition_id, p.error_code) for p in result.partition_result] == [
        (0, 0),
        (1, Errors.ELECTION_NOT_NEEDED),
    ]


def test_controlled_shutdown_response_lists_remaining_partitions():
    response = controller_protos.controlled_shutdown_response([T1, T0])
    assert [(p.topic_name, p.partition_index) for p in response.remaining_partitions] == [("t", 0), ("t", 1)]


def test_errors_map_to_kafka_codes():
    assert controller_protos.kafka_error(KafkaError(error=Errors.NOT_CONTROLLER)).code == 41
    assert controller_protos.kafka_error(TimeoutError("slow")).code == Errors.REQUEST_TIMED_OUT
    assert controller_protos.kafka_error(RuntimeError("bug")).code == Errors.UNKNOWN_SERVER_ERROR


# --- controller to broker ---------------------------------------------------------------------


def info(partition: TopicPartition, is_new: bool = False) -> PartitionStateInfo:
    return PartitionStateInfo(partition, 3, 1, 5, (1, 2), 8, (1, 2), offline_replicas=(2,), is_new=is_new)


def test_leader_and_isr_request():
    effect = SendLeaderAndIsr(2, 77, 3, (info(T0, is_new=True),), (BROKER,))
    request = broker_requests.leader_and_isr_request(effect, 1001)
    assert (request.controller_id, request.controller_epoch, request.broker_epoch) == (1001, 3, 77)
    (state,) = request.partition_states
    assert (state.topic_name, state.leader, state.leader_epoch, list(state.isr), state.zk_version) == (
        "t",
        1,
        5,
        [1, 2],
        8,
    )
    assert state.is_new and list(state.offline_replicas) == [2]
    assert (request.live_leaders[0].node_id, request.live_leaders[0].host, request.live_leaders[0].rack) == (
        1,
        "h1",
        "r1",
    )


def test_update_metadata_carries_the_controller_endpoint_and_cluster_id():
    controller = common_pb2.Node(node_id=1001, host="ctl", port=9093)
    effect = SendUpdateMetadata(1, 55, 3, (info(T0),), (BROKER,))
    method, request = broker_requests.request_for(effect, 1001, controller, "cid")
    assert method == "UpdateMetadata"
    assert request.controller == controller and request.cluster_id == "cid"
    assert [n.port for n in request.live_brokers] == [9092]


def test_stop_replica_request_groups_by_topic_and_its_answer_becomes_a_deletion_event():
    effect = SendStopReplica(
        1,
        55,
        3,
        (
            StopReplicaPartition(T0, -2, True),
            StopReplicaPartition(T1, -2, True),
            StopReplicaPartition(TopicPartition("u", 0), 4, False),
        ),
    )
    request = broker_requests.stop_replica_request(effect, 1001)
    assert [
        (t.topic_name, [(p.partition_index, p.delete_partition) for p in t.partition_states])
        for t in request.topic_states
    ] == [("t", [(0, True), (1, True)]), ("u", [(0, False)])]
    response = broker_pb2.StopReplicaResponse()
    response.partition_errors.add(topic_name="t", partition_index=1, error_code=56)
    event = broker_requests.stop_replica_deletion_event(effect, response)
    assert (event.replica_id, event.request_error_code) == (1, 0)
    assert event.partition_error_codes == {T0: 0, T1: 56}
    no_delete = SendStopReplica(1, 55, 3, (StopReplicaPartition(T0, 4, False),))
    assert broker_requests.stop_replica_deletion_event(no_delete, response) is None


def test_broker_address_prefers_plaintext_and_defaults_the_host():
    broker = BrokerInfo(1, (EndPoint("h", 1, "SSL", "SSL"), EndPoint("", 2, "PLAINTEXT")), None, 1)
    assert broker_requests.broker_address(broker) == "127.0.0.1:2"
    assert broker_requests.broker_address(BrokerInfo(2)) is None


# --- ZooKeeper layer --------------------------------------------------------------------------


def test_zk_partition_state_conversions():
    leadership = zk_convert.leadership_from_zk(zk.Versioned(zk.PartitionStateZnode(1, 5, (1, 2), 3), 8))
    assert leadership.leader_and_isr == LeaderAndIsr(1, 5, (1, 2), 8) and leadership.controller_epoch == 3
    assert zk_convert.partition_state_to_zk(leadership.leader_and_isr, 3) == zk.PartitionStateZnode(
        1, 5, (1, 2), 3
    )


def test_rewritten_assignment_keeps_topic_id_and_reassignment_state():
    context = ControllerContext()
    context.apply(TopicAdded("t", "vY5mWtJpS0SeqD4iXIEkrg"))
    context.apply(PartitionAssignmentChanged(T0, ReplicaAssignment((1, 2, 3), adding_replicas=(3,))))
    written = zk_convert.topic_assignment_to_zk("t", {0: (1, 2, 3), 1: (2, 3)}, context)
    assert written.topic_id == "vY5mWtJpS0SeqD4iXIEkrg"
    assert written.partitions[0] == ReplicaAssignment((1, 2, 3), (3,), ())
    assert written.partitions[1] == ReplicaAssignment((2, 3))
    assert zk_convert.assignment_from_zk(written)[0] == ReplicaAssignment((1, 2, 3), (3,), ())


def test_a_leader_and_isr_answer_with_storage_errors_becomes_an_event_of_those_partitions_only():
    effect = SendLeaderAndIsr(2, 77, 3, (info(T0), info(T1)), (BROKER,))
    response = broker_pb2.LeaderAndIsrResponse()
    response.partition_errors.add(topic_name="t", partition_index=0, error_code=56)
    response.partition_errors.add(topic_name="t", partition_index=1, error_code=11)
    event = broker_requests.leader_and_isr_storage_error_event(effect, response)
    assert (event.broker_id, event.error_code, dict(event.partition_error_codes)) == (2, 0, {T0: 56})
    healthy = broker_pb2.LeaderAndIsrResponse()
    healthy.partition_errors.add(topic_name="t", partition_index=0, error_code=0)
    assert broker_requests.leader_and_isr_storage_error_event(effect, healthy) is None
