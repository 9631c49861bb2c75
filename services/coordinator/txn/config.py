"""`TransactionConfig`: the broker keys (Kafka 2.8 names and defaults) the transaction coordinator
reads: transaction bounds and timers (`transaction.*`, `transactional.id.expiration.ms`) and
its internal topic (`transaction.state.log.*`, as `offsets.topic.*` for `__consumer_offsets`).
"""

from __future__ import annotations

from services.common.config import Config, ConfigType, at_least, setting


class TransactionConfig(Config):
    transaction_max_timeout_ms: int = setting(
        ConfigType.INT, 900000, at_least(1),
        doc="Largest transaction timeout a producer may ask for (INVALID_TRANSACTION_TIMEOUT above it).")
    transactional_id_expiration_ms: int = setting(
        ConfigType.INT, 604800000, at_least(1),
        doc="How long a transactional id without any transaction update is kept before it is removed.")
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = setting(
        ConfigType.INT, 10000, at_least(1), doc="How often ongoing transactions past their timeout are aborted.")
    transaction_remove_expired_transaction_cleanup_interval_ms: int = setting(
        ConfigType.INT, 3600000, at_least(1), doc="How often expired transactional ids are removed.")
    transaction_state_log_num_partitions: int = setting(
        ConfigType.INT, 50, at_least(1), doc="Partitions of __transaction_state (fixed once created).")
    transaction_state_log_replication_factor: int = setting(
        ConfigType.SHORT, 3, at_least(1),
        doc="Replication factor of __transaction_state; it is created once that many brokers are live.")
    transaction_state_log_min_isr: int = setting(
        ConfigType.INT, 2, at_least(1), doc="min.insync.replicas of __transaction_state.")
    transaction_state_log_segment_bytes: int = setting(
        ConfigType.INT, 104857600, at_least(1), doc="segment.bytes of __transaction_state.")
    transaction_state_log_load_buffer_size: int = setting(
        ConfigType.INT, 5242880, at_least(1), doc="Bytes read per fetch while loading a partition.")
