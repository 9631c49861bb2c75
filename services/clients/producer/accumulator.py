"""The record accumulator (Kafka's RecordAccumulator): per-partition queues of batches between
`send` and the sender thread.

`append` adds a record to its partition's open batch under one lock; the common case is two
list appends and a future (`append_value` is that case alone, for records with only a value going
to the sticky partition: the hot path of `send`). A record that does not fit starts a new batch,
which first takes
`max(batch.size, record)` bytes from `buffer.memory` (blocking up to `max.block.ms`, outside
the lock). For records left to the sticky partitioner (partition -1) a new batch is also where
the sticky partition moves on, as in Kafka's `onNewBatch`.

`ready` says which leaders have something to send: a partition is ready when its first batch
is full, has lingered `linger.ms`, or a flush, close or memory shortage is under way; a batch
being retried is ready once `retry.backoff.ms` has passed. `drain` then builds, per ready
leader, the batches of one request: one per partition, starting at a rotating partition so none
starves, up to `max.request.size`. The queued batches of a partition go out together as one
wire batch (so a backlog leaves in few large requests); retried batches go first, alone and in
their original order.

A partition has at most `max_in_flight_per_partition` batches in flight (one until its first
batch under the current producer id is acknowledged). With idempotence, a drained batch gets its
producer id, epoch and base sequence here; a retried batch is only resent
when no earlier batch of its partition is unanswered, and no new batch leaves a partition while
one of its retries is unanswered. A transactional producer's batches carry the transactional
bit, and `ready`/`drain` take only the partitions already added to the transaction (`allowed`).
Queue contents, sequences and in-flight lists belong to the
sender thread, except `batches`/`open`, which `append` shares under the lock.
"""

from __future__ import annotations

import bisect
import threading
from collections import deque
from collections.abc import Callable, Container, Iterable, Mapping

from services.clients.cluster import Node
from services.clients.producer.batch import SEQUENCE_MODULUS, MergedSize, ProducerBatch, WireBatch
from services.clients.producer.buffer_pool import BufferPool
from services.clients.producer.errors import ProducerClosedError
from services.clients.producer.futures import FutureRecordMetadata
from services.clients.producer.partitioner import StickyPartitionCache, TopicInfo
from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.records.batch import HEADER_SIZE
from services.common.topic_partition import TopicPartition

NO_DELAY_LIMIT_MS = 1 << 62
_new_future = object.__new__  # a future without a call to __init__, on the hot path


class PartitionQueue:
    """One partition's queued batches, retries, batches in flight and sequence state."""

    __slots__ = ("tp", "batches", "open", "retries", "in_flight", "next_sequence", "last_acked_sequence",
                 "next_order")

    def __init__(self, tp: TopicPartition):
        self.tp = tp
        self.batches: deque[ProducerBatch] = deque()  # not yet drained; the last may be open
        self.open: ProducerBatch | None = None  # the batch appends go to
        self.retries: list[WireBatch] = []  # waiting to be sent again, in order
        self.in_flight: list[WireBatch] = []
        self.next_sequence = 0
        self.last_acked_sequence = -1
        self.next_order = 0

    def has_pending(self) -> bool:
        return bool(self.batches or self.retries)


