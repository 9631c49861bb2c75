"""The `odradek` source's read options: Spark's Kafka source option names, parsed and checked at
planning (on the driver), so a mistake fails the query before any task runs.

`ReadOptions.parse(options, streaming=...)` takes the options as Spark hands them to a Python data
source (names lower-cased) and answers a frozen, picklable `ReadOptions`, or raises
`InvalidOptionError` naming the option, what was wrong and, for an unknown option, the known ones:
- exactly one of `subscribe` (comma separated topics), `subscribePattern` (a regular expression a
  whole topic name must match) and `assign` (JSON `{"topic": [partitions]}`);
- `startingOffsets` / `endingOffsets`: `earliest`, `latest` or JSON `{"topic": {"partition":
  offset}}` with -2 for earliest and -1 for latest (latest cannot start a batch read, earliest cannot
  end one, streaming reads take no end); `startingTimestamp` (ms, every partition) or
  `startingOffsetsByTimestamp` (JSON of ms per partition), which win over `startingOffsets` as in
  Spark, with `startingOffsetsByTimestampStrategy` (`error` or `latest`) for partitions no record
  reaches; `endingTimestamp` / `endingOffsetsByTimestamp` for batch reads;
- `maxOffsetsPerTrigger` (streaming reads; ignored by batch reads, as in Spark), `minPartitions`,
  `maxPartitions` (our own, batch reads: at most this many tasks, the ranges packed into them by
  size, as Spark packs small files to its parallelism; by default Spark's default parallelism when
  `register` told it, unless `minPartitions` is given), `failOnDataLoss` (default true),
  `includeHeaders` (default false), `isolationLevel` (or Kafka's `kafka.isolation.level`:
  read_uncommitted or read_committed);
- `minOffsetsPerTrigger` and `maxTriggerDelay` (streaming reads, as in Spark): a trigger that
  finds fewer than `minOffsetsPerTrigger` new offsets runs no batch, until that many are there or
  `maxTriggerDelay` (a Spark duration, `15m` by default; `500ms`, `10s`, `2m`, `1h`, a plain
  number is ms) has passed since the last batch; `Trigger.AvailableNow` ignores them;
- `gateway` (required: comma separated gateway URLs), `maxBytesPerRequest` (the range reads' size,
  default 8 MiB; a task's first read asks for at most 1 MiB) and `timeoutMs` (how long a gateway
  request may be retried, default 60000; Kafka's `kafka.request.timeout.ms` sets it when it is not
  given);
- taken as Spark's Kafka source takes them, so that its users' queries run unchanged:
  `groupIdPrefix` and `kafka.group.id` (the source assigns partitions itself and commits no
  offsets to a group, as Spark's; here it also joins none) and `kafka.bootstrap.servers` beside
  `gateway` (the reads go through the gateway);
- `kafka.security.protocol` SASL_PLAINTEXT or SASL_SSL with `kafka.sasl.mechanism` and
  `kafka.sasl.username` / `kafka.sasl.password` or `kafka.sasl.jaas.config`: the user the reads
  authenticate as to the gateway (HTTP Basic; the gateway checks it against the brokers' users).
Any other `kafka.*` option is refused, naming it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.clients.client_config import CommonClientConfig
from services.clients.spark.gateway import gateway_urls
from services.common.config import ConfigError
from services.common.security.grpc_credentials import basic_authorization
from services.common.shared_types import ISOLATION_LEVEL_NAMES, IsolationLevel

EARLIEST = -2
LATEST = -1
DEFAULT_MAX_BYTES_PER_REQUEST = 8 * 1024 * 1024
DEFAULT_TIMEOUT_MS = 60000

# Spark's names (as the user writes them) of every option the reader knows.
READ_OPTION_NAMES = (
    "gateway", "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
    "startingTimestamp", "startingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "endingTimestamp", "endingOffsetsByTimestamp", "maxOffsetsPerTrigger", "minPartitions", "maxPartitions",
    "failOnDataLoss", "includeHeaders", "isolationLevel", "kafka.isolation.level", "maxBytesPerRequest",
    "timeoutMs", "minOffsetsPerTrigger", "maxTriggerDelay", "groupIdPrefix", "kafka.group.id",
    "kafka.request.timeout.ms", "kafka.bootstrap.servers", "kafka.security.protocol", "kafka.sasl.mechanism",
    "kafka.sasl.username", "kafka.sasl.password", "kafka.sasl.jaas.config",
)
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
# Spark's duration suffixes (JavaUtils.timeStringAsMs) in ms; a number without one is ms.
_DURATION_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_KNOWN = {name.lower(): name for name in READ_OPTION_NAMES}
# Spark's own keys that reach a data source's options without the user naming them.
_IGNORED = frozenset({"path", "paths"})

# A partition's offset spec: an offset, EARLIEST or LATEST; or ("timestamp", ms).
OffsetSpec = int | tuple[str, int]


class InvalidOptionError(ValueError):
    """An option of the `odradek` source that is unknown, malformed or contradicts another."""


@dataclass(frozen=True)
class Subscription:
    """What to read: `topics`, a `pattern` or `assigned` partitions (exactly one is set)."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics or any(topic == assigned for assigned, _ in self.assigned)


