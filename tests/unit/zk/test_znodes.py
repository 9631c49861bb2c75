"""Znode codecs: round trips, and JSON in the exact shapes Kafka 2.8 writes decoding correctly."""

from __future__ import annotations

import json
import queue
import struct

import pytest
from kazoo.exceptions import BadVersionError, NodeExistsError, RolledBackError, RuntimeInconsistency
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent

from services.common.errors import Errors
from services.common.shared_types import BrokerInfo, EndPoint, ReplicaAssignment
from services.common.topic_partition import TopicPartition
from services.common.zk import (
    admin,
    brokers,
    cluster_id,
    configs,
    consumers,
    controller,
    coordinators,
    isr_change,
    partition_state,
    producer_ids,
    topics,
)
from services.common.zk.consumers import ConsumerRegistration
from services.common.zk.controller import ControllerInfo
from services.common.zk.coordinators import CoordinatorInfo, CoordinatorOwnership, PartitionOwner
from services.common.zk.errors import ControllerMovedError, ZnodeFormatError
from services.common.zk.fencing import FencedTransaction, ZkTransaction
from services.common.zk.partition_state import PartitionStateZnode
from services.common.zk.producer_ids import ProducerIdBlock, ProducerIdsExhaustedError
from services.common.zk.topics import TopicAssignment
from services.common.zk.watches import ZkEvent, enqueue_watch

TP0 = TopicPartition("orders", 0)


def parsed(data: bytes) -> dict:
    return json.loads(data)


# -- /brokers/ids/<id> ------------------------------------------------------------------------

KAFKA_BROKER_V5 = (
    b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
    b'"endpoints":["PLAINTEXT://kafka-1:9092"],"jmx_port":-1,"port":9092,"host":"kafka-1",'
    b'"version":5,"timestamp":"1620000000000"}'
)


def test_kafka_broker_v5_decodes() -> None:
    info = brokers.decode_broker(1, KAFKA_BROKER_V5)

    assert info == BrokerInfo(1, (EndPoint("kafka-1", 9092),), timestamp_ms=1620000000000, version=5)
    assert info.endpoint().port == 9092


def test_kafka_broker_with_rack_listeners_and_features_decodes() -> None:
    data = (
        b'{"features":{"metadata.version":{"min_version":1,"max_version":3}},'
        b'"listener_security_protocol_map":{"CLIENT":"PLAINTEXT","REPLICATION":"SSL"},'
        b'"endpoints":["CLIENT://h1:9092","REPLICATION://[::1]:9093"],"rack":"dc1","jmx_port":9999,'
        b'"port":9092,"host":"h1","version":5,"timestamp":"1620000000001"}'
    )
    info = brokers.decode_broker(7, data)

    assert info.endpoints == (
        EndPoint("h1", 9092, "CLIENT", "PLAINTEXT"),
        EndPoint("::1", 9093, "REPLICATION", "SSL"),
    )
    assert info.rack == "dc1"
    assert info.jmx_port == 9999
    assert info.features == (("metadata.version", 1, 3),)
    assert brokers.decode_broker(7, brokers.encode_broker(info)) == info
    assert info.endpoint("REPLICATION").connection_string == "REPLICATION://[::1]:9093"


def test_old_broker_registration_versions_decode() -> None:
    v1 = brokers.decode_broker(2, b'{"version":1,"host":"old","port":9092,"jmx_port":9999,"timestamp":"5"}')
    v2 = brokers.decode_broker(
        3, b'{"version":2,"host":"h","port":9092,"jmx_port":-1,"timestamp":"5","endpoints":["SSL://h:9093"]}'
    )

    assert v1.endpoints == (EndPoint("old", 9092),)
    assert v2.endpoints == (EndPoint("h", 9093, "SSL", "SSL"),)


