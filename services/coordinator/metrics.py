"""The coordinator's Prometheus metrics, read at scrape time from the group coordinator (Kafka's
GroupMetadataManager gauges: NumGroups and the per-state counts, NumOffsets; plus the partitions
of `__consumer_offsets` this instance owns and those it is still loading)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import REGISTRY, GaugeMetricFamily

from services.common.metrics import ServiceCollector
from services.coordinator.group import GroupCoordinator, GroupState


class CoordinatorMetrics(ServiceCollector):
    def __init__(self, coordinator_id: int, groups: GroupCoordinator, registry=REGISTRY) -> None:
        self._groups = groups
        super().__init__("coordinator", coordinator_id, registry)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        groups = self._groups.groups()
        by_state = Counter(group.state for group in groups)
        gauge = self.gauge

        yield gauge("odradek_coordinator_num_groups", "Groups this coordinator serves.", len(groups))
        yield self.labelled(GaugeMetricFamily, "odradek_coordinator_num_groups_by_state", "Groups in each state.",
                            "state", [(state.value, by_state.get(state, 0)) for state in GroupState])
        yield gauge("odradek_coordinator_num_members", "Members of the groups this coordinator serves.",
                    sum(len(group.members) for group in groups))
        yield gauge("odradek_coordinator_num_offsets", "Committed offsets this coordinator holds.",
                    sum(len(group.offsets) for group in groups))
        owned = self._groups.owned_partitions()
        yield gauge("odradek_coordinator_owned_partitions", "Partitions of __consumer_offsets served.", len(owned))
        yield gauge("odradek_coordinator_loading_partitions", "Partitions of __consumer_offsets being loaded.",
                    len(self._groups.served_partitions() - owned))
