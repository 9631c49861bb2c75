"""The broker's configuration: Kafka 2.8's broker keys and defaults, and the broker-wide log
defaults that per-topic configs override (Kafka's `log.*` key → topic key mapping)."""

from __future__ import annotations

from services.common.config import (
    LONG_MAX,
    REQUIRED,
    ConfigType,
    at_least,
    between,
    each_one_of,
    one_of,
    setting,
)
from services.common.kafka_wire.listener_config import KafkaListenerConfig
from services.common.service import DEFAULT_PARKED_MAX_REQUESTS, Listener, parse_listener
from services.common.zk.connect import ZkTlsConfig


class BrokerConfig(KafkaListenerConfig, ZkTlsConfig):
    broker_id: int = setting(ConfigType.INT, REQUIRED, at_least(0), doc="This broker's id.")
    listeners: str = setting(ConfigType.STRING, "PLAINTEXT://:9092")
    advertised_listeners: str | None = setting(ConfigType.STRING, None)
    broker_rack: str | None = setting(ConfigType.STRING, None)
    log_dirs: tuple[str, ...] = setting(ConfigType.LIST, "/tmp/odradek-logs")
    zookeeper_connect: str = setting(ConfigType.STRING, REQUIRED)
    zookeeper_session_timeout_ms: int = setting(ConfigType.INT, 18000, at_least(1000))
    zookeeper_connection_timeout_ms: int = setting(ConfigType.INT, 18000, at_least(1000))
    metrics_port: int = setting(ConfigType.INT, -1, doc="Prometheus endpoint port; -1 disables it.")
    grpc_worker_threads: int = setting(
        ConfigType.INT, 64, at_least(1),
        doc="Threads serving the gRPC calls that do not run on the event loop (controller requests, "
            "metadata); produce and fetch run on the loop, and a parked one holds no thread.")
    parked_max_requests: int = setting(
        ConfigType.INT, DEFAULT_PARKED_MAX_REQUESTS, at_least(1),
        doc="Client produce and fetch requests the broker holds at once, being handled or parked in a "
            "purgatory (followers' fetches are not counted); one more is answered at once with "
            "THROTTLING_QUOTA_EXCEEDED.")
    sched_batch_enable: bool = setting(
        ConfigType.BOOLEAN, True,
        doc="On Linux, run the broker's threads under the SCHED_BATCH scheduling policy. Its threads "
            "hand work to each other all the time (a parked fetch completed by an append, a produce "
            "completed by a follower's fetch) and share one interpreter lock; under the default policy "
            "a woken thread preempts its waker only to wait for that lock, which costs a replicated "
            "produce about a third more context switches.")

    num_partitions: int = setting(ConfigType.INT, 1, at_least(1))
    default_replication_factor: int = setting(ConfigType.INT, 1, at_least(1))
    auto_create_topics_enable: bool = setting(ConfigType.BOOLEAN, True)
    min_insync_replicas: int = setting(ConfigType.INT, 1, at_least(1))
    unclean_leader_election_enable: bool = setting(ConfigType.BOOLEAN, False)
    compression_type: str = setting(ConfigType.STRING, "producer",
                                    one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"))
    message_max_bytes: int = setting(ConfigType.INT, 1048588, at_least(0))
    message_max_decompressed_bytes: int = setting(
        ConfigType.INT, 67108864, at_least(0),
        doc="Default of the topic-level max.message.decompressed.bytes: the largest size a produced "
            "compressed batch may decompress to.")
    fetch_max_bytes: int = setting(ConfigType.INT, 57671680, at_least(1024))
    max_incremental_fetch_session_cache_slots: int = setting(
        ConfigType.INT, 1000, at_least(0),
        doc="Incremental fetch sessions (KIP-227) the broker keeps for followers and consumers; a full "
            "fetch that finds no slot is answered outside any session.")
    replica_lag_time_max_ms: int = setting(ConfigType.LONG, 30000, at_least(1))
    replica_fetch_wait_max_ms: int = setting(ConfigType.INT, 500, at_least(0))
    replica_fetch_min_bytes: int = setting(ConfigType.INT, 1, at_least(1))
    replica_fetch_max_bytes: int = setting(ConfigType.INT, 1048576, at_least(0))
    replica_fetch_response_max_bytes: int = setting(ConfigType.INT, 10485760, at_least(0))
    replica_fetch_backoff_ms: int = setting(ConfigType.INT, 1000, at_least(0))
    leader_replication_throttled_rate: int = setting(
        ConfigType.LONG, LONG_MAX, at_least(0),
        doc="Bytes/s this broker sends as leader to followers of throttled replicas (the topics' "
            "leader.replication.throttled.replicas) outside the ISR; set dynamically by "
            "reassign-partitions --throttle.")
    follower_replication_throttled_rate: int = setting(
        ConfigType.LONG, LONG_MAX, at_least(0),
        doc="Bytes/s this broker fetches as follower for throttled replicas (the topics' "
            "follower.replication.throttled.replicas) outside the ISR.")
    replication_quota_window_num: int = setting(
        ConfigType.INT, 11, at_least(1), doc="Windows over which replication throttles measure their rate.")
    replication_quota_window_size_seconds: int = setting(
        ConfigType.INT, 1, at_least(1), doc="The length of each replication throttle window.")
    replica_high_watermark_checkpoint_interval_ms: int = setting(ConfigType.LONG, 5000, at_least(1))
    request_timeout_ms: int = setting(ConfigType.INT, 30000)

    controlled_shutdown_enable: bool = setting(ConfigType.BOOLEAN, True)
    controlled_shutdown_max_retries: int = setting(ConfigType.INT, 3)
    controlled_shutdown_retry_backoff_ms: int = setting(ConfigType.LONG, 5000)

    log_segment_bytes: int = setting(ConfigType.INT, 1073741824, at_least(14))
    log_roll_ms: int | None = setting(ConfigType.LONG, None)
    log_roll_hours: int = setting(ConfigType.INT, 168, at_least(1))
    log_roll_jitter_ms: int | None = setting(ConfigType.LONG, None)
    log_roll_jitter_hours: int = setting(ConfigType.INT, 0, at_least(0))
    log_index_size_max_bytes: int = setting(ConfigType.INT, 10485760, at_least(4))
    log_index_interval_bytes: int = setting(ConfigType.INT, 4096, at_least(0))
    log_flush_interval_messages: int = setting(ConfigType.LONG, LONG_MAX, at_least(1))
    log_flush_interval_ms: int | None = setting(ConfigType.LONG, None)
    log_flush_scheduler_interval_ms: int = setting(ConfigType.LONG, LONG_MAX)
    log_flush_offset_checkpoint_interval_ms: int = setting(ConfigType.INT, 60000, at_least(0))
    log_flush_start_offset_checkpoint_interval_ms: int = setting(ConfigType.INT, 60000, at_least(0))
    log_retention_bytes: int = setting(ConfigType.LONG, -1)
    log_retention_ms: int | None = setting(ConfigType.LONG, None)
    log_retention_minutes: int | None = setting(ConfigType.INT, None)
    log_retention_hours: int = setting(ConfigType.INT, 168)
    log_retention_check_interval_ms: int = setting(ConfigType.LONG, 300000, at_least(1))
    log_initial_task_delay_ms: int = setting(ConfigType.LONG, 30000, at_least(0),
                                             doc="How long after start the log tasks (retention, flushes, "
                                                 "checkpoints, deleting logs) first run.")
    log_cleanup_policy: tuple[str, ...] = setting(ConfigType.LIST, "delete", each_one_of("compact", "delete"))
    log_cleaner_enable: bool = setting(ConfigType.BOOLEAN, True)
    log_cleaner_backoff_ms: int = setting(ConfigType.LONG, 15000, at_least(0))
    log_cleaner_threads: int = setting(ConfigType.INT, 1, at_least(1))
    log_cleaner_dedupe_buffer_size: int = setting(ConfigType.LONG, 134217728, at_least(0))
    log_cleaner_io_buffer_load_factor: float = setting(ConfigType.DOUBLE, 0.9, between(0, 1))
    log_cleaner_io_buffer_size: int = setting(ConfigType.INT, 524288, at_least(0))
    log_cleaner_max_compaction_lag_ms: int = setting(ConfigType.LONG, LONG_MAX, at_least(1))
    log_cleaner_delete_retention_ms: int = setting(ConfigType.LONG, 86400000)
    log_cleaner_min_compaction_lag_ms: int = setting(ConfigType.LONG, 0)
    log_cleaner_min_cleanable_ratio: float = setting(ConfigType.DOUBLE, 0.5, between(0, 1))
    log_segment_delete_delay_ms: int = setting(ConfigType.LONG, 60000, at_least(0))
    log_preallocate: bool = setting(ConfigType.BOOLEAN, False)
    log_message_timestamp_type: str = setting(ConfigType.STRING, "CreateTime",
                                              one_of("CreateTime", "LogAppendTime"))
    log_message_timestamp_difference_max_ms: int = setting(ConfigType.LONG, LONG_MAX)
    num_recovery_threads_per_data_dir: int = setting(ConfigType.INT, 1, at_least(1))

    @property
    def listener(self) -> Listener:
        return parse_listener(self.listeners.split(",")[0])

    @property
    def advertised_listener(self) -> Listener:
        """Where clients reach this broker: advertised.listeners, else listeners (with a host)."""
        listener = parse_listener((self.advertised_listeners or self.listeners).split(",")[0])
        if not listener.host:
            listener = Listener(listener.protocol, "127.0.0.1", listener.port)
        return listener

    def log_defaults(self) -> dict[str, object]:
        """Broker-wide defaults of the per-topic log configs, keyed by topic config names."""
        retention_ms = self.log_retention_ms
        if retention_ms is None:
            retention_ms = (self.log_retention_minutes * 60_000 if self.log_retention_minutes is not None
                            else self.log_retention_hours * 3_600_000)
        flush_ms = self.log_flush_interval_ms
        if flush_ms is None:
            flush_ms = self.log_flush_scheduler_interval_ms
        return {
            "segment.bytes": self.log_segment_bytes,
            "segment.ms": (self.log_roll_ms if self.log_roll_ms is not None
                           else self.log_roll_hours * 3_600_000),
            "segment.jitter.ms": (self.log_roll_jitter_ms if self.log_roll_jitter_ms is not None
                                  else self.log_roll_jitter_hours * 3_600_000),
            "segment.index.bytes": self.log_index_size_max_bytes,
            "index.interval.bytes": self.log_index_interval_bytes,
            "flush.messages": self.log_flush_interval_messages,
            "flush.ms": flush_ms,
            "retention.bytes": self.log_retention_bytes,
            "retention.ms": retention_ms,
            "max.message.bytes": self.message_max_bytes,
            "max.message.decompressed.bytes": self.message_max_decompressed_bytes,
            "delete.retention.ms": self.log_cleaner_delete_retention_ms,
            "min.compaction.lag.ms": self.log_cleaner_min_compaction_lag_ms,
            "max.compaction.lag.ms": self.log_cleaner_max_compaction_lag_ms,
            "file.delete.delay.ms": self.log_segment_delete_delay_ms,
            "min.cleanable.dirty.ratio": self.log_cleaner_min_cleanable_ratio,
            "cleanup.policy": ",".join(self.log_cleanup_policy),
            "min.insync.replicas": self.min_insync_replicas,
            "compression.type": self.compression_type,
            "unclean.leader.election.enable": self.unclean_leader_election_enable,
            "preallocate": self.log_preallocate,
            "message.timestamp.type": self.log_message_timestamp_type,
            "message.timestamp.difference.max.ms": self.log_message_timestamp_difference_max_ms,
        }