def test_broker_encodes_kafka_v5_fields_and_round_trips() -> None:
    info = BrokerInfo(1, (EndPoint("h1", 9092),), rack=None, timestamp_ms=1620000000000)

    assert parsed(brokers.encode_broker(info)) == {
        "version": 5,
        "host": "h1",
        "port": 9092,
        "endpoints": ["PLAINTEXT://h1:9092"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "jmx_port": -1,
        "timestamp": "1620000000000",
        "features": {},
    }
    assert brokers.decode_broker(1, brokers.encode_broker(info)) == info
    racked = BrokerInfo(2, (EndPoint("h2", 9093, "SSL", "SSL"),), rack="r1", timestamp_ms=3)
    assert parsed(brokers.encode_broker(racked))["rack"] == "r1"
    assert parsed(brokers.encode_broker(racked))["host"] is None
    assert parsed(brokers.encode_broker(racked))["port"] == -1
    assert brokers.decode_broker(2, brokers.encode_broker(racked)) == racked


def test_broker_endpoint_without_security_protocol_is_rejected() -> None:
    data = b'{"version":5,"endpoints":["CLIENT://h:1"],"listener_security_protocol_map":{},"jmx_port":-1}'

    with pytest.raises(ZnodeFormatError, match="CLIENT"):
        brokers.decode_broker(1, data)


# -- /brokers/topics/<t> ----------------------------------------------------------------------


def test_kafka_topic_v3_decodes() -> None:
    data = (
        b'{"removing_replicas":{"1":[3]},"partitions":{"0":[1,2,3],"1":[2,3,4]},'
        b'"topic_id":"AAAAAAAAAAEAAAAAAAAAAg","adding_replicas":{"1":[4]},"version":3}'
    )
    assignment = topics.decode_topic("orders", data)

    assert assignment.topic_id == "AAAAAAAAAAEAAAAAAAAAAg"
    assert assignment.partitions == {
        0: ReplicaAssignment((1, 2, 3)),
        1: ReplicaAssignment((2, 3, 4), adding_replicas=(4,), removing_replicas=(3,)),
    }
    assert assignment.replicas() == {0: [1, 2, 3], 1: [2, 3, 4]}


def test_kafka_topic_v1_without_topic_id_decodes() -> None:
    assignment = topics.decode_topic("legacy", b'{"version":1,"partitions":{"0":[1],"1":[2]}}')

    assert assignment == TopicAssignment.of("legacy", {0: [1], 1: [2]})
    assert assignment.topic_id is None


def test_topic_encodes_v3_and_round_trips() -> None:
    topic_id = topics.new_topic_id()
    assignment = TopicAssignment(
        "orders", {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 3), (3,), (1,))}, topic_id
    )

    assert parsed(topics.encode_topic(assignment)) == {
        "version": 3,
        "topic_id": topic_id,
        "partitions": {"0": [1, 2], "1": [2, 3]},
        "adding_replicas": {"1": [3]},
        "removing_replicas": {"1": [1]},
    }
    assert topics.decode_topic("orders", topics.encode_topic(assignment)) == assignment


def test_topic_ids_are_kafka_uuids() -> None:
    # Kafka's Uuid(1, 2): most and least significant longs, big-endian, base64url without padding.
    assert topics.topic_id_from_bytes(struct.pack(">qq", 1, 2)) == "AAAAAAAAAAEAAAAAAAAAAg"
    assert topics.topic_id_to_bytes("AAAAAAAAAAEAAAAAAAAAAg") == struct.pack(">qq", 1, 2)
    ids = {topics.new_topic_id() for _ in range(200)}
    assert len(ids) == 200
    for topic_id in ids:
        assert len(topic_id) == 22 and "=" not in topic_id and not topic_id.startswith("-")
        assert topic_id not in (topics.ZERO_TOPIC_ID, topics.METADATA_TOPIC_ID)
        assert topics.topic_id_to_bytes(topic_id)[6] >> 4 == 4  # a version 4 UUID


@pytest.mark.parametrize(
    "bad", ["", "short", "AAAAAAAAAAEAAAAAAAAAAg==", "AAAAAAAAAAEAAAAAAAAAA!", "AAAAAAAAAAEAAAAAAAAAAh"]
)
def test_malformed_topic_ids_are_rejected(bad: str) -> None:
    with pytest.raises(ValueError):
        topics.topic_id_to_bytes(bad)


