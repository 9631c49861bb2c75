"""The client side of DescribeLogDirs: the request asks about all or some partitions, the answer
reads back as LogDirDescriptions, and `odradek log-dirs` renders Kafka's JSON from them."""

from __future__ import annotations

import json

from services.clients.admin_types import LogDirDescription, ReplicaInfo
from services.clients.cli_log_dirs import log_dirs_json
from services.clients.partition_requests import describe_log_dirs_request, parse_describe_log_dirs
from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.topic_partition import TopicPartition


def test_the_request_asks_about_all_or_only_the_given_partitions():
    assert describe_log_dirs_request().all_topics
    request = describe_log_dirs_request([TopicPartition("a", 1), ("a", 0), TopicPartition("b", 2)])
    assert not request.all_topics
    assert [(t.topic, list(t.partitions)) for t in request.topics] == [("a", [1, 0]), ("b", [2])]


def test_the_answer_reads_back_with_errors_per_dir():
    response = broker_pb2.DescribeLogDirsResponse()
    good = response.results.add(error_code=0, log_dir="/d1")
    good.topics.add(name="a").partitions.add(partition_index=0, partition_size=120, offset_lag=0)
    response.results.add(error_code=Errors.KAFKA_STORAGE_ERROR, log_dir="/d2")
    parsed = parse_describe_log_dirs(response)
    assert parsed["/d1"] == LogDirDescription(None, {TopicPartition("a", 0): ReplicaInfo(120, 0, False)})
    assert parsed["/d2"].error.error == Errors.KAFKA_STORAGE_ERROR and parsed["/d2"].replica_infos == {}


def test_kafkas_json_keeps_the_topics_asked_for():
    descriptions = {
        1: {"/d1": LogDirDescription(None, {TopicPartition("a", 0): ReplicaInfo(120, 0),
                                            TopicPartition("b", 0): ReplicaInfo(7, 0)})},
        2: {"/d2": LogDirDescription(parse_describe_log_dirs(_storage_error("/d2"))["/d2"].error, {})},
    }
    rendered = json.dumps(log_dirs_json([1, 2], descriptions, {"a"}), separators=(",", ":"))
    assert rendered == ('{"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/d1","error":null,'
                        '"partitions":[{"partition":"a-0","size":120,"offsetLag":0,"isFuture":false}]}]},'
                        '{"broker":2,"logDirs":[{"logDir":"/d2","error":"KAFKA_STORAGE_ERROR","partitions":[]}]}]}')
    everything = log_dirs_json([1], descriptions, set())
    assert [p["partition"] for p in everything["brokers"][0]["logDirs"][0]["partitions"]] == ["a-0", "b-0"]


def _storage_error(log_dir: str) -> broker_pb2.DescribeLogDirsResponse:
    response = broker_pb2.DescribeLogDirsResponse()
    response.results.add(error_code=Errors.KAFKA_STORAGE_ERROR, log_dir=log_dir)
    return response
