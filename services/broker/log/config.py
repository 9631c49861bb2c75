"""Configuration of the storage engine: per-topic `LogConfig` and broker-wide `LogManagerConfig`.

`LogConfig` declares Kafka 2.8's topic-level keys with their names, defaults and validators
(`segment.bytes`, `retention.ms`, `cleanup.policy`, ...); attributes are the snake_case names
(`config.segment_bytes`). A topic's effective config is the broker defaults (the `log.*` keys
mapped to topic keys, see `BrokerConfig.log_defaults`) overlaid with that topic's overrides:

    LogConfig.from_props({"retention.ms": "3600000"}, defaults=broker_defaults)

`LogManagerConfig` holds the broker keys the LogManager itself uses (log dirs, recovery threads,
task intervals, the `log.cleaner.*` keys); `LogManagerConfig.from_mapping(broker_config.as_dict())`
picks them out.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

from services.common.config import (
    LONG_MAX,
    Config,
    ConfigType,
    at_least,
    between,
    each_one_of,
    one_of,
    setting,
)

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
INITIAL_TASK_DELAY_MS = 30_000  # Kafka's LogManager.InitialTaskDelayMs


class LogConfig(Config):
    segment_bytes: int = setting(ConfigType.INT, 1073741824, at_least(14),
                                 doc="Roll a new segment when the active one would exceed this size.")
    segment_ms: int = setting(ConfigType.LONG, 604800000, at_least(1),
                              doc="Roll a new segment when the active one is older than this.")
    segment_jitter_ms: int = setting(ConfigType.LONG, 0, at_least(0),
                                     doc="Random amount subtracted from segment.ms per segment.")
    segment_index_bytes: int = setting(ConfigType.INT, 10485760, at_least(12),
                                       doc="Preallocated size of each offset and time index file.")
    index_interval_bytes: int = setting(ConfigType.INT, 4096, at_least(0),
                                        doc="Log bytes between two offset index entries.")
    max_message_bytes: int = setting(ConfigType.INT, 1048588, at_least(0),
                                     doc="Largest record batch a producer may append.")
    max_message_decompressed_bytes: int = setting(
        ConfigType.INT, 67108864, at_least(0),
        doc="Largest size a compressed batch may decompress to; a larger one is refused with "
            "MESSAGE_TOO_LARGE before it is decompressed in full.")
    message_timestamp_type: str = setting(ConfigType.STRING, CREATE_TIME,
                                          one_of(CREATE_TIME, LOG_APPEND_TIME))
    message_timestamp_difference_max_ms: int = setting(ConfigType.LONG, LONG_MAX, at_least(0))
    retention_ms: int = setting(ConfigType.LONG, 604800000, at_least(-1))
    retention_bytes: int = setting(ConfigType.LONG, -1)
    cleanup_policy: tuple[str, ...] = setting(ConfigType.LIST, "delete", each_one_of("compact", "delete"))
    flush_messages: int = setting(ConfigType.LONG, LONG_MAX, at_least(0))
    flush_ms: int = setting(ConfigType.LONG, LONG_MAX, at_least(0))
    file_delete_delay_ms: int = setting(ConfigType.LONG, 60000, at_least(0))
    min_cleanable_dirty_ratio: float = setting(ConfigType.DOUBLE, 0.5, between(0, 1))
    delete_retention_ms: int = setting(ConfigType.LONG, 86400000, at_least(0))
    min_compaction_lag_ms: int = setting(ConfigType.LONG, 0, at_least(0))
    max_compaction_lag_ms: int = setting(ConfigType.LONG, LONG_MAX, at_least(1))
    preallocate: bool = setting(ConfigType.BOOLEAN, False)
    compression_type: str = setting(ConfigType.STRING, "producer",
                                    one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"))
    min_insync_replicas: int = setting(ConfigType.INT, 1, at_least(1))
    unclean_leader_election_enable: bool = setting(ConfigType.BOOLEAN, False)
    message_format_version: str = setting(ConfigType.STRING, "2.8-IV1")
    message_downconversion_enable: bool = setting(ConfigType.BOOLEAN, True)
    leader_replication_throttled_replicas: tuple[str, ...] = setting(ConfigType.LIST, "")
    follower_replication_throttled_replicas: tuple[str, ...] = setting(ConfigType.LIST, "")

    @classmethod
    def from_props(cls, props: Mapping[str, Any] | None = None,
                   defaults: LogConfig | Mapping[str, Any] | None = None) -> LogConfig:
        """Defaults (a LogConfig or a mapping of topic keys) overlaid with `props` (dotted keys)."""
        base = defaults.as_dict() if isinstance(defaults, LogConfig) else dict(defaults or {})
        return cls.load(base, dict(props or {}), env={})

    compact: bool = dataclasses.field(init=False, repr=False, compare=False, default=False)
    delete: bool = dataclasses.field(init=False, repr=False, compare=False, default=True)
    log_append_time: bool = dataclasses.field(init=False, repr=False, compare=False, default=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        # derived flags, read on every append
        object.__setattr__(self, "compact", "compact" in self.cleanup_policy)
        object.__setattr__(self, "delete", "delete" in self.cleanup_policy)
        object.__setattr__(self, "log_append_time", self.message_timestamp_type == LOG_APPEND_TIME)

    @property
    def max_index_size(self) -> int:
        return self.segment_index_bytes

    def random_segment_jitter(self) -> int:
        """A per-segment jitter in [0, min(segment.jitter.ms, segment.ms))."""
        if self.segment_jitter_ms == 0:
            return 0
        return random.randrange(min(self.segment_jitter_ms, self.segment_ms))

    def initial_file_size(self) -> int:
        return self.segment_bytes if self.preallocate else 0


class LogManagerConfig(Config):
    log_dirs: tuple[str, ...] = setting(ConfigType.LIST, "/tmp/odradek-logs")
    num_recovery_threads_per_data_dir: int = setting(ConfigType.INT, 1, at_least(1))
    log_retention_check_interval_ms: int = setting(ConfigType.LONG, 300000, at_least(1))
    log_flush_scheduler_interval_ms: int = setting(ConfigType.LONG, LONG_MAX, at_least(1))
    log_flush_offset_checkpoint_interval_ms: int = setting(ConfigType.INT, 60000, at_least(1))
    log_flush_start_offset_checkpoint_interval_ms: int = setting(ConfigType.INT, 60000, at_least(1))
    log_cleaner_enable: bool = setting(ConfigType.BOOLEAN, True,
                                       doc="Compact the logs whose cleanup.policy has compact.")
    log_cleaner_threads: int = setting(ConfigType.INT, 1, at_least(1))
    log_cleaner_dedupe_buffer_size: int = setting(ConfigType.LONG, 134217728, at_least(0),
                                                  doc="Memory for the offset maps of all cleaner threads.")
    log_cleaner_io_buffer_load_factor: float = setting(ConfigType.DOUBLE, 0.9, between(0, 1),
                                                       doc="How full an offset map may get.")
    log_cleaner_io_buffer_size: int = setting(ConfigType.INT, 524288, at_least(0),
                                              doc="Read size of all cleaner threads together.")
    log_cleaner_backoff_ms: int = setting(ConfigType.LONG, 15000, at_least(0),
                                          doc="How long a cleaner thread waits when no log needs cleaning.")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> LogManagerConfig:
        """The declared keys found in `values` (dotted keys); other keys are ignored."""
        return cls.load({k: v for k, v in values.items() if k in cls.__settings__}, env={})