# -- partition state, controller, epoch -------------------------------------------------------


def test_kafka_partition_state_decodes_and_round_trips() -> None:
    data = b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2,3]}'
    state = partition_state.decode_partition_state(TP0, data)

    assert state == PartitionStateZnode(leader=1, leader_epoch=7, isr=(1, 2, 3), controller_epoch=3)
    assert partition_state.encode_partition_state(state) == data
    assert partition_state.partition_state_path(TP0) == "/brokers/topics/orders/partitions/0/state"


def test_kafka_controller_znode_decodes_without_endpoint() -> None:
    info = controller.decode_controller(b'{"version":1,"brokerid":2,"timestamp":"1620000000000"}')

    assert info == ControllerInfo(2, 1620000000000, None)


def test_controller_znode_round_trips_with_endpoint_and_ignores_unknown_fields() -> None:
    info = ControllerInfo(5, 1620000000000, "ctl-5:9093")
    data = controller.encode_controller(info)

    assert parsed(data) == {
        "version": 1,
        "brokerid": 5,
        "timestamp": "1620000000000",
        "endpoint": "ctl-5:9093",
    }
    assert controller.decode_controller(data) == info
    newer = b'{"version":2,"brokerid":5,"timestamp":"1","endpoint":"c:1","kraft":true}'
    assert controller.decode_controller(newer) == ControllerInfo(5, 1, "c:1")


def test_controller_epoch_is_a_plain_integer() -> None:
    assert controller.encode_controller_epoch(3) == b"3"
    assert controller.decode_controller_epoch(b"42") == 42
    with pytest.raises(ZnodeFormatError):
        controller.decode_controller_epoch(b'{"epoch":1}')


# -- notifications, configs, admin ------------------------------------------------------------


def test_kafka_isr_change_notification_decodes_and_round_trips() -> None:
    data = b'{"version":1,"partitions":[{"topic":"orders","partition":0},{"topic":"orders","partition":1}]}'
    partitions = isr_change.decode_isr_change(data)

    assert partitions == {TopicPartition("orders", 0), TopicPartition("orders", 1)}
    assert isr_change.encode_isr_change(partitions) == data
    assert isr_change.sequence_number("/isr_change_notification/isr_change_0000000012") == "0000000012"
    assert isr_change.isr_change_path("0000000012") == "/isr_change_notification/isr_change_0000000012"


def test_kafka_topic_config_and_change_notification_decode() -> None:
    data = b'{"version":1,"config":{"cleanup.policy":"compact","retention.ms":"86400000"}}'

    assert configs.decode_config(data) == {"cleanup.policy": "compact", "retention.ms": "86400000"}
    assert configs.encode_config({"retention.ms": 86400000, "cleanup.policy": "compact"}) == data
    assert configs.decode_config(b"") == {}
    assert configs.decode_config_change(b'{"version":2,"entity_path":"topics/orders"}') == "topics/orders"
    assert (
        configs.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"t"}') == "topics/t"
    )
    assert configs.encode_config_change(configs.topic_entity_path("orders")) == (
        b'{"version":2,"entity_path":"topics/orders"}'
    )


def test_kafka_admin_znodes_decode() -> None:
    reassignment = b'{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[3,1,2]}]}'
    election = b'{"version":1,"partitions":[{"topic":"orders","partition":0}]}'

    assert admin.decode_reassignment(reassignment) == {TP0: [3, 1, 2]}
    assert admin.encode_reassignment({TP0: [3, 1, 2]}) == reassignment
    assert admin.decode_preferred_replica_election(election) == {TP0}
    assert admin.encode_preferred_replica_election([TP0]) == election
    assert admin.delete_topic_path("orders") == "/admin/delete_topics/orders"


# -- producer ids, cluster id -----------------------------------------------------------------


