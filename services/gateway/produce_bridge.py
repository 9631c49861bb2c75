"""`ProduceBridge`: how every produce route of the gateway (REST v2, v3 and its streaming form, Arrow)
hands records to the process's Producer, awaits their acknowledgements on the event loop, and
names their failures as the gateway answers them.

    bridge = produce_bridge(state)
    sent = await bridge.send(records, deadline_s)          # a producer future or an error per record
    outcomes = await bridge.outcomes(sent, deadline_s)      # a done future or an error per record

`send` hands the records (`Outgoing` tuples) to `Producer.send` in order, so each partition keeps
their order, on the threadpool, where `send` may wait for metadata or buffer memory; a record with
nothing but a value takes the Producer's fast path. At the deadline the wait ends with
REQUEST_TIMED_OUT and nothing more is sent. `settled` returns once every future is done or at a
deadline.

Nothing polls and no thread waits on the cluster: the Producer calls the bridge's batch listener
on its sender thread once per answered batch, which wakes the event loop with
`loop.call_soon_threadsafe` (one wake-up pending at a time); there each waiting request's futures
are checked from the first not yet done, and the asyncio future of a request whose records are all
answered is settled. A request that stops waiting (its deadline, or its client gone) leaves nothing.

The failures: `error_code(error)` is a record's REST Proxy v2 code (50003 when retrying may help,
else 50002), `refusal(error)` its v3 answer (413 for a record too large, the Kafka error as v3
answers it, 400 for a record `send` refused as malformed, 500 else); `unanswered` is the
REQUEST_TIMED_OUT error of a record not acknowledged by the request's deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool

from services.clients.producer import RecordTooLargeError
from services.common.errors import Errors, KafkaError
from services.gateway.errors import (
    KAFKA_ERROR,
    KAFKA_RETRIABLE_ERROR,
    RestError,
    bad_request,
    from_kafka_error_v3,
    kafka_error_code,
)

if TYPE_CHECKING:
    from services.gateway.state import GatewayState

# A record to send: `ProducerRecord`'s fields in order (topic, value, key, partition, timestamp_ms,
# headers), as a plain tuple (a named one costs more to make than `Producer.send` costs).
Outgoing = tuple[str, bytes | None, bytes | None, int | None, int | None, Sequence[tuple[str, bytes | None]] | None]
Sent = Any  # what `Producer.send` returned for a record (a FutureRecordMetadata), or the error it raised
Blocking = Callable[..., Awaitable[Any]]  # GatewayState.blocking

def unanswered(request_timeout_ms: int) -> KafkaError:
    """The error of a record sent but not acknowledged by the request's deadline."""
    return KafkaError(f"no acknowledgement within request.timeout.ms ({request_timeout_ms} ms); "
                      f"the record may still be written", error=Errors.REQUEST_TIMED_OUT)


def error_code(error: BaseException) -> int:
    """A record's error as a REST Proxy v2 error code: 50003 when retrying may help, else 50002."""
    if isinstance(error, KafkaError):
        return kafka_error_code(error)
    return KAFKA_RETRIABLE_ERROR if isinstance(error, TimeoutError) else KAFKA_ERROR


def refusal(error: BaseException) -> RestError:
    """A record's error as REST Proxy v3 answers it."""
    if isinstance(error, RecordTooLargeError):
        return RestError(413, 413, str(error))
    if isinstance(error, KafkaError):
        return from_kafka_error_v3(error)
    if isinstance(error, (ValueError, TypeError)):
        return bad_request(str(error))
    return RestError(500, KAFKA_ERROR, f"{type(error).__name__}: {error}")


class _Waiter:
    """A request waiting for `futures`; `first` is the first not seen done."""

    __slots__ = ("futures", "first", "settled")

    def __init__(self, futures: Sequence[Any]) -> None:
        self.futures = futures
        self.first = 0
        self.settled: asyncio.Future[None] | None = None  # made once the request has to wait

    def answered(self) -> bool:
        futures, first, count = self.futures, self.first, len(self.futures)
        while first < count and futures[first].done():
            first += 1
        self.first = first
        return first == count


