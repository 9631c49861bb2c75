"""The produce bridge: records handed to the producer in order, one outcome per record in record
order whatever the producer answers (an offset, a Kafka error, an error raised by `send`, nothing by
the deadline), waits settled by the producer's batch listener rather than by polling, and the
gateway's answers for a record's error."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from services.clients.producer import RecordMetadata, RecordTooLargeError
from services.common.errors import Errors, KafkaError
from services.gateway.config import GatewayConfig
from services.gateway.errors import KAFKA_ERROR, KAFKA_RETRIABLE_ERROR
from services.gateway.metrics import GatewayMetrics
from services.gateway.produce_bridge import Outgoing, error_code, produce_bridge, refusal
from services.gateway.state import GatewayState


class Answered:
    """A record's future as `Producer.send` returns it, answered by `StandInProducer.answer`."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.offset_or_error: int | BaseException | None = None

    def done(self) -> bool:
        return self.offset_or_error is not None

    def offset(self) -> int:
        if isinstance(self.offset_or_error, BaseException):  # as FutureRecordMetadata raises the record's error
            raise self.offset_or_error
        return self.offset_or_error

    def get(self, timeout: float | None = None) -> RecordMetadata:
        return RecordMetadata(self.topic, self.partition, self.offset(), 0, -1, -1)


class StandInProducer:
    """`send` queues a pending future (or raises for the record at `raise_at`); `answer` completes
    futures and then calls the batch listeners, from another thread, as the sender thread does."""

    def __init__(self, raise_at: int | None = None, block_s: float = 0) -> None:
        self.raise_at = raise_at
        self.block_s = block_s
        self.sent: list[tuple] = []
        self.futures: list[Answered] = []
        self.listeners: list = []

    def add_batch_listener(self, listener) -> None:
        self.listeners.append(listener)

    def send(self, topic, value, key=None, partition=None, timestamp_ms=None, headers=None) -> Answered:
        if len(self.sent) == self.raise_at:
            self.raise_at = None
            raise KafkaError("not a topic", error=Errors.INVALID_TOPIC_EXCEPTION)
        time.sleep(self.block_s)
        self.sent.append((topic, value, key, partition, timestamp_ms, headers))
        future = Answered(topic, partition or 0)
        self.futures.append(future)
        return future

    def answer(self, answers: dict[int, int | BaseException], delay_s: float = 0.05, notify: bool = True) -> None:
        def later() -> None:
            time.sleep(delay_s)
            for index, answer in answers.items():
                self.futures[index].offset_or_error = answer
            if notify:
                for listener in self.listeners:
                    listener(None)
        threading.Thread(target=later, daemon=True).start()


def gateway_state(producer: StandInProducer, timeout_ms: int = 5000) -> GatewayState:
    return GatewayState(GatewayConfig(bootstrap_servers="127.0.0.1:1", request_timeout_ms=timeout_ms), None,
                        producer, GatewayMetrics(), "http://127.0.0.1:8080")


def records(count: int) -> list[Outgoing]:
    return [("t", b"v%d" % i, None, 1, None, None) for i in range(count)]


def outcome(item) -> int | BaseException:
    if isinstance(item, BaseException):
        return item
    try:
        return item.offset()
    except Exception as error:  # noqa: BLE001 - the record's error is what is compared
        return error


def test_outcomes_are_in_record_order_and_come_when_the_listener_is_called():
    producer = StandInProducer()
    retriable = KafkaError("moved", error=Errors.NOT_LEADER_OR_FOLLOWER)

    async def main() -> tuple[list, float]:
        bridge = produce_bridge(gateway_state(producer))
        deadline_s = time.monotonic() + 5
        sent = await bridge.send(records(3), deadline_s)
        producer.answer({0: 7, 1: retriable, 2: 8}, delay_s=0.1)
        started = time.monotonic()
        outcomes = await bridge.outcomes(sent, deadline_s)
        return [outcome(item) for item in outcomes], time.monotonic() - started

    outcomes, waited_s = asyncio.run(main())
    assert outcomes == [7, retriable, 8]
    assert 0.09 < waited_s < 1
    assert producer.sent == [("t", b"v0", None, 1, None, None), ("t", b"v1", None, 1, None, None),
                             ("t", b"v2", None, 1, None, None)]


def test_futures_done_without_a_batch_answered_are_not_polled_for():
    """Only the producer's batch listener wakes a waiting request: nothing checks the futures
    meanwhile, and a request nobody wakes ends at its deadline with its futures as they are."""
    producer = StandInProducer()

    async def main() -> tuple[bool, float]:
        bridge = produce_bridge(gateway_state(producer))
        sent = await bridge.send(records(1))
        producer.answer({0: 3}, delay_s=0.01, notify=False)
        started = time.monotonic()
        await bridge.settled(sent, time.monotonic() + 0.4)
        return sent[0].done(), time.monotonic() - started

    done, waited_s = asyncio.run(main())
    assert done and 0.35 < waited_s < 2


def test_records_unanswered_by_the_deadline_are_request_timed_out():
    producer = StandInProducer()

    async def main() -> tuple[list, float]:
        bridge = produce_bridge(gateway_state(producer, timeout_ms=300))
        deadline_s = time.monotonic() + 0.3
        sent = await bridge.send(records(2), deadline_s)
        producer.answer({0: 5}, delay_s=0.01)
        started = time.monotonic()
        outcomes = await bridge.outcomes(sent, deadline_s)
        return [outcome(item) for item in outcomes], time.monotonic() - started

    (first, second), waited_s = asyncio.run(main())
    assert first == 5
    assert isinstance(second, KafkaError) and second.error == Errors.REQUEST_TIMED_OUT
    assert "no acknowledgement within request.timeout.ms (300 ms)" in str(second)
    assert error_code(second) == KAFKA_RETRIABLE_ERROR
    assert 0.2 < waited_s < 2


def test_an_error_raised_by_send_fails_that_record_and_the_ones_after_it():
    producer = StandInProducer(raise_at=2)

    async def main() -> list:
        return await produce_bridge(gateway_state(producer)).send(records(4), time.monotonic() + 5)

    sent = asyncio.run(main())
    assert len(producer.sent) == 2 and not any(isinstance(item, BaseException) for item in sent[:2])
    assert [item.error for item in sent[2:]] == [Errors.INVALID_TOPIC_EXCEPTION] * 2
    assert error_code(sent[2]) == KAFKA_ERROR


def test_each_alone_an_error_raised_by_send_fails_only_its_record():
    producer = StandInProducer(raise_at=1)

    async def main() -> list:
        return await produce_bridge(gateway_state(producer)).send(iter(records(3)), each_alone=True)

    sent = asyncio.run(main())
    assert isinstance(sent[1], KafkaError) and not isinstance(sent[0], BaseException)
    assert not isinstance(sent[2], BaseException) and len(producer.sent) == 2


def test_nothing_is_sent_past_the_deadline():
    producer = StandInProducer(block_s=0.1)

    async def main() -> list:
        return await produce_bridge(gateway_state(producer)).send(records(10), time.monotonic() + 0.25)

    with pytest.raises(KafkaError) as raised:  # the hand-over was still blocked at the deadline
        asyncio.run(main())
    assert raised.value.error == Errors.REQUEST_TIMED_OUT
    time.sleep(0.3)
    assert len(producer.sent) <= 4


def test_many_requests_each_settle_when_their_own_records_are_answered():
    producer = StandInProducer()

    async def main() -> list[list]:
        bridge = produce_bridge(gateway_state(producer))
        deadline_s = time.monotonic() + 5
        sends = [await bridge.send(records(3), deadline_s) for _ in range(20)]
        waits = [asyncio.ensure_future(bridge.outcomes(sent, deadline_s)) for sent in sends]
        for request in range(20):  # one batch each, answered in reverse order
            producer.answer({3 * (19 - request) + i: 100 * (19 - request) + i for i in range(3)},
                            delay_s=0.01 * request)
        results = [[outcome(item) for item in await wait] for wait in waits]
        assert not bridge._waiters
        return results

    results = asyncio.run(main())
    assert results == [[100 * request + i for i in range(3)] for request in range(20)]


def test_a_request_that_stops_waiting_leaves_no_waiter():
    producer = StandInProducer()

    async def main() -> int:
        bridge = produce_bridge(gateway_state(producer))
        sent = await bridge.send(records(1))
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(bridge.settled(sent, time.monotonic() + 5), 0.05)
        return len(bridge._waiters)

    assert asyncio.run(main()) == 0


def test_a_records_error_as_rest_proxy_v3_answers_it():
    too_large = refusal(RecordTooLargeError("the record is 2000000 bytes"))
    assert (too_large.status, too_large.error_code) == (413, 413)
    unknown = refusal(KafkaError("gone", error=Errors.UNKNOWN_TOPIC_OR_PARTITION))
    assert (unknown.status, unknown.error_code) == (404, 40403)
    malformed = refusal(ValueError("invalid timestamp -1"))
    assert (malformed.status, malformed.error_code, malformed.message) == (400, 400, "invalid timestamp -1")
    other = refusal(OSError("disk"))
    assert (other.status, other.error_code, other.message) == (500, KAFKA_ERROR, "OSError: disk")
    assert error_code(TimeoutError()) == KAFKA_RETRIABLE_ERROR and error_code(OSError()) == KAFKA_ERROR
