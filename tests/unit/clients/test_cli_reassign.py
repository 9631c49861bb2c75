"""`odradek reassign-partitions`: JSON files, proposals and Kafka's output lines."""

from __future__ import annotations

import random

import pytest

from services.clients import cli
from services.clients.cli_reassign import (
    ReassignCommandError,
    format_list,
    format_reassignment_json,
    format_verify,
    parse_broker_list,
    parse_reassignment_json,
    parse_topics_json,
    propose_assignment,
)
from services.common.shared_types import ReplicaAssignment
from services.common.topic_partition import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_reassignment_json_is_read_and_written_in_kafkas_format():
    document = {"version": 1, "partitions": [{"topic": "t", "partition": 1, "replicas": [2, 3]},
                                             {"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["any"]}]}
    assert parse_reassignment_json(document) == {T1: [2, 3], T0: [1]}
    assert format_reassignment_json({T1: [2, 3], T0: [1]}) == (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["any"]},'
        '{"topic":"t","partition":1,"replicas":[2,3],"log_dirs":["any","any"]}]}')


@pytest.mark.parametrize("partitions", [
    [],
    [{"topic": "t", "partition": 0}],
    [{"topic": "t", "partition": 0, "replicas": []}],
    [{"topic": "t", "partition": 0, "replicas": [1, 1]}],
    [{"topic": "t", "partition": 0, "replicas": [1]}, {"topic": "t", "partition": 0, "replicas": [2]}],
    [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/data"]}],
])
def test_bad_reassignment_files_are_refused(partitions):
    with pytest.raises(ReassignCommandError):
        parse_reassignment_json({"version": 1, "partitions": partitions})


def test_topics_and_broker_lists():
    assert parse_topics_json({"topics": [{"topic": "a"}, {"topic": "b"}], "version": 1}, "f") == ["a", "b"]
    with pytest.raises(ReassignCommandError, match="duplicate"):
        parse_topics_json({"topics": [{"topic": "a"}, {"topic": "a"}]}, "f")
    assert parse_broker_list("1,2,3") == [1, 2, 3]
    with pytest.raises(ReassignCommandError, match="duplicate"):
        parse_broker_list("1,1")


def test_a_proposal_spreads_replicas_and_keeps_the_replication_factor():
    proposed = propose_assignment(6, 3, [4, 5, 6, 7], random.Random(1))
    assert sorted(proposed) == list(range(6))
    for replicas in proposed.values():
        assert len(replicas) == len(set(replicas)) == 3 and set(replicas) <= {4, 5, 6, 7}
    leaders = [replicas[0] for replicas in proposed.values()]
    assert max(leaders.count(b) for b in (4, 5, 6, 7)) == 2
    with pytest.raises(ReassignCommandError, match="larger than available brokers"):
        propose_assignment(1, 3, [1, 2])


def test_verify_and_list_lines():
    targets = {T0: [2, 3], T1: [1, 2], TopicPartition("t", 2): [4]}
    ongoing = {T1: ReplicaAssignment((1, 2, 3), (1,), (3,))}
    current = {T0: [2, 3], T1: [2, 3], TopicPartition("t", 2): [1]}
    assert format_verify(targets, ongoing, current) == [
        "Status of partition reassignment:",
        "Reassignment of partition t-0 is complete.",
        "Reassignment of partition t-1 is still in progress.",
        "There is no active reassignment of partition t-2, but replica set is 1 rather than 4.",
    ]
    assert format_list(ongoing) == "Current partition reassignments:\nt-1: replicas: 1,2,3. adding: 1. removing: 3."
    assert format_list({}) == "No partition reassignments found."


def test_exactly_one_action_is_required(capsys):
    with pytest.raises(SystemExit):
        cli.main(["reassign-partitions", "--bootstrap-server", "h:1", "--execute", "--verify",
                  "--reassignment-json-file", "f"])
    with pytest.raises(SystemExit):
        cli.main(["reassign-partitions", "--bootstrap-server", "h:1", "--execute"])
    assert "--reassignment-json-file" in capsys.readouterr().err
