"""The producer's sender thread (Kafka's Sender): from accumulated batches to acknowledged records.

Each round: apply the produce answers that arrived, make sure an idempotent producer has its
producer id, ask the accumulator which leaders are ready, expire batches past
`delivery.timeout.ms`, drain one request per ready leader that has fewer than
`max.in.flight.requests.per.connection` requests unanswered, and send each as an asynchronous
call of the transport (`ChannelPool.send`) bounded by `request.timeout.ms` (several requests are
in flight at once; an answer wakes the thread). Then sleep until a batch may become ready
(`linger.ms`, `retry.backoff.ms`), a new batch was started, or an answer arrived. Callbacks,
interceptors and batch listeners run on this thread: when a batch is done, each record's
interceptors and callback, then each listener once per run of records answered together.

Answers, per partition:

- success, or DUPLICATE_SEQUENCE_NUMBER: the records are done (acks=0: done when sent, offset -1);
- MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE for a batch of several records: it is split and the
  parts are sent instead, in order;
- a retriable error (a failed call counts as NETWORK_EXCEPTION or REQUEST_TIMED_OUT): sent again
  after `retry.backoff.ms`, as long as `retries` and `delivery.timeout.ms` allow; errors saying
  metadata is stale also request a metadata update;
- anything else fails the records.

Idempotence, as Kafka 3.x's idempotent producer: InitProducerId before the first batch; a batch's
sequence numbers are fixed when it is first drained and kept across retries (the same bytes are
resent). OUT_OF_ORDER_SEQUENCE_NUMBER is retried: for a batch sent while an earlier one of its
partition was unanswered it only means the earlier one failed (or was overtaken: gRPC does not
order concurrent calls), and the batch goes again after it; for a batch sent with nothing before
it unanswered it means the broker lost the producer's state, and the producer id is renewed
first, unless a batch after it was acknowledged already: then it was written (a broker takes a
producer's sequences only in order) and is done, as a duplicate is. UNKNOWN_PRODUCER_ID renews
it too. A sequenced batch that fails for good gives its sequence numbers back when it is its
partition's last and surely not written; otherwise the producer id is renewed (an epoch bump in
Kafka: this broker answers with a new id), once nothing is in flight, and every partition starts
again at sequence 0.

Transactions (a `TransactionCalls` given): the producer id and epoch are the transaction
manager's (from `init_transactions`), never renewed here. Each round first adds to the
transaction, in one AddPartitionsToTxn, every partition holding data that is not in it yet
(again after `retry.backoff.ms` while the coordinator asks to retry), and drains only partitions
already added; their batches carry the transactional bit and the request the transactional id.
A batch failing for good makes the transaction abortable (fatal when the producer is fenced or
unauthorized); where the idempotent producer would renew its id, the next abort bumps the epoch.
While the transaction is aborting or in error, queued batches are failed instead of sent.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from services.clients.cluster import Cluster, Node
from services.clients.metadata import Metadata
from services.clients.partition_requests import parse_produce, produce_request
from services.clients.producer.accumulator import NO_DELAY_LIMIT_MS, PartitionQueue, RecordAccumulator
from services.clients.producer.batch import SEQUENCE_MODULUS, ProducerBatch, WireBatch
from services.clients.producer.config import ProducerConfig
from services.clients.producer.errors import KafkaTimeoutError, TransactionAbortedError
from services.clients.producer.futures import BatchResult
from services.clients.producer.metrics import ProducerMetrics
from services.clients.producer.transactions import TransactionCalls
from services.clients.transport import BROKER, ChannelPool, Deadline, PendingCall, call_any_node
from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.errors import Errors, KafkaError, error_for_code
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.records import Compression
from services.common.shared_types import NO_OFFSET
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

MAX_POLL_MS = 1000
TOO_LARGE = frozenset({Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE})
# partition errors after which the records may be in the log all the same
MAYBE_WRITTEN = frozenset({Errors.REQUEST_TIMED_OUT, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND})


class Sender(threading.Thread):
    """Sends what the accumulator gathers; see the module docstring."""

    def __init__(self, config: ProducerConfig, accumulator: RecordAccumulator, metadata: Metadata,
                 pool: ChannelPool, metrics: ProducerMetrics, *, request_metadata_update: Callable[[], None],
                 interceptors: Sequence[Any] = (), transactions: TransactionCalls | None = None,
                 clock: Clock = SYSTEM_CLOCK, name: str = "odradek-producer"):
        super().__init__(name=name, daemon=True)
        self._accumulator = accumulator
        self._metadata = metadata
        self._pool = pool
        self._metrics = metrics
        self._request_metadata_update = request_metadata_update
        self._interceptors = tuple(interceptors)
        self._batch_listeners: tuple[Callable[[BatchResult], None], ...] = ()
        self._clock = clock
        self._acks = config.required_acks
        self._idempotent = config.enable_idempotence
        self._retries = config.retries
        self._retry_backoff_ms = config.retry_backoff_ms
        self._request_timeout_ms = config.request_timeout_ms
        self._delivery_timeout_ms = config.delivery_timeout_ms
        self._max_request_size = config.max_request_size
        self._max_in_flight = config.max_in_flight_requests_per_connection
        self._compression = Compression.parse(config.compression_type)
        self._wakeup = threading.Event()
        self._answers: deque = deque()
        self._in_flight_requests: dict[str, int] = {}
        self._routes_cluster: Cluster | None = None
        self._leaders: dict[TopicPartition, Node] = {}
        self._partitions_by_node: dict[int, list[TopicPartition]] = {}
        self._running = True
        self._forced = False
        self.producer_id = -1
        self.producer_epoch = -1
        self._renew_producer_id = False
        self._next_producer_id_attempt_ms = 0
        self.fatal_error: KafkaError | None = None
        self._txn = transactions
        self._transactional_id = transactions.manager.transactional_id if transactions is not None else None
        self._next_add_partitions_ms = 0

    # ------------------------------------------------------------------ control

    def wakeup(self) -> None:
        self._wakeup.set()

    def initiate_close(self) -> None:
        """Stop taking part in new work: send what is queued, then end."""
        self._running = False
        self._wakeup.set()

    def force_close(self) -> None:
        """End now; whatever is not done fails."""
        self._forced = True
        self._running = False
        self._wakeup.set()

    def add_batch_listener(self, listener: Callable[[BatchResult], None]) -> None:
        self._batch_listeners += (listener,)

    @property
    def requests_in_flight(self) -> int:
        return sum(self._in_flight_requests.values())

    def run(self) -> None:
        try:
            while self._running:
                self._run_once()
            # what is queued goes out, and calls still open are answered (acks=0 ones too: closing
            # the channel earlier could cancel them before they reach the broker)
            while not self._forced and (self._accumulator.has_incomplete() or self.requests_in_flight):
                self._run_once()
        except Exception as exc:
            logger.exception("the producer's sender thread failed")
            self._abort(KafkaError(f"the producer's sender thread failed: {exc!r}"))
            return
        if self._forced:
            self._abort(KafkaError("the producer was closed forcefully before the record was acknowledged",
                                   error=Errors.NETWORK_EXCEPTION))

    def _run_once(self) -> None:
        self._wakeup.clear()
        self._handle_answers()
        now = self._clock.monotonic_ms()
        if self.fatal_error is not None:
            self._abort(self.fatal_error)
            self._wakeup.wait(MAX_POLL_MS / 1000)
            return
        allowed = None
        if self._txn is not None:
            allowed, delay = self._transaction_round(now)
            if allowed is None:
                self._wakeup.wait(min(delay, MAX_POLL_MS) / 1000)
                return
        elif self._idempotent and not self._producer_id_ready(now):
            delay = self._expire(now)
            retry_in = max(self._next_producer_id_attempt_ms - now, 1)
            self._wakeup.wait(min(delay, retry_in, MAX_POLL_MS) / 1000)
            return
        else:
            delay = MAX_POLL_MS
        delay = min(delay, self._send_producer_data(now, allowed))
        self._wakeup.wait(min(delay, MAX_POLL_MS) / 1000)

    # ------------------------------------------------------------------ transactions

    def _transaction_round(self, now: int) -> tuple[frozenset | None, int]:
        """(partitions that may be drained, or None to send nothing this round; ms to wait at most)."""
        manager = self._txn.manager
        if manager.has_error or manager.is_aborting:
            error = manager.last_error if manager.has_error else TransactionAbortedError(
                "Failing batch since transaction was aborted")
            self._fail_undrained(error)
            return None, self._expire(now)
        if manager.producer_id < 0 or not manager.sending_allowed():
            return None, self._expire(now)
        self._use_producer_id(manager.producer_id, manager.producer_epoch)
        delay = MAX_POLL_MS
        to_add = manager.partitions_to_add(self._accumulator.partitions_with_data())
        if to_add:
            if now >= self._next_add_partitions_ms:
                retry_in = self._txn.add_partitions(to_add, Deadline(self._request_timeout_ms, self._clock))
                if manager.has_error:
                    return None, 0
                self._next_add_partitions_ms = self._clock.monotonic_ms() + retry_in
            delay = max(self._next_add_partitions_ms - now, 1)
        return manager.partitions_in_txn, delay

    def _use_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        if (producer_id, producer_epoch) == (self.producer_id, self.producer_epoch):
            return
        if self.producer_id >= 0:
            self._accumulator.reset_sequences()
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        logger.info("transactional id %s: producer id %d, epoch %d", self._transactional_id, producer_id,
                    producer_epoch)

    def _fail_undrained(self, error: KafkaError) -> None:
        """Fails the batches not sent yet (the transaction is aborting or in error)."""
        for wire in self._accumulator.abort_undrained():
            if wire.base_sequence >= 0:
                self._txn.manager.require_epoch_bump()
            self._complete(wire, NO_OFFSET, -1, error)

    # ------------------------------------------------------------------ producer id

    def _producer_id_ready(self, now: int) -> bool:
        if self.producer_id >= 0 and not self._renew_producer_id:
            return True
        if self.requests_in_flight or now < self._next_producer_id_attempt_ms:
            return False
        request = common_pb2.InitProducerIdRequest(producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                                                   transaction_timeout_ms=0)
        self._metrics.producer_id_requests_total += 1
        try:
            answer = call_any_node(self._metadata, self._pool, "InitProducerId", request,
                                   Deadline(self._request_timeout_ms, self._clock))
            error = (None if answer.error_code == Errors.NONE
                     else KafkaError.from_code(answer.error_code, answer.error_message))
        except KafkaError as exc:
            error = exc
        if error is not None:
            if not error.retriable and error.code != Errors.NETWORK_EXCEPTION:
                logger.error("InitProducerId failed for good: %s", error)
                self.fatal_error = error
            else:
                logger.info("InitProducerId failed, will retry: %s", error)
            self._next_producer_id_attempt_ms = self._clock.monotonic_ms() + self._retry_backoff_ms
            return False
        renewed = self.producer_id >= 0
        self.producer_id, self.producer_epoch = answer.producer_id, answer.producer_epoch
        self._renew_producer_id = False
        if renewed:
            self._accumulator.reset_sequences()
        logger.info("producer id %d, epoch %d", self.producer_id, self.producer_epoch)
        return True

    def _renew(self, reason: str) -> None:
        if self._txn is not None:  # the abort of the transaction bumps the epoch instead
            logger.info("transactional id %s needs an epoch bump: %s", self._transactional_id, reason)
            self._txn.manager.require_epoch_bump()
            return
        if not self._renew_producer_id:
            logger.info("renewing producer id %d: %s", self.producer_id, reason)
        self._renew_producer_id = True

    # ------------------------------------------------------------------ sending

    def _routes(self, cluster: Cluster) -> None:
        if cluster is self._routes_cluster:
            return
        leaders: dict[TopicPartition, Node] = {}
        by_node: dict[int, list[TopicPartition]] = {}
        for topic, partitions in cluster.topics.items():
            for info in partitions:
                node = cluster.nodes.get(info.leader) if info.leader >= 0 else None
                if node is not None:
                    tp = TopicPartition(topic, info.partition)
                    leaders[tp] = node
                    by_node.setdefault(node.node_id, []).append(tp)
        self._routes_cluster, self._leaders, self._partitions_by_node = cluster, leaders, by_node

    def _send_producer_data(self, now: int, allowed: frozenset | None = None) -> int:
        self._routes(self._metadata.cluster)
        ready, delay, unknown_leaders = self._accumulator.ready(self._leaders, now, allowed)
        if unknown_leaders:
            self._metadata.add_topics(*unknown_leaders)
            self._metadata.request_update()
            self._request_metadata_update()
        delay = min(delay, self._expire(now))
        nodes = [node for node in ready if self._in_flight_requests.get(node.address, 0) < self._max_in_flight]
        if nodes:
            drained = self._accumulator.drain(self._partitions_by_node, nodes, self._max_request_size, now,
                                              self.producer_id, self.producer_epoch, allowed)
            for node, wires in drained.items():
                self._send_request(node, wires, now)
            if drained:
                return 0  # a request is full at max.request.size: more may be ready behind it
        return delay

    def _send_request(self, node: Node, wires: list[WireBatch], now: int) -> None:
        batches: dict[TopicPartition, bytes] = {}
        for wire in wires:
            batches[wire.tp] = wire.encode(self._compression)
            self._metrics.batch_bytes_total += len(batches[wire.tp])
            self._metrics.records_in_requests_total += wire.record_count
            if wire.attempts > 1:
                self._metrics.record_retry_total += wire.record_count
        self._metrics.batch_total += len(wires)
        self._metrics.request_total += 1
        request = produce_request(batches, self._acks, self._request_timeout_ms, self._transactional_id)
        address = node.address
        self._in_flight_requests[address] = self._in_flight_requests.get(address, 0) + 1
        entry = (node, wires, now)
        try:
            call = self._pool.send(address, BROKER, "Produce", request, self._request_timeout_ms)
        except Exception as exc:  # the pool is closed, or the request could not even be started
            self._answers.append((entry, exc))
            return
        call.add_done_callback(lambda done: self._on_answer(entry, done))
        if self._acks == 0:
            for wire in wires:
                self._complete(wire, NO_OFFSET, -1, None)

    def _on_answer(self, entry, call: PendingCall) -> None:
        """On a gRPC thread: hand the answer to the sender thread."""
        self._answers.append((entry, call))
        self._wakeup.set()

    # ------------------------------------------------------------------ answers

    def _handle_answers(self) -> None:
        while self._answers:
            (node, wires, sent_ms), outcome = self._answers.popleft()
            self._in_flight_requests[node.address] -= 1
            now = self._clock.monotonic_ms()
            self._metrics.request_answered(now - sent_ms)
            failure: KafkaError | None = None
            parsed: dict = {}
            if isinstance(outcome, Exception):  # the request never left
                failure = KafkaError(f"Produce to {node.address} could not be sent: {outcome!r}",
                                     error=Errors.NETWORK_EXCEPTION)
            else:
                response, failure = outcome.outcome()
                if failure is None:
                    parsed = parse_produce(response)
            for wire in wires:
                queue = self._accumulator.queue_of(wire.tp)
                if wire not in queue.in_flight:  # already failed by a forced close or a fatal error
                    continue
                queue.in_flight.remove(wire)
                if self._acks == 0:
                    continue
                if failure is not None:
                    self._on_error(queue, wire, failure.code, failure, now, maybe_written=True)
                    continue
                answer = parsed.get(wire.tp)
                if answer is None:
                    error = KafkaError(f"{node.address} did not answer for {wire.tp}",
                                       error=Errors.UNKNOWN_SERVER_ERROR)
                    self._on_error(queue, wire, Errors.UNKNOWN_SERVER_ERROR, error, now, maybe_written=True)
                    continue
                code, result = answer
                if code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER and self._written_before_acked(queue, wire):
                    logger.info("%r was written before batches acknowledged after it: done", wire)
                    code = Errors.DUPLICATE_SEQUENCE_NUMBER
                if code in (Errors.NONE, Errors.DUPLICATE_SEQUENCE_NUMBER):
                    if self._idempotent and wire.base_sequence >= 0 and _sequence_after(
                            wire.last_sequence, queue.last_acked_sequence):
                        queue.last_acked_sequence = wire.last_sequence
                    self._complete(wire, result.base_offset, result.log_append_time_ms, None)
                else:
                    error = KafkaError.from_code(code, result.error_message or error_for_code(code).description)
                    self._on_error(queue, wire, code, error, now, maybe_written=code in MAYBE_WRITTEN)

    def _written_before_acked(self, queue: PartitionQueue, wire: WireBatch) -> bool:
        """Whether a batch refused as out of order was in fact written: a broker takes a producer's
        sequences only in order, so a batch of this producer id whose sequences come before one
        already acknowledged was written, by an attempt whose answer was lost (its retry is then
        too old for the leader's cache of the producer's last 5 batches). Kafka's producer never
        lets such a retry fall that far behind; this one's timed-out calls can."""
        return (self._idempotent and self._txn is None and wire.base_sequence >= 0
                and wire.producer_id == self.producer_id and queue.last_acked_sequence >= 0
                and _sequence_after(queue.last_acked_sequence, wire.last_sequence))

    def _on_error(self, queue: PartitionQueue, wire: WireBatch, code: int, error: KafkaError, now: int,
                  maybe_written: bool) -> None:
        if code in TOO_LARGE:
            parts = wire.split()
            if parts:
                logger.info("%s refused %r as too large; sending it in %d parts", wire.tp, wire, len(parts))
                self._metrics.batch_split_total += 1
                self._give_back_sequence(queue, wire, written=False)
                for part in parts:
                    self._accumulator.reenqueue(part, now)
                return
        spec = error_for_code(code)
        if spec.invalid_metadata:
            self._metadata.request_update()
            self._request_metadata_update()
        retry_at = self._retry_time(queue, wire, code, spec.retriable, now)
        if retry_at is not None:
            logger.debug("retrying %r after %s", wire, error)
            self._accumulator.reenqueue(wire, retry_at)
            return
        if self._idempotent and wire.base_sequence >= 0:
            self._give_back_sequence(queue, wire, written=maybe_written)
        if self._txn is not None:
            self._txn.manager.batch_failed(code, error)
        self._complete(wire, NO_OFFSET, -1, error)

    def _retry_time(self, queue: PartitionQueue, wire: WireBatch, code: int, retriable: bool,
                    now: int) -> int | None:
        """When to send `wire` again, or None to fail it."""
        if now - wire.created_ms >= self._delivery_timeout_ms or wire.attempts > self._retries:
            return None
        if self._idempotent and wire.base_sequence >= 0:
            if code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER:
                if not wire.sent_as_first:
                    return now  # an earlier batch failed or was overtaken: resend right after it
                if self._txn is not None:
                    return None  # the transaction must be aborted (with an epoch bump)
                self._renew(f"{wire.tp} lost the producer's sequence (OUT_OF_ORDER_SEQUENCE_NUMBER)")
                return now + self._retry_backoff_ms
            if code == Errors.UNKNOWN_PRODUCER_ID:
                if self._txn is not None:
                    return None
                self._renew(f"{wire.tp} does not know the producer id")
                return now + self._retry_backoff_ms
        return now + self._retry_backoff_ms if retriable else None

    def _give_back_sequence(self, queue: PartitionQueue, wire: WireBatch, written: bool) -> None:
        """A sequenced batch is gone: reuse its numbers if that is safe, else renew the producer id."""
        if wire.base_sequence < 0:
            return
        end = (wire.base_sequence + wire.record_count) % SEQUENCE_MODULUS
        others = any(w.base_sequence >= 0 for w in queue.in_flight) or any(
            w.base_sequence >= 0 and w is not wire for w in queue.retries)
        if not written and not others and queue.next_sequence == end and not self._renew_producer_id:
            queue.next_sequence = wire.base_sequence
        else:
            self._renew(f"batch {wire!r} failed and may have left a gap in the sequence of {wire.tp}")
        wire.clear_sequence()

    def _expire(self, now: int) -> int:
        expired, next_expiry = self._accumulator.expire(now)
        for wire in expired:
            queue = self._accumulator.queue_of(wire.tp)
            elapsed = now - wire.created_ms
            error = KafkaTimeoutError(f"Expiring {wire.record_count} record(s) for {wire.tp}: {elapsed} ms has "
                                      f"passed since batch creation")
            if self._idempotent and wire.base_sequence >= 0:
                self._give_back_sequence(queue, wire, written=True)
            if self._txn is not None:
                self._txn.manager.batch_failed(Errors.REQUEST_TIMED_OUT, error)
            self._complete(wire, NO_OFFSET, -1, error)
        return next_expiry if next_expiry < NO_DELAY_LIMIT_MS else MAX_POLL_MS

    # ------------------------------------------------------------------ completion

    def _complete(self, wire: WireBatch, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        finished = wire.complete(base_offset, log_append_time, error)
        if error is None:
            self._metrics.record_send_total += wire.record_count
        else:
            self._metrics.record_error_total += wire.record_count
        if finished:
            self._accumulator.batches_done(finished)
            for batch in finished:
                self._run_callbacks(batch)
                if self._batch_listeners:
                    self._notify_listeners(batch)

    def _run_callbacks(self, batch: ProducerBatch) -> None:
        callbacks = dict(batch.callbacks) if batch.callbacks else {}
        indexes = range(len(batch.values)) if self._interceptors else sorted(callbacks)
        for index in indexes:
            metadata, error = batch.metadata_or_error(index)
            for interceptor in self._interceptors:
                try:
                    interceptor.on_acknowledgement(metadata, error)
                except Exception:
                    logger.exception("interceptor %r failed in on_acknowledgement", interceptor)
            callback = callbacks.get(index)
            if callback is not None:
                try:
                    callback(metadata, error)
                except Exception:
                    logger.exception("a send callback failed")

    def _notify_listeners(self, batch: ProducerBatch) -> None:
        for result in batch.results():
            for listener in self._batch_listeners:
                try:
                    listener(result)
                except Exception:
                    logger.exception("batch listener %r failed", listener)

    def _abort(self, error: KafkaError) -> None:
        """Fails every record not yet answered (a forced close or a fatal error)."""
        for wire in self._accumulator.abort_undrained():
            self._complete(wire, NO_OFFSET, -1, error)
        for queue in self._accumulator.queues():
            for wire in list(queue.in_flight):
                queue.in_flight.remove(wire)
                self._complete(wire, NO_OFFSET, -1, error)


def _sequence_after(sequence: int, other: int) -> bool:
    """Whether `sequence` comes after `other` (sequences wrap at 2^31; -1 is before everything)."""
    if other < 0:
        return sequence >= 0
    distance = (sequence - other) % SEQUENCE_MODULUS
    return 0 < distance < SEQUENCE_MODULUS // 2
