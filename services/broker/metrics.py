"""The broker's Prometheus metrics, read from live state at scrape time, under Kafka's names:

- ReplicaManager: partition and leader counts, under-replicated and offline partitions, ISR
  shrinks and expands (ISR changes this broker wrote as a leader);
- BrokerTopicMetrics: bytes in and messages in (appends to partitions it leads), bytes out (record
  bytes served to consumers' fetches; followers' fetches are replication bytes out), per topic and
  for all topics, and replication bytes in/out;
- Log: size, segment count, log end and log start offset of every hosted partition;
- LogManager: offline log directories (OfflineLogDirectoryCount), and each log dir's
  LogDirectoryOffline (1 offline, 0 online), with the replicas left offline with them;
- DelayedOperationPurgatory: purgatory size (watch list entries) and delayed operations, by
  `delayed_operation` (Produce, Fetch), and the operations that expired;
- FetchSessionCache: incremental fetch sessions held, partitions they cache, sessions evicted,
  and the full and incremental fetches served;
- replication throttles: bytes of throttled replicas sent as leader and fetched as follower, and
  their rate over the throttle's windows.

A scrape costs O(hosted partitions + purgatory watch keys): nothing walks records."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily

from services.common.metrics import ServiceCollector

if TYPE_CHECKING:
    from services.broker.server import BrokerServer

PARTITION_LABELS = ["topic", "partition"]


class BrokerMetrics(ServiceCollector):
    def __init__(self, server: BrokerServer, registry=REGISTRY) -> None:
        self.server = server
        super().__init__("broker", server.broker_id, registry)

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        manager = self.server.replica_manager
        partitions = manager.partitions()
        yield from self._replica_manager(manager, partitions)
        yield from self._topic_traffic(manager.topic_stats)
        yield from self._logs(partitions)
        yield from self._log_dirs(manager.log_manager, manager)
        yield from self._purgatories(manager)
        yield from self._fetch_sessions(manager.fetch_sessions)
        yield from self._replication_throttles(manager)

    def _replica_manager(self, manager, partitions) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        leaders = [p for p in partitions if p.is_leader]
        gauge = self.gauge
        yield gauge("odradek_replica_manager_partition_count", "Partitions hosted by this broker.",
                    len(partitions))
        yield gauge("odradek_replica_manager_leader_count", "Partitions this broker leads.", len(leaders))
        yield gauge("odradek_replica_manager_under_replicated_partitions",
                    "Led partitions whose ISR is smaller than their replica set.",
                    sum(1 for p in leaders if len(p.isr) < len(p.replicas)))
        yield gauge("odradek_replica_manager_offline_partitions", "Hosted partitions without a leader.",
                    sum(1 for p in partitions if p.leader_id < 0))
        isr = manager.isr_manager
        yield self.counter("odradek_replica_manager_isr_shrinks", "ISR shrinks this broker wrote as leader.",
                           isr.shrinks if isr is not None else 0)
        yield self.counter("odradek_replica_manager_isr_expands", "ISR expansions this broker wrote as leader.",
                           isr.expands if isr is not None else 0)

    def _replication_throttles(self, manager) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        quotas = (("LeaderReplication", manager.leader_quota), ("FollowerReplication", manager.follower_quota))
        yield self.labelled(CounterMetricFamily, "odradek_replication_throttled_bytes",
                            "Record bytes of throttled replicas sent to followers (LeaderReplication) or "
                            "fetched from leaders (FollowerReplication).",
                            "replication_type", [(name, q.throttled_bytes_total) for name, q in quotas])
        yield self.labelled(GaugeMetricFamily, "odradek_replication_throttled_byte_rate",
                            "Bytes/s of throttled replicas over the throttle's windows.",
                            "replication_type", [(name, q.rate()) for name, q in quotas])

    def _fetch_sessions(self, cache) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield self.gauge("odradek_fetch_session_cache_num_incremental_fetch_sessions",
                         "Incremental fetch sessions the broker holds.", cache.size)
        yield self.gauge("odradek_fetch_session_cache_num_incremental_fetch_partitions_cached",
                         "Partitions held by the incremental fetch sessions.", cache.partitions_cached)
        yield self.counter("odradek_fetch_session_cache_incremental_fetch_session_evictions",
                           "Sessions evicted to make room for another.", cache.evictions)
        yield self.counter("odradek_fetch_session_cache_full_fetches",
                           "Fetches that opened or closed a session or came without one.", cache.full_fetches)
        yield self.counter("odradek_fetch_session_cache_incremental_fetches",
                           "Fetches that continued a session.", cache.incremental_fetches)

    def _topic_traffic(self, stats) -> Iterator[CounterMetricFamily]:
        traffic = stats.snapshot()
        per_topic = (
            ("bytes_in", "Record bytes appended by clients to partitions this broker leads."),
            ("messages_in", "Records appended by clients to partitions this broker leads."),
            ("bytes_out", "Record bytes served to consumers' fetches (followers' are replication bytes out)."),
            ("messages_out", "Records served to consumers' fetches, from the fetch offset to the end of the "
                             "last batch served."),
        )
        for field, doc in per_topic:
            yield self.labelled(CounterMetricFamily, f"odradek_broker_topic_{field}", doc, "topic",
                                [(topic, getattr(t, field)) for topic, t in sorted(traffic.items())])
            yield self.counter(f"odradek_broker_topic_all_topics_{field}", doc + " All topics, deleted ones too.",
                               getattr(stats.all_topics, field))
        yield self.counter("odradek_broker_topic_replication_bytes_in",
                           "Record bytes this broker appended as a follower.", stats.replication_bytes_in)
        yield self.counter("odradek_broker_topic_replication_bytes_out",
                           "Record bytes served to followers' fetches.", stats.replication_bytes_out)

    def _partition_family(self, name: str, doc: str) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=[self.label_name, *PARTITION_LABELS])

    def _logs(self, partitions) -> Iterator[GaugeMetricFamily]:
        size = self._partition_family("odradek_log_size", "Bytes of the partition's log segments.")
        segments = self._partition_family("odradek_log_num_log_segments", "Segments of the partition's log.")
        end = self._partition_family("odradek_log_log_end_offset", "The partition's log end offset.")
        start = self._partition_family("odradek_log_log_start_offset", "The partition's log start offset.")
        for partition in partitions:
            log = partition.log
            labels = [*self.labels, partition.topic, str(partition.partition)]
            size.add_metric(labels, log.size_in_bytes)
            segments.add_metric(labels, log.num_segments)
            end.add_metric(labels, log.log_end_offset)
            start.add_metric(labels, log.log_start_offset)
        yield from (size, segments, end, start)

    def _log_dirs(self, log_manager, manager) -> Iterator[GaugeMetricFamily]:
        offline = log_manager.offline_log_dirs()
        yield self.gauge("odradek_log_manager_offline_log_directory_count", "Log directories offline.",
                         len(offline))
        yield self.labelled(GaugeMetricFamily, "odradek_log_manager_log_directory_offline",
                            "1 when the log directory is offline, 0 when it is online.", "log_directory",
                            [(d, int(d in offline)) for d in log_manager.log_dirs])
        yield self.gauge("odradek_replica_manager_offline_replica_count",
                         "Replicas of this broker in offline log directories.", len(manager.offline_partition_keys()))

    def _purgatories(self, manager) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        purgatories = (("Produce", manager.produce_purgatory, manager.delayed_produce_expired),
                       ("Fetch", manager.fetch_purgatory, manager.delayed_fetch_expired))
        yield self.labelled(GaugeMetricFamily, "odradek_delayed_operation_purgatory_purgatory_size",
                            "Watch list entries of the purgatory (an operation once per key it watches).",
                            "delayed_operation", [(name, p.watched) for name, p, _ in purgatories])
        yield self.labelled(GaugeMetricFamily, "odradek_delayed_operation_purgatory_num_delayed_operations",
                            "Operations waiting in the purgatory.",
                            "delayed_operation", [(name, p.delayed) for name, p, _ in purgatories])
        yield self.labelled(CounterMetricFamily, "odradek_delayed_operation_expires",
                            "Delayed operations that timed out.",
                            "delayed_operation", [(name, expired) for name, _, expired in purgatories])
