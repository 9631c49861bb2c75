"""Topic names and topic configs: Kafka's validation rules.

Names (Kafka's `Topic`): not empty, not "." or "..", at most 249 characters, only ASCII letters,
digits, '.', '_' and '-'. Because metric names turn '.' into '_', a name containing either
collides with an existing topic that differs only by those two characters. `__consumer_offsets`
and `__transaction_state` are internal topics.

Configs (Kafka 2.8's LogConfig): only topic-level keys are accepted; each value is parsed and
checked as the broker would; min.compaction.lag.ms may not exceed max.compaction.lag.ms.
Violations raise `KafkaError` with INVALID_TOPIC_EXCEPTION or INVALID_CONFIG.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from services.common.config import (
    ConfigError,
    ConfigType,
    Validator,
    at_least,
    between,
    each_one_of,
    one_of,
    parse_value,
)
from services.common.errors import Errors, KafkaError
from services.common.topic_names import INTERNAL_TOPICS, invalid_topic, validate_topic_name


def is_internal(topic: str) -> bool:
    return topic in INTERNAL_TOPICS


def has_collision_chars(topic: str) -> bool:
    return "_" in topic or "." in topic


def has_collision(topic_a: str, topic_b: str) -> bool:
    """True if the names are equal once every '.' is read as '_'."""
    return topic_a.replace(".", "_") == topic_b.replace(".", "_")


def colliding_topics(topic: str, existing: Iterable[str]) -> list[str]:
    return sorted(t for t in existing if t != topic and has_collision(topic, t))


def validate_new_topic_name(topic: str, existing_topics: Iterable[str]) -> None:
    """Kafka's checks on a topic to create: a legal name, not existing, not colliding."""
    validate_topic_name(topic)
    existing = set(existing_topics)
    if topic in existing:
        raise KafkaError(f"Topic '{topic}' already exists.", error=Errors.TOPIC_ALREADY_EXISTS)
    if has_collision_chars(topic):
        colliding = colliding_topics(topic, existing)
        if colliding:
            raise invalid_topic(f"Topic '{topic}' collides with existing topics: {', '.join(colliding)}")


# ---------------------------------------------------------------------------------------------
# topic configs


def _matches(pattern: str, what: str) -> Validator:
    compiled = re.compile(pattern)

    def check(key: str, value: Any) -> None:
        if not compiled.fullmatch(str(value)):
            raise ConfigError(key, value, f"must be {what}")

    return check


def _throttled_replicas(key: str, value: Any) -> None:
    items = [item.strip() for item in value]
    if items == ["*"] or all(re.fullmatch(r"[0-9]+:[0-9]+", item) for item in items):
        return
    raise ConfigError(
        key, value, "must be the literal '*' or a list of replicas in the format [partitionId]:[brokerId]"
    )


_C = ConfigType
TOPIC_CONFIGS: dict[str, tuple[ConfigType, tuple[Validator, ...]]] = {
    "segment.bytes": (_C.INT, (at_least(14),)),
    "segment.ms": (_C.LONG, (at_least(1),)),
    "segment.jitter.ms": (_C.LONG, (at_least(0),)),
    "segment.index.bytes": (_C.INT, (at_least(0),)),
    "flush.messages": (_C.LONG, (at_least(0),)),
    "flush.ms": (_C.LONG, (at_least(0),)),
    "retention.bytes": (_C.LONG, ()),
    "retention.ms": (_C.LONG, (at_least(-1),)),
    "max.message.bytes": (_C.INT, (at_least(0),)),
    "max.message.decompressed.bytes": (_C.INT, (at_least(0),)),
    "index.interval.bytes": (_C.INT, (at_least(0),)),
    "delete.retention.ms": (_C.LONG, (at_least(0),)),
    "min.compaction.lag.ms": (_C.LONG, (at_least(0),)),
    "max.compaction.lag.ms": (_C.LONG, (at_least(1),)),
    "file.delete.delay.ms": (_C.LONG, (at_least(0),)),
    "min.cleanable.dirty.ratio": (_C.DOUBLE, (between(0, 1),)),
    "cleanup.policy": (_C.LIST, (each_one_of("compact", "delete"),)),
    "unclean.leader.election.enable": (_C.BOOLEAN, ()),
    "min.insync.replicas": (_C.INT, (at_least(1),)),
    "compression.type": (_C.STRING, (one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),)),
    "preallocate": (_C.BOOLEAN, ()),
    "message.format.version": (
        _C.STRING,
        (_matches(r"[0-9]+\.[0-9]+(\.[0-9]+)?(-IV[0-9]+)?", "a Kafka version"),),
    ),
    "message.timestamp.type": (_C.STRING, (one_of("CreateTime", "LogAppendTime"),)),
    "message.timestamp.difference.max.ms": (_C.LONG, (at_least(0),)),
    "leader.replication.throttled.replicas": (_C.LIST, (_throttled_replicas,)),
    "follower.replication.throttled.replicas": (_C.LIST, (_throttled_replicas,)),
    "message.downconversion.enable": (_C.BOOLEAN, ()),
}
_DEFAULT_MIN_COMPACTION_LAG_MS = 0
_DEFAULT_MAX_COMPACTION_LAG_MS = (1 << 63) - 1


def reject_null_configs(configs: Mapping[str, str | None]) -> None:
    nulls = [key for key, value in configs.items() if value is None]
    if nulls:
        raise KafkaError(
            f"Null value not supported for topic configs : {','.join(nulls)}", error=Errors.INVALID_REQUEST
        )


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check topic config overrides as Kafka does; returns them as strings.

    A null value is INVALID_REQUEST; an unknown key or a bad value is INVALID_CONFIG.
    """
    reject_null_configs(configs)
    parsed: dict[str, Any] = {}
    for key, value in configs.items():
        spec = TOPIC_CONFIGS.get(key)
        if spec is None:
            raise KafkaError(f"Unknown topic config name: {key}", error=Errors.INVALID_CONFIG)
        kind, validators = spec
        try:
            parsed[key] = parse_value(key, kind, value)
            for validate in validators:
                validate(key, parsed[key])
        except ConfigError as e:
            raise KafkaError(str(e), error=Errors.INVALID_CONFIG) from None
    min_lag = parsed.get("min.compaction.lag.ms", _DEFAULT_MIN_COMPACTION_LAG_MS)
    max_lag = parsed.get("max.compaction.lag.ms", _DEFAULT_MAX_COMPACTION_LAG_MS)
    if min_lag > max_lag:
        raise KafkaError(
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
            f"max.compaction.lag.ms ({max_lag})",
            error=Errors.INVALID_CONFIG,
        )
    return {key: str(value) for key, value in configs.items()}
