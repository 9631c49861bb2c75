"""The consuming side of the 0.8 ZooKeeper consumer: what fetchers put in a stream's queue and
how a stream hands it out, as Kafka 0.8's PartitionTopicInfo, FetchedDataChunk and
KafkaStream/ConsumerIterator.

- `PartitionTopicInfo` is one owned partition: the stream queue it feeds, its fetch offset (next
  offset to fetch) and consumed offset (next offset the application has not taken yet, which is
  what gets committed). A rebalance `revoke()`s the infos it replaces, so chunks still queued or
  being iterated for them are dropped instead of moving offsets the group no longer owns.
- `FetchedDataChunk` is the records of one fetch of one partition; `enqueue` advances the fetch
  offset past them (past trailing control batches too, via `next_fetch_offset`).
- `KafkaStream` is a blocking iterator of `MessageAndMetadata` over one bounded queue
  (`queued.max.message.chunks` chunks). With `consumer.timeout.ms` >= 0, waiting longer raises
  ConsumerTimeoutError and the stream stays usable; the shutdown sentinel ends the iteration.
  Records below the consumed offset (the rest of a batch fetched again) are skipped; each one
  taken moves the partition's consumed offset past it.
- Decoders (`key_decoder`, `value_decoder`: bytes -> object, as 0.8's Decoder) are applied as a
  message is handed out; a null key or value stays None. When one raises, the iteration raises
  MessageDecodeError naming topic, partition and offset, carrying the raw message, with the
  consumed offset left AT that message: a commit before the stream is iterated again records it,
  so a restarted consumer reads it again. Iterating again goes on with the next message (the
  failed one counts as handed out, in the error) and moves the consumed offset past it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from services.clients.zk_consumer.errors import ConsumerTimeoutError, MessageDecodeError, MessageSizeTooLargeError
from services.common.topic_partition import TopicPartition

INVALID_OFFSET = -1


class MessageAndMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: Any
    message: Any
    timestamp: int = -1


Decoder = Callable[[bytes], Any]


def _new_message(fields: tuple) -> MessageAndMetadata:
    """A MessageAndMetadata from its six fields, without the keyword handling of its __new__."""
    return tuple.__new__(MessageAndMetadata, fields)


@dataclass(eq=False)
class PartitionTopicInfo:
    tp: TopicPartition
    chunk_queue: queue.Queue
    consumed_offset: int
    fetched_offset: int
    fetch_size: int
    revoked: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reset_offsets(self, offset: int) -> None:
        """Both offsets to `offset` (after a reset for auto.offset.reset)."""
        with self._lock:
            self.fetched_offset = offset
            self.consumed_offset = offset

    def revoke(self) -> None:
        with self._lock:
            self.revoked = True


class FetchedDataChunk(NamedTuple):
    records: list[tuple]  # (offset, key, value, timestamp), as `fetcher.decode_chunk` makes them
    info: PartitionTopicInfo
    fetch_offset: int
    too_large: bool = False


SHUTDOWN = FetchedDataChunk([], None, -1)  # type: ignore[arg-type]


def enqueue(info: PartitionTopicInfo, records: list[tuple], fetch_offset: int, next_fetch_offset: int,
            partial_bytes: int, stop: threading.Event, put_wait_s: float = 0.1) -> bool:
    """Puts one fetch's records on the partition's stream queue, blocking while it is full (but not
    past `stop`), and moves the fetch offset to `next_fetch_offset`. A fetch that returned only
    part of a message is queued as a `too_large` chunk, for the stream to report. Returns False
    when stopped or revoked before the chunk was queued."""
    too_large = not records and next_fetch_offset == fetch_offset and partial_bytes > 0
    if not records and not too_large:
        info.fetched_offset = max(info.fetched_offset, next_fetch_offset)
        return True
    chunk = FetchedDataChunk(records, info, fetch_offset, too_large)
    while not stop.is_set() and not info.revoked:
        try:
            info.chunk_queue.put(chunk, timeout=put_wait_s)
        except queue.Full:
            continue
        info.fetched_offset = next_fetch_offset
        return True
    return False


class KafkaStream:
    """A blocking iterator of MessageAndMetadata; see the module docstring."""

    def __init__(self, chunk_queue: queue.Queue, consumer_timeout_ms: int, thread_id: str = "",
                 key_decoder: Decoder | None = None, value_decoder: Decoder | None = None):
        self.chunk_queue = chunk_queue
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder
        self._decoding = key_decoder is not None or value_decoder is not None
        self.consumer_timeout_ms = consumer_timeout_ms
        self.thread_id = thread_id
        self._lock = threading.Lock()
        self._current: Iterator[tuple] | None = None
        self._current_info: PartitionTopicInfo | None = None
        self._done = False

    def __iter__(self) -> KafkaStream:
        return self

    def __next__(self) -> MessageAndMetadata:
        while True:
            with self._lock:
                if self._done:
                    raise StopIteration
                if self._current is not None:
                    message = self._next_from_current()
                    if message is not None:
                        return message
            self._take_chunk()

    def clear(self) -> None:
        """Drops the chunk being iterated (a rebalance is handing its partition over)."""
        with self._lock:
            self._current = None
            self._current_info = None

    def _next_from_current(self) -> MessageAndMetadata | None:
        """The next record of the chunk being iterated (the stream's lock held), or None at its end.
        The consumed offset is a plain assignment: the GIL makes it atomic, and a record handed out
        while a rebalance revokes the partition is delivered again by the next owner (at least once)."""
        info = self._current_info
        topic, partition = info.tp.topic, info.tp.partition
        for offset, key, value, timestamp in self._current:
            if info.revoked:
                break
            if offset < info.consumed_offset:
                continue
            if self._decoding:
                key, value = self._decoded(info, offset, key, value, timestamp)
            info.consumed_offset = offset + 1
            return _new_message((topic, partition, offset, key, value, timestamp))
        self._current = None
        self._current_info = None
        return None

    def _decoded(self, info: PartitionTopicInfo, offset: int, key: bytes | None, value: bytes | None,
                 timestamp: int) -> tuple[Any, Any]:
        try:
            return (key if key is None or self.key_decoder is None else self.key_decoder(key),
                    value if value is None or self.value_decoder is None else self.value_decoder(value))
        except Exception as exc:
            info.consumed_offset = offset
            raw = _new_message((info.tp.topic, info.tp.partition, offset, key, value, timestamp))
            raise MessageDecodeError(f"decoding the message of {info.tp} at offset {offset} failed: {exc!r}",
                                     raw) from exc

    def _take_chunk(self) -> None:
        chunk = self._get()
        with self._lock:
            if chunk is SHUTDOWN:
                self._done = True
                return
            if chunk.info.revoked:
                return
            if chunk.too_large:
                raise MessageSizeTooLargeError(
                    f"a message of {chunk.info.tp} at offset {chunk.fetch_offset} is larger than the "
                    f"fetch size {chunk.info.fetch_size}; increase fetch.message.max.bytes")
            self._current = iter(chunk.records)
            self._current_info = chunk.info

    def _get(self) -> FetchedDataChunk:
        if self.consumer_timeout_ms < 0:
            return self.chunk_queue.get()
        try:
            return self.chunk_queue.get(timeout=self.consumer_timeout_ms / 1000)
        except queue.Empty:
            raise ConsumerTimeoutError(
                f"no message within consumer.timeout.ms={self.consumer_timeout_ms}") from None
