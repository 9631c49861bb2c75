"""Per-topic traffic counters of one broker (Kafka's BrokerTopicMetrics): bytes and messages
appended by clients to the partitions it leads, bytes and messages it served to consumers' fetches,
and the replication traffic (bytes followers fetched from it, bytes it fetched as a follower) as
totals.

Counted once per request and topic, under one lock, from the request's own sizes: nothing here
walks records. A produce's messages are its appended offsets (last - first + 1); a retried batch
that was already in the log counts nothing. A fetch's messages are the offsets it served from the
fetch offset up to the end of its last batch (the batch headers give that end)."""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass


@dataclass
class TopicTraffic:
    bytes_in: int = 0
    messages_in: int = 0
    bytes_out: int = 0
    messages_out: int = 0


class BrokerTopicStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._topics: defaultdict[str, TopicTraffic] = defaultdict(TopicTraffic)
        self.all_topics = TopicTraffic()  # deleted topics' traffic included
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0

    def appended(self, topic: str, size_bytes: int, messages: int) -> None:
        """A client's (or a coordinator's) append to a partition this broker leads."""
        with self._lock:
            for traffic in (self._topics[topic], self.all_topics):
                traffic.bytes_in += size_bytes
                traffic.messages_in += messages

    def fetched(self, sizes_by_topic: dict[str, int], messages_by_topic: dict[str, int],
                from_follower: bool) -> None:
        """The record bytes and messages one fetch response carries, by topic."""
        with self._lock:
            if from_follower:
                self.replication_bytes_out += sum(sizes_by_topic.values())
                return
            for topic, size in sizes_by_topic.items():
                messages = messages_by_topic.get(topic, 0)
                for traffic in (self._topics[topic], self.all_topics):
                    traffic.bytes_out += size
                    traffic.messages_out += messages

    def replicated(self, size_bytes: int) -> None:
        """Bytes this broker appended as a follower."""
        with self._lock:
            self.replication_bytes_in += size_bytes

    def remove(self, topic: str) -> None:
        """Forgets a deleted topic's counters (as Kafka removes its metrics)."""
        with self._lock:
            self._topics.pop(topic, None)

    def snapshot(self) -> dict[str, TopicTraffic]:
        with self._lock:
            return {topic: TopicTraffic(t.bytes_in, t.messages_in, t.bytes_out, t.messages_out)
                    for topic, t in self._topics.items()}
