"""The producer's configuration: Kafka 3.x's producer keys and defaults, and the objects it plugs in.

`load_producer_config(mapping, overrides)` takes dotted keys and/or snake_case keywords (keywords
win) and returns `(ProducerConfig, ProducerPlugins)`. Checks beyond each key's own, as Kafka's
ProducerConfig does them:

- `enable.idempotence` (default true) needs acks=all, retries > 0 and
  `max.in.flight.requests.per.connection` <= 5. Set explicitly, a conflict is a ConfigError;
  left at its default, a conflicting setting (say acks=1) turns idempotence off.
- `delivery.timeout.ms` must be at least `linger.ms` + `request.timeout.ms`: a ConfigError when
  set explicitly, otherwise raised to that sum.
- `transactional.id` makes a transactional producer, which is idempotent: a ConfigError when
  idempotence is off (set so, or turned off by a conflicting setting).

Plugins are objects, not strings, so they bypass the typed config: `key.serializer` and
`value.serializer` (None passes bytes through and encodes str as UTF-8; a callable `f(data)`, an
object with Kafka's `serialize(topic, data)`, a class of such objects, or a dotted import path),
`partitioner.class` ("default", "uniform_sticky", "round_robin", Kafka's Java names for those, a
`Partitioner`, a class, a callable or a dotted path) and `interceptor.classes` (objects with
`on_send(record) -> record` and `on_acknowledgement(metadata, exception)`, classes, or dotted paths).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from services.clients.client_config import CommonClientConfig
from services.clients.producer.partitioner import (
    BUILT_IN_PARTITIONERS,
    CallablePartitioner,
    DefaultPartitioner,
    Partitioner,
)
from services.common.config import ConfigError, ConfigType, at_least, between, one_of, setting

logger = logging.getLogger(__name__)

MAX_INT = 2147483647
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5
COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
ACKS_VALUES = {"all": -1, "-1": -1, "0": 0, "1": 1}
PLUGIN_KEYS = ("key.serializer", "value.serializer", "partitioner.class", "interceptor.classes")

# (topic, data) -> bytes | None
Serializer = Callable[[str, Any], "bytes | None"]


class ProducerConfig(CommonClientConfig):
    """The producer's keys (Kafka 3.x names and defaults)."""

    acks: str = setting(ConfigType.STRING, "all", one_of(*ACKS_VALUES),
                        doc="Acknowledgements the leader must gather before answering: 0, 1 or all (-1).")
    enable_idempotence: bool = setting(ConfigType.BOOLEAN, True,
                                       doc="Producer id and per-partition sequence numbers: no duplicates "
                                           "and no reordering across retries.")
    retries: int = setting(ConfigType.INT, MAX_INT, between(0, MAX_INT),
                           doc="How many times a batch failing with a retriable error is sent again.")
    batch_size: int = setting(ConfigType.INT, 16384, at_least(0),
                              doc="Bytes of records gathered per partition before a batch is full.")
    linger_ms: int = setting(ConfigType.LONG, 0, at_least(0),
                             doc="How long a batch that is not full waits for more records.")
    buffer_memory: int = setting(ConfigType.LONG, 33554432, at_least(0),
                                 doc="Bytes of records waiting to be sent or acknowledged, at most.")
    max_block_ms: int = setting(ConfigType.LONG, 60000, at_least(0),
                                doc="How long send() and partitions_for() wait for metadata or buffer memory.")
    max_request_size: int = setting(ConfigType.INT, 1048576, at_least(0),
                                    doc="Bytes of one produce request, and so of one record, at most.")
    max_in_flight_requests_per_connection: int = setting(
        ConfigType.INT, 5, at_least(1), doc="Produce requests awaiting an answer from one broker, at most.")
    delivery_timeout_ms: int = setting(ConfigType.INT, 120000, at_least(0),
                                       doc="Bound on the time from send() to success or failure, retries "
                                           "included.")
    compression_type: str = setting(ConfigType.STRING, "none", one_of(*COMPRESSION_TYPES),
                                    doc="Codec of the record batches.")
    partitioner_ignore_keys: bool = setting(ConfigType.BOOLEAN, False,
                                            doc="Place keyed records like records without keys.")
    transactional_id: str | None = setting(ConfigType.STRING, None,
                                           doc="Identifies the producer across restarts for transactions; "
                                               "a newer instance fences older ones.")
    transaction_timeout_ms: int = setting(ConfigType.INT, 60000, at_least(1),
                                          doc="How long the coordinator lets a transaction stay open before "
                                              "aborting it.")

    @property
    def required_acks(self) -> int:
        """acks as the number the Produce request carries: 0, 1 or -1."""
        return ACKS_VALUES[self.acks]


@dataclass(frozen=True)
class ProducerPlugins:
    """The objects the producer calls: serializers, partitioner, interceptors."""

    key_serializer: Serializer | None = None
    value_serializer: Serializer | None = None
    partitioner: Partitioner | None = None
    interceptors: tuple[Any, ...] = ()


