"""Kafka 0.8's range assignment of partitions to consumer threads, topic by topic.

For each topic, the partitions (sorted by number) are cut into contiguous ranges over the
consumer threads subscribed to it (sorted by consumer id, then thread number): with P partitions
and C threads, each thread gets P // C partitions and the first P % C threads one more. Threads
beyond the partition count get none.

    range_assign({"t": [a-0, a-1, b-0]}, {"t": [0, 1, 2, 3, 4]})
    -> {t-0: a-0, t-1: a-0, t-2: a-1, t-3: a-1, t-4: b-0}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from services.clients.zk_consumer.topic_count import ConsumerThreadId
from services.common.topic_partition import TopicPartition


def range_assign(threads_per_topic: Mapping[str, Sequence[ConsumerThreadId]],
                 partitions_per_topic: Mapping[str, Sequence[int]]) -> dict[TopicPartition, ConsumerThreadId]:
    """The whole group's assignment: every partition of every subscribed topic to one thread."""
    owners: dict[TopicPartition, ConsumerThreadId] = {}
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


def group_threads_per_topic(counts: Sequence, all_topics: Sequence[str]) -> dict[str, list[ConsumerThreadId]]:
    """Every member's thread ids merged per topic (each count is a Static/WildcardTopicCount)."""
    merged: dict[str, list[ConsumerThreadId]] = {}
    for count in counts:
        for topic, ids in count.thread_ids_per_topic(all_topics).items():
            merged.setdefault(topic, []).extend(ids)
    return merged
