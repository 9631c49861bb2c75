"""What every service's Prometheus collector shares: registration in a registry (once per process:
tests run several services in one), unregistration on close, and families labelled by the
service's id. Each service's own module says what it measures, read from live state at scrape time."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily

logger = logging.getLogger(__name__)

# Request latency buckets, in seconds, of every service's histograms: from a fast metadata answer
# (~1 ms) to a long-poll fetch or a rebalance (tens of seconds).
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class ServiceCollector:
    """A collector registered in `registry` whose families carry the label `service` = `service_id`;
    a subclass implements `collect`."""

    def __init__(self, service: str, service_id: int, registry=REGISTRY) -> None:
        self.label_name = service
        self.labels = [str(service_id)]
        self._registry = registry
        try:
            registry.register(self)
        except ValueError:  # another service of this kind registered already in this process (tests)
            self._registry = None
            logger.debug("%s metrics already registered in this process", service)

    def close(self) -> None:
        if self._registry is not None:
            self._registry.unregister(self)
            self._registry = None

    def gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=[self.label_name])
        family.add_metric(self.labels, value)
        return family

    def counter(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        family = CounterMetricFamily(name, doc, labels=[self.label_name])
        family.add_metric(self.labels, value)
        return family

    def labelled(self, family_type, name: str, doc: str, label: str,
                 values: Iterable[tuple[str, float]]) -> GaugeMetricFamily | CounterMetricFamily:
        """One family with a second label: a value per `(label value, value)` pair."""
        family = family_type(name, doc, labels=[self.label_name, label])
        for label_value, value in values:
            family.add_metric(self.labels + [label_value], value)
        return family
