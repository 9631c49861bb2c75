"""GrpcLeaderEndpoint's FetchRequest: kept between fetches of the same partitions, with only the
changed partitions' fields set again, and built anew when the partitions change."""

from __future__ import annotations

import pytest

from services.broker.replication.leader_endpoint import GrpcLeaderEndpoint
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


def test_the_request_is_kept_and_only_changed_partitions_are_set(endpoint):
    partitions = {("a", i): (i, 3, 1024) for i in range(100)} | {("b", 0): (7, 1, 1024)}
    first = endpoint._fetch_request(2, 500, 1, 1 << 20, partitions)
    assert fields(first) == partitions
    assert (first.replica_id, first.max_wait_ms, first.min_bytes, first.max_bytes) == (2, 500, 1, 1 << 20)
    assert [t.topic for t in first.topics] == ["a", "b"]
    moved = dict(partitions) | {("a", 5): (9, 4, 2048)}
    second = endpoint._fetch_request(2, 500, 1, 1 << 20, moved)
    assert second is first
    assert fields(second) == moved
    assert broker_pb2.FetchRequest.FromString(second.SerializeToString()) == second


def test_a_changed_partition_set_builds_a_new_request(endpoint):
    first = endpoint._fetch_request(2, 500, 1, 1 << 20, {("a", 0): (0, 0, 1024), ("a", 1): (0, 0, 1024)})
    fewer = {("a", 1): (4, 0, 1024)}
    second = endpoint._fetch_request(2, 500, 1, 1 << 20, fewer)
    assert second is not first
    assert fields(second) == fewer
    again = endpoint._fetch_request(2, 500, 1, 1 << 20, {("a", 1): (5, 0, 1024)})
    assert again is second and fields(again) == {("a", 1): (5, 0, 1024)}


def test_a_closed_endpoint_answers_every_partition_with_a_network_exception():
    """A fetcher being stopped closes its endpoint while its thread may still be calling it."""
    endpoint = GrpcLeaderEndpoint("127.0.0.1:1")
    endpoint.close()
    partitions = {("a", 0): (0, 0, 1024), ("a", 1): (5, 0, 1024)}
    assert {tp: data.error_code for tp, data in endpoint.fetch(2, 0, 1, 1024, partitions).items()} == {
        tp: Errors.NETWORK_EXCEPTION for tp in partitions}
    answers = endpoint.offsets_for_leader_epoch({("a", 0): (3, 2)})
    assert answers == {("a", 0): (Errors.NETWORK_EXCEPTION, -1, -1)}
