"""Kafka 0.8.2's two assignments of partitions to consumer threads (`partition.assignment.strategy`).

`range` (the default), topic by topic: the partitions (sorted by number) are cut into contiguous
ranges over the consumer threads subscribed to it (sorted by consumer id, then thread number):
with P partitions and C threads, each thread gets P // C partitions and the first P % C threads
one more. Threads beyond the partition count get none.

    range_assign({"t": [a-0, a-1, b-0]}, {"t": [0, 1, 2, 3, 4]})
    -> {t-0: a-0, t-1: a-0, t-2: a-1, t-3: a-1, t-4: b-0}

`roundrobin`, over all subscribed topics at once: every topic-partition is put in one order and
dealt in turn to the group's sorted thread ids, so thread counts differ by at most one. The order
is Kafka 0.8.2's: by Java `String.hashCode` of `[<topic>,<partition>]` (signed 32-bit, which
spreads a topic's partitions over the threads), ties by topic, then partition. It is valid only
when every topic the group consumes has the same thread ids: every member subscribes to the same
topics, each member with one stream count for all of them (counts may differ between members; a
wildcard subscription qualifies when it resolves to those topics); otherwise it raises
SubscriptionMismatchError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import cycle

from services.clients.zk_consumer.errors import SubscriptionMismatchError
from services.clients.zk_consumer.topic_count import ConsumerThreadId
from services.common.hashing import java_string_hashcode
from services.common.topic_partition import TopicPartition

RANGE = "range"
ROUNDROBIN = "roundrobin"
STRATEGIES = (RANGE, ROUNDROBIN)

Owners = dict[TopicPartition, ConsumerThreadId]


def range_assign(threads_per_topic: Mapping[str, Sequence[ConsumerThreadId]],
                 partitions_per_topic: Mapping[str, Sequence[int]]) -> Owners:
    """The whole group's assignment: every partition of every subscribed topic to one thread."""
    owners: Owners = {}
    for topic, threads in threads_per_topic.items():
        consumers = sorted(set(threads))
        partitions = sorted(partitions_per_topic.get(topic, ()))
        if not consumers or not partitions:
            continue
        per_consumer, with_extra = divmod(len(partitions), len(consumers))
        for position, thread in enumerate(consumers):
            start = per_consumer * position + min(position, with_extra)
            count = per_consumer + (1 if position < with_extra else 0)
            for partition in partitions[start:start + count]:
                owners[TopicPartition(topic, partition)] = thread
    return owners


def round_robin_order(tp: TopicPartition) -> tuple[int, str, int]:
    return java_string_hashcode(f"[{tp.topic},{tp.partition}]"), tp.topic, tp.partition


def round_robin_assign(threads_per_topic: Mapping[str, Sequence[ConsumerThreadId]],
                       partitions_per_topic: Mapping[str, Sequence[int]]) -> Owners:
    """The whole group's assignment of the given topics' partitions; `threads_per_topic` holds
    every topic the group consumes, as the subscriptions are checked to be identical."""
    threads = check_identical_subscriptions(threads_per_topic)
    if not threads:
        return {}
    all_partitions = sorted((TopicPartition(topic, p) for topic, ps in partitions_per_topic.items() for p in ps),
                            key=round_robin_order)
    return dict(zip(all_partitions, cycle(threads)))


def check_identical_subscriptions(threads_per_topic: Mapping[str, Sequence[ConsumerThreadId]],
                                  ) -> list[ConsumerThreadId]:
    """The group's sorted thread ids, the same for every topic; else SubscriptionMismatchError."""
    if not threads_per_topic:
        return []
    first_topic, *others = sorted(threads_per_topic)
    expected = set(threads_per_topic[first_topic])
    for topic in others:
        found = set(threads_per_topic[topic])
        if found != expected:
            raise SubscriptionMismatchError(
                "roundrobin assignment needs every member of the group to subscribe to the same topics, "
                "each member with one stream count for all of them: "
                f"threads consuming {first_topic!r} but not {topic!r}: {_names(expected - found)}; "
                f"threads consuming {topic!r} but not {first_topic!r}: {_names(found - expected)}")
    return sorted(expected)


def assign(strategy: str, group_threads: Mapping[str, Sequence[ConsumerThreadId]],
           partitions_per_topic: Mapping[str, Sequence[int]]) -> Owners:
    """The group's owners of `partitions_per_topic` (this member's topics) under `strategy`."""
    if strategy == ROUNDROBIN:
        return round_robin_assign(group_threads, partitions_per_topic)
    return range_assign({t: group_threads.get(t, []) for t in partitions_per_topic}, partitions_per_topic)


def _names(threads: set[ConsumerThreadId], most: int = 10) -> str:
    """`<consumer id>-<n>,<n>...` per member, the first `most` members."""
    numbers: dict[str, list[str]] = {}
    for thread in sorted(threads):
        numbers.setdefault(thread.consumer_id, []).append(str(thread.thread_number))
    named = [f"{member}-{','.join(n)}" for member, n in list(numbers.items())[:most]]
    more = f" and {len(numbers) - most} more members" if len(numbers) > most else ""
    return ", ".join(named) + more or "none"


def group_threads_per_topic(counts: Sequence, all_topics: Sequence[str]) -> dict[str, list[ConsumerThreadId]]:
    """Every member's thread ids merged per topic (each count is a Static/WildcardTopicCount)."""
    merged: dict[str, list[ConsumerThreadId]] = {}
    for count in counts:
        for topic, ids in count.thread_ids_per_topic(all_topics).items():
            merged.setdefault(topic, []).extend(ids)
    return merged