def test_kafka_producer_id_block_decodes_and_round_trips() -> None:
    data = b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'
    block = producer_ids.decode_block(data)

    assert block == ProducerIdBlock(2, 1000, 1999)
    assert block.size == 1000
    assert producer_ids.encode_block(block) == data
    assert producer_ids.decode_block(b"") is None


def test_producer_id_blocks_follow_each_other() -> None:
    first = producer_ids.next_block(None, 1)

    assert first == ProducerIdBlock(1, 0, 999)
    assert producer_ids.next_block(first, 2) == ProducerIdBlock(2, 1000, 1999)
    with pytest.raises(ProducerIdsExhaustedError):
        producer_ids.next_block(ProducerIdBlock(1, 0, producer_ids.MAX_PRODUCER_ID - 10), 1)


def test_kafka_cluster_id_decodes() -> None:
    assert (
        cluster_id.decode_cluster_id(b'{"version":"1","id":"Yx3bNqWvTf2kHc9PqsmL3g"}')
        == "Yx3bNqWvTf2kHc9PqsmL3g"
    )
    assert cluster_id.encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'
    assert len(cluster_id.new_cluster_id()) == 22


# -- coordinators -----------------------------------------------------------------------------


def test_coordinator_registration_round_trips() -> None:
    info = CoordinatorInfo(4, "coord-4:9094", 1620000000000)
    data = coordinators.encode_coordinator(info)

    assert parsed(data) == {"version": 1, "endpoint": "coord-4:9094", "timestamp": "1620000000000"}
    assert coordinators.decode_coordinator(4, data) == info


def test_a_coordinators_kafka_listener_is_registered_beside_its_endpoint() -> None:
    info = CoordinatorInfo(4, "coord-4:9094", 1620000000000, kafka_endpoint="coord-4:19094")
    data = coordinators.encode_coordinator(info)

    assert parsed(data)["kafka_endpoint"] == "coord-4:19094"
    assert coordinators.decode_coordinator(4, data) == info


def test_coordinator_ownership_decodes_and_round_trips() -> None:
    data = (
        b'{"version":1,"partitions":{"__consumer_offsets":{"0":{"owner":1,"epoch":4},"1":{"owner":2,"epoch":0}},'
        b'"__transaction_state":{"0":{"owner":2,"epoch":1}}}}'
    )
    ownership = coordinators.decode_ownership(data)

    assert ownership.partitions == {
        TopicPartition("__consumer_offsets", 0): PartitionOwner(1, 4),
        TopicPartition("__consumer_offsets", 1): PartitionOwner(2, 0),
        TopicPartition("__transaction_state", 0): PartitionOwner(2, 1),
    }
    assert ownership.owned_by(2) == {
        TopicPartition("__consumer_offsets", 1): 0,
        TopicPartition("__transaction_state", 0): 1,
    }
    assert coordinators.encode_ownership(ownership) == data


def test_ownership_epochs_grow_only_when_the_owner_changes() -> None:
    offsets0, offsets1, offsets2 = (TopicPartition("__consumer_offsets", p) for p in range(3))
    before = CoordinatorOwnership({offsets0: PartitionOwner(1, 4), offsets1: PartitionOwner(2, 0)})

    after = before.reassigned({offsets0: 2, offsets1: 2, offsets2: 1})

    assert after.partitions == {
        offsets0: PartitionOwner(2, 5),
        offsets1: PartitionOwner(2, 0),
        offsets2: PartitionOwner(1, 0),
    }
    assert before.partitions[offsets0] == PartitionOwner(1, 4)


def test_an_owner_that_registered_again_gets_a_new_epoch() -> None:
    offsets0, offsets1 = (TopicPartition("__consumer_offsets", p) for p in range(2))
    before = CoordinatorOwnership({offsets0: PartitionOwner(1, 4, 1000, registration=77),
                                   offsets1: PartitionOwner(2, 0, 1001, registration=80)})

    after = before.reassigned({offsets0: 1, offsets1: 2}, {1: 95, 2: 80})   # coordinator 1 restarted

    assert after.partitions == {offsets0: PartitionOwner(1, 5, 1000, 95), offsets1: PartitionOwner(2, 0, 1001, 80)}
    data = coordinators.encode_ownership(after)
    assert b'"0":{"owner":1,"epoch":5,"producer_id":1000,"registration":95}' in data
    assert coordinators.decode_ownership(data) == after


