"""`TopicPartition`: a (topic, partition) pair, the one key type clients, servers and ZooKeeper
code share. Printed as Kafka prints it: `topic-0`."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
