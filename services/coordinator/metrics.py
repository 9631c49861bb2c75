"""The coordinator's Prometheus metrics, read at scrape time from the group coordinator (Kafka's
GroupMetadataManager gauges: NumGroups and the per-state counts, NumOffsets; plus the members of
its groups, the partitions of `__consumer_offsets` this instance owns and those it is still
loading) and consumer lag: each group's committed offset per partition and its lag behind the
partition's log end offset (`lag.LogEndOffsets`, as `odradek consumer-groups --describe` prints
it). A scrape costs O(groups + committed offsets), plus at most one batched ListOffsets per
broker every few seconds."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import REGISTRY, GaugeMetricFamily

from services.common.metrics import ServiceCollector
from services.common.topic_partition import TopicPartition
from services.coordinator.group import GroupCoordinator, GroupState
from services.coordinator.lag import LogEndOffsets

GROUP_PARTITION_LABELS = ["group", "topic", "partition"]


class CoordinatorMetrics(ServiceCollector):
    def __init__(self, coordinator_id: int, groups: GroupCoordinator, end_offsets: LogEndOffsets | None = None,
                 registry=REGISTRY) -> None:
        self._groups = groups
        self._end_offsets = end_offsets
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
        yield self.labelled(GaugeMetricFamily, "odradek_coordinator_group_members", "Members of each group.",
                            "group", [(group.group_id, len(group.members)) for group in groups])
        yield gauge("odradek_coordinator_num_offsets", "Committed offsets this coordinator holds.",
                    sum(len(group.offsets) for group in groups))
        owned = self._groups.owned_partitions()
        yield gauge("odradek_coordinator_owned_partitions", "Partitions of __consumer_offsets served.", len(owned))
        yield gauge("odradek_coordinator_loading_partitions", "Partitions of __consumer_offsets being loaded.",
                    len(self._groups.served_partitions() - owned))
        yield from self._lag(groups)

    def _lag(self, groups) -> Iterator[GaugeMetricFamily]:
        committed: list[tuple[str, TopicPartition, int]] = [
            (group.group_id, TopicPartition(*tp), offset.offset)
            for group in groups for tp, offset in dict(group.offsets).items()]
        ends = self._end_offsets.get({tp for _, tp, _ in committed}) if self._end_offsets else {}
        offsets = GaugeMetricFamily("odradek_consumer_group_committed_offset",
                                    "The group's committed offset of the partition.",
                                    labels=[self.label_name, *GROUP_PARTITION_LABELS])
        lag = GaugeMetricFamily("odradek_consumer_group_lag",
                                "The partition's log end offset minus the group's committed offset.",
                                labels=[self.label_name, *GROUP_PARTITION_LABELS])
        for group_id, tp, offset in committed:
            labels = [*self.labels, group_id, tp.topic, str(tp.partition)]
            offsets.add_metric(labels, offset)
            end = ends.get(tp)
            if end is not None:
                lag.add_metric(labels, end - offset)
        yield offsets
        yield lag
