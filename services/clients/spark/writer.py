"""The `odradek` sink: `df.write.format("odradek")` and `df.writeStream.format("odradek")`, as
Spark's Kafka sink, through the gateway's Arrow produce (`POST /v3/clusters/<id>/records`).

Options (Spark hands them over lower-cased): `gateway` (required: comma separated gateway URLs),
`topic` (the topic of every row: it overrides a `topic` column, as in Spark's Kafka sink),
`maxRequestBytes` (default 4 MiB: no POST is larger, but for a single larger record) and
`timeoutMs` (default 60000: how long a POST may take, retries on other gateways included).
`kafka.security.protocol` SASL_PLAINTEXT or SASL_SSL with `kafka.sasl.mechanism` and
`kafka.sasl.username` / `kafka.sasl.password` or `kafka.sasl.jaas.config` name the user the
requests authenticate as to the gateway (HTTP Basic). `checkpointLocation` and `path` (which Spark
adds) are ignored; `kafka.bootstrap.servers` and anything else are refused when the query is
planned (`options.InvalidOptionError`, worded as the source's), as are columns of the wrong type
(Spark's Kafka sink's messages): `value` string or binary (required), `key` string or binary,
`topic` string (required unless the option is given), `partition` int, `headers`
array<struct<key: string, value: binary>>. Other columns are not sent.

Each task POSTs its Arrow batches (only the columns above) in IPC streams of at most
`maxRequestBytes`, in order; a POST that fails raises its error (a `KafkaError` named as the
gateway names it: `MESSAGE_TOO_LARGE (10): ...`), which fails the task. The commit message of a
task counts its records per topic-partition; the driver's commit logs a summary. Delivery is
at-least-once, as Spark's Kafka sink: a retried task writes its records again.

Streaming writes take `exactlyOnce=true` (off by default) for exactly-once delivery to
read_committed readers: each task writes its rows in a Kafka transaction that the driver commits
with the micro-batch (`txn_sink`, decisions in `exactly_once`), with `transactionalIdPrefix`
(default `odradek-sink-` and a hash of the checkpoint location: it must differ between queries)
and `transactionTimeoutMs` (default 900000: how long a prepared transaction may wait for the
driver). It needs the `checkpointLocation` option (a path, or a Hadoop-compatible filesystem's URI:
`batch_log`), where it keeps its batch records. Batch writes refuse it. Its Producer and Admin
reach the brokers directly and take Kafka's client security settings with Spark's `kafka.` prefix
(the `kafka.sasl.*` options above and `kafka.ssl.*`, which other writes refuse).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyspark.sql.datasource as spark_datasource
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from services.clients.admin_types import PreparedTransaction
from services.clients.spark.gateway import GatewayClient
from services.clients.spark.options import (
    DEFAULT_TIMEOUT_MS,
    KAFKA_SECURITY_OPTION_NAMES,
    InvalidOptionError,
    boolean_option,
    check_option_names,
    gateway_authorization,
    gateway_option,
    kafka_client_settings,
    positive_option,
)
from services.common.http_wire import ARROW_STREAM

if TYPE_CHECKING:
    from services.clients.spark.txn_sink import BatchCommitter, TransactionalSettings

logger = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
WRITE_OPTION_NAMES = ("gateway", "topic", "maxRequestBytes", "timeoutMs", "exactlyOnce", "transactionalIdPrefix",
                      "transactionTimeoutMs", *KAFKA_SECURITY_OPTION_NAMES)
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000
# Spark's own keys that reach a sink's options without the user naming them (`save(path)`, a stream's).
_IGNORED = frozenset({"path", "checkpointlocation", "queryname"})
SENT_COLUMNS = ("key", "value", "topic", "partition", "headers")
HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
BYTES_TYPES = (StringType(), BinaryType())
ROWS_PER_ARROW_BATCH = 10_000  # when Spark hands over Rows (a pyspark without Arrow writers)

# pyspark >= 4.0 has the Arrow batch writer, >= 4.1 the Arrow stream writer; before, Rows.
BatchWriterBase = getattr(spark_datasource, "DataSourceArrowWriter", spark_datasource.DataSourceWriter)
StreamWriterBase = getattr(spark_datasource, "DataSourceStreamArrowWriter", spark_datasource.DataSourceStreamWriter)


@dataclass(frozen=True)
class WriteOptions:
    gateway_urls: tuple[str, ...]
    topic: str | None
    max_request_bytes: int
    timeout_ms: int
    exactly_once: bool = False
    transactional_id_prefix: str | None = None
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS
    checkpoint_location: str | None = None
    client_settings: tuple[tuple[str, str], ...] = ()  # Kafka's client security settings, for exactlyOnce
    authorization: str | None = field(default=None, repr=False)  # of the gateway requests


def write_options(options: Mapping[str, str]) -> WriteOptions:
    """The sink's options from Spark's (lower-cased) ones; InvalidOptionError naming what is wrong."""
    given = {str(name).lower(): value for name, value in options.items() if str(name).lower() not in _IGNORED}
    check_option_names(given, WRITE_OPTION_NAMES, "sink")
    topic = given.get("topic")
    if topic is not None and not str(topic).strip():
        raise InvalidOptionError("Option 'topic' is empty.")
    exactly_once = boolean_option(given, "exactlyOnce", False)
    checkpoint = next((str(value) for name, value in options.items() if str(name).lower() == "checkpointlocation"),
                      None)
    if exactly_once and checkpoint is None:
        raise InvalidOptionError("Option 'exactlyOnce' needs the 'checkpointLocation' option: the sink keeps its "
                                 "batch records there.")
    prefix = given.get("transactionalidprefix")
    if prefix is not None and not str(prefix).strip():
        raise InvalidOptionError("Option 'transactionalIdPrefix' is empty.")
    client_settings = kafka_client_settings(given)
    tls_settings = [name for name, _ in client_settings if name.startswith("ssl.")]
    if tls_settings and not exactly_once:
        raise InvalidOptionError(f"Option(s) {', '.join(repr('kafka.' + name) for name in tls_settings)}: only "
                                 "exactlyOnce writes use them (they reach the brokers directly); other writes go "
                                 "through the HTTP gateway.")
    return WriteOptions(gateway_option(given), None if topic is None else str(topic).strip(),
                        positive_option(given, "maxRequestBytes") or DEFAULT_MAX_REQUEST_BYTES,
                        positive_option(given, "timeoutMs") or DEFAULT_TIMEOUT_MS, exactly_once,
                        None if prefix is None else str(prefix).strip(),
                        positive_option(given, "transactionTimeoutMs") or DEFAULT_TRANSACTION_TIMEOUT_MS, checkpoint,
                        client_settings, gateway_authorization(given))


def _unsupported(name: str, kind: DataType, wanted: str) -> InvalidOptionError:
    return InvalidOptionError(f"{name} attribute unsupported type {kind.simpleString()}. {name} must be a(n) {wanted}")


def check_schema(schema: StructType, topic_option: str | None) -> None:
    """Spark's Kafka sink's checks of the columns written; InvalidOptionError with its message."""
    types = {column.name: column.dataType for column in schema.fields}
    if "value" not in types:
        raise InvalidOptionError("Required attribute 'value' not found")
    if topic_option is None and "topic" not in types:
        raise InvalidOptionError("topic option required when no 'topic' attribute is present. Use the topic option for "
                         "setting a topic.")
    wanted = {"value": (BYTES_TYPES, "string or binary"), "key": (BYTES_TYPES, "string or binary"),
              "topic": ((StringType(),), "string"), "partition": ((IntegerType(),), "int"),
              "headers": ((HEADERS_TYPE,), HEADERS_TYPE.simpleString())}
    for name, (accepted, described) in wanted.items():
        if name == "topic" and topic_option is not None:
            continue  # the option overrides the column
        kind = types.get(name)
        if kind is not None and not any(_same_shape(kind, each) for each in accepted):
            raise _unsupported(name, kind, described)


def _same_shape(kind: DataType, wanted: DataType) -> bool:
    """Equal but for nullability (Spark's `DataType.equalsStructurally`)."""
    if isinstance(kind, ArrayType) and isinstance(wanted, ArrayType):
        return _same_shape(kind.elementType, wanted.elementType)
    if isinstance(kind, StructType) and isinstance(wanted, StructType):
        return len(kind.fields) == len(wanted.fields) and all(
            a.name == b.name and _same_shape(a.dataType, b.dataType)
            for a, b in zip(kind.fields, wanted.fields, strict=True))
    return type(kind) is type(wanted)


@dataclass
class OdradekCommitMessage(WriterCommitMessage):
    """What one task wrote: records per (topic, partition); with `exactlyOnce`, the transaction
    holding them, which the driver ends."""

    records: int = 0
    partitions: dict[tuple[str, int], int] = field(default_factory=dict)
    prepared: PreparedTransaction | None = None

    def add(self, answer: Mapping[str, Any]) -> None:
        self.records += int(answer["records"])
        for written in answer["partitions"]:
            tp = (written["topic"], int(written["partition"]))
            self.partitions[tp] = self.partitions.get(tp, 0) + int(written["records"])


def summary(messages: Iterable[WriterCommitMessage | None]) -> str:
    done = [message for message in messages if isinstance(message, OdradekCommitMessage)]
    partitions: dict[tuple[str, int], int] = {}
    for message in done:
        for tp, count in message.partitions.items():
            partitions[tp] = partitions.get(tp, 0) + count
    topics = sorted({topic for topic, _ in partitions})
    return (f"{sum(message.records for message in done)} records by {len(done)} tasks to {len(partitions)} "
            f"partitions of {', '.join(topics) or 'no topic'}")


class RequestCutter:
    """Gathers Arrow batches into IPC streams of at most `max_bytes` (but for one larger row)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.pending: list[pa.RecordBatch] = []
        self.pending_bytes = 0

    def add(self, batch: pa.RecordBatch) -> Iterator[bytes]:
        """The streams completed by adding `batch`."""
        if batch.num_rows == 0:
            return
        size = batch.nbytes
        if self.pending and self.pending_bytes + size > self.max_bytes:
            yield from self.flush()
        self.pending.append(batch)
        self.pending_bytes += size
        if self.pending_bytes >= self.max_bytes:
            yield from self.flush()

    def flush(self) -> Iterator[bytes]:
        """The streams of everything pending."""
        if not self.pending:
            return
        table = pa.Table.from_batches(self.pending)
        self.pending, self.pending_bytes = [], 0
        yield from self._streams(table)

    def _streams(self, table: pa.Table) -> Iterator[bytes]:
        stream = ipc_stream(table)
        if len(stream) <= self.max_bytes or table.num_rows <= 1:
            yield stream
            return
        half = table.num_rows // 2
        yield from self._streams(table.slice(0, half))
        yield from self._streams(table.slice(half))


def ipc_stream(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


class GatewaySink:
    """The writing of one task: its batches POSTed to the gateway."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options
        self.columns = [name for name in SENT_COLUMNS if not (name == "topic" and options.topic is not None)]

    def write(self, batches: Iterable[pa.RecordBatch]) -> OdradekCommitMessage:
        message = OdradekCommitMessage()
        cutter = RequestCutter(self.options.max_request_bytes)
        with GatewayClient(list(self.options.gateway_urls), self.options.timeout_ms / 1000,
                           authorization=self.options.authorization) as client:
            path = client.cluster_path("/records")
            for batch in batches:
                for stream in cutter.add(self._sent(batch)):
                    message.add(self._post(client, path, stream))
            for stream in cutter.flush():
                message.add(self._post(client, path, stream))
        return message

    def _sent(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        names = [name for name in self.columns if name in batch.schema.names]
        return batch.select(names)

    def _post(self, client: GatewayClient, path: str, stream: bytes) -> Mapping[str, Any]:
        params = {"topic": self.options.topic} if self.options.topic is not None else None
        return client.request("POST", path, params=params, headers={"Content-Type": ARROW_STREAM},
                              content=stream).json()


def arrow_batches(items: Iterator[Any], schema: StructType) -> Iterator[pa.RecordBatch]:
    """Spark's input as Arrow batches: as they come from an Arrow writer, or built from Rows."""
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema: pa.Schema | None = None
    rows: list[Any] = []
    for item in items:
        if isinstance(item, pa.RecordBatch):
            yield item
            continue
        rows.append(item)
        if len(rows) >= ROWS_PER_ARROW_BATCH:
            arrow_schema = arrow_schema or to_arrow_schema(schema)
            yield pa.RecordBatch.from_pylist([row.asDict() for row in rows], schema=arrow_schema)
            rows = []
    if rows:
        arrow_schema = arrow_schema or to_arrow_schema(schema)
        yield pa.RecordBatch.from_pylist([row.asDict() for row in rows], schema=arrow_schema)


class OdradekSink:
    """What the batch and the stream writer share: the checks when planned, the writing of a task."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = write_options(options)
        check_schema(schema, self.options.topic)
        self.schema = schema

    def write(self, iterator: Iterator[Any]) -> OdradekCommitMessage:
        return GatewaySink(self.options).write(arrow_batches(iterator, self.schema))


class OdradekBatchWriter(OdradekSink, BatchWriterBase):
    """`df.write.format("odradek")`: checks options and columns when the query is planned."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        super().__init__(options, schema)
        if self.options.exactly_once:
            raise InvalidOptionError("Option 'exactlyOnce' is for streaming writes (writeStream); a batch write "
                                     "is at-least-once.")

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        logger.info("odradek: wrote %s", summary(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        logger.warning("odradek: write aborted after %s (written records stay: at-least-once)", summary(messages))


class OdradekStreamWriter(OdradekSink, StreamWriterBase):
    """`df.writeStream.format("odradek")`: each micro-batch's rows, at least once, or exactly once
    with `exactlyOnce` (created on the driver, it first rolls forward a batch a crash left half
    committed: see `txn_sink`)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        super().__init__(options, schema)
        self.transactional: TransactionalSettings | None = None
        if self.options.exactly_once:
            from services.clients.spark.txn_sink import transactional_settings

            self.transactional = transactional_settings(self.options)
            self._committer().recover()

    def _committer(self) -> BatchCommitter:
        from services.clients.spark.txn_sink import BatchCommitter

        return BatchCommitter(self.transactional)

    def write(self, iterator: Iterator[Any]) -> OdradekCommitMessage:
        if self.transactional is None:
            return super().write(iterator)
        from services.clients.spark.txn_sink import TransactionalTaskWriter

        batches = arrow_batches(iterator, self.schema)
        partitions, prepared = TransactionalTaskWriter(self.transactional, self.options.topic).write(batches)
        return OdradekCommitMessage(sum(partitions.values()), partitions, prepared)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 - Spark's name
        if self.transactional is not None:
            self._committer().commit(_prepared(messages), batchId)
        logger.info("odradek: batch %d wrote %s", batchId, summary(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        if self.transactional is not None:
            self._committer().abort(_prepared(messages), batchId)
            logger.warning("odradek: batch %d aborted after %s (its transactions aborted)", batchId,
                           summary(messages))
            return
        logger.warning("odradek: batch %d aborted after %s (written records stay: at-least-once)", batchId,
                       summary(messages))


def _prepared(messages: Iterable[WriterCommitMessage | None]) -> list[PreparedTransaction | None]:
    return [message.prepared for message in messages if isinstance(message, OdradekCommitMessage)]