# -- legacy consumers -------------------------------------------------------------------------


def test_kafka_legacy_consumer_znodes_decode_and_round_trip() -> None:
    data = b'{"version":1,"subscription":{"clicks":2},"pattern":"static","timestamp":"1620000000000"}'
    registration = consumers.decode_consumer(data)

    assert registration == ConsumerRegistration({"clicks": 2}, "static", 1620000000000)
    assert consumers.encode_consumer(registration) == data
    assert consumers.decode_owner(consumers.encode_owner("g_host-1-abcd1234-0")) == "g_host-1-abcd1234-0"
    assert consumers.encode_offset(12345) == b"12345"
    assert consumers.decode_offset(b"12345") == 12345
    assert consumers.owner_path("g", TP0) == "/consumers/g/owners/orders/0"
    assert consumers.offset_path("g", TP0) == "/consumers/g/offsets/orders/0"
    assert consumers.consumer_path("g", "g_c1") == "/consumers/g/ids/g_c1"


# -- shared rules -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "x\x00"])
def test_names_that_are_not_one_path_segment_are_rejected(name: str) -> None:
    with pytest.raises(ValueError):
        topics.topic_path(name)
    with pytest.raises(ValueError):
        consumers.group_path(name)


@pytest.mark.parametrize(
    "decode",
    [
        lambda d: brokers.decode_broker(1, d),
        lambda d: topics.decode_topic("t", d),
        lambda d: partition_state.decode_partition_state(TP0, d),
        controller.decode_controller,
        isr_change.decode_isr_change,
        coordinators.decode_ownership,
        consumers.decode_consumer,
        producer_ids.decode_block,
    ],
)
@pytest.mark.parametrize("data", [b"not json", b"[1,2]", b'{"version":1}', b'{"partitions":7,"isr":1}'])
def test_malformed_znodes_raise_znode_format_error(decode, data: bytes) -> None:
    with pytest.raises(ZnodeFormatError):
        decode(data)


def test_enqueue_watch_only_enqueues() -> None:
    events: queue.Queue[ZkEvent] = queue.Queue(maxsize=4)
    watch = enqueue_watch(events, "controller_change")

    watch(WatchedEvent(EventType.DELETED, KeeperState.CONNECTED, "/controller"))

    assert events.get_nowait() == ZkEvent("controller_change", EventType.DELETED, "/controller")


class _RecordingTransaction:
    def __init__(self) -> None:
        self.ops: list[tuple] = []

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: self.ops.append((name, *args))


class _StubKazoo:
    def __init__(self) -> None:
        self.tx = _RecordingTransaction()

    def transaction(self) -> _RecordingTransaction:
        return self.tx


def test_fenced_transaction_checks_the_epoch_first_and_maps_a_failed_check() -> None:
    zk = _StubKazoo()
    tx = FencedTransaction(zk, 4).create("/a", b"x").delete("/b")

    assert zk.tx.ops[0] == ("check", "/controller_epoch", 4)
    assert tx.outcome([True, "/a", True]) == ["/a", True]
    with pytest.raises(ControllerMovedError) as moved:
        tx.outcome([BadVersionError(), RuntimeInconsistency(), RuntimeInconsistency()])
    assert moved.value.code == Errors.STALE_CONTROLLER_EPOCH
    with pytest.raises(NodeExistsError) as exists:
        tx.outcome([RolledBackError(), NodeExistsError(), RuntimeInconsistency()])
    assert "create /a" in exists.value.__notes__[0]
    with pytest.raises(ValueError):
        FencedTransaction(zk, -1)


def test_plain_transaction_raises_the_failing_op() -> None:
    tx = ZkTransaction(_StubKazoo()).set_data("/a", b"1", 3)

    with pytest.raises(BadVersionError):
        tx.outcome([BadVersionError()])
