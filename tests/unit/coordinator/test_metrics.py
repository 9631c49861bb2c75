"""The coordinator's Prometheus gauges."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from services.common.clock import ManualClock
from services.common.topic_partition import TopicPartition
from services.coordinator.group import GroupConfig, GroupCoordinator, ManualScheduler
from services.coordinator.lag import LogEndOffsets
from services.coordinator.metrics import CoordinatorMetrics


class _Store:
    def append(self, partition, records, callback) -> None:
        callback(0)


def test_gauges_count_groups_offsets_and_partitions():
    clock = ManualClock()
    groups = GroupCoordinator(GroupConfig(), clock, ManualScheduler(clock), _Store())
    groups.start()
    partition = groups.partition_for("g")
    groups.begin_loading(partition)
    groups.complete_loading(partition)
    groups.begin_loading((partition + 1) % 50)
    groups.handle_commit_offsets("g", "", None, -1, {("t", 0): _offset(5)}, lambda result: None)
    registry = CollectorRegistry()
    CoordinatorMetrics(7, groups, registry=registry)
    text = generate_latest(registry).decode()
    assert 'odradek_coordinator_num_groups{coordinator="7"} 1.0' in text
    assert 'odradek_coordinator_num_groups_by_state{coordinator="7",state="Empty"} 1.0' in text
    assert 'odradek_coordinator_num_offsets{coordinator="7"} 1.0' in text
    assert 'odradek_coordinator_owned_partitions{coordinator="7"} 1.0' in text
    assert 'odradek_coordinator_loading_partitions{coordinator="7"} 1.0' in text


def _offset(value: int):
    from services.coordinator.group import CommittedOffset

    return CommittedOffset(value)


def test_lag_is_log_end_minus_committed_per_group_and_partition():
    clock = ManualClock()
    groups = GroupCoordinator(GroupConfig(), clock, ManualScheduler(clock), _Store())
    groups.start()
    for group in ("g", "h"):
        partition = groups.partition_for(group)
        groups.begin_loading(partition)
        groups.complete_loading(partition)
    groups.handle_commit_offsets("g", "", None, -1, {("t", 0): _offset(5), ("t", 1): _offset(7)}, lambda r: None)
    groups.handle_commit_offsets("h", "", None, -1, {("t", 0): _offset(2)}, lambda r: None)
    asked = []

    def fetch(partitions):
        asked.append(partitions)
        return {TopicPartition("t", 0): 12}  # t-1's leader did not answer: no lag for it

    registry = CollectorRegistry()
    CoordinatorMetrics(7, groups, LogEndOffsets(fetch, clock, max_age_ms=5000), registry)
    value = registry.get_sample_value
    labels = {"coordinator": "7", "group": "g", "topic": "t", "partition": "0"}
    assert value("odradek_consumer_group_lag", labels) == 7
    assert value("odradek_consumer_group_lag", {**labels, "group": "h"}) == 10
    assert value("odradek_consumer_group_committed_offset", {**labels, "partition": "1"}) == 7
    assert value("odradek_consumer_group_lag", {**labels, "partition": "1"}) is None
    assert value("odradek_coordinator_group_members", {"coordinator": "7", "group": "g"}) == 0
    assert asked == [[TopicPartition("t", 0), TopicPartition("t", 1)]]  # one call for both groups


def test_log_end_offsets_are_reused_until_stale_or_a_new_partition_is_asked():
    clock = ManualClock()
    calls = []

    def fetch(partitions):
        calls.append(list(partitions))
        if len(calls) == 3:
            raise OSError("brokers unreachable")
        return {tp: 100 * len(calls) for tp in partitions}

    ends = LogEndOffsets(fetch, clock, max_age_ms=5000)
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    assert ends.get({a}) == {a: 100}
    clock.advance(4999)
    assert ends.get({a}) == {a: 100} and len(calls) == 1
    assert ends.get({a, b}) == {a: 200, b: 200} and len(calls) == 2  # b was not asked before
    clock.advance(5000)
    assert ends.get({a, b}) == {a: 200, b: 200} and len(calls) == 3  # a failed refresh keeps the last
    assert ends.get(set()) == {} and len(calls) == 3