@dataclass(frozen=True)
class OffsetBound:
    """Where a read starts or ends: `default` (an offset spec) for every partition not in
    `per_partition`; `strategy` says what a timestamp no record reaches means ("error" or "latest")."""

    default: OffsetSpec | None
    per_partition: dict[tuple[str, int], OffsetSpec] = field(default_factory=dict)
    strategy: str = "error"
    specific: bool = False  # per-partition JSON: every partition read must be named

    def spec_for(self, topic: str, partition: int) -> OffsetSpec | None:
        return self.per_partition.get((topic, partition), self.default)


@dataclass(frozen=True)
class ReadOptions:
    gateway: tuple[str, ...]
    subscription: Subscription
    starting: OffsetBound
    ending: OffsetBound
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    isolation_level: str = IsolationLevel.READ_UNCOMMITTED.config_name
    max_bytes_per_request: int = DEFAULT_MAX_BYTES_PER_REQUEST
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    authorization: str | None = field(default=None, repr=False)  # of the gateway requests

    @classmethod
    def parse(cls, options: Mapping[str, Any], *, streaming: bool) -> ReadOptions:
        given = {str(name).lower(): str(value) for name, value in options.items() if str(name).lower() not in _IGNORED}
        check_option_names(given)
        min_offsets = positive_option(given, "minOffsetsPerTrigger")
        max_offsets = positive_option(given, "maxOffsetsPerTrigger")
        if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
            raise InvalidOptionError(f"Option 'minOffsetsPerTrigger' ({min_offsets}) is higher than "
                                     f"'maxOffsetsPerTrigger' ({max_offsets}).")
        _group_id_options(given)
        return cls(
            gateway=gateway_option(given),
            subscription=_subscription(given),
            starting=_starting(given, streaming),
            ending=_ending(given, streaming),
            max_offsets_per_trigger=max_offsets,
            min_partitions=positive_option(given, "minPartitions"),
            max_partitions=positive_option(given, "maxPartitions"),
            fail_on_data_loss=boolean_option(given, "failOnDataLoss", True),
            include_headers=boolean_option(given, "includeHeaders", False),
            isolation_level=_isolation_level(given),
            max_bytes_per_request=positive_option(given, "maxBytesPerRequest") or DEFAULT_MAX_BYTES_PER_REQUEST,
            timeout_ms=(positive_option(given, "timeoutMs") or positive_option(given, "kafka.request.timeout.ms")
                        or DEFAULT_TIMEOUT_MS),
            min_offsets_per_trigger=min_offsets,
            max_trigger_delay_ms=duration_ms_option(given, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS),
            authorization=gateway_authorization(given),
        )

    def task_limit(self, default_parallelism: int | None) -> int | None:
        """How many tasks a batch read may take at most: `maxPartitions`; else, unless `minPartitions`
        asks for more tasks, Spark's default parallelism when known (small ranges packed into as many
        tasks as Spark runs at once, as it packs small files); else no limit."""
        if self.max_partitions:
            return self.max_partitions
        if self.min_partitions:
            return None
        return default_parallelism

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1000


