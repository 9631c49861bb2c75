"""DeletedTopicOffsets: which topics' offsets a pass removes, against a group coordinator."""

from __future__ import annotations

from services.coordinator.deleted_topics import DeletedTopicOffsets
from services.coordinator.group import TopicPartition
from tests.unit.coordinator.group.support import Harness


class FakeTopics:
    """The children of /brokers/topics, and the watches the pass registered."""

    def __init__(self, *topics: str) -> None:
        self.topics = list(topics)
        self.watches: list = []

    def get_all_topics(self, watch=None) -> list[str]:
        self.watches.append(watch)
        return list(self.topics)


def test_a_topic_change_removes_only_topics_seen_deleted_and_a_full_pass_every_missing_one():
    h = Harness()
    h.commit({TopicPartition("live", 0): 1, TopicPartition("doomed", 0): 2, TopicPartition("never", 0): 3})
    zk = FakeTopics("live", "doomed")
    passes = DeletedTopicOffsets(None, zk, h.coordinator, check_interval_ms=60000)
    assert passes.remove_deleted(only_seen_deleted=True) == 0   # nothing read before: nothing seen deleted
    zk.topics = ["live"]
    assert passes.remove_deleted(only_seen_deleted=True) == 1
    assert set(h.fetch()) == {TopicPartition("live", 0), TopicPartition("never", 0)}
    assert passes.remove_deleted() == 1   # after loading, on the interval: every topic that does not exist
    assert set(h.fetch()) == {TopicPartition("live", 0)}
    assert zk.watches and all(w is not None for w in zk.watches)
