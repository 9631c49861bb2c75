"""The coordinator's Prometheus metrics, read at scrape time from the group coordinator (Kafka's
GroupMetadataManager gauges: NumGroups and the per-state counts, NumOffsets; plus the partitions
of `__consumer_offsets` this instance owns and those it is still loading)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import REGISTRY, GaugeMetricFamily

from services.coordinator.group import GroupCoordinator, GroupState

logger = logging.getLogger(__name__)


class CoordinatorMetrics:
    def __init__(self, coordinator_id: int, groups: GroupCoordinator, registry=REGISTRY) -> None:
        self._label = str(coordinator_id)
        self._groups = groups
        self._registry = registry
        try:
            registry.register(self)
        except ValueError:  # another coordinator in this process registered already (tests)
            self._registry = None
            logger.debug("coordinator metrics already registered in this process")

    def close(self) -> None:
        if self._registry is not None:
            self._registry.unregister(self)
            self._registry = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        manager = self._groups.manager
        groups = manager.groups()
        by_state = Counter(group.state for group in groups)

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, doc, labels=["coordinator"])
            family.add_metric([self._label], value)
            return family

        yield gauge("odradek_coordinator_num_groups", "Groups this coordinator serves.", len(groups))
        states = GaugeMetricFamily("odradek_coordinator_num_groups_by_state", "Groups in each state.",
                                   labels=["coordinator", "state"])
        for state in GroupState:
            states.add_metric([self._label, state.value], by_state.get(state, 0))
        yield states
        yield gauge("odradek_coordinator_num_members", "Members of the groups this coordinator serves.",
                    sum(len(group.members) for group in groups))
        yield gauge("odradek_coordinator_num_offsets", "Committed offsets this coordinator holds.",
                    sum(len(group.offsets) for group in groups))
        owned = manager.owned_partitions()
        yield gauge("odradek_coordinator_owned_partitions", "Partitions of __consumer_offsets served.", len(owned))
        yield gauge("odradek_coordinator_loading_partitions", "Partitions of __consumer_offsets being loaded.",
                    len(manager.served_partitions() - owned))
