"""The `odradek` sink's checks made when a query is planned (options, columns), its cutting of Arrow
batches into requests, its commit messages, and its Rows-to-Arrow fallback: pure code, no JVM."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import Row
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType

from services.clients.spark.options import InvalidOptionError
from services.clients.spark.writer import (
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_TIMEOUT_MS,
    HEADERS_TYPE,
    OdradekCommitMessage,
    RequestCutter,
    arrow_batches,
    check_schema,
    summary,
    write_options,
)


def schema(**columns) -> StructType:
    return StructType([StructField(name, kind) for name, kind in columns.items()])


def test_options_arrive_lower_cased_and_take_defaults():
    options = write_options({"gateway": "gw1:8080, http://gw2:8081/", "topic": "events"})
    assert options.gateway_urls == ("http://gw1:8080", "http://gw2:8081")
    assert (options.topic, options.max_request_bytes, options.timeout_ms) == (
        "events", DEFAULT_MAX_REQUEST_BYTES, DEFAULT_TIMEOUT_MS)
    tuned = write_options({"gateway": "gw", "maxrequestbytes": "65536", "timeoutMs": "5000",
                           "checkpointlocation": "/tmp/cp", "path": "ignored"})
    assert (tuned.topic, tuned.max_request_bytes, tuned.timeout_ms) == (None, 65536, 5000)


@pytest.mark.parametrize(("options", "says"), [
    ({"kafka.bootstrap.servers": "broker:9092"}, "give its URLs in the 'gateway' option"),
    ({"gateway": "gw", "subscribe": "t", "acks": "all"}, "Unknown option(s) 'acks', 'subscribe' for the odradek "
                                                        "sink; it knows: gateway, topic, maxRequestBytes, timeoutMs, "
                                                        "exactlyOnce, transactionalIdPrefix, transactionTimeoutMs, "
                                                        "kafka.security.protocol, kafka.sasl.mechanism, "),
    ({}, "Option 'gateway' is required"),
    ({"gateway": " , "}, "Option 'gateway' is required"),
    ({"gateway": "gw", "topic": " "}, "Option 'topic' is empty"),
    ({"gateway": "gw", "maxrequestbytes": "4MB"}, "Option 'maxRequestBytes' must be a positive integer; got '4MB'"),
    ({"gateway": "gw", "timeoutms": "0"}, "Option 'timeoutMs' must be a positive integer; got '0'"),
])
def test_bad_options_are_refused_with_what_is_wrong(options: dict, says: str):
    with pytest.raises(InvalidOptionError) as refused:
        write_options(options)
    assert says in str(refused.value)


def test_columns_of_spark_kafka_sink_types_are_accepted():
    check_schema(schema(key=StringType(), value=BinaryType(), topic=StringType(), partition=IntegerType(),
                        headers=HEADERS_TYPE, offset=LongType(), anything=LongType()), None)
    check_schema(schema(value=StringType()), "events")
    check_schema(schema(value=StringType(), topic=LongType()), "events")  # the option overrides the column
    nullable_headers = ArrayType(StructType([StructField("key", StringType(), False),
                                             StructField("value", BinaryType(), True)]), False)
    check_schema(schema(value=BinaryType(), headers=nullable_headers), "events")


@pytest.mark.parametrize(("columns", "topic", "says"), [
    ({"key": BinaryType()}, "t", "Required attribute 'value' not found"),
    ({"value": BinaryType()}, None, "topic option required when no 'topic' attribute is present"),
    ({"value": IntegerType()}, "t", "value attribute unsupported type int. value must be a(n) string or binary"),
    ({"value": BinaryType(), "key": LongType()}, "t", "key attribute unsupported type bigint"),
    ({"value": BinaryType(), "topic": BinaryType()}, None, "topic attribute unsupported type binary. topic must be "
                                                           "a(n) string"),
    ({"value": BinaryType(), "partition": LongType()}, "t", "partition attribute unsupported type bigint. partition "
                                                            "must be a(n) int"),
    ({"value": BinaryType(), "headers": ArrayType(StructType([StructField("key", StringType()),
                                                              StructField("value", StringType())]))}, "t",
     "headers attribute unsupported type array<struct<key:string,value:string>>. headers must be a(n) "
     "array<struct<key:string,value:binary>>"),
])
def test_columns_of_other_types_are_refused_with_spark_kafka_sink_messages(columns: dict, topic: str | None,
                                                                            says: str):
    with pytest.raises(InvalidOptionError) as refused:
        check_schema(schema(**columns), topic)
    assert says in str(refused.value)


def batch(values: list[bytes]) -> pa.RecordBatch:
    return pa.record_batch({"value": pa.array(values, pa.binary())})


def rows_of(streams: list[bytes]) -> list[bytes]:
    return [value for stream in streams for value in pa.ipc.open_stream(stream).read_all().column("value").to_pylist()]


def test_batches_are_cut_into_requests_of_at_most_max_bytes_in_order():
    cutter = RequestCutter(8192)
    values = [b"%05d" % n + b"x" * 95 for n in range(1000)]
    streams = []
    for start in range(0, 1000, 70):
        streams += cutter.add(batch(values[start:start + 70]))
    streams += cutter.flush()
    assert rows_of(streams) == values
    assert all(len(stream) <= 8192 for stream in streams) and len(streams) > 10
    assert list(cutter.flush()) == []


def test_small_batches_share_a_request_and_a_larger_row_goes_alone():
    cutter = RequestCutter(1 << 20)
    streams = [stream for n in range(50) for stream in cutter.add(batch([b"%d" % n]))] + list(cutter.flush())
    assert len(streams) == 1 and rows_of(streams) == [b"%d" % n for n in range(50)]
    big = RequestCutter(2048)
    values = [b"a", b"b" * 5000, b"c"]
    streams = list(big.add(batch(values))) + list(big.flush())
    assert rows_of(streams) == values and any(len(stream) > 5000 for stream in streams)


def test_commit_messages_count_records_per_partition():
    first, second = OdradekCommitMessage(), OdradekCommitMessage()
    first.add({"records": 3, "partitions": [{"topic": "a", "partition": 0, "first_offset": 0, "last_offset": 1,
                                             "records": 2},
                                            {"topic": "b", "partition": 1, "first_offset": 5, "last_offset": 5,
                                             "records": 1}]})
    second.add({"records": 2, "partitions": [{"topic": "a", "partition": 0, "first_offset": 2, "last_offset": 3,
                                              "records": 2}]})
    assert first.partitions == {("a", 0): 2, ("b", 1): 1}
    assert summary([first, second, None]) == "5 records by 2 tasks to 2 partitions of a, b"
    assert summary([]) == "0 records by 0 tasks to 0 partitions of no topic"


def test_rows_become_arrow_batches_when_spark_hands_over_rows():
    spark_schema = schema(key=StringType(), value=BinaryType(), partition=IntegerType())
    rows = [Row(key=None if n % 2 else f"k{n}", value=b"v%d" % n, partition=n % 3) for n in range(25)]
    batches = list(arrow_batches(iter(rows), spark_schema))
    table = pa.Table.from_batches(batches)
    assert table.column("value").to_pylist() == [b"v%d" % n for n in range(25)]
    assert table.column("key").to_pylist() == [None if n % 2 else f"k{n}" for n in range(25)]
    arrow = batch([b"x"])
    assert list(arrow_batches(iter([arrow]), spark_schema)) == [arrow]
