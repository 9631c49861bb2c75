"""The coordinator's Prometheus gauges."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from services.common.clock import ManualClock
from services.coordinator.group import GroupConfig, GroupCoordinator, ManualScheduler
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
    CoordinatorMetrics(7, groups, registry)
    text = generate_latest(registry).decode()
    assert 'odradek_coordinator_num_groups{coordinator="7"} 1.0' in text
    assert 'odradek_coordinator_num_groups_by_state{coordinator="7",state="Empty"} 1.0' in text
    assert 'odradek_coordinator_num_offsets{coordinator="7"} 1.0' in text
    assert 'odradek_coordinator_owned_partitions{coordinator="7"} 1.0' in text
    assert 'odradek_coordinator_loading_partitions{coordinator="7"} 1.0' in text


def _offset(value: int):
    from services.coordinator.group import OffsetAndMetadata

    return OffsetAndMetadata(value)