# Kafka's client security settings, with Spark's `kafka.` prefix. The SASL ones are the user the
# source and sink authenticate as to the gateway (HTTP Basic, which the gateway verifies against the
# same users as the brokers); the exactly-once sink's Producer and Admin, which reach the brokers'
# gRPC listeners directly, take all of them.
KAFKA_SASL_OPTION_NAMES = ("kafka.security.protocol", "kafka.sasl.mechanism", "kafka.sasl.username",
                           "kafka.sasl.password", "kafka.sasl.jaas.config")
KAFKA_SECURITY_OPTION_NAMES = (
    *KAFKA_SASL_OPTION_NAMES, "kafka.ssl.ca.location", "kafka.ssl.truststore.location",
    "kafka.ssl.keystore.location", "kafka.ssl.certificate.location", "kafka.ssl.key.location",
    "kafka.ssl.key.password",
)


def kafka_client_settings(given: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The `KAFKA_SECURITY_OPTION_NAMES` given, as client settings without the `kafka.` prefix;
    InvalidOptionError when the clients would refuse them."""
    settings = tuple((name.removeprefix("kafka."), str(given[name])) for name in KAFKA_SECURITY_OPTION_NAMES
                     if name in given)
    _sasl_credentials(settings)
    return settings


def gateway_authorization(given: Mapping[str, str]) -> str | None:
    """The `Authorization` header of the gateway requests: HTTP Basic of the SASL user the
    `kafka.sasl.*` options name (with `kafka.security.protocol` SASL_*), else None."""
    credentials = _sasl_credentials(tuple((name.removeprefix("kafka."), str(given[name]))
                                          for name in KAFKA_SASL_OPTION_NAMES if name in given))
    return None if credentials is None else basic_authorization(*credentials)


def _sasl_credentials(settings: tuple[tuple[str, str], ...]) -> tuple[str, str] | None:
    try:
        config = CommonClientConfig.load({"bootstrap.servers": "127.0.0.1:9092", **dict(settings)}, env={})
        return config.sasl_credentials()
    except ConfigError as exc:
        raise InvalidOptionError(f"Option 'kafka.{exc.key}': {exc.reason}") from None


def check_option_names(given: Mapping[str, str], names: tuple[str, ...] = READ_OPTION_NAMES,
                       user: str = "source") -> None:
    """Refuses `kafka.bootstrap.servers` without `gateway`, any `kafka.*` option not in `names` (a
    Kafka client setting that means nothing here) and any other option not in `names`; `user` is
    "source" or "sink"."""
    verb = "reads" if user == "source" else "writes"
    known = {name.lower() for name in names}
    if "kafka.bootstrap.servers" in given and ("gateway" not in given or "kafka.bootstrap.servers" not in known):
        raise InvalidOptionError(f"The odradek {user} {verb} through the HTTP gateway: give its URLs in the "
                                 f"'gateway' option instead of 'kafka.bootstrap.servers'.")
    kafka_settings = sorted(name for name in given if name.startswith("kafka.") and name not in known)
    if kafka_settings:
        taken = [name for name in names if name.startswith("kafka.")]
        raise InvalidOptionError(
            f"Option(s) {', '.join(repr(name) for name in kafka_settings)}: Kafka client settings the odradek "
            f"{user} has no use for, as it {verb} through the HTTP gateway; of Kafka's settings it takes "
            f"{', '.join(taken) or 'none'}.")
    unknown = sorted(name for name in given if name not in known)
    if unknown:
        raise InvalidOptionError(f"Unknown option(s) {', '.join(repr(name) for name in unknown)} for the odradek "
                                 f"{user}; it knows: {', '.join(names)}.")


def gateway_option(given: Mapping[str, str]) -> tuple[str, ...]:
    urls = gateway_urls(given.get("gateway", ""))
    if not urls:
        raise InvalidOptionError("Option 'gateway' is required: the URL of an Odradek HTTP gateway "
                                 "(several comma separated), e.g. http://localhost:8080.")
    return tuple(urls)


def _subscription(given: Mapping[str, str]) -> Subscription:
    chosen = [name for name in ("subscribe", "subscribepattern", "assign") if name in given]
    if len(chosen) != 1:
        what = "none was" if not chosen else f"{' and '.join(_KNOWN[name] for name in chosen)} were"
        raise InvalidOptionError("Exactly one of the options 'subscribe', 'subscribePattern' and 'assign' must "
                                 f"be given to the odradek source; {what} given.")
    value = given[chosen[0]].strip()
    if chosen[0] == "subscribe":
        topics = tuple(dict.fromkeys(topic.strip() for topic in value.split(",") if topic.strip()))
        if not topics:
            raise InvalidOptionError("Option 'subscribe' names no topic: give a comma separated list of topics.")
        return Subscription(topics=topics)
    if chosen[0] == "subscribepattern":
        if not value:
            raise InvalidOptionError("Option 'subscribePattern' is empty: give a regular expression of topics.")
        try:
            re.compile(value)
        except re.error as error:
            raise InvalidOptionError(f"Option 'subscribePattern' {value!r} is not a regular expression: "
                                     f"{error}.") from None
        return Subscription(pattern=value)
    assigned = _json_object("assign", value)
    partitions = []
    for topic, numbers in assigned.items():
        if not isinstance(numbers, list) or not all(isinstance(n, int) and n >= 0 for n in numbers):
            raise InvalidOptionError(f"Option 'assign' must map topics to lists of partition numbers, like "
                                     f'{{"topicA": [0, 1]}}; got {value!r}.')
        partitions.extend((topic, n) for n in numbers)
    if not partitions:
        raise InvalidOptionError(f"Option 'assign' names no partition: {value!r}.")
    return Subscription(assigned=tuple(dict.fromkeys(partitions)))


def _json_object(name: str, value: str) -> dict[str, Any]:
    try:
        parsed = json.loads(value)
    except ValueError as error:
        raise InvalidOptionError(f"Option {_KNOWN.get(name.lower(), name)!r} is not valid JSON ({error}): "
                                 f"{value!r}.") from None
    if not isinstance(parsed, dict):
        raise InvalidOptionError(f"Option {_KNOWN.get(name.lower(), name)!r} must be a JSON object: {value!r}.")
    return parsed


def _per_partition(name: str, value: str) -> dict[tuple[str, int], int]:
    """{"topic": {"0": n}} -> {(topic, 0): n}."""
    result = {}
    for topic, partitions in _json_object(name, value).items():
        if not isinstance(partitions, dict):
            raise InvalidOptionError(f'Option {name!r} must map topics to {{"partition": number}} objects; '
                                     f"got {value!r}.")
        for partition, number in partitions.items():
            if not (isinstance(partition, str) and partition.isdigit()) or not isinstance(number, int) \
                    or isinstance(number, bool):
                raise InvalidOptionError(f"Option {name!r}: partition {partition!r} of {topic!r} must be a "
                                         f"partition number with an integer; got {number!r}.")
            result[(topic, int(partition))] = number
    return result


def _timestamp(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise InvalidOptionError(f"Option {name!r} must be a timestamp in ms since the epoch; got "
                                 f"{value!r}.") from None
    if number < 0:
        raise InvalidOptionError(f"Option {name!r} must be a timestamp in ms since the epoch; got {value!r}.")
    return number


def _starting(given: Mapping[str, str], streaming: bool) -> OffsetBound:
    strategy = given.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise InvalidOptionError("Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest'; got "
                                 f"{strategy!r}.")
    if "startingtimestamp" in given:
        return OffsetBound(("timestamp", _timestamp("startingTimestamp", given["startingtimestamp"])),
                           strategy=strategy)
    if "startingoffsetsbytimestamp" in given:
        stamps = _per_partition("startingOffsetsByTimestamp", given["startingoffsetsbytimestamp"])
        for (topic, partition), stamp in stamps.items():
            if stamp < 0:
                raise InvalidOptionError(f"Option 'startingOffsetsByTimestamp': the timestamp of {topic}-{partition} "
                                         f"must be a time in ms, not {stamp}.")
        return OffsetBound(None, {tp: ("timestamp", stamp) for tp, stamp in stamps.items()}, strategy=strategy,
                           specific=True)
    bound = _offsets(given, "startingOffsets", "earliest" if not streaming else "latest")
    if not streaming and (bound.default == LATEST or LATEST in bound.per_partition.values()):
        raise InvalidOptionError("Option 'startingOffsets' cannot be latest (-1) for a batch read of the odradek "
                                 "source: a batch read would be empty.")
    return bound


def _ending(given: Mapping[str, str], streaming: bool) -> OffsetBound:
    names = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
    if streaming:
        for name in names:
            if name.lower() in given:
                raise InvalidOptionError(f"Option {name!r} is not valid in a streaming read: a stream has no end.")
        return OffsetBound(LATEST)
    if "endingtimestamp" in given:
        return OffsetBound(("timestamp", _timestamp("endingTimestamp", given["endingtimestamp"])), strategy="latest")
    if "endingoffsetsbytimestamp" in given:
        stamps = _per_partition("endingOffsetsByTimestamp", given["endingoffsetsbytimestamp"])
        return OffsetBound(None, {tp: ("timestamp", stamp) for tp, stamp in stamps.items()}, strategy="latest",
                           specific=True)
    bound = _offsets(given, "endingOffsets", "latest")
    if bound.default == EARLIEST or EARLIEST in bound.per_partition.values():
        raise InvalidOptionError("Option 'endingOffsets' cannot be earliest (-2) for a batch read of the odradek "
                                 "source: the read would be empty.")
    return bound


def _offsets(given: Mapping[str, str], name: str, default: str) -> OffsetBound:
    value = given.get(name.lower(), default).strip()
    if value.lower() == "earliest":
        return OffsetBound(EARLIEST)
    if value.lower() == "latest":
        return OffsetBound(LATEST)
    offsets = _per_partition(name, value)
    for (topic, partition), offset in offsets.items():
        if offset < EARLIEST:
            raise InvalidOptionError(f"Option {name!r}: the offset of {topic}-{partition} must be an offset, -2 "
                                     f"(earliest) or -1 (latest); got {offset}.")
    return OffsetBound(None, offsets, specific=True)


def positive_option(given: Mapping[str, str], name: str) -> int | None:
    value = given.get(name.lower())
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise InvalidOptionError(f"Option {name!r} must be a positive integer; got {value!r}.")
    return number


def boolean_option(given: Mapping[str, str], name: str, default: bool) -> bool:
    value = given.get(name.lower())
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise InvalidOptionError(f"Option {name!r} must be true or false; got {value!r}.")
    return value.strip().lower() == "true"


def _isolation_level(given: Mapping[str, str]) -> str:
    values = {given[name].strip().lower() for name in ("isolationlevel", "kafka.isolation.level") if name in given}
    if len(values) > 1:
        raise InvalidOptionError("Options 'isolationLevel' and 'kafka.isolation.level' disagree.")
    level = values.pop() if values else IsolationLevel.READ_UNCOMMITTED.config_name
    if level not in ISOLATION_LEVEL_NAMES:
        raise InvalidOptionError(f"Option 'isolationLevel' must be read_uncommitted or read_committed; got {level!r}.")
    return level


def duration_ms_option(given: Mapping[str, str], name: str, default: int) -> int:
    """A Spark duration option (`15m`, `10s`, `500ms`; a plain number is ms), in ms."""
    value = given.get(name.lower())
    if value is None:
        return default
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", value.lower())
    if match is None or match.group(2) not in ("", *_DURATION_UNITS_MS):
        raise InvalidOptionError(f"Option {name!r} must be a duration such as 500ms, 10s, 15m or 1h; got {value!r}.")
    return int(int(match.group(1)) * _DURATION_UNITS_MS.get(match.group(2), 1))


def _group_id_options(given: Mapping[str, str]) -> None:
    for name in ("groupIdPrefix", "kafka.group.id"):
        if name.lower() in given and not given[name.lower()].strip():
            raise InvalidOptionError(f"Option {name!r} is empty.")
