"""The broker's Prometheus metrics, read from live state at scrape time (Kafka's names where they
exist: partition count, leader count, under-replicated and offline partitions, purgatory sizes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client.core import REGISTRY, CounterMetricFamily

from services.common.metrics import ServiceCollector

if TYPE_CHECKING:
    from services.broker.server import BrokerServer


class BrokerMetrics(ServiceCollector):
    def __init__(self, server: BrokerServer, registry=REGISTRY) -> None:
        self.server = server
        super().__init__("broker", server.broker_id, registry)

    def collect(self):
        server = self.server
        manager = server.replica_manager
        partitions = manager.partitions()
        leaders = [p for p in partitions if p.is_leader]
        under_replicated = sum(1 for p in leaders if len(p.isr) < len(p.replicas))
        gauge = self.gauge

        yield gauge("odradek_replica_manager_partition_count", "Partitions hosted by this broker.",
                    len(partitions))
        yield gauge("odradek_replica_manager_leader_count", "Partitions this broker leads.", len(leaders))
        yield gauge("odradek_replica_manager_under_replicated_partitions",
                    "Led partitions whose ISR is smaller than their replica set.", under_replicated)
        yield gauge("odradek_purgatory_delayed_fetches", "Fetches waiting in the purgatory.",
                    manager.fetch_purgatory.delayed)
        yield gauge("odradek_purgatory_delayed_produces", "Produces waiting for acks=all.",
                    manager.produce_purgatory.delayed)
        isr = manager.isr_manager
        yield self.labelled(CounterMetricFamily, "odradek_replica_manager_isr_changes",
                            "ISR changes made by this leader.", "change",
                            [("shrink", isr.shrinks if isr is not None else 0),
                             ("expand", isr.expands if isr is not None else 0)])
        offline = sum(1 for p in partitions if p.leader_id < 0)
        yield gauge("odradek_replica_manager_offline_partitions", "Hosted partitions without a leader.", offline)
        yield self.labelled(CounterMetricFamily, "odradek_purgatory_expired", "Delayed operations that timed out.",
                            "operation", [("fetch", manager.delayed_fetch_expired),
                                          ("produce", manager.delayed_produce_expired)])
