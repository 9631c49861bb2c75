"""The replication quota: its rate over a window of samples, and the partitions it throttles."""

from __future__ import annotations

from services.broker.replication.quota import ALL_PARTITIONS, ReplicationQuota, throttled_partitions
from services.common.clock import ManualClock
from services.common.topic_partition import TopicPartition


def test_unbounded_quota_is_never_exceeded() -> None:
    quota = ReplicationQuota(clock=ManualClock())
    quota.record(10**12)
    assert not quota.is_exceeded()


def test_rate_is_measured_over_at_least_one_window() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(1000, window_count=11, window_size_ms=1000, clock=clock)
    quota.record(1000)
    assert quota.rate() == 1000.0  # over one whole window, not over the 0 ms elapsed
    assert not quota.is_exceeded()
    quota.record(1)
    assert quota.is_exceeded()


def test_exceeded_quota_frees_as_time_passes() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(1000, window_count=11, window_size_ms=1000, clock=clock)
    quota.record(3000)
    assert quota.is_exceeded()
    clock.advance(2000)
    assert quota.is_exceeded()  # 3000 bytes over 2 s
    clock.advance(1001)
    assert not quota.is_exceeded()  # 3000 bytes over 3 s
    assert quota.throttled_bytes_total == 3000


def test_sustained_rate_follows_the_bound() -> None:
    """Sending only while under the bound, as the leader and follower do, gives the bound's rate."""
    clock = ManualClock()
    quota = ReplicationQuota(100_000, window_count=11, window_size_ms=1000, clock=clock)
    sent = 0
    for _ in range(30_000):  # 30 s in 1 ms steps, 10 kB chunks
        if not quota.is_exceeded():
            quota.record(10_000)
            sent += 10_000
        clock.advance(1)
    assert 2_900_000 <= sent <= 3_200_000


def test_old_windows_are_forgotten() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(1000, window_count=2, window_size_ms=1000, clock=clock)
    quota.record(50_000)
    clock.advance(2000)
    assert quota.rate() == 0.0
    assert not quota.is_exceeded()


def test_rate_change_applies_at_once() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(1000, clock=clock)
    quota.record(5000)
    assert quota.is_exceeded()
    quota.update_rate(10_000)
    assert not quota.is_exceeded()


def test_throttled_partitions_of_a_config() -> None:
    assert throttled_partitions(["*"], 1) == ALL_PARTITIONS
    assert throttled_partitions(["0:1", "0:2", "1:2", " 3:1 "], 1) == frozenset({0, 3})
    assert throttled_partitions(["0:1"], 2) == frozenset()
    assert throttled_partitions([], 2) == frozenset()


def test_which_partitions_are_throttled() -> None:
    quota = ReplicationQuota(clock=ManualClock())
    quota.mark_throttled("t", frozenset({0, 2}))
    quota.mark_throttled("all", ALL_PARTITIONS)
    assert quota.is_throttled(TopicPartition("t", 0)) and not quota.is_throttled(TopicPartition("t", 1))
    assert quota.is_throttled(("all", 7))
    quota.mark_throttled("t", frozenset())
    quota.remove_throttle("all")
    assert not quota.is_throttled(("t", 0)) and not quota.is_throttled(("all", 7))
    assert not quota.has_throttled
