"""What `Producer.send` returns: `FutureRecordMetadata`, resolving to a `RecordMetadata`; and the
`ProducerRecord` interceptors see.

A future is two references, its batch and its index in that batch; nothing waits per record.
The batch is completed once for all its records by the sender thread, and a `threading.Event`
is only created, per batch, when someone calls `get` before the batch is done. `get(timeout)`
(alias `result`) returns the metadata or raises the record's error (a `KafkaError`);
`exception(timeout)` returns that error or None; both raise `KafkaTimeoutError` when `timeout`
(seconds) passes first.
"""

from __future__ import annotations

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

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._batch.error_of(self._index)

    def __repr__(self) -> str:
        batch = self._batch
        state = "done" if batch.done else "pending"
        return f"<FutureRecordMetadata {batch.topic}-{batch.partition} #{self._index} {state}>"
