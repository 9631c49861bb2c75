"""`ConsumerRebalanceListener`: what a 0.8 ZooKeeper consumer tells its application during a
rebalance (Kafka 0.8.2.x/0.9's `kafka.javaapi.consumer.ConsumerRebalanceListener`).

Set with `connector.set_consumer_rebalance_listener(listener)` before the streams are created.
In every rebalance attempt, on the rebalance thread:

- `before_releasing_partitions({topic: {partition}})` once the fetchers are stopped, the queued
  chunks dropped and (with auto-commit) the consumed offsets committed, before the ownership
  znodes are deleted; the map is empty when nothing is owned (the first rebalance);
- `before_starting_fetchers(consumer_id, {topic: {partition: ConsumerThreadId}})` once this
  member's partitions are claimed, with the whole group's assignment of the topics it consumes,
  before fetching starts.

An exception from either fails that attempt: what was claimed is released and the attempt is
retried after `rebalance.backoff.ms`, as any failed attempt. Shutdown calls neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from services.clients.zk_consumer.topic_count import ConsumerThreadId
from services.common.topic_partition import TopicPartition


class ConsumerRebalanceListener:
    """Subclass and override either method; both do nothing here."""

    def before_releasing_partitions(self, partition_ownership: dict[str, set[int]]) -> None:
        pass

    def before_starting_fetchers(self, consumer_id: str,
                                 global_partition_assignment: dict[str, dict[int, ConsumerThreadId]]) -> None:
        pass


def ownership_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, set[int]]:
    by_topic: dict[str, set[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, set()).add(tp.partition)
    return by_topic


def assignment_by_topic(owners: Mapping[TopicPartition, ConsumerThreadId]) -> dict[str, dict[int, ConsumerThreadId]]:
    by_topic: dict[str, dict[int, ConsumerThreadId]] = {}
    for tp, thread in sorted(owners.items()):
        by_topic.setdefault(tp.topic, {})[tp.partition] = thread
    return by_topic
