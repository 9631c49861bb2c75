"""Offsets per offsets.storage: the larger-offset merge of dual commit, ZooKeeper-only writes of
moved offsets, commit retries and giving up, fetch retries until stopped; with fake stores."""

from services.clients.zk_consumer.offset_storage import KafkaOffsets, OffsetStorage, ZooKeeperOffsets, newest_offsets
from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition
from tests.unit.clients.zk_consumer.fake_zk import FakeZk

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


class FakeGroupOffsets:
    """The admin client's two offset calls over a dict, failing the first `failures` calls."""

    def __init__(self, failures: int = 0):
        self.offsets: dict[TopicPartition, int] = {}
        self.failures = failures
        self.calls = 0

    def _maybe_fail(self) -> None:
        self.calls += 1
        if self.failures:
            self.failures -= 1
            raise KafkaError("coordinator away", error=Errors.COORDINATOR_NOT_AVAILABLE)

    def list_consumer_group_offsets(self, group_id, partitions=None, *, timeout_ms=None):
        self._maybe_fail()
        return {tp: _Committed(self.offsets[tp]) for tp in partitions if tp in self.offsets}

    def alter_consumer_group_offsets(self, group_id, offsets, *, timeout_ms=None):
        self._maybe_fail()
        self.offsets.update(offsets)


class _Committed:
    def __init__(self, offset: int):
        self.offset = offset


def _storage(zk: FakeZk, kafka: FakeGroupOffsets | None, dual: bool = True, **options) -> tuple[OffsetStorage, list]:
    slept: list[float] = []
    stores = KafkaOffsets(lambda: kafka, "g", 1000) if kafka is not None else None
    storage = OffsetStorage(ZooKeeperOffsets(zk, "g"), stores, dual_commit=dual, sleep_s=slept.append, **options)
    return storage, slept


def test_the_merge_takes_the_larger_offset_per_partition_and_keeps_either_sides_only_ones():
    assert newest_offsets({T0: 5, T1: 9}, {T0: 7, T1: 3, T2: 1}) == {T0: 7, T1: 9, T2: 1}
    assert newest_offsets({}, {}) == {}


def test_zookeeper_storage_writes_only_moved_offsets_and_never_asks_kafka():
    zk = FakeZk({}, {})
    zk.offsets = {T0: 4}
    storage, _ = _storage(zk, None)
    assert storage.fetch([T0, T1]) == {T0: 4}
    zk.offsets[T0] = 99  # not moved by this member: not written again
    assert storage.commit({T0: 4, T1: 2})
    assert zk.offsets == {T0: 99, T1: 2}


def test_dual_commit_resumes_from_the_larger_of_zookeeper_and_kafka_and_writes_both():
    zk, kafka = FakeZk({}, {}), FakeGroupOffsets()
    zk.offsets, kafka.offsets = {T0: 10, T1: 2}, {T1: 6, T2: 1}
    storage, _ = _storage(zk, kafka)
    assert storage.fetch([T0, T1, T2]) == {T0: 10, T1: 6, T2: 1}
    assert storage.commit({T0: 12, T1: 6, T2: 1})
    assert kafka.offsets == {T0: 12, T1: 6, T2: 1}
    assert zk.offsets == {T0: 12, T1: 6, T2: 1}


def test_kafka_storage_without_dual_commit_reads_and_writes_only_kafka():
    zk, kafka = FakeZk({}, {}), FakeGroupOffsets()
    zk.offsets, kafka.offsets = {T0: 10}, {T0: 3}
    storage, _ = _storage(zk, kafka, dual=False)
    assert storage.fetch([T0]) == {T0: 3}
    assert storage.commit({T0: 4})
    assert (kafka.offsets, zk.offsets) == ({T0: 4}, {T0: 10})


def test_a_refused_commit_is_retried_then_given_up_without_touching_zookeeper():
    zk, kafka = FakeZk({}, {}), FakeGroupOffsets(failures=2)
    storage, slept = _storage(zk, kafka, commit_max_retries=2, backoff_ms=250)
    assert storage.commit({T0: 5})
    assert (kafka.calls, slept, zk.offsets) == (3, [0.25, 0.25], {T0: 5})
    kafka.failures = 10
    assert not storage.commit({T0: 8})
    assert (kafka.calls, zk.offsets, kafka.offsets) == (6, {T0: 5}, {T0: 5})
    assert not storage.commit({T0: 8}, retry_on_failure=False)
    assert kafka.calls == 7


def test_a_kafka_fetch_is_retried_until_answered_or_stopped():
    zk, kafka = FakeZk({}, {}), FakeGroupOffsets(failures=3)
    kafka.offsets = {T0: 2}
    storage, slept = _storage(zk, kafka, backoff_ms=100)
    assert storage.fetch([T0]) == {T0: 2} and len(slept) == 3
    stopping = FakeGroupOffsets(failures=100)
    stopped_after: list[float] = []
    storage = OffsetStorage(ZooKeeperOffsets(zk, "g"), KafkaOffsets(lambda: stopping, "g", 1000),
                            sleep_s=stopped_after.append, stopped=lambda: len(stopped_after) >= 2)
    assert storage.fetch([T0]) is None and stopping.calls == 2
