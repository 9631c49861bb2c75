"""GrpcLeaderEndpoint's FetchRequest: an incremental fetch names only what its session says; a full
one is kept between fetches of the same partitions, with only the changed partitions' fields set
again, and built anew when the partitions change."""

from __future__ import annotations

import pytest

from services.broker.replication.leader_endpoint import GrpcLeaderEndpoint
from services.clients.fetch_session import SessionFetch
from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2


@pytest.fixture
def endpoint():
    endpoint = GrpcLeaderEndpoint("127.0.0.1:1")  # never called: requests are only built
    yield endpoint
    endpoint.close()


def fields(request: broker_pb2.FetchRequest) -> dict:
    return {(topic.topic, p.partition): (p.fetch_offset, p.current_leader_epoch, p.partition_max_bytes)
            for topic in request.topics for p in topic.partitions}


def full(partitions: dict, session_id: int = 0) -> SessionFetch:
    return SessionFetch(session_id, 0, partitions, [])


def test_the_full_request_is_kept_and_only_changed_partitions_are_set(endpoint):
    partitions = {("a", i): (i, 3, 1024) for i in range(100)} | {("b", 0): (7, 1, 1024)}
    first = endpoint._fetch_request(2, 500, 1, 1 << 20, full(partitions))
    assert fields(first) == partitions
    assert (first.replica_id, first.max_wait_ms, first.min_bytes, first.max_bytes) == (2, 500, 1, 1 << 20)
    assert (first.HasField("session_id"), first.session_id, first.session_epoch) == (True, 0, 0)
    assert [t.topic for t in first.topics] == ["a", "b"]
    moved = dict(partitions) | {("a", 5): (9, 4, 2048)}
    second = endpoint._fetch_request(2, 500, 1, 1 << 20, full(moved, session_id=4))
    assert second is first
    assert fields(second) == moved and second.session_id == 4
    assert broker_pb2.FetchRequest.FromString(second.SerializeToString()) == second


def test_a_changed_partition_set_builds_a_new_full_request(endpoint):
    first = endpoint._fetch_request(2, 500, 1, 1 << 20, full({("a", 0): (0, 0, 1024), ("a", 1): (0, 0, 1024)}))
    fewer = {("a", 1): (4, 0, 1024)}
    second = endpoint._fetch_request(2, 500, 1, 1 << 20, full(fewer))
    assert second is not first
    assert fields(second) == fewer
    again = endpoint._fetch_request(2, 500, 1, 1 << 20, full({("a", 1): (5, 0, 1024)}))
    assert again is second and fields(again) == {("a", 1): (5, 0, 1024)}


def test_an_incremental_request_names_only_the_changes_and_leaves_the_full_one_alone(endpoint):
    first = endpoint._fetch_request(2, 500, 1, 1 << 20, full({("a", 0): (0, 0, 1024), ("a", 1): (0, 0, 1024)}))
    incremental = endpoint._fetch_request(2, 500, 1, 1 << 20,
                                          SessionFetch(9, 3, {("a", 1): (6, 0, 1024)}, [("a", 0)]))
    assert incremental is not first and fields(incremental) == {("a", 1): (6, 0, 1024)}
    assert (incremental.replica_id, incremental.session_id, incremental.session_epoch) == (2, 9, 3)
    assert [(t.topic, list(t.partitions)) for t in incremental.forgotten_topics_data] == [("a", [0])]
    assert fields(first) == {("a", 0): (0, 0, 1024), ("a", 1): (0, 0, 1024)}


def test_a_closed_endpoint_answers_with_a_network_exception():
    """A fetcher being stopped closes its endpoint while its thread may still be calling it."""
    endpoint = GrpcLeaderEndpoint("127.0.0.1:1")
    endpoint.close()
    answer = endpoint.fetch(2, 0, 1, 1024, full({("a", 0): (0, 0, 1024), ("a", 1): (5, 0, 1024)}))
    assert (answer.error_code, answer.partitions) == (Errors.NETWORK_EXCEPTION, {})
    answers = endpoint.offsets_for_leader_epoch({("a", 0): (3, 2)})
    assert answers == {("a", 0): (Errors.NETWORK_EXCEPTION, -1, -1)}