def load_producer_config(config: Mapping[str, Any] | None,
                         overrides: Mapping[str, Any]) -> tuple[ProducerConfig, ProducerPlugins]:
    """The config and plugins from dotted keys plus snake_case keywords (see the module docstring)."""
    supplied = dict(config or {})
    keywords = dict(overrides)
    plugin_values: dict[str, Any] = {}
    for key in PLUGIN_KEYS:
        snake = key.replace(".", "_")
        for source, name in ((supplied, key), (keywords, snake)):
            if name in source:
                plugin_values[key] = source.pop(name)
    for source, name in ((supplied, "acks"), (keywords, "acks")):
        value = source.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            source[name] = str(value)
    loaded = ProducerConfig.load(supplied, env={}, **keywords)
    _check_idempotence(loaded)
    _check_delivery_timeout(loaded)
    if loaded.transactional_id and not loaded.enable_idempotence:
        raise ConfigError("transactional.id", loaded.transactional_id,
                          "a transactional producer must be idempotent: enable.idempotence must be true (with "
                          "acks=all, retries > 0 and max.in.flight.requests.per.connection <= 5)")
    return loaded, resolve_plugins(plugin_values)


def _check_idempotence(config: ProducerConfig) -> None:
    if not config.enable_idempotence:
        return
    conflicts = []
    if config.max_in_flight_requests_per_connection > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
        conflicts.append(("max.in.flight.requests.per.connection", config.max_in_flight_requests_per_connection,
                          f"must be at most {MAX_IN_FLIGHT_FOR_IDEMPOTENCE} for the idempotent producer"))
    if config.retries == 0:
        conflicts.append(("retries", config.retries, "must not be 0 for the idempotent producer"))
    if config.required_acks != -1:
        conflicts.append(("acks", config.acks, "must be all for the idempotent producer, which otherwise "
                                               "cannot promise no duplicates"))
    if not conflicts:
        return
    if "enable.idempotence" in config.originals():
        key, value, reason = conflicts[0]
        raise ConfigError(key, value, reason)
    logger.info("idempotence is off: %s", "; ".join(f"{key}={value!r}" for key, value, _ in conflicts))
    object.__setattr__(config, "enable_idempotence", False)


def _check_delivery_timeout(config: ProducerConfig) -> None:
    lower_bound = config.linger_ms + config.request_timeout_ms
    if config.delivery_timeout_ms >= lower_bound:
        return
    if "delivery.timeout.ms" in config.originals():
        raise ConfigError("delivery.timeout.ms", config.delivery_timeout_ms,
                          f"must be at least linger.ms + request.timeout.ms ({lower_bound})")
    object.__setattr__(config, "delivery_timeout_ms", min(lower_bound, MAX_INT))


# --------------------------------------------------------------------------------------------- plugins

def resolve_plugins(values: Mapping[str, Any]) -> ProducerPlugins:
    interceptors = values.get("interceptor.classes") or ()
    if isinstance(interceptors, str):
        interceptors = [name for name in (part.strip() for part in interceptors.split(",")) if name]
    elif not isinstance(interceptors, list | tuple):
        interceptors = [interceptors]
    return ProducerPlugins(
        key_serializer=resolve_serializer("key.serializer", values.get("key.serializer")),
        value_serializer=resolve_serializer("value.serializer", values.get("value.serializer")),
        partitioner=resolve_partitioner(values.get("partitioner.class")),
        interceptors=tuple(_instance("interceptor.classes", item) for item in interceptors),
    )


def resolve_serializer(key: str, value: Any) -> Serializer | None:
    """A `(topic, data) -> bytes` function for the configured serializer, or None for pass-through."""
    if value is None:
        return None
    target = _instance(key, value)
    serialize = getattr(target, "serialize", None)
    if callable(serialize):
        return lambda topic, data: serialize(topic, data)
    if callable(target):
        return lambda topic, data: target(data)
    raise ConfigError(key, value, "expected a callable or an object with serialize(topic, data)")


def resolve_partitioner(value: Any) -> Partitioner:
    if value is None:
        return DefaultPartitioner()
    if isinstance(value, str) and value in BUILT_IN_PARTITIONERS:
        return BUILT_IN_PARTITIONERS[value]()
    target = _instance("partitioner.class", value)
    if isinstance(target, Partitioner):
        return target
    if callable(getattr(target, "partition", None)):
        return CallablePartitioner(target.partition)
    if callable(target):
        return CallablePartitioner(target)
    raise ConfigError("partitioner.class", value, "expected a Partitioner, a class or a callable")


def _instance(key: str, value: Any) -> Any:
    """Imports a dotted path, instantiates a class, or returns the object itself."""
    if isinstance(value, str):
        value = _import(key, value)
    if isinstance(value, type):
        try:
            return value()
        except Exception as exc:
            raise ConfigError(key, value, f"could not instantiate it: {exc}") from exc
    return value


def _import(key: str, path: str) -> Any:
    module_name, _, attribute = path.strip().replace(":", ".").rpartition(".")
    if not module_name:
        raise ConfigError(key, path, "expected a dotted path such as package.module.Name")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(key, path, f"cannot import it: {exc}") from exc
