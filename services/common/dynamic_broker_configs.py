"""Dynamic broker configs (Kafka's DynamicBrokerConfig, ZooKeeper mode): which broker keys change
without a restart, the entity names they are stored under, and the check of a new set of them.

Odradek applies live the broker-wide defaults of the per-topic log configs (retention, segments,
flush, index, cleanup, compaction lags, message sizes and timestamps, `min.insync.replicas`,
`compression.type`, `log.preallocate`): a broker rebuilds its default log config from them and every
log without a topic override of the key follows at once; its followers' fetching
(`replica.fetch.*`), which each replica fetcher takes up from its next fetch; and its replication
throttles (`leader.replication.throttled.rate`, `follower.replication.throttled.rate`). Every other
broker key is static (read from the properties file at start); altering one is refused with
INVALID_REQUEST naming it.

Entities: a broker's own dynamic configs are stored under its id (`/config/brokers/1`), the
cluster-wide defaults under `<default>` (`/config/brokers/<default>`); admin requests name the
defaults with the empty resource name.
"""

from __future__ import annotations

from collections.abc import Mapping

from services.common.config import ConfigError, ConfigType, parse_value
from services.common.errors import Errors, KafkaError

DEFAULT_BROKER_ENTITY = "<default>"
DYNAMIC_BROKER_CONFIG_SOURCE = 2
DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE = 3
STATIC_BROKER_CONFIG_SOURCE = 4
DEFAULT_CONFIG_SOURCE = 5

# dotted key -> type, as the broker's config declares them
DYNAMIC_BROKER_CONFIGS: Mapping[str, ConfigType] = {
    "log.segment.bytes": ConfigType.INT,
    "log.roll.ms": ConfigType.LONG,
    "log.roll.hours": ConfigType.INT,
    "log.roll.jitter.ms": ConfigType.LONG,
    "log.roll.jitter.hours": ConfigType.INT,
    "log.index.size.max.bytes": ConfigType.INT,
    "log.index.interval.bytes": ConfigType.INT,
    "log.flush.interval.messages": ConfigType.LONG,
    "log.flush.interval.ms": ConfigType.LONG,
    "log.retention.bytes": ConfigType.LONG,
    "log.retention.ms": ConfigType.LONG,
    "log.retention.minutes": ConfigType.INT,
    "log.retention.hours": ConfigType.INT,
    "message.max.bytes": ConfigType.INT,
    "message.max.decompressed.bytes": ConfigType.INT,
    "log.cleaner.delete.retention.ms": ConfigType.LONG,
    "log.cleaner.min.compaction.lag.ms": ConfigType.LONG,
    "log.cleaner.max.compaction.lag.ms": ConfigType.LONG,
    "log.segment.delete.delay.ms": ConfigType.LONG,
    "log.cleaner.min.cleanable.ratio": ConfigType.DOUBLE,
    "log.cleanup.policy": ConfigType.LIST,
    "min.insync.replicas": ConfigType.INT,
    "compression.type": ConfigType.STRING,
    "log.preallocate": ConfigType.BOOLEAN,
    "log.message.timestamp.type": ConfigType.STRING,
    "log.message.timestamp.difference.max.ms": ConfigType.LONG,
    "replica.fetch.wait.max.ms": ConfigType.INT,
    "replica.fetch.min.bytes": ConfigType.INT,
    "replica.fetch.max.bytes": ConfigType.INT,
    "replica.fetch.response.max.bytes": ConfigType.INT,
    "replica.fetch.backoff.ms": ConfigType.INT,
    "leader.replication.throttled.rate": ConfigType.LONG,
    "follower.replication.throttled.rate": ConfigType.LONG,
}


def broker_entity(resource_name: str) -> str:
    """The stored entity of an admin request's broker resource name: a broker id, or `<default>`
    for ""; anything else is INVALID_REQUEST."""
    if resource_name in ("", DEFAULT_BROKER_ENTITY):
        return DEFAULT_BROKER_ENTITY
    if not resource_name.isdigit():
        raise KafkaError(f"Broker resource name must be a broker id or empty (the cluster default), "
                         f"not {resource_name!r}", error=Errors.INVALID_REQUEST)
    return str(int(resource_name))


def validate_dynamic_broker_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """The configs to store (keys without a value dropped); INVALID_REQUEST naming every key that
    cannot change without a restart, INVALID_CONFIG for a value of the wrong type."""
    static = sorted(k for k in configs if k not in DYNAMIC_BROKER_CONFIGS)
    if static:
        raise KafkaError(f"Cannot update these configs dynamically: {', '.join(static)} (they are read "
                         f"from the broker's properties at start)", error=Errors.INVALID_REQUEST)
    checked = {}
    for key, value in configs.items():
        if value is None:
            continue
        try:
            parse_value(key, DYNAMIC_BROKER_CONFIGS[key], value)
        except ConfigError as exc:
            raise KafkaError(f"Invalid value {value!r} for configuration {key}: {exc}",
                             error=Errors.INVALID_CONFIG) from exc
        checked[key] = str(value)
    return checked
