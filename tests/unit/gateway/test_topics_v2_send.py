"""Sending a v2 produce request's records: one offsets entry per record, in record order, whatever
the producer answers (an offset, a Kafka error, an error raised by `send` itself, or nothing before
the deadline), and the request awaits the futures on the event loop rather than in a thread."""

from __future__ import annotations

import asyncio
import threading
import time

from services.clients.producer import RecordMetadata
from services.common.errors import Errors, KafkaError
from services.gateway.config import GatewayConfig
from services.gateway.errors import KAFKA_ERROR, KAFKA_RETRIABLE_ERROR
from services.gateway.metrics import GatewayMetrics
from services.gateway.routes.topics_v2 import OutgoingRecord, send_records
from services.gateway.state import GatewayState


class Outcome:
    """A future as `Producer.send` returns it, answered by the stand-in below."""

    def __init__(self) -> None:
        self.metadata: RecordMetadata | None = None
        self.error: BaseException | None = None
        self.answered = False

    def done(self) -> bool:
        return self.answered

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self.error

    @property
    def partition(self) -> int:
        return self.metadata.partition

    def offset(self) -> int:
        return self.get().offset

    def get(self, timeout: float | None = None) -> RecordMetadata:
        if self.error is not None:  # as FutureRecordMetadata.get raises the record's error
            raise self.error
        return self.metadata


class StandInProducer:
    """Answers each record from another thread, as the sender thread does: record i by `answers[i]`
    (an offset, an exception to fail it with, None to never answer); `raise_at` makes `send` itself
    raise for that record."""

    def __init__(self, answers: list, raise_at: int | None = None) -> None:
        self.answers = answers
        self.raise_at = raise_at
        self.sent: list[OutgoingRecord] = []

    def send(self, topic, value, key=None, partition=None):
        index = len(self.sent)
        if index == self.raise_at:
            raise KafkaError("not a topic", error=Errors.INVALID_TOPIC_EXCEPTION)
        self.sent.append(OutgoingRecord(key, value, partition))
        outcome, answer = Outcome(), self.answers[index]
        if answer is not None:
            def answer_later() -> None:
                if isinstance(answer, BaseException):
                    outcome.error = answer
                else:
                    outcome.metadata = RecordMetadata(topic, partition or 0, answer, 0, -1, -1)
                outcome.answered = True
            threading.Thread(target=answer_later).start()
        return outcome


def run(producer: StandInProducer, count: int, timeout_ms: int = 5000) -> tuple[list[dict], float]:
    state = GatewayState(GatewayConfig(bootstrap_servers="127.0.0.1:1", request_timeout_ms=timeout_ms), None,
                         producer, GatewayMetrics(), "http://127.0.0.1:8080")
    records = [OutgoingRecord(None, b"v%d" % i, 1) for i in range(count)]

    async def main() -> list[dict]:
        return await send_records(state, "t", records, time.monotonic() + timeout_ms / 1000)

    started = time.monotonic()
    return asyncio.run(main()), time.monotonic() - started


def test_offsets_and_kafka_errors_are_answered_in_record_order():
    retriable = KafkaError("moved", error=Errors.NOT_LEADER_OR_FOLLOWER)
    fatal = KafkaError("too big", error=Errors.MESSAGE_TOO_LARGE)
    offsets, elapsed_s = run(StandInProducer([7, retriable, 8, fatal]), 4)
    assert offsets == [
        {"partition": 1, "offset": 7, "error_code": None, "error": None},
        {"partition": None, "offset": None, "error_code": KAFKA_RETRIABLE_ERROR, "error": str(retriable)},
        {"partition": 1, "offset": 8, "error_code": None, "error": None},
        {"partition": None, "offset": None, "error_code": KAFKA_ERROR, "error": str(fatal)},
    ]
    assert elapsed_s < 2


def test_an_error_raised_by_send_fails_that_record_and_the_ones_after_it():
    producer = StandInProducer([1, 2, 3, 4], raise_at=2)
    offsets, _ = run(producer, 4)
    assert [e["offset"] for e in offsets[:2]] == [1, 2]
    failed = [(e["partition"], e["error_code"], "INVALID_TOPIC_EXCEPTION" in e["error"]) for e in offsets[2:]]
    assert failed == [(None, KAFKA_ERROR, True)] * 2
    assert len(producer.sent) == 2


def test_records_unanswered_by_the_deadline_are_answered_retriable_timeouts():
    offsets, elapsed_s = run(StandInProducer([5, None]), 2, timeout_ms=300)
    assert offsets[0]["offset"] == 5
    assert offsets[1]["error_code"] == KAFKA_RETRIABLE_ERROR and "REQUEST_TIMED_OUT" in offsets[1]["error"]
    assert 0.25 < elapsed_s < 2
