"""`Producer`: Kafka 3.x producer semantics over Odradek's gRPC brokers.

    with Producer(bootstrap_servers="127.0.0.1:9092", linger_ms=5) as producer:
        future = producer.send("events", b"payload", key=b"user-1")
        metadata = future.get(timeout=10)   # RecordMetadata(topic, partition, offset, ...)
        producer.flush()

`send` runs interceptors, then the serializers, picks the partition (see `partitioner`), and
appends the record to the accumulator (a record with a bytes value and nothing else, with no
interceptors or serializers configured, goes straight into the open batch of its topic's sticky
partition); a background sender thread batches, sends, retries and completes the futures, and a
metadata thread keeps leaders fresh. `send` blocks only while it
waits for a topic's metadata or for `buffer.memory`, each bounded by `max.block.ms`. Problems
found before the record is queued are raised by `send` itself (and counted as record errors;
interceptors see them in `on_acknowledgement(None, error)`): a topic or partition missing from
the metadata after `max.block.ms` (`KafkaTimeoutError`), no buffer memory after `max.block.ms`
(`BufferExhaustedError`), a record over `max.request.size` or `buffer.memory`
(`RecordTooLargeError`), a value that is not bytes, and any send after `close`
(`ProducerClosedError`). Everything later reaches the future and the callback.

Transactions (`transactional_id` set; Kafka 3.x's API, each call blocking up to `max.block.ms`):

    producer.init_transactions()           # once: fences older instances, aborts their leftovers
    producer.begin_transaction()
    producer.send("out", b"...")
    producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
    producer.commit_transaction()          # or abort_transaction()

`prepare_transaction()` instead of `commit_transaction()` sends the records and leaves the
transaction open for another process to end (`Admin.end_transaction`).

`send` is refused outside a transaction. After an abortable error (a failed send inside the
transaction) only `abort_transaction` is allowed, then a new transaction may begin; after a fatal
one (ProducerFencedError, ...) only `close`. See `transaction_manager` and `transactions`.

`flush(timeout)` waits for every record sent before it; `close(timeout)` flushes, then stops the
threads (after `timeout` seconds whatever is still pending fails). Safe to share between threads.
`add_batch_listener(listener)` has the sender thread hand each answered batch to `listener` as a
`BatchResult` (timestamps, values, base offset, error): per-record accounting at a per-batch cost.

Where this differs from the Java producer, and why:
- errors found before a record is queued are raised rather than returned as a failed future;
- the batches queued for a partition leave merged into one RecordBatch (up to `max.request.size`),
  so a backlog costs few large requests: Python pays per call, not per byte;
- gRPC does not keep concurrent calls in order, so without idempotence a partition has one batch
  in flight at a time (its records stay in order, retries included); with idempotence up to
  `max.in.flight.requests.per.connection`, an overtaken batch being resent after the one before it;
- where Kafka bumps the producer epoch, this producer asks for a new producer id, which is what
  Odradek's InitProducerId gives an idempotent producer.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from time import time_ns as _time_ns
from typing import Any

from services.clients.admin_types import PreparedTransaction
from services.clients.cluster import Cluster
from services.clients.metadata import Metadata
from services.clients.producer.accumulator import RecordAccumulator
from services.clients.producer.batch import RECORD_OVERHEAD_BYTES
from services.clients.producer.buffer_pool import BufferPool
from services.clients.producer.config import load_producer_config
from services.clients.producer.errors import (
    KafkaTimeoutError,
    ProducerClosedError,
    RecordTooLargeError,
    TransactionStateError,
)
from services.clients.producer.futures import BatchResult, FutureRecordMetadata, ProducerRecord
from services.clients.producer.metadata_updater import MetadataUpdater
from services.clients.producer.metrics import ProducerMetrics
from services.clients.producer.partitioner import (
    UNKNOWN_PARTITION,
    BuiltInPartitioner,
    DefaultPartitioner,
    TopicInfo,
)
from services.clients.producer.sender import Sender
from services.clients.producer.transaction_manager import TransactionManager
from services.clients.producer.transactions import TransactionCalls
from services.clients.transport import ChannelPool, Deadline
from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.errors import KafkaError, error_for_code
from services.common.hashing import partition_for_key
from services.common.records.batch import HEADER_SIZE
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

_client_ids = itertools.count(1)
HEADER_OVERHEAD_BYTES = 2


class Producer:
    """Sends records to Odradek topics; see the module docstring."""

    def __init__(self, config: Mapping[str, Any] | None = None, *, clock: Clock = SYSTEM_CLOCK, **overrides: Any):
        self.config, plugins = load_producer_config(config, overrides)
        config = self.config
        self.client_id = config.client_id or f"producer-{next(_client_ids)}"
        self._clock = clock
        self._time_ms = clock.time_ms
        self._max_block_ms = config.max_block_ms
        self._max_record_bytes = min(config.max_request_size, config.buffer_memory) - HEADER_SIZE
        self._key_serializer = plugins.key_serializer
        self._value_serializer = plugins.value_serializer
        self._interceptors = plugins.interceptors
        self._partitioner = plugins.partitioner
        built_in = isinstance(self._partitioner, BuiltInPartitioner)
        self._sticky = self._partitioner.sticky if built_in else None
        # records with only a value take the hot path when nothing else has to look at them
        self._plain = (self._sticky is not None and clock is SYSTEM_CLOCK and not self._interceptors
                       and self._key_serializer is None and self._value_serializer is None)
        self._ignore_keys = config.partitioner_ignore_keys or (built_in and self._partitioner.ignores_keys)
        self._hash_keys = isinstance(self._partitioner, DefaultPartitioner)
        self._metrics = ProducerMetrics()
        self._topic_infos: dict[str, TopicInfo] = {}
        self._closed = False
        self._close_lock = threading.Lock()
        self._sender: Sender | None = None
        self._pool = ChannelPool.from_config(config, clock)
        self._metadata = Metadata.from_config(config, clock=clock)
        self._txn: TransactionCalls | None = None
        if config.transactional_id:
            self._plain = False  # every send is checked against the transaction's state
            self._txn = TransactionCalls(TransactionManager(config.transactional_id, config.transaction_timeout_ms),
                                         self._metadata, self._pool, request_timeout_ms=config.request_timeout_ms,
                                         retry_backoff_ms=config.retry_backoff_ms)
        self._buffer = BufferPool(config.buffer_memory, on_wait=self._wake_sender)
        self._accumulator = RecordAccumulator(
            batch_size=config.batch_size, linger_ms=config.linger_ms, retry_backoff_ms=config.retry_backoff_ms,
            delivery_timeout_ms=config.delivery_timeout_ms, pool=self._buffer, sticky=self._sticky,
            idempotent=config.enable_idempotence, max_in_flight_per_partition=_partition_depth(config),
            on_new_batch=self._wake_sender, transactional=self._txn is not None, clock=clock)
        self._updater = MetadataUpdater(self._metadata, self._pool, config.request_timeout_ms,
                                        self._on_metadata_update, f"odradek-producer-metadata | {self.client_id}")
        self._sender = Sender(config, self._accumulator, self._metadata, self._pool, self._metrics,
                              request_metadata_update=self._updater.wakeup, interceptors=self._interceptors,
                              transactions=self._txn, clock=clock,
                              name=f"odradek-producer-network-thread | {self.client_id}")
        self._append_value = self._accumulator.append_value
        self._updater.start()
        self._sender.start()

    # ------------------------------------------------------------------ sending

    def send(self, topic: str, value: Any, key: Any = None, partition: int | None = None,
             timestamp_ms: int | None = None, headers: Iterable[tuple[str, Any]] | Mapping[str, Any] | None = None,
             callback=None) -> FutureRecordMetadata:
        """Queues one record; returns a future of its `RecordMetadata`.

        `callback(metadata, exception)` runs on the sender thread when the record is answered;
        exactly one of its arguments is None.
        """
        if (self._plain and key is None and partition is None and headers is None and callback is None
                and timestamp_ms is None and value.__class__ is bytes):
            size = len(value) + RECORD_OVERHEAD_BYTES
            if size <= self._max_record_bytes:
                future = self._append_value(topic, value, _time_ns() // 1_000_000, size)
                if future is not None:
                    return future
        return self._send(topic, value, key, partition, timestamp_ms, headers, callback)

    def _send(self, topic, value, key, partition, timestamp_ms, headers, callback) -> FutureRecordMetadata:
        try:
            if self._closed:
                raise ProducerClosedError("cannot send after the producer is closed")
            if self._txn is not None:
                self._txn.manager.check_send()
            if self._interceptors:
                topic, value, key, partition, timestamp_ms, headers = self._on_send(
                    ProducerRecord(topic, value, key, partition, timestamp_ms, headers))
            original_key, original_value = key, value
            if self._key_serializer is not None:
                key = self._key_serializer(topic, key)
            elif key is not None and key.__class__ is not bytes:
                key = _as_bytes("key", key)
            if self._value_serializer is not None:
                value = self._value_serializer(topic, value)
            elif value is not None and value.__class__ is not bytes:
                value = _as_bytes("value", value)
            info = self._topic_infos.get(topic)
            waited_ms = 0
            if info is None or (partition is not None and not 0 <= partition < info.num_partitions):
                info, waited_ms = self._wait_on_metadata(topic, partition)
            size = RECORD_OVERHEAD_BYTES
            if value is not None:
                size += len(value)
            if key is not None:
                size += len(key)
            if headers is not None:
                headers, header_bytes = _checked_headers(headers)
                size += header_bytes
            if size > self._max_record_bytes:
                raise self._too_large(size)
            if timestamp_ms is None:
                timestamp_ms = self._time_ms()
            elif timestamp_ms < 0:
                raise ValueError(f"invalid timestamp {timestamp_ms}: timestamps must not be negative")
            if partition is None:
                if key is None or self._ignore_keys:
                    partition = UNKNOWN_PARTITION if self._sticky is not None else self._partition(
                        topic, original_key, key, original_value, value, info)
                elif self._hash_keys:
                    partition = partition_for_key(key, info.num_partitions)
                else:
                    partition = self._partition(topic, original_key, key, original_value, value, info)
            return self._accumulator.append(topic, partition, timestamp_ms, key, value, headers, callback, size,
                                            info, self._max_block_ms - waited_ms)
        except BaseException as error:
            self._metrics.record_error_total += 1
            for interceptor in self._interceptors:
                try:
                    interceptor.on_acknowledgement(None, error)
                except Exception:
                    logger.exception("interceptor %r failed in on_acknowledgement", interceptor)
            raise

    def add_batch_listener(self, listener: Callable[[BatchResult], None]) -> None:
        """Calls `listener(result)` on the sender thread for every batch of records answered from now
        on, after their callbacks: the timestamps, values and outcome of a whole batch in one call,
        so that accounting for every record costs one call per batch rather than a callback each
        (records sent without a callback keep the fast path of `send`). As with callbacks, a batch's
        futures are done, and `flush` may return, just before its listeners run; once `close`
        returns, every listener has seen every batch."""
        self._sender.add_batch_listener(listener)

    def _on_send(self, record: ProducerRecord) -> ProducerRecord:
        for interceptor in self._interceptors:
            try:
                record = interceptor.on_send(record)
            except Exception:  # as Kafka: an interceptor's failure is logged, the record goes on
                logger.exception("interceptor %r failed in on_send", interceptor)
        return record

    def _partition(self, topic: str, key: Any, key_bytes: bytes | None, value: Any, value_bytes: bytes | None,
                   info: TopicInfo) -> int:
        partitioner = self._partitioner
        if isinstance(partitioner, BuiltInPartitioner):
            partition = partitioner.choose(topic, key_bytes, info)
        else:
            partition = partitioner.partition(topic, key, key_bytes, value, value_bytes, self._metadata.cluster)
        if not isinstance(partition, int) or not 0 <= partition < info.num_partitions:
            raise ValueError(f"partitioner {partitioner!r} chose partition {partition!r} of {topic}, which has "
                             f"{info.num_partitions} partitions")
        return partition

    def _too_large(self, size: int) -> RecordTooLargeError:
        size += HEADER_SIZE
        if size > self.config.max_request_size:
            return RecordTooLargeError(f"the record is {size} bytes when serialized, more than max.request.size "
                                       f"({self.config.max_request_size})")
        return RecordTooLargeError(f"the record is {size} bytes when serialized, more than buffer.memory "
                                   f"({self.config.buffer_memory})")

    # ------------------------------------------------------------------ metadata

    def _wait_on_metadata(self, topic: str, partition: int | None,
                          max_wait_ms: float | None = None) -> tuple[TopicInfo, int]:
        """Blocks until `topic` (and `partition`) are in the metadata; returns (info, ms waited)."""
        if partition is not None and partition < 0:
            raise ValueError(f"invalid partition {partition} for topic {topic}")
        max_wait_ms = self._max_block_ms if max_wait_ms is None else max_wait_ms
        deadline = Deadline(max_wait_ms, self._clock)
        started = self._clock.monotonic_ms()
        self._metadata.add_topics(topic)
        while True:
            info = TopicInfo.of(self._metadata.cluster, topic)
            if info is not None:
                self._topic_infos[topic] = info
                if partition is None or partition < info.num_partitions:
                    return info, self._clock.monotonic_ms() - started
            code = self._metadata.topic_error(topic)
            if code and not error_for_code(code).retriable:
                raise KafkaError.from_code(code, f"metadata for topic {topic}: {error_for_code(code).description}")
            refused = self._metadata.authentication_error
            if refused is not None:
                raise KafkaError(str(refused), error=refused.error)
            if deadline.expired:
                if info is None:
                    last_error = self._metadata.last_error  # e.g. a TLS handshake the servers refused
                    raise KafkaTimeoutError(f"Topic {topic} not present in metadata after {max_wait_ms:g} ms."
                                            + (f" The last metadata request failed: {last_error}" if last_error
                                               else ""))
                raise KafkaTimeoutError(f"Partition {partition} of topic {topic} with partition count "
                                        f"{info.num_partitions} is not present in metadata after {max_wait_ms:g} ms.")
            if self._closed:
                raise ProducerClosedError("the producer was closed while waiting for metadata")
            version = self._metadata.request_update()
            self._updater.wakeup()
            self._metadata.await_update(version, deadline.remaining_ms())

    def _on_metadata_update(self, cluster: Cluster) -> None:
        infos = {}
        for topic in self._metadata.topics:
            info = TopicInfo.of(cluster, topic)
            if info is not None:
                infos[topic] = info
        self._topic_infos = infos
        self._wake_sender()

    def _wake_sender(self) -> None:
        if self._sender is not None:
            self._sender.wakeup()

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition numbers, waiting up to `max.block.ms` for its metadata."""
        if self._closed:
            raise ProducerClosedError("the producer is closed")
        info = self._topic_infos.get(topic)
        if info is None:
            info, _ = self._wait_on_metadata(topic, None)
        return list(range(info.num_partitions))

    # ------------------------------------------------------------------ transactions

    def init_transactions(self) -> None:
        """Registers `transactional.id` with its coordinator: gets the producer id and a new epoch,
        which fences any older producer with the same id and ends its open transaction."""
        txn = self._transactions("init_transactions")
        txn.manager.begin_init()
        producer_id, epoch = txn.init_producer_id(Deadline(self._max_block_ms, self._clock))
        txn.manager.initialized(producer_id, epoch)
        self._wake_sender()

    def begin_transaction(self) -> None:
        """Starts a transaction: the records sent until it ends are committed or aborted together."""
        self._transactions("begin_transaction").manager.begin()

    def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_metadata: Any) -> None:
        """Commits a consumer group's `offsets` ({partition: offset or OffsetAndMetadata}) as part of
        the transaction; `group_metadata` is `Consumer.group_metadata()`, which fences zombie members."""
        from services.clients.consumer.records import OffsetAndMetadata

        txn = self._transactions("send_offsets_to_transaction")
        txn.manager.check_in_transaction("send_offsets_to_transaction")
        if not offsets:
            return  # as Kafka: nothing to add to the transaction
        wanted = {TopicPartition(*tp): value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
                  for tp, value in offsets.items()}
        deadline = Deadline(self._max_block_ms, self._clock)
        txn.add_offsets(group_metadata.group_id, deadline)
        txn.txn_offset_commit(group_metadata, wanted, deadline)

    def commit_transaction(self) -> None:
        """Sends every record of the transaction, then commits it. Raises the abortable error of a
        failed send (then only `abort_transaction` is allowed); after a timeout it may be called again."""
        txn = self._transactions("commit_transaction")
        txn.manager.begin_commit()
        deadline = Deadline(self._max_block_ms, self._clock)
        self._flush_by(deadline, "commit_transaction")
        txn.manager.raise_if_error()
        if txn.manager.transaction_started:
            txn.end_txn(True, deadline)
        txn.manager.complete_transaction()

    def prepare_transaction(self) -> PreparedTransaction:
        """Sends every record of the transaction and leaves it open, for another process to commit
        or abort with `Admin.end_transaction` (as a two-phase commit's first phase): answers the
        transactional id, producer id, epoch and partitions it needs. The producer should then be
        closed; a later `init_transactions` of the same transactional id aborts what is still open."""
        txn = self._transactions("prepare_transaction")
        txn.manager.check_in_transaction("prepare_transaction")
        self._flush_by(Deadline(self._max_block_ms, self._clock), "prepare_transaction")
        txn.manager.raise_if_error()
        manager = txn.manager
        return PreparedTransaction(manager.transactional_id, manager.producer_id, manager.producer_epoch,
                                   frozenset(manager.partitions_in_txn))

    def abort_transaction(self) -> None:
        """Aborts the transaction: records not sent yet fail with TransactionAbortedError, the
        coordinator writes ABORT markers, and the epoch is bumped when a failed send requires it.

        The bump of a transaction the coordinator knows goes with the abort (EndTxn with
        bump_epoch): the markers carry the new epoch, so a batch of the old one that reaches its
        partition late is fenced there instead of joining the next transaction. Without one (nothing
        was added, or the epoch is exhausted and the answer keeps it) InitProducerId bumps it."""
        txn = self._transactions("abort_transaction")
        manager = txn.manager
        manager.begin_abort()
        self._wake_sender()
        deadline = Deadline(self._max_block_ms, self._clock)
        self._flush_by(deadline, "abort_transaction")
        if manager.transaction_started:
            bump = manager.epoch_bump_required
            epoch = txn.end_txn(False, deadline, bump_epoch=bump)
            if bump and epoch > manager.producer_epoch:
                manager.initialized(manager.producer_id, epoch)
        if manager.epoch_bump_required:
            manager.initialized(*txn.init_producer_id(deadline, bump=True))
        manager.complete_transaction()

    def _transactions(self, operation: str) -> TransactionCalls:
        if self._txn is None:
            raise TransactionStateError(f"Cannot call {operation}: transactional.id is not set")
        if self._closed:
            raise ProducerClosedError(f"Cannot call {operation} after the producer is closed")
        return self._txn

    def _flush_by(self, deadline: Deadline, operation: str) -> None:
        try:
            self.flush(deadline.remaining_ms() / 1000)
        except KafkaTimeoutError as error:
            raise KafkaTimeoutError(f"{operation}: the transaction's records were not all sent within "
                                    f"max.block.ms ({self._max_block_ms} ms)") from error

    # ------------------------------------------------------------------ flush, close, metrics

    def flush(self, timeout: float | None = None) -> None:
        """Waits until every record sent before this call is answered; `timeout` in seconds."""
        if threading.current_thread() is self._sender:
            raise RuntimeError("flush() from a send callback would wait for itself")
        deadline = None if timeout is None else self._clock.monotonic_ms() + timeout * 1000
        self._accumulator.begin_flush()
        self._wake_sender()
        try:
            for batch in self._accumulator.incomplete():
                remaining = None if deadline is None else max(0.0, (deadline - self._clock.monotonic_ms()) / 1000)
                if not batch.wait(remaining):
                    raise KafkaTimeoutError(f"flush did not complete within {timeout:g} s")
        finally:
            self._accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Sends what is pending and stops; after `timeout` seconds, fails what is left."""
        with self._close_lock:
            first_close = not self._closed
            self._closed = True
            self._plain = False  # from now on every send goes the way that refuses it
        sender = self._sender
        if threading.current_thread() is sender:
            logger.warning("close() from a send callback cannot wait for pending records; closing forcefully")
            self._accumulator.close()
            sender.force_close()
            return
        if first_close:
            self._accumulator.close()
            sender.initiate_close()
        sender.join(timeout)
        if sender.is_alive():
            sender.force_close()
            sender.join(self.config.request_timeout_ms / 1000)
        if not first_close:
            return
        self._updater.stop()
        self._updater.join(self.config.request_timeout_ms / 1000)
        self._buffer.close()
        self._pool.close()
        for plugin in (self._partitioner, *self._interceptors):
            close = getattr(plugin, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    logger.exception("closing %r failed", plugin)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def metrics(self) -> dict[str, float]:
        """Kafka-named counters: records sent, retried and failed, batches, bytes, requests, buffer."""
        return self._metrics.snapshot(
            buffer_total_bytes=self._buffer.total_bytes, buffer_available_bytes=self._buffer.available_bytes,
            waiting_threads=self._buffer.waiting_threads,
            bufferpool_wait_time_ns_total=self._buffer.wait_time_ns_total,
            requests_in_flight=self._sender.requests_in_flight)

    @property
    def producer_id(self) -> int:
        """The idempotent producer's id (-1 before it has one, or without idempotence)."""
        return self._sender.producer_id


