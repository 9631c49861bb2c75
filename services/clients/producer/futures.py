"""What `Producer.send` returns: `FutureRecordMetadata`, resolving to a `RecordMetadata`; the
`ProducerRecord` interceptors see; and the `BatchResult` batch listeners see.

A future is two references, its batch and its index in that batch; nothing waits per record.
The batch is completed once for all its records by the sender thread, and a `threading.Event`
is only created, per batch, when someone calls `get` before the batch is done. `get(timeout)`
(alias `result`) returns the metadata or raises the record's error (a `KafkaError`);
`exception(timeout)` returns that error or None; both raise `KafkaTimeoutError` when `timeout`
(seconds) passes first. `partition` and `offset()` give where a done record went without building
its metadata (for callers that answer many records at once).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from services.clients.producer.errors import KafkaTimeoutError

Header = tuple[str, "bytes | None"]


class RecordMetadata(NamedTuple):
    """Where an acknowledged record went. `offset` is -1 with acks=0; `timestamp` is the broker's
    append time for topics with LogAppendTime, else the record's own; sizes are -1 for None."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


class BatchResult(NamedTuple):
    """Records of one partition answered together, as a listener of `Producer.add_batch_listener`
    receives them: their timestamps (ms; the wall-clock time of `send` unless the caller gave one)
    and values, in the order they were sent; the offset of the first (-1 with acks=0 or on error);
    and the error every one of them failed with, or None. The sequences must not be changed."""

    topic: str
    partition: int
    base_offset: int
    timestamps: Sequence[int]
    values: Sequence[bytes | None]
    error: BaseException | None


class ProducerRecord(NamedTuple):
    """A record on its way in, as `interceptor.on_send(record)` receives and returns it."""

    topic: str
    value: object
    key: object = None
    partition: int | None = None
    timestamp_ms: int | None = None
    headers: list[Header] | None = None


class FutureRecordMetadata:
    """The pending result of one `send`."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch, index: int):
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.done

    def cancelled(self) -> bool:
        return False

    def _wait(self, timeout: float | None) -> None:
        batch = self._batch
        if not batch.done and not batch.wait(timeout):
            raise KafkaTimeoutError(f"no acknowledgement of the record after {timeout:g} s")

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata once acknowledged; raises its error if it failed."""
        self._wait(timeout)
        return self._batch.metadata(self._index)

    result = get

    def offset(self) -> int:
        """The record's offset once it is done (-1 with acks=0), without building its metadata;
        raises its error if it failed, KafkaTimeoutError if it is not done."""
        self._wait(0)
        return self._batch.offset(self._index)

    @property
    def partition(self) -> int:
        """The partition the record was sent to (known once `send` returned)."""
        return self._batch.partition

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._batch.error_of(self._index)

    def __repr__(self) -> str:
        batch = self._batch
        state = "done" if batch.done else "pending"
        return f"<FutureRecordMetadata {batch.topic}-{batch.partition} #{self._index} {state}>"