class ProduceBridge:
    """Sends through one Producer and settles the waits of one event loop (a gateway process's)."""

    def __init__(self, producer: Any, blocking: Blocking, loop: asyncio.AbstractEventLoop,
                 request_timeout_ms: int) -> None:
        self._send = producer.send
        self._blocking = blocking
        self._request_timeout_ms = request_timeout_ms
        self._loop = loop
        self._waiters: set[_Waiter] = set()
        self._wakeup_pending = False
        producer.add_batch_listener(self._batch_answered)

    # ------------------------------------------------------------------ sending

    async def send(self, records: Iterable[Outgoing], deadline_s: float | None = None, *,
                   each_alone: bool = False) -> list[Sent]:
        """Hands `records` to the Producer in order (`records` is read on the threadpool); per
        record, its future or the error `send` raised. The first error stops the sending (every
        later record gets it too) unless `each_alone`. With `deadline_s` (monotonic), the wait ends
        there with REQUEST_TIMED_OUT, and nothing more is sent."""
        if deadline_s is None:
            return await run_in_threadpool(self._send_all, records, each_alone)
        stopped: list[bool] = []  # not empty once the wait has ended
        try:
            return await self._blocking(self._send_all, records, each_alone, stopped,
                                        timeout_s=max(0.001, deadline_s - time.monotonic()))
        finally:
            stopped.append(True)

    def _send_all(self, records: Iterable[Outgoing], each_alone: bool,
                  stopped: list[bool] | None = None) -> list[Sent]:
        """On the threadpool: `Producer.send` for each record, in order, until `stopped`."""
        send = self._send
        sent: list[Sent] = []
        remaining = iter(records)
        for topic, value, key, partition, timestamp_ms, headers in remaining:
            if stopped:
                break  # the wait has ended: nobody reads what is sent
            try:
                if key is None and partition is None and timestamp_ms is None and headers is None:
                    sent.append(send(topic, value))
                else:
                    sent.append(send(topic, value, key, partition, timestamp_ms, headers))
            except Exception as error:  # noqa: BLE001 - refused before it was queued: nothing written
                sent.append(error)
                if not each_alone:
                    sent.extend(error for _ in remaining)
        return sent

    # ------------------------------------------------------------------ acknowledgements

    async def settled(self, sent: Sequence[Sent], deadline_s: float) -> None:
        """Returns once every future of `sent` is done, or at `deadline_s` (monotonic)."""
        waiter = _Waiter([item for item in sent if not isinstance(item, BaseException)])
        remaining_s = deadline_s - time.monotonic()
        if waiter.answered() or remaining_s <= 0:
            return
        waiter.settled = self._loop.create_future()
        self._waiters.add(waiter)
        timer = self._loop.call_later(remaining_s, _settle, waiter.settled)
        try:
            await waiter.settled
        finally:
            timer.cancel()
            self._waiters.discard(waiter)

    async def outcomes(self, sent: Sequence[Sent], deadline_s: float) -> list[Sent]:
        """`sent` once settled by `deadline_s`: per record its done future (`offset()` and `get()`
        answer at once, or raise the record's error) or its error, `unanswered` if it is not done."""
        await self.settled(sent, deadline_s)
        late = None
        outcomes = []
        for item in sent:
            if not isinstance(item, BaseException) and not item.done():
                item = late = late or unanswered(self._request_timeout_ms)
            outcomes.append(item)
        return outcomes

    def _batch_answered(self, _result: Any) -> None:
        """The Producer's batch listener, on its sender thread: the batch's futures are done."""
        if self._wakeup_pending:
            return
        self._wakeup_pending = True
        try:
            self._loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def _wake(self) -> None:
        """On the event loop: settles every request whose futures are all done."""
        self._wakeup_pending = False  # before the checks: a batch answered during them wakes the loop again
        for waiter in [waiter for waiter in self._waiters if waiter.answered()]:
            self._waiters.discard(waiter)
            _settle(waiter.settled)


def _settle(settled: asyncio.Future[None]) -> None:
    if not settled.done():
        settled.set_result(None)


def produce_bridge(state: GatewayState) -> ProduceBridge:
    """The bridge of the process's Producer, made on first use on the process's event loop."""
    bridge = state.extensions.get("produce_bridge")
    if bridge is None:
        bridge = state.extensions["produce_bridge"] = ProduceBridge(
            state.producer, state.blocking, asyncio.get_running_loop(), state.config.request_timeout_ms)
    return bridge
