"""The consumer's configuration keys, with Kafka's names and defaults (ConsumerConfig).

Besides the keys every client has (`CommonClientConfig`), the consumer reads fetch sizing
(`fetch.min.bytes`, `fetch.max.wait.ms`, `fetch.max.bytes`, `max.partition.fetch.bytes`), how
many records one poll returns (`max.poll.records`), where to start without a position
(`auto.offset.reset`), which records are visible (`isolation.level`), `check.crcs`,
`default.api.timeout.ms` and `client.rack`. `consumer.timeout.ms` bounds how long iterating over
a consumer waits for the next record (-1: forever).

Consumer groups: `group.id` (None or blank: no group, so no `subscribe` and no commits),
`group.instance.id` (static membership), `session.timeout.ms`, `heartbeat.interval.ms` (must be
lower than the session timeout), `max.poll.interval.ms` (also the rebalance timeout),
`enable.auto.commit` with `auto.commit.interval.ms` (only with a group id: setting it to true
without one is an error, leaving it unset turns it off), `exclude.internal.topics` (pattern
subscriptions never match internal topics) and `allow.auto.create.topics` (subscribed topics'
metadata requests may create them).

`key.deserializer` and `value.deserializer` are callables taking the raw bytes (never called for
a null key or value), or None to hand out bytes; `partition.assignment.strategy` is an assignor
name, a comma-separated list of them, or a list of names, assignor classes or instances (see
`assignors.assignors_from_config`; default "range"). These three are plain attributes, kept as
given, not parsed settings.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from services.clients.client_config import CommonClientConfig, load_client_config
from services.common.config import ConfigError, ConfigType, at_least, one_of, setting
from services.common.shared_types import ISOLATION_LEVEL_NAMES, IsolationLevel

Deserializer = Callable[[bytes], Any]

EARLIEST = "earliest"
LATEST = "latest"
NONE = "none"
_DESERIALIZER_KEYS = {"key.deserializer": "key_deserializer", "value.deserializer": "value_deserializer"}
_ASSIGNMENT_STRATEGY_KEY = "partition.assignment.strategy"
DEFAULT_ASSIGNMENT_STRATEGY = "range"
_LEGAL_INSTANCE_ID = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def _valid_group_instance_id(key: str, value: Any) -> None:
    if value is not None and not _LEGAL_INSTANCE_ID.fullmatch(value):
        raise ConfigError(key, value, "Must be 1 to 249 characters of ASCII alphanumerics, '.', '_' and '-'")


class ConsumerConfig(CommonClientConfig):
    """Keys of the consumer; see the module docstring."""

    group_id: str | None = setting(ConfigType.STRING, None,
                                   doc="The consumer group of this consumer; needed by subscribe and commits.")
    group_instance_id: str | None = setting(ConfigType.STRING, None, _valid_group_instance_id,
                                            doc="A stable identity making this consumer a static group member.")
    session_timeout_ms: int = setting(ConfigType.INT, 10000, at_least(1),
                                      doc="A member without heartbeats for this long is removed from the group.")
    heartbeat_interval_ms: int = setting(ConfigType.INT, 3000, at_least(1),
                                         doc="Time between two heartbeats to the group coordinator.")
    max_poll_interval_ms: int = setting(ConfigType.INT, 300000, at_least(1),
                                        doc="Longest time between two polls before the member leaves the group; "
                                            "also the rebalance timeout.")
    enable_auto_commit: bool = setting(ConfigType.BOOLEAN, True,
                                       doc="Commit consumed positions in the background (with a group id only).")
    auto_commit_interval_ms: int = setting(ConfigType.INT, 5000, at_least(0),
                                           doc="Time between two automatic commits.")
    exclude_internal_topics: bool = setting(ConfigType.BOOLEAN, True,
                                            doc="Pattern subscriptions never match internal topics.")
    allow_auto_create_topics: bool = setting(ConfigType.BOOLEAN, True,
                                             doc="Metadata requests for subscribed topics may create them.")
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
    isolation_level: str = setting(ConfigType.STRING, IsolationLevel.READ_UNCOMMITTED.config_name,
                                   one_of(*ISOLATION_LEVEL_NAMES),
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
    partition_assignment_strategy: Any = dataclasses.field(default=DEFAULT_ASSIGNMENT_STRATEGY)

    def __post_init__(self) -> None:
        super().__post_init__()
        for key, attribute in _DESERIALIZER_KEYS.items():
            _check_deserializer(key, getattr(self, attribute))
        if self.group_id and self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError("heartbeat.interval.ms", self.heartbeat_interval_ms,
                              f"Must be lower than session.timeout.ms ({self.session_timeout_ms})")

    @classmethod
    def _from_supplied(cls, supplied: dict[str, Any]) -> ConsumerConfig:
        plain = {key: supplied.pop(key) for key in (*_DESERIALIZER_KEYS, _ASSIGNMENT_STRATEGY_KEY) if key in supplied}
        auto_commit = supplied.get("enable.auto.commit")
        config = super()._from_supplied(supplied)
        for key, value in plain.items():
            if key in _DESERIALIZER_KEYS:
                _check_deserializer(key, value)
                object.__setattr__(config, _DESERIALIZER_KEYS[key], value)
            else:
                object.__setattr__(config, "partition_assignment_strategy", value)
        config._originals.update(plain)
        if not config.group_id and auto_commit is not None and config.enable_auto_commit:
            raise ConfigError("enable.auto.commit", auto_commit, "Cannot be true without a group.id")
        return config

    @property
    def isolation_level_code(self) -> int:
        return IsolationLevel.from_config(self.isolation_level)

    @property
    def auto_commit_enabled(self) -> bool:
        """enable.auto.commit, which only a consumer with a group id can have."""
        return self.enable_auto_commit and bool(self.group_id)


def _check_deserializer(key: str, value: Any) -> None:
    if value is not None and not callable(value):
        raise ConfigError(key, value, "Expected a callable taking bytes, or None")


def load_consumer_config(config: Mapping[str, Any] | None, overrides: Mapping[str, Any]) -> ConsumerConfig:
    """A ConsumerConfig from a mapping of dotted keys plus snake_case keyword overrides (overrides win)."""
    return load_client_config(ConsumerConfig, config, overrides)