def _partition_depth(config) -> int:
    """Batches of one partition in flight at once. gRPC does not keep concurrent calls in order (the
    broker may append a later request first), so without sequence numbers to catch that a partition
    sends one batch at a time, which keeps its records in order even across retries; the queued
    batches behind it leave merged in the next request. An idempotent producer pipelines up to
    max.in.flight.requests.per.connection batches and repairs an overtaken batch by resending it."""
    return config.max_in_flight_requests_per_connection if config.enable_idempotence else 1


def _as_bytes(kind: str, data: Any) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"the {kind} must be bytes or str, not {type(data).__name__}; configure {kind}.serializer "
                    f"to send other types")


def _checked_headers(headers: Iterable[tuple[str, Any]] | Mapping[str, Any]) -> tuple[list, int]:
    """[(name, bytes or None)] from pairs or a mapping (str values become UTF-8), and their size."""
    checked = []
    size = 0
    for name, value in headers.items() if isinstance(headers, Mapping) else headers:
        if not isinstance(name, str):
            raise TypeError(f"header names must be str, not {type(name).__name__}")
        if value is not None and value.__class__ is not bytes:
            value = _as_bytes("header value", value)
        checked.append((name, value))
        size += len(name) + (len(value) if value is not None else 0) + HEADER_OVERHEAD_BYTES
    return checked, size
