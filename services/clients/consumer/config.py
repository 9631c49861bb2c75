"""The consumer's configuration keys, with Kafka's names and defaults (ConsumerConfig).

Besides the keys every client has (`CommonClientConfig`), the consumer reads fetch sizing
(`fetch.min.bytes`, `fetch.max.wait.ms`, `fetch.max.bytes`, `max.partition.fetch.bytes`), how
many records one poll returns (`max.poll.records`), where to start without a position
(`auto.offset.reset`), which records are visible (`isolation.level`), `check.crcs`,
`default.api.timeout.ms` and `client.rack`. `group.id` is accepted for the consumer groups to
come. `consumer.timeout.ms` bounds how long iterating over a consumer waits for the next record
(-1: forever).

`key.deserializer` and `value.deserializer` are callables taking the raw bytes (never called for
a null key or value), or None to hand out bytes; they are plain attributes, not parsed settings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from services.clients.client_config import CommonClientConfig, load_client_config
from services.common.config import ConfigError, ConfigType, at_least, one_of, setting
from services.common.pb.odradek.common.v1 import common_pb2

Deserializer = Callable[[bytes], Any]

EARLIEST = "earliest"
LATEST = "latest"
NONE = "none"
READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
ISOLATION_LEVELS = {READ_UNCOMMITTED: common_pb2.READ_UNCOMMITTED, READ_COMMITTED: common_pb2.READ_COMMITTED}
_DESERIALIZER_KEYS = {"key.deserializer": "key_deserializer", "value.deserializer": "value_deserializer"}


class ConsumerConfig(CommonClientConfig):
    """Keys of the consumer; see the module docstring."""

    group_id: str | None = setting(ConfigType.STRING, None,
                                   doc="The consumer group this consumer belongs to (unused until groups exist).")
    fetch_min_bytes: int = setting(ConfigType.INT, 1, at_least(0),
                                   doc="Least data a broker gathers before answering a fetch.")
    fetch_max_wait_ms: int = setting(ConfigType.INT, 500, at_least(0),
                                     doc="Longest a broker holds a fetch waiting for fetch.min.bytes.")
    fetch_max_bytes: int = setting(ConfigType.INT, 52428800, at_least(0),
                                   doc="Most data one fetch answer carries (at least one batch always comes).")
    max_partition_fetch_bytes: int = setting(ConfigType.INT, 1048576, at_least(0),
                                             doc="Most data one fetch answer carries for one partition.")
    max_poll_records: int = setting(ConfigType.INT, 500, at_least(1),
                                    doc="Most records one poll() returns.")
    auto_offset_reset: str = setting(ConfigType.STRING, LATEST, one_of(LATEST, EARLIEST, NONE),
                                     doc="Where to start without a valid position: earliest, latest, or none "
                                         "to raise an error.")
    isolation_level: str = setting(ConfigType.STRING, READ_UNCOMMITTED, one_of(READ_UNCOMMITTED, READ_COMMITTED),
                                   doc="read_committed reads only committed transactional records, "
                                       "up to the last stable offset.")
    check_crcs: bool = setting(ConfigType.BOOLEAN, True, doc="Verify the CRC-32C of every fetched batch.")
    default_api_timeout_ms: int = setting(ConfigType.INT, 60000, at_least(0),
                                          doc="Bound on blocking calls that take no timeout of their own.")
    consumer_timeout_ms: int = setting(ConfigType.LONG, -1, at_least(-1),
                                       doc="Iteration stops after this long without a record (-1: never).")
    client_rack: str = setting(ConfigType.STRING, "", doc="Rack of this consumer, sent with fetches.")
    key_deserializer: Deserializer | None = dataclasses.field(default=None)
    value_deserializer: Deserializer | None = dataclasses.field(default=None)

    def __post_init__(self) -> None:
        super().__post_init__()
        for key, attribute in _DESERIALIZER_KEYS.items():
            _check_deserializer(key, getattr(self, attribute))

    @classmethod
    def _from_supplied(cls, supplied: dict[str, Any]) -> ConsumerConfig:
        deserializers = {key: supplied.pop(key) for key in _DESERIALIZER_KEYS if key in supplied}
        config = super()._from_supplied(supplied)
        for key, value in deserializers.items():
            _check_deserializer(key, value)
            object.__setattr__(config, _DESERIALIZER_KEYS[key], value)
        config._originals.update(deserializers)
        return config

    @property
    def isolation_level_code(self) -> int:
        return ISOLATION_LEVELS[self.isolation_level]


def _check_deserializer(key: str, value: Any) -> None:
    if value is not None and not callable(value):
        raise ConfigError(key, value, "Expected a callable taking bytes, or None")


def load_consumer_config(config: Mapping[str, Any] | None, overrides: Mapping[str, Any]) -> ConsumerConfig:
    """A ConsumerConfig from a mapping of dotted keys plus snake_case keyword overrides (overrides win)."""
    return load_client_config(ConsumerConfig, config, overrides)
