"""Choosing a record's partition, as Kafka's producer does.

Precedence (in `Producer.send`): an explicit partition; then the partitioner. The built-in ones:

- `DefaultPartitioner` ("default"): a key goes to `to_positive(murmur2(key)) % partitions` over
  all partitions of the topic, exactly as the Java client; a null key goes to the topic's sticky
  partition.
- `UniformStickyPartitioner` ("uniform_sticky"): every record to the sticky partition, keys ignored.
- `RoundRobinPartitioner` ("round_robin"): a per-topic counter over the partitions that have a
  leader (over all partitions when none has).

The sticky partition (`StickyPartitionCache`, Kafka's) is chosen at random among the partitions
with a leader and changes only when the record accumulator needs a new batch for it, so records
without keys fill whole batches one partition at a time.

A user partitioner is a `Partitioner` (an instance or a class, instantiated without arguments),
any object with Kafka's `partition(topic, key, key_bytes, value, value_bytes, cluster)`, or a
plain callable with those arguments; `cluster` is the current `services.clients.cluster.Cluster`.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from services.clients.cluster import Cluster
from services.common.hashing import partition_for_key, to_positive

UNKNOWN_PARTITION = -1


class TopicInfo(NamedTuple):
    """What a partitioner needs of a topic: its partition count and the partitions with a leader."""

    num_partitions: int
    available: tuple[int, ...]

    @classmethod
    def of(cls, cluster: Cluster, topic: str) -> TopicInfo | None:
        partitions = cluster.partitions_for(topic)
        if not partitions:
            return None
        return cls(len(partitions), tuple(p.partition for p in partitions if p.has_leader))


class StickyPartitionCache:
    """Kafka's StickyPartitionCache: one partition per topic until a new batch is needed."""

    def __init__(self, rng: random.Random | None = None):
        self._partitions: dict[str, int] = {}
        self._random = rng or random.Random()
        self._lock = threading.Lock()

    def partition(self, topic: str, info: TopicInfo) -> int:
        cached = self._partitions.get(topic)
        if cached is not None and cached < info.num_partitions:
            return cached
        return self.next_partition(topic, info, UNKNOWN_PARTITION)

    def next_partition(self, topic: str, info: TopicInfo, previous: int) -> int:
        """A new sticky partition if the current one is still `previous` (or none is set)."""
        with self._lock:
            old = self._partitions.get(topic)
            if old is not None and old != previous and old < info.num_partitions:
                return old
            available = info.available
            if not available:
                new = self._random.randrange(info.num_partitions)
            elif len(available) == 1:
                new = available[0]
            else:
                new = old
                while new is None or new == old:
                    new = available[self._random.randrange(len(available))]
            self._partitions[topic] = new
            return new


class Partitioner:
    """Kafka's Partitioner interface; subclass it for a custom partitioner."""

    def partition(self, topic: str, key: Any, key_bytes: bytes | None, value: Any, value_bytes: bytes | None,
                  cluster: Cluster) -> int:
        raise NotImplementedError

    def on_new_batch(self, topic: str, cluster: Cluster, previous_partition: int) -> None:
        """Called before a new batch is started for a record this partitioner placed."""

    def close(self) -> None:
        """Called by `Producer.close`."""


class BuiltInPartitioner(Partitioner):
    """The partitioners the producer drives itself: `sticky` is their sticky cache (or None)."""

    sticky: StickyPartitionCache | None = None
    ignores_keys = False

    def choose(self, topic: str, key_bytes: bytes | None, info: TopicInfo) -> int:
        raise NotImplementedError

    def partition(self, topic, key, key_bytes, value, value_bytes, cluster) -> int:
        info = TopicInfo.of(cluster, topic)
        if info is None:
            raise ValueError(f"topic {topic} is not in the cluster metadata")
        return self.choose(topic, key_bytes, info)

    def on_new_batch(self, topic: str, cluster: Cluster, previous_partition: int) -> None:
        info = TopicInfo.of(cluster, topic)
        if self.sticky is not None and info is not None:
            self.sticky.next_partition(topic, info, previous_partition)


class DefaultPartitioner(BuiltInPartitioner):
    """murmur2 of the key over all partitions; sticky partition for null keys."""

    def __init__(self, rng: random.Random | None = None):
        self.sticky = StickyPartitionCache(rng)

    def choose(self, topic: str, key_bytes: bytes | None, info: TopicInfo) -> int:
        if key_bytes is None:
            return self.sticky.partition(topic, info)
        return partition_for_key(key_bytes, info.num_partitions)


class UniformStickyPartitioner(BuiltInPartitioner):
    """The sticky partition for every record, whatever its key."""

    ignores_keys = True

    def __init__(self, rng: random.Random | None = None):
        self.sticky = StickyPartitionCache(rng)

    def choose(self, topic: str, key_bytes: bytes | None, info: TopicInfo) -> int:
        return self.sticky.partition(topic, info)


class RoundRobinPartitioner(BuiltInPartitioner):
    """Each record to the next partition in turn (available ones first), keys ignored."""

    ignores_keys = True

    def __init__(self):
        self._counters: dict[str, int] = {}
        self._lock = threading.Lock()

    def choose(self, topic: str, key_bytes: bytes | None, info: TopicInfo) -> int:
        with self._lock:
            value = self._counters.get(topic, 0)
            self._counters[topic] = (value + 1) & 0xFFFFFFFF
        if value & 0x80000000:
            value -= 1 << 32  # the Java counter is a signed int that wraps
        if info.available:
            return info.available[to_positive(value) % len(info.available)]
        return to_positive(value) % info.num_partitions


class CallablePartitioner(Partitioner):
    """A plain function `(topic, key, key_bytes, value, value_bytes, cluster) -> partition`."""

    def __init__(self, function: Callable[..., int]):
        self.function = function

    def partition(self, topic, key, key_bytes, value, value_bytes, cluster) -> int:
        return self.function(topic, key, key_bytes, value, value_bytes, cluster)


BUILT_IN_PARTITIONERS: dict[str, type[BuiltInPartitioner]] = {
    "default": DefaultPartitioner,
    "uniform_sticky": UniformStickyPartitioner,
    "round_robin": RoundRobinPartitioner,
    # the Java class names, so Kafka configurations carry over
    "org.apache.kafka.clients.producer.internals.DefaultPartitioner": DefaultPartitioner,
    "org.apache.kafka.clients.producer.UniformStickyPartitioner": UniformStickyPartitioner,
    "org.apache.kafka.clients.producer.RoundRobinPartitioner": RoundRobinPartitioner,
}
