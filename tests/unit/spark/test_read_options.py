"""The `odradek` source's read options (Spark's Kafka names, checked at planning), the offsets JSON of
the streaming reader, the rate limit, the split of offset ranges by minPartitions and their packing by
maxPartitions: pure code."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from services.clients.spark.options import EARLIEST, LATEST, InvalidOptionError, ReadOptions
from services.clients.spark.planning import OffsetRangeGroup, ReadSettings, offset_ranges, packed
from services.clients.spark.stream_reader import OdradekStreamReader, delays_batch, from_json, rate_limited, to_json

GATEWAY = {"gateway": "localhost:8080, http://other:8080/"}


def parse(streaming: bool = False, **options: str) -> ReadOptions:
    return ReadOptions.parse({name.lower(): value for name, value in {**GATEWAY, **options}.items()},
                             streaming=streaming)


def test_defaults_follow_spark_kafka_source() -> None:
    batch = parse(subscribe="a, b,a")
    assert batch.gateway == ("http://localhost:8080", "http://other:8080")
    assert batch.subscription.topics == ("a", "b")
    assert batch.starting.default == EARLIEST and batch.ending.default == LATEST
    assert batch.fail_on_data_loss and not batch.include_headers and batch.isolation_level == "read_uncommitted"
    streaming = parse(True, subscribePattern="clicks-.*")
    assert streaming.starting.default == LATEST
    assert streaming.subscription.matches("clicks-1") and not streaming.subscription.matches("xclicks-1")


def test_offsets_json_and_timestamps() -> None:
    options = parse(assign=json.dumps({"t": [0, 1]}), startingOffsets=json.dumps({"t": {"0": 5, "1": -2}}),
                    endingOffsets=json.dumps({"t": {"0": -1, "1": 9}}))
    assert options.subscription.assigned == (("t", 0), ("t", 1))
    assert options.starting.per_partition == {("t", 0): 5, ("t", 1): EARLIEST} and options.starting.specific
    assert options.ending.spec_for("t", 0) == LATEST
    by_time = parse(subscribe="t", startingOffsets="earliest", startingTimestamp="1000",
                    startingOffsetsByTimestampStrategy="latest")
    assert by_time.starting.default == ("timestamp", 1000) and by_time.starting.strategy == "latest"
    per_partition = parse(subscribe="t", startingOffsetsByTimestamp=json.dumps({"t": {"0": 7}}))
    assert per_partition.starting.per_partition == {("t", 0): ("timestamp", 7)}
    assert parse(True, subscribe="t", isolationLevel="READ_COMMITTED").isolation_level == "read_committed"


@pytest.mark.parametrize(("streaming", "options", "message"), [
    (False, {"subscribe": "t", "gateway": ""}, "'gateway' is required"),
    (False, {}, "Exactly one of the options"),
    (False, {"subscribe": "t", "subscribePattern": "x"}, "subscribe and subscribePattern were given"),
    (False, {"subscribe": " , "}, "names no topic"),
    (False, {"subscribePattern": "("}, "not a regular expression"),
    (False, {"assign": "[1]"}, "must be a JSON object"),
    (False, {"assign": '{"t": ["0"]}'}, "lists of partition numbers"),
    (False, {"assign": '{"t": [0]'}, "not valid JSON"),
    (False, {"subscribe": "t", "startingOffsets": "latest"}, "cannot be latest"),
    (False, {"subscribe": "t", "startingOffsets": '{"t": {"0": -1}}'}, "cannot be latest"),
    (False, {"subscribe": "t", "endingOffsets": "earliest"}, "cannot be earliest"),
    (False, {"subscribe": "t", "startingOffsets": '{"t": {"x": 1}}'}, "must be a partition number"),
    (False, {"subscribe": "t", "startingOffsets": '{"t": {"0": -3}}'}, "-2 (earliest) or -1 (latest)"),
    (False, {"subscribe": "t", "startingTimestamp": "soon"}, "timestamp in ms"),
    (False, {"subscribe": "t", "startingOffsetsByTimestampStrategy": "maybe"}, "'error' or 'latest'"),
    (True, {"subscribe": "t", "endingOffsets": "latest"}, "not valid in a streaming read"),
    (False, {"subscribe": "t", "minPartitions": "0"}, "positive integer"),
    (False, {"subscribe": "t", "includeHeaders": "yes"}, "true or false"),
    (False, {"subscribe": "t", "isolationLevel": "dirty"}, "read_uncommitted or read_committed"),
    (False, {"subscribe": "t", "isolationLevel": "read_committed", "kafka.isolation.level": "read_uncommitted"},
     "disagree"),
    (False, {"subscribe": "t", "kafka.fetch.max.bytes": "1"}, "Option(s) 'kafka.fetch.max.bytes': Kafka client"),
    (True, {"subscribe": "t", "minOffsetsPerTrigger": "50", "maxOffsetsPerTrigger": "10"},
     "'minOffsetsPerTrigger' (50) is higher than 'maxOffsetsPerTrigger' (10)"),
    (True, {"subscribe": "t", "maxTriggerDelay": "soon"}, "duration such as 500ms"),
    (True, {"subscribe": "t", "maxTriggerDelay": "5 weeks"}, "duration such as 500ms"),
    (False, {"subscribe": "t", "groupIdPrefix": " "}, "Option 'groupIdPrefix' is empty"),
    (False, {"subscribe": "t", "maxOffsetPerTrigger": "5"}, "Unknown option(s) 'maxoffsetpertrigger'"),
])
def test_bad_options_are_refused_with_the_option_named(streaming: bool, options: dict[str, str],
                                                        message: str) -> None:
    with pytest.raises(InvalidOptionError) as refused:
        parse(streaming, **options)
    assert message in str(refused.value)


def test_streaming_offsets_are_spark_kafka_json() -> None:
    offsets = {("t", 0): 5, ("t", 10): 7, ("u", 1): 0}
    assert to_json(offsets) == {"t": {"0": 5, "10": 7}, "u": {"1": 0}}
    assert from_json(json.loads(json.dumps(to_json(offsets)))) == offsets


def test_the_rate_limit_spreads_by_lag_and_never_passes_latest() -> None:
    start = {("t", 0): 0, ("t", 1): 100}
    latest = {("t", 0): 300, ("t", 1): 200, ("t", 2): 100}  # t-2 is new: from 0
    ends = rate_limited(start, latest, 100)
    assert ends == {("t", 0): 60, ("t", 1): 120, ("t", 2): 20}
    assert rate_limited(start, latest, 10_000) == latest
    assert rate_limited({("t", 0): 0, ("t", 1): 0}, {("t", 0): 1, ("t", 1): 1000}, 2) == {("t", 0): 1, ("t", 1): 1}


def test_min_partitions_splits_ranges_by_size() -> None:
    settings = ReadSettings(("http://g",), "c", False, True, "read_uncommitted", 1024, 1.0)
    starts = {("t", 0): 0, ("t", 1): 0, ("t", 2): 5}
    ends = {("t", 0): 900, ("t", 1): 100, ("t", 2): 5}
    plain = offset_ranges(starts, ends, settings, None)
    assert [(r.partition, r.from_offset, r.until_offset) for r in plain] == [(0, 0, 900), (1, 0, 100)]
    split = offset_ranges(starts, ends, settings, 10)
    assert len(split) >= 10
    for partition, end in ((0, 900), (1, 100)):
        pieces = sorted((r.from_offset, r.until_offset) for r in split if r.partition == partition)
        assert pieces[0][0] == 0 and pieces[-1][1] == end
        assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:], strict=False))


def test_max_partitions_packs_ranges_by_size_into_that_many_tasks() -> None:
    settings = ReadSettings(("http://g",), "c", False, True, "read_uncommitted", 1024, 1.0)
    sizes = {0: 900, 1: 100, 2: 500, 3: 450, 4: 50}
    ranges = offset_ranges({("t", p): 0 for p in sizes}, {("t", p): n for p, n in sizes.items()}, settings, None)
    assert packed(ranges, None) == ranges and packed(ranges, 5) == ranges
    groups = packed(ranges, 2)
    assert all(isinstance(group, OffsetRangeGroup) for group in groups)
    assert sorted(r.partition for group in groups for r in group.ranges) == [0, 1, 2, 3, 4]
    assert sorted(sum(r.size for r in group.ranges) for group in groups) == [1000, 1000]
    assert ReadOptions.parse({"gateway": "http://g", "subscribe": "t", "maxPartitions": "2"},
                             streaming=False).max_partitions == 2
    with pytest.raises(InvalidOptionError, match="maxPartitions"):
        ReadOptions.parse({"gateway": "http://g", "subscribe": "t", "maxPartitions": "0"}, streaming=False)


def test_task_limit_is_max_partitions_else_spark_parallelism_unless_min_partitions_is_given() -> None:
    base = {"gateway": "http://g", "subscribe": "t"}
    assert ReadOptions.parse(base, streaming=False).task_limit(2) == 2
    assert ReadOptions.parse(base, streaming=False).task_limit(None) is None
    assert ReadOptions.parse({**base, "maxPartitions": "7"}, streaming=False).task_limit(2) == 7
    assert ReadOptions.parse({**base, "minPartitions": "12"}, streaming=False).task_limit(2) is None


def test_with_parallelism_makes_a_class_that_travels_by_value_with_its_parallelism() -> None:
    from pyspark import cloudpickle

    from services.clients.spark.source import OdradekDataSource, with_parallelism

    assert with_parallelism(None) is OdradekDataSource and with_parallelism(0) is OdradekDataSource
    bound = with_parallelism(3)
    assert issubclass(bound, OdradekDataSource) and bound.name() == "odradek"
    travelled = cloudpickle.loads(cloudpickle.dumps(bound))
    assert travelled.default_parallelism == 3 and OdradekDataSource.default_parallelism is None


def test_spark_kafka_trigger_and_group_options_are_taken() -> None:
    options = parse(True, subscribe="t", minOffsetsPerTrigger="20", maxOffsetsPerTrigger="100",
                    maxTriggerDelay="30s", groupIdPrefix="etl", **{"kafka.group.id": "etl-1",
                                                                   "kafka.request.timeout.ms": "5000",
                                                                   "kafka.bootstrap.servers": "b:9092"})
    assert (options.min_offsets_per_trigger, options.max_offsets_per_trigger) == (20, 100)
    assert options.max_trigger_delay_ms == 30_000
    assert options.timeout_ms == 5000
    assert parse(True, subscribe="t").max_trigger_delay_ms == 15 * 60 * 1000
    assert parse(True, subscribe="t", timeoutMs="7000", **{"kafka.request.timeout.ms": "5000"}).timeout_ms == 7000
    for text, ms in (("250", 250), ("500ms", 500), ("2m", 120_000), ("1 h", 3_600_000), ("3min", 180_000)):
        assert parse(True, subscribe="t", maxTriggerDelay=text).max_trigger_delay_ms == ms


def test_kafka_bootstrap_servers_without_a_gateway_asks_for_one() -> None:
    with pytest.raises(InvalidOptionError, match="instead of 'kafka.bootstrap.servers'"):
        ReadOptions.parse({"subscribe": "t", "kafka.bootstrap.servers": "b:9092"}, streaming=False)


def test_min_offsets_per_trigger_holds_a_trigger_until_enough_offsets_or_the_delay() -> None:
    assert not delays_batch(3, 10, 1000, None, 0)  # the first trigger runs
    assert delays_batch(3, 10, 1000, 0, 999)
    assert not delays_batch(10, 10, 1000, 0, 10)
    assert not delays_batch(3, 10, 1000, 0, 1000)


def test_the_stream_reader_returns_its_start_while_a_trigger_is_held(monkeypatch) -> None:
    reader = OdradekStreamReader({**GATEWAY, "subscribe": "t", "minoffsetspertrigger": "10",
                                  "maxtriggerdelay": "1h"}, schema=None)
    latest = {("t", 0): 5}
    monkeypatch.setattr(reader, "_latest_offsets", lambda: dict(latest))
    assert reader.latestOffset({"t": {"0": 0}}, None) == {"t": {"0": 5}}  # the first trigger runs
    latest[("t", 0)] = 9
    assert reader.latestOffset({"t": {"0": 5}}, None) == {"t": {"0": 5}}  # 4 new offsets: held
    latest[("t", 0)] = 15
    assert reader.latestOffset({"t": {"0": 5}}, None) == {"t": {"0": 15}}  # 10 new offsets
    reader.options = replace(reader.options, max_trigger_delay_ms=0)
    latest[("t", 0)] = 16
    assert reader.latestOffset({"t": {"0": 15}}, None) == {"t": {"0": 16}}  # the delay has passed


def test_sasl_options_name_the_user_the_reads_authenticate_as_to_the_gateway():
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'
    options = ReadOptions.parse({"gateway": "http://g:8080", "subscribe": "t", "kafka.security.protocol": "SASL_SSL",
                                 "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config": jaas}, streaming=False)
    assert options.authorization == "Basic dTpw" and "dTpw" not in repr(options)
    assert ReadOptions.parse({"gateway": "g", "subscribe": "t"}, streaming=False).authorization is None
    with pytest.raises(InvalidOptionError, match="'kafka.sasl.mechanism': GSSAPI is not supported"):
        ReadOptions.parse({"gateway": "g", "subscribe": "t", "kafka.security.protocol": "SASL_PLAINTEXT",
                           "kafka.sasl.username": "u", "kafka.sasl.password": "p"}, streaming=False)
    with pytest.raises(InvalidOptionError, match="'kafka.ssl.ca.location'"):
        ReadOptions.parse({"gateway": "g", "subscribe": "t", "kafka.ssl.ca.location": "/ca.pem"}, streaming=False)
