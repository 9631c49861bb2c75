"""DescribeLogDirs on the broker: every log dir with its partition logs, their sizes on disk and
offset lag, all of them or only those asked about; the servicer's answer carries the same."""

from __future__ import annotations

import os

from services.broker.metadata_cache import MetadataCache
from services.broker.replica_manager import LogDirPartition
from services.broker.servicer import BrokerServicer
from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.topic_partition import TopicPartition
from tests.unit.broker.log.support import batch

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def fill(manager) -> None:
    for tp in (A0, A1, B0):
        manager.log_manager.get_or_create_log(tp)
    log = manager.log_manager.get_log(A0)
    log.append_as_leader(batch(3, value_size=100), 0)
    log.update_high_watermark(log.log_end_offset)


def test_every_log_with_its_size_and_no_lag(manager):
    fill(manager)
    (described,) = manager.describe_log_dirs()
    assert described.log_dir == os.path.abspath(manager.log_manager.log_dirs[0])
    assert described.error_code == Errors.NONE
    size = manager.log_manager.get_log(A0).size_in_bytes
    assert size > 300
    assert described.partitions == {A0: LogDirPartition(size, 0), A1: LogDirPartition(0, 0),
                                    B0: LogDirPartition(0, 0)}


def test_only_the_partitions_asked_about(manager):
    fill(manager)
    (described,) = manager.describe_log_dirs([A1, TopicPartition("absent", 0)])
    assert list(described.partitions) == [A1]
    (described,) = manager.describe_log_dirs([])
    assert described.partitions == {}


def test_the_servicer_answers_per_dir_and_topic(manager):
    fill(manager)
    servicer = BrokerServicer(1, manager, MetadataCache(), fetch_max_bytes=1 << 20)
    everything = servicer.DescribeLogDirs(broker_pb2.DescribeLogDirsRequest(all_topics=True), None)
    (result,) = everything.results
    assert (result.error_code, result.log_dir) == (0, os.path.abspath(manager.log_manager.log_dirs[0]))
    assert {(t.name, p.partition_index, p.partition_size > 0, p.offset_lag, p.is_future_key)
            for t in result.topics for p in t.partitions} == {("a", 0, True, 0, False), ("a", 1, False, 0, False),
                                                              ("b", 0, False, 0, False)}
    request = broker_pb2.DescribeLogDirsRequest()
    request.topics.add(topic="b", partitions=[0])
    (result,) = servicer.DescribeLogDirs(request, None).results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [("b", [0])]
