"""The controller's Prometheus metrics, read at scrape time from the published `ControllerView`
and the event queue (Kafka's KafkaController gauges: ActiveControllerCount,
OfflinePartitionsCount, PreferredReplicaImbalanceCount, GlobalTopicCount, GlobalPartitionCount,
TopicsToDeleteCount, and the ControllerEventManager's EventQueueSize), and the count of
ZooKeeper writes the controller gave up on (`failed_zk_writes_total`: a write of one topic that
failed for a reason of its own, logged and skipped so the other work goes on)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily

from services.common.metrics import ServiceCollector
from services.controller.view import ControllerView


class ControllerMetrics(ServiceCollector):
    def __init__(
        self,
        controller_id: int,
        view: Callable[[], ControllerView],
        event_queue_size: Callable[[], int],
        registry=REGISTRY,
    ) -> None:
        self._view = view
        self._event_queue_size = event_queue_size
        super().__init__("controller", controller_id, registry)

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        view = self._view()
        gauge = self.gauge

        yield gauge(
            "odradek_controller_active_controller_count",
            "1 on the active controller, else 0.",
            1 if view.active else 0,
        )
        yield gauge(
            "odradek_controller_offline_partitions_count",
            "Partitions without a live leader.",
            view.offline_partition_count,
        )
        yield gauge(
            "odradek_controller_preferred_replica_imbalance_count",
            "Partitions not led by their preferred replica.",
            view.preferred_replica_imbalance_count,
        )
        yield gauge(
            "odradek_controller_global_topic_count", "Topics in the cluster.", view.global_topic_count
        )
        yield gauge(
            "odradek_controller_global_partition_count",
            "Partitions in the cluster.",
            view.global_partition_count,
        )
        yield gauge(
            "odradek_controller_topics_to_delete_count",
            "Topics queued for deletion.",
            view.topics_to_delete_count,
        )
        yield gauge(
            "odradek_controller_event_queue_size",
            "Events waiting for the controller event thread.",
            self._event_queue_size(),
        )
        yield self.counter(
            "odradek_controller_failed_zk_writes",
            "ZooKeeper writes given up on (logged; the topic's other work and other topics go on).",
            view.failed_zk_writes,
        )
