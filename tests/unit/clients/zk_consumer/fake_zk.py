"""An in-memory stand-in for the ZooKeeper layer the 0.8 consumer uses: topics with partition
counts, member registrations, ownership and offsets, and the watches set on reads."""

from __future__ import annotations

from services.common.topic_partition import TopicPartition
from services.common.zk.codec import Versioned
from services.common.zk.consumers import ConsumerRegistration
from services.common.zk.topics import TopicAssignment


class FakeZk:
    def __init__(self, topics: dict[str, int], members: dict[str, ConsumerRegistration]):
        self.topics = topics
        self.members = members
        self.owners: dict[TopicPartition, str] = {}
        self.offsets: dict[TopicPartition, int] = {}
        self.watched: list[str] = []

    def get_all_topics(self, watch=None):
        if watch is not None:
            self.watched.append("topics")
        return sorted(self.topics)

    def get_legacy_consumers(self, group, watch=None):
        self.watched.append("members")
        return dict(self.members)

    def get_topic_assignment(self, topic, watch=None):
        self.watched.append(topic)
        if topic not in self.topics:
            return None
        return Versioned(TopicAssignment.of(topic, {p: [1] for p in range(self.topics[topic])}), 0)

    def claim_partition(self, group, tp, thread_id):
        if tp in self.owners:
            return False
        self.owners[tp] = thread_id
        return True

    def get_partition_owner(self, group, tp):
        return self.owners.get(tp)

    def release_partition(self, group, tp):
        self.owners.pop(tp, None)

    def get_all_brokers(self):
        return {1: object()}

    def register_legacy_consumer(self, group, consumer_id, subscription, pattern="static"):
        self.members[consumer_id] = ConsumerRegistration(dict(subscription), pattern)

    def delete_legacy_consumer(self, group, consumer_id):
        self.members.pop(consumer_id, None)

    def get_legacy_offsets(self, group, partitions):
        return {tp: self.offsets[tp] for tp in partitions if tp in self.offsets}

    def commit_legacy_offsets(self, group, offsets):
        self.offsets.update(offsets)
