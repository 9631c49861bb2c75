"""FindCoordinator from the directory, and the fence record's key."""

from __future__ import annotations

from services.common.coordinator_lookup import (
    coordinator_nodes,
    find_coordinator,
    kafka_coordinator,
    kafka_coordinator_nodes,
)
from services.common.errors import Errors
from services.common.hashing import coordinator_partition
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.topic_partition import TopicPartition
from services.common.zk.coordinator_directory import DirectorySnapshot
from services.common.zk.coordinators import CoordinatorInfo, CoordinatorOwnership, PartitionOwner
from services.coordinator.offsets_log import fence_key, is_fence_key
from services.coordinator.servicer import client_host


def snapshot(owner_id: int, live: bool = True, kafka_endpoint: str | None = None) -> DirectorySnapshot:
    partition = coordinator_partition("orders")
    ownership = CoordinatorOwnership({TopicPartition("__consumer_offsets", partition): PartitionOwner(owner_id, 3)})
    coordinators = {owner_id: CoordinatorInfo(owner_id, "127.0.0.1:9094", 0, kafka_endpoint)} if live else {}
    return DirectorySnapshot(coordinators, ownership)


def test_the_owner_of_the_groups_partition_is_the_coordinator():
    response = find_coordinator(snapshot(2001), "orders", common_pb2.GROUP)
    assert response.error_code == 0
    assert (response.coordinator.node_id, response.coordinator.host, response.coordinator.port) == (
        2001, "127.0.0.1", 9094)


def test_no_live_owner_is_coordinator_not_available():
    response = find_coordinator(snapshot(2001, live=False), "orders", common_pb2.GROUP)
    assert response.error_code == Errors.COORDINATOR_NOT_AVAILABLE
    assert response.coordinator.node_id == -1


def test_transactional_ids_look_in_the_transaction_topic():
    response = find_coordinator(snapshot(2001), "orders", common_pb2.TRANSACTION)
    assert response.error_code == Errors.COORDINATOR_NOT_AVAILABLE


def test_an_empty_key_is_an_invalid_request():
    assert find_coordinator(snapshot(2001), "", common_pb2.GROUP).error_code == 42


def test_coordinator_nodes_lists_live_coordinators():
    assert [(n.node_id, n.port) for n in coordinator_nodes(snapshot(2002))] == [(2002, 9094)]


def test_kafka_clients_are_sent_to_the_owners_kafka_listener():
    answer = kafka_coordinator(snapshot(2001, kafka_endpoint="127.0.0.1:19094"), "orders", 0)
    assert (answer.error_code, answer.node_id, answer.host, answer.port) == (0, 2001, "127.0.0.1", 19094)
    assert kafka_coordinator_nodes(snapshot(2001, kafka_endpoint="127.0.0.1:19094")) == [(2001, "127.0.0.1", 19094)]


def test_an_owner_without_a_kafka_listener_is_not_available_to_kafka_clients():
    answer = kafka_coordinator(snapshot(2001), "orders", 0)
    assert (answer.error_code, answer.node_id) == (Errors.COORDINATOR_NOT_AVAILABLE, -1)
    assert kafka_coordinator_nodes(snapshot(2001)) == []
    assert kafka_coordinator(snapshot(2001, kafka_endpoint="h:1"), "", 0).error_code == Errors.INVALID_REQUEST
    assert kafka_coordinator(snapshot(2001, kafka_endpoint="h:1"), "orders", 1).error_code == (
        Errors.COORDINATOR_NOT_AVAILABLE)  # a transactional id looks in __transaction_state


def test_fence_keys_are_recognised_and_group_keys_are_not():
    assert is_fence_key(fence_key(2001))
    assert not is_fence_key(b"\x00\x01\x00\x01g")
    assert not is_fence_key(b"\x00\x02\x00\x01g")
    assert not is_fence_key(None)


class _Context:
    def __init__(self, peer: str) -> None:
        self._peer = peer

    def peer(self) -> str:
        return self._peer


def test_client_host_is_shown_as_kafka_shows_it():
    assert client_host(_Context("ipv4:127.0.0.1:51234")) == "/127.0.0.1"
    assert client_host(_Context("ipv6:[::1]:51234")) == "/::1"