class RecordAccumulator:
    """Batches per partition; see the module docstring."""

    def __init__(self, *, batch_size: int, linger_ms: int, retry_backoff_ms: int, delivery_timeout_ms: int,
                 pool: BufferPool, sticky: StickyPartitionCache | None = None, idempotent: bool = False,
                 max_in_flight_per_partition: int = 1, on_new_batch: Callable[[], None] | None = None,
                 transactional: bool = False, clock: Clock = SYSTEM_CLOCK):
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.pool = pool
        self.idempotent = idempotent
        self.transactional = transactional
        self.max_in_flight_per_partition = max_in_flight_per_partition
        self._sticky = sticky
        self._sticky_partitions: dict[str, int] = sticky._partitions if sticky is not None else {}
        self._on_new_batch = on_new_batch
        self._clock = clock
        self.lock = threading.Lock()
        self._acquire, self._release = self.lock.acquire, self.lock.release  # cheaper than `with` per record
        self._topics: dict[str, list[PartitionQueue]] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._flushes = 0
        self._closed = False
        self._drain_index: dict[int, int] = {}

    # ------------------------------------------------------------------ appending

    def append(self, topic: str, partition: int, timestamp: int, key: bytes | None, value: bytes | None,
               headers: list | None, callback: Callable | None, size: int, info: TopicInfo,
               max_block_ms: float) -> FutureRecordMetadata:
        """Adds one record (partition -1: the sticky partition) and returns its future."""
        with self.lock:
            queues = self._topics.get(topic)
            if queues is not None:
                chosen = partition if partition >= 0 else self._sticky_partitions.get(topic, -1)
                batch = queues[chosen].open if 0 <= chosen < len(queues) else None
                if batch is not None and batch.size + size <= self.batch_size:
                    return batch.append(timestamp, key, value, headers, callback, size)
        return self._append_new_batch(topic, partition, timestamp, key, value, headers, callback, size, info,
                                      max_block_ms)

    def append_value(self, topic: str, value: bytes, timestamp: int, size: int) -> FutureRecordMetadata | None:
        """The hot path of `send`: a record with a value only (no key, headers or callback) into the
        open batch of the topic's sticky partition; None when that takes more (a new batch, say)."""
        self._acquire()
        try:
            queues = self._topics.get(topic)
            if queues is None:
                return None
            partition = self._sticky_partitions.get(topic, -1)
            batch = queues[partition].open if 0 <= partition < len(queues) else None
            if batch is None or batch.size + size > self.batch_size:
                return None
            values = batch.values
            index = len(values)
            values.append(value)
            batch.timestamps.append(timestamp)
            batch.size += size
            if batch.keys is not None:
                batch.keys.append(None)
            if batch.headers is not None:
                batch.headers.append(None)
        finally:
            self._release()
        future = _new_future(FutureRecordMetadata)
        future._batch = batch
        future._index = index
        return future

    def _append_new_batch(self, topic, partition, timestamp, key, value, headers, callback, size, info,
                          max_block_ms) -> FutureRecordMetadata:
        sticky = partition < 0
        record = (timestamp, key, value, headers, callback, size)
        with self.lock:
            self._check_open()
            if sticky:
                partition = self._sticky.partition(topic, info)
            queue = self._queue(topic, partition)
            future = self._try_append(queue, *record)
            if future is not None:
                return future
            if sticky:  # a new batch is needed: the sticky partition moves on first
                moved = self._sticky.next_partition(topic, info, partition)
                if moved != partition:
                    queue = self._queue(topic, moved)
                    future = self._try_append(queue, *record)
                    if future is not None:
                        return future
        memory = self.pool.allocate(max(self.batch_size, size + HEADER_SIZE), max_block_ms)
        try:
            with self.lock:
                self._check_open()
                future = self._try_append(queue, *record)
                if future is not None:
                    return future
                batch = ProducerBatch(queue.tp.topic, queue.tp.partition, self._clock.monotonic_ms(), memory)
                memory = 0
                queue.batches.append(batch)
                queue.open = batch
                self._incomplete.add(batch)
                future = self._try_append(queue, *record)
                # the sender acts on a backlog when its answers come; it needs waking only for the
                # first batch of a partition, or when that one became full
                wake = len(queue.batches) <= 2
        finally:
            if memory:
                self.pool.deallocate(memory)
        if wake and self._on_new_batch is not None:
            self._on_new_batch()
        return future

    def _try_append(self, queue: PartitionQueue, timestamp, key, value, headers, callback,
                    size) -> FutureRecordMetadata | None:
        batch = queue.open
        if batch is None or (batch.values and batch.size + size > self.batch_size):
            return None
        return batch.append(timestamp, key, value, headers, callback, size)

    def _check_open(self) -> None:
        if self._closed:
            raise ProducerClosedError("cannot send after the producer is closed")

    def _queue(self, topic: str, partition: int) -> PartitionQueue:
        queues = self._topics.setdefault(topic, [])
        while len(queues) <= partition:
            queues.append(PartitionQueue(TopicPartition(topic, len(queues))))
        return queues[partition]

    def queue_of(self, tp: TopicPartition) -> PartitionQueue | None:
        queues = self._topics.get(tp.topic)
        return queues[tp.partition] if queues is not None and tp.partition < len(queues) else None

    def partitions_with_data(self) -> list[TopicPartition]:
        """Partitions with batches queued or waiting to be retried."""
        with self.lock:
            return [queue.tp for queues in self._topics.values() for queue in queues if queue.has_pending()]

    def queues(self) -> list[PartitionQueue]:
        with self.lock:
            return [queue for queues in self._topics.values() for queue in queues]

    # ------------------------------------------------------------------ ready and drain

    def ready(self, leaders: Mapping[TopicPartition, Node], now_ms: int,
              allowed: Container[TopicPartition] | None = None) -> tuple[set[Node], int, set[str]]:
        """(leaders with a sendable partition, ms until the next may become sendable, topics with a
        partition whose leader is unknown); only partitions in `allowed`, when given."""
        ready: set[Node] = set()
        unknown: set[str] = set()
        next_delay = NO_DELAY_LIMIT_MS
        with self.lock:
            sendable_now = self._flushes > 0 or self._closed or self.pool.exhausted
            for queues in self._topics.values():
                for queue in queues:
                    if not (queue.batches or queue.retries) or (allowed is not None and queue.tp not in allowed):
                        continue
                    leader = leaders.get(queue.tp)
                    if leader is None:
                        unknown.add(queue.tp.topic)
                        continue
                    if leader in ready or len(queue.in_flight) >= self._depth(queue):
                        continue
                    if queue.retries:
                        wait = queue.retries[0].next_attempt_ms - now_ms
                    else:
                        first = queue.batches[0]
                        full = len(queue.batches) > 1 or first.size >= self.batch_size
                        wait = 0 if full or sendable_now else first.created_ms + self.linger_ms - now_ms
                    if wait <= 0:
                        ready.add(leader)
                    else:
                        next_delay = min(next_delay, wait)
        return ready, next_delay, unknown

    def drain(self, partitions_by_node: Mapping[int, list[TopicPartition]], nodes: Iterable[Node],
              max_request_size: int, now_ms: int, producer_id: int = -1, producer_epoch: int = -1,
              allowed: Container[TopicPartition] | None = None) -> dict[Node, list[WireBatch]]:
        """The wire batches of one request per node (see the module docstring)."""
        drained: dict[Node, list[WireBatch]] = {}
        with self.lock:
            for node in nodes:
                tps = partitions_by_node.get(node.node_id, ())
                if allowed is not None:
                    tps = [tp for tp in tps if tp in allowed]
                wires = self._drain_node(node.node_id, tps, max_request_size, now_ms, producer_id, producer_epoch)
                if wires:
                    drained[node] = wires
        return drained

    def _drain_node(self, node_id: int, tps: list[TopicPartition], max_request_size: int, now_ms: int,
                    producer_id: int, producer_epoch: int) -> list[WireBatch]:
        wires: list[WireBatch] = []
        if not tps:
            return wires
        count = len(tps)
        start = self._drain_index.get(node_id, 0) % count
        size = 0
        for step in range(count):
            queue = self.queue_of(tps[(start + step) % count])
            if queue is None or len(queue.in_flight) >= self._depth(queue):
                continue
            wire = self._drain_partition(queue, max_request_size - size, not wires, now_ms)
            if wire is None:
                continue
            if self.idempotent and wire.base_sequence < 0:
                wire.set_sequence(producer_id, producer_epoch, queue.next_sequence, self.transactional)
                queue.next_sequence = (queue.next_sequence + wire.record_count) % SEQUENCE_MODULUS
            wire.sent_as_first = not any(w.order < wire.order for w in queue.in_flight)
            wire.attempts += 1
            queue.in_flight.append(wire)
            wires.append(wire)
            size += wire.size
            if size >= max_request_size:
                break
        self._drain_index[node_id] = start + 1
        return wires

    def _depth(self, queue: PartitionQueue) -> int:
        """Batches the partition may have in flight. A broker takes any sequence from a producer id
        it does not know yet, so until the partition's first batch is acknowledged a second one could
        overtake it and be taken first: until then, one at a time."""
        if self.idempotent and queue.last_acked_sequence < 0:
            return 1
        return self.max_in_flight_per_partition

    def _drain_partition(self, queue: PartitionQueue, room: int, first_in_request: bool,
                         now_ms: int) -> WireBatch | None:
        if queue.retries:
            wire = queue.retries[0]
            if wire.next_attempt_ms > now_ms or (not first_in_request and wire.size > room):
                return None
            if self.idempotent and any(w.order < wire.order for w in queue.in_flight):
                return None  # an earlier batch is unanswered: resend in order
            return queue.retries.pop(0)
        if not queue.batches:
            return None
        if self.idempotent and any(w.attempts > 1 for w in queue.in_flight):
            return None  # a retry is unanswered: nothing new behind it yet
        taken: list[ProducerBatch] = []
        merged = MergedSize()
        while queue.batches:
            batch = queue.batches[0]
            if merged.with_batch(batch) > room and (taken or not first_in_request):
                break
            taken.append(queue.batches.popleft())
            merged.add(batch)
            if batch is queue.open:
                queue.open = None
        if not taken:
            return None
        wire = WireBatch.of_batches(queue.tp, taken, (queue.next_order,))
        queue.next_order += 1
        return wire

    # ------------------------------------------------------------------ after a response

    def reenqueue(self, wire: WireBatch, next_attempt_ms: int) -> None:
        """Puts a batch back to be sent again, in its original place among the retries."""
        queue = self.queue_of(wire.tp)
        wire.next_attempt_ms = next_attempt_ms
        with self.lock:
            orders = [w.order for w in queue.retries]
            queue.retries.insert(bisect.bisect(orders, wire.order), wire)

    def reset_sequences(self) -> None:
        """After a new producer id: sequences start again at 0; waiting retries will be renumbered."""
        with self.lock:
            for queues in self._topics.values():
                for queue in queues:
                    queue.next_sequence = 0
                    queue.last_acked_sequence = -1
                    for wire in queue.retries:
                        wire.clear_sequence()

    def expire(self, now_ms: int) -> tuple[list[WireBatch], int]:
        """Removes batches waiting longer than `delivery.timeout.ms` since creation; returns them
        and the ms until the next one would expire."""
        expired: list[WireBatch] = []
        next_expiry = NO_DELAY_LIMIT_MS
        deadline = now_ms - self.delivery_timeout_ms
        with self.lock:
            for queues in self._topics.values():
                for queue in queues:
                    while queue.batches and queue.batches[0].created_ms <= deadline:
                        batch = queue.batches.popleft()
                        if batch is queue.open:
                            queue.open = None
                        expired.append(WireBatch.of_batches(queue.tp, [batch], (queue.next_order,)))
                        queue.next_order += 1
                    if queue.batches:
                        next_expiry = min(next_expiry, queue.batches[0].created_ms - deadline)
                    if queue.retries:
                        kept = [w for w in queue.retries if w.created_ms > deadline]
                        expired += [w for w in queue.retries if w.created_ms <= deadline]
                        queue.retries[:] = kept
                        for wire in kept:
                            next_expiry = min(next_expiry, wire.created_ms - deadline)
        return expired, next_expiry

    def batches_done(self, batches: Iterable[ProducerBatch]) -> None:
        memory = 0
        with self.lock:
            for batch in batches:
                self._incomplete.discard(batch)
                memory += batch.memory
                batch.memory = 0
        self.pool.deallocate(memory)

    def abort_undrained(self) -> list[WireBatch]:
        """Takes every batch not in flight out of the queues (for a forced close or a fatal error)."""
        taken: list[WireBatch] = []
        with self.lock:
            for queues in self._topics.values():
                for queue in queues:
                    taken += queue.retries
                    queue.retries = []
                    while queue.batches:
                        batch = queue.batches.popleft()
                        taken.append(WireBatch.of_batches(queue.tp, [batch], (queue.next_order,)))
                        queue.next_order += 1
                    queue.open = None
        return taken

    # ------------------------------------------------------------------ flush and close

    def incomplete(self) -> list[ProducerBatch]:
        with self.lock:
            return list(self._incomplete)

    def has_incomplete(self) -> bool:
        with self.lock:
            return bool(self._incomplete)

    def begin_flush(self) -> None:
        with self.lock:
            self._flushes += 1

    def end_flush(self) -> None:
        with self.lock:
            self._flushes -= 1

    def close(self) -> None:
        """No more appends; everything queued is ready to send."""
        with self.lock:
            self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed
