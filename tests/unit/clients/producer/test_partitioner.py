"""Tests for the producer's partitioners: keyed records land where the Java client puts them
(`Utils.toPositive(Utils.murmur2(keyBytes)) % numPartitions`), the sticky partition moves only
when a new batch is needed, round robin cycles over partitions with a leader."""

from __future__ import annotations

import random

import pytest

from services.clients.cluster import Cluster
from services.clients.producer.config import resolve_partitioner
from services.clients.producer.partitioner import (
    UNKNOWN_PARTITION,
    CallablePartitioner,
    DefaultPartitioner,
    Partitioner,
    RoundRobinPartitioner,
    StickyPartitionCache,
    TopicInfo,
    UniformStickyPartitioner,
)
from services.common.config import ConfigError
from tests.unit.clients.support import metadata_response, node_proto, partition

# Kafka's UtilsTest murmur2 answers, turned into partitions by hand: to_positive clears the sign
# bit, which is not abs() (e.g. b"21" hashes to -973932308: abs gives partition 2 of 3, Java 0).
PARTITIONS_OF_3 = {b"21": 0, b"foobar": 0, b"a-little-bit-long-string": 2, b"a-little-bit-longer-string": 2,
                   b"abc": 0, b"": 0, b"kafka": 1}
PARTITIONS_OF_7 = {b"21": 3, b"foobar": 0, b"a-little-bit-long-string": 1, b"a-little-bit-longer-string": 0,
                   b"abc": 4, b"": 2, b"kafka": 3}
# Partitions the Java producer picks among 1000 (published by kafka-python's tests).
PARTITIONS_OF_1000 = {b"": 681, b"a": 524, b"ab": 434, b"abc": 107, b"123456789": 566, b"\x00 ": 742}


def info(count: int, available: tuple[int, ...] | None = None) -> TopicInfo:
    return TopicInfo(count, tuple(range(count)) if available is None else available)


@pytest.mark.parametrize("count, answers", [(3, PARTITIONS_OF_3), (7, PARTITIONS_OF_7), (1000, PARTITIONS_OF_1000)])
def test_keys_hash_to_the_java_clients_partitions(count: int, answers: dict[bytes, int]):
    partitioner = DefaultPartitioner()
    for key, expected in answers.items():
        assert partitioner.choose("t", key, info(count)) == expected, key


def test_keys_use_all_partitions_even_without_leaders():
    assert DefaultPartitioner().choose("t", b"kafka", info(3, available=(0,))) == 1


def test_kafka_signature_reads_the_cluster():
    response = metadata_response([node_proto(1, 9092)], topics={"t": [partition(i, 1) for i in range(3)]})
    cluster = Cluster.from_response(response)
    assert DefaultPartitioner().partition("t", "kafka", b"kafka", None, None, cluster) == 1
    with pytest.raises(ValueError):
        DefaultPartitioner().partition("missing", None, b"k", None, None, cluster)


def test_sticky_partition_stays_until_a_new_batch_is_needed():
    cache = StickyPartitionCache(random.Random(7))
    topic_info = info(5)
    first = cache.partition("t", topic_info)
    assert all(cache.partition("t", topic_info) == first for _ in range(100))
    second = cache.next_partition("t", topic_info, first)
    assert second != first and cache.partition("t", topic_info) == second
    # another caller that still thinks the old partition is current does not move it again
    assert cache.next_partition("t", topic_info, first) == second
    assert cache.partition("other", topic_info) in range(5)


def test_sticky_partition_prefers_partitions_with_a_leader():
    cache = StickyPartitionCache(random.Random(1))
    only = info(4, available=(2,))
    assert cache.partition("t", only) == 2
    assert cache.next_partition("t", only, 2) == 2
    nothing = info(4, available=())
    assert all(cache.next_partition("u", nothing, cache.partition("u", nothing)) in range(4) for _ in range(20))
    seen = set()
    two = info(6, available=(1, 4))
    current = cache.partition("v", two)
    for _ in range(20):
        current = cache.next_partition("v", two, current)
        seen.add(current)
    assert seen == {1, 4}


def test_null_keys_and_ignored_keys_go_to_the_sticky_partition():
    default = DefaultPartitioner(random.Random(3))
    sticky = default.choose("t", None, info(8))
    assert default.choose("t", None, info(8)) == sticky
    uniform = UniformStickyPartitioner(random.Random(3))
    assert uniform.ignores_keys and not default.ignores_keys
    assert len({uniform.choose("t", key, info(8)) for key in PARTITIONS_OF_1000}) == 1


def test_round_robin_cycles_over_available_partitions():
    partitioner = RoundRobinPartitioner()
    assert [partitioner.choose("t", b"k", info(3)) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert [partitioner.choose("u", None, info(5, available=(1, 3))) for _ in range(4)] == [1, 3, 1, 3]
    assert partitioner.sticky is None


def test_round_robin_counter_wraps_like_a_java_int():
    partitioner = RoundRobinPartitioner()
    partitioner._counters["t"] = 2**31 - 1
    # Integer.MAX_VALUE then MIN_VALUE: toPositive(MIN_VALUE) is 0
    assert [partitioner.choose("t", None, info(10)) for _ in range(2)] == [(2**31 - 1) % 10, 0]


def test_resolving_partitioner_class():
    assert isinstance(resolve_partitioner(None), DefaultPartitioner)
    assert isinstance(resolve_partitioner("uniform_sticky"), UniformStickyPartitioner)
    assert isinstance(resolve_partitioner("org.apache.kafka.clients.producer.RoundRobinPartitioner"),
                      RoundRobinPartitioner)
    assert isinstance(resolve_partitioner(RoundRobinPartitioner), RoundRobinPartitioner)
    assert isinstance(resolve_partitioner("services.clients.producer.partitioner.UniformStickyPartitioner"),
                      UniformStickyPartitioner)

    class Fixed(Partitioner):
        def partition(self, topic, key, key_bytes, value, value_bytes, cluster):
            return 1

    assert isinstance(resolve_partitioner(Fixed), Fixed)
    function = resolve_partitioner(lambda topic, key, key_bytes, value, value_bytes, cluster: 0)
    assert isinstance(function, CallablePartitioner)
    assert function.partition("t", None, None, None, None, Cluster.empty()) == 0
    with pytest.raises(ConfigError, match="partitioner.class"):
        resolve_partitioner("no.such.module.Partitioner")
    with pytest.raises(ConfigError):
        resolve_partitioner(42)
    assert UNKNOWN_PARTITION == -1
