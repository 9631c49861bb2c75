"""`POST /v3/clusters/{cluster_id}/topics/{topic_name}/records`: REST Proxy v3's produce, of one
record or of a stream of them.

The body is JSON records one after another (`v3_produce_body`). Before anything is read, the
cluster, the content type (`application/json`, else 415) and the topic (404/40403) are checked.

- A body with a Content-Length holding one record is answered on its own: 200 with its delivery
  report, or the record's error with its HTTP status (400 for a malformed record, 404/40402 for an
  unknown partition, 5xx naming the Kafka error), nothing written. An empty body is 422/42206.
- A chunked body (no Content-Length: streaming mode), or a whole body of several records, is
  answered 200 at once with a stream of delivery reports, one per record, in the records' order,
  each followed by CRLF and written as soon as its record is acknowledged (an error report,
  `{"error_code": 400, "message": ...}`, for a record refused; the stream goes on).

The body is read as it arrives (`request.stream()`), cut into records as each completes, and the
records of each piece are handed to the process's shared Producer through the produce bridge
(`produce_bridge`), piece after piece (so each partition keeps the records' order); the response
awaits each record's acknowledgement on the event loop and writes the reports in order.
At most `MAX_IN_FLIGHT_REPORTS` reports wait to be written (the body is not read further until
they are), and no report is awaited longer than `request.timeout.ms` plus a second past the
producer's delivery timeout (then it is 500/50003).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.requests import ClientDisconnect

from services.common.errors import Errors, KafkaError
from services.gateway.errors import RestError, error_responses, from_kafka_error_v3
from services.gateway.produce_bridge import Sent, produce_bridge, refusal
from services.gateway.routes.v3_produce_body import (
    JsonValueSplitter,
    ProduceRecord,
    delivered_report,
    parse_record_text,
    produce_record,
)
from services.gateway.routes.v3_resources import (
    KnownCluster,
    bad_request,
    check_json_content,
    describe_topic,
    invalid_payload,
)
from services.gateway.state import GatewayState, State

router = APIRouter(tags=["v3"])

MAX_IN_FLIGHT_REPORTS = 10_000
SUBMIT_CHUNK = 1000
REPORT_SEPARATOR = b"\r\n"
REPORT_GRACE_S = 2.0
NOT_UTF8 = "Error processing JSON: the body is not UTF-8."

_DATA_SCHEMA = {"type": ["object", "null"], "required": ["type"], "properties": {
    "type": {"type": "string", "enum": ["BINARY", "JSON", "STRING"]}, "data": {}}}
PRODUCE_REQUEST_SCHEMA = {
    "type": "object",
    "properties": {
        "partition_id": {"type": ["integer", "null"]},
        "headers": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"}, "value": {"type": ["string", "null"], "format": "byte"}}}},
        "key": _DATA_SCHEMA,
        "value": _DATA_SCHEMA,
        "timestamp": {"type": ["string", "null"], "format": "date-time"},
    },
}

T = TypeVar("T")
Outcome = dict[str, Any] | RestError  # a delivery report, or why the record was not written
Submitted = tuple[ProduceRecord, Sent] | RestError  # a record handed to the producer, or why it was not


class ReportStream(Response):
    """A 200 answer streaming `reports`; unlike Starlette's StreamingResponse it leaves `receive`
    alone, so the request body can still be read while the answer is written."""

    media_type = "application/json"

    def __init__(self, reports: AsyncIterator[bytes]) -> None:
        self.reports = reports
        self.status_code = 200
        self.background = None
        self.init_headers(None)

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        try:
            async for report in self.reports:
                await send({"type": "http.response.body", "body": report, "more_body": True})
        finally:
            await self.reports.aclose()
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class RecordSender:
    """Sends the records of one request through the produce bridge and answers for each."""

    def __init__(self, state: GatewayState, cluster_id: str, topic: str, partitions_count: int) -> None:
        self.state = state
        self.cluster_id = cluster_id
        self.topic = topic
        self.partitions_count = partitions_count
        self.bridge = produce_bridge(state)
        self.report_timeout_s = state.request_timeout_s + REPORT_GRACE_S

    def record(self, text: str) -> ProduceRecord:
        """The record `text` asks for; RestError when it is refused."""
        record = produce_record(parse_record_text(text), self.partitions_count)
        size = len(record.key or b"") + len(record.value or b"")
        limit = self.state.config.max_record_bytes
        if size > limit:
            raise invalid_payload(f"The record's key and value are {size} bytes, more than max.record.bytes ({limit}).")
        return record

    async def produce_one(self, text: str) -> JSONResponse:
        [submitted] = await self.submit([text])
        outcome = await self._await(submitted)
        if isinstance(outcome, RestError):
            raise outcome
        return JSONResponse(outcome)

    async def submit(self, texts: Iterable[str], pending: asyncio.Queue | None = None) -> list[Submitted]:
        """What became of each text, in order: the sound records are handed to the producer in
        order, `SUBMIT_CHUNK` at a time (which keeps each partition's order), and only then put in
        `pending`, so a full `pending` never waits on records not yet sent."""
        submitted: list[Submitted] = []
        chunk: list[ProduceRecord | RestError] = []
        for text in texts:
            try:
                chunk.append(self.record(text))
            except RestError as error:
                chunk.append(error)
            if len(chunk) >= SUBMIT_CHUNK:
                submitted += await self._hand_over(chunk, pending)
                chunk = []
        return submitted + await self._hand_over(chunk, pending)

    async def _hand_over(self, chunk: list[ProduceRecord | RestError],
                         pending: asyncio.Queue | None) -> list[Submitted]:
        records = [record for record in chunk if not isinstance(record, RestError)]
        sent = iter(await self.bridge.send(
            ((self.topic, record.value, record.key, record.partition, record.timestamp_ms, record.headers)
             for record in records), each_alone=True) if records else ())
        submitted = [record if isinstance(record, RestError) else (record, next(sent)) for record in chunk]
        if pending is not None:
            for item in submitted:
                await pending.put(item)
        return submitted

    async def reports(self, texts: AsyncIterator[list[str]]) -> AsyncIterator[bytes]:
        """The delivery report of every record of `texts`, in order, each as it completes."""
        pending: asyncio.Queue[Submitted | None] = asyncio.Queue(MAX_IN_FLIGHT_REPORTS)
        reader = asyncio.create_task(self._read(texts, pending))
        try:
            while (submitted := await pending.get()) is not None:
                outcome = await self._await(submitted)
                yield json.dumps(outcome.body() if isinstance(outcome, RestError) else outcome).encode() \
                    + REPORT_SEPARATOR
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    async def _read(self, texts: AsyncIterator[list[str]], pending: asyncio.Queue) -> None:
        try:
            async for batch in texts:
                await self.submit(batch, pending)
        except ClientDisconnect:
            pass
        except RestError as error:
            await pending.put(error)
        except Exception as error:  # noqa: BLE001 - the body stopped: say why in a last report
            await pending.put(_body_failure(error))
        await pending.put(None)

    async def _await(self, submitted: Submitted) -> Outcome:
        """The record's delivery report, or why it was not written."""
        if isinstance(submitted, RestError):
            return submitted
        record, sent = submitted
        if isinstance(sent, BaseException):
            return refusal(sent)
        await self.bridge.settled((sent,), time.monotonic() + self.report_timeout_s)
        if not sent.done():
            return from_kafka_error_v3(KafkaError(f"no delivery report within {self.report_timeout_s:g} s",
                                                  error=Errors.REQUEST_TIMED_OUT))
        try:
            metadata = sent.get()
        except Exception as error:  # noqa: BLE001 - the record's own error, answered in its report
            return refusal(error)
        self.state.metrics.produced(1)
        return delivered_report(self.cluster_id, record, metadata)


def _body_failure(error: Exception) -> RestError:
    """Why reading the body stopped: too large (413), not UTF-8 (400), or anything else (400)."""
    if type(error).__name__ == "BodyTooLarge":
        return RestError(413, 413, "The request body exceeds max.request.bytes.")
    if isinstance(error, UnicodeDecodeError):
        return bad_request(NOT_UTF8)
    return bad_request(f"Error processing the body: {error}")


async def record_texts(chunks: AsyncIterator[bytes]) -> AsyncIterator[list[str]]:
    """The text of each record of a body arriving in `chunks`, a list per chunk that completed any."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    splitter = JsonValueSplitter()
    async for chunk in chunks:
        texts = splitter.feed(decoder.decode(chunk))
        if texts:
            yield texts
    texts = splitter.feed(decoder.decode(b"", final=True))
    rest = splitter.finish()
    if rest is not None:
        texts.append(rest)
    if texts:
        yield texts


async def _one(item: T) -> AsyncIterator[T]:
    yield item


async def whole_body_texts(body: bytes) -> list[str]:
    """The text of each record of a whole body (400 when it is not UTF-8, 422 when it has none)."""
    try:
        texts = [text async for batch in record_texts(_one(body)) for text in batch]
    except UnicodeDecodeError:
        raise bad_request(NOT_UTF8) from None
    if not texts:
        raise invalid_payload("Request body is empty. Data is required.")
    return texts


@router.post("/v3/clusters/{cluster_id}/topics/{topic_name}/records",
             summary="Produce records: one, or a stream answered by a stream of delivery reports",
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/json": {"schema": PRODUCE_REQUEST_SCHEMA}}}}, responses=error_responses(415))
async def produce_records(topic_name: str, request: Request, state: State, cluster_id: KnownCluster) -> Response:
    check_json_content(request)
    topic = await describe_topic(state, topic_name)
    sender = RecordSender(state, cluster_id, topic_name, len(topic.partitions))
    if request.headers.get("content-length") is None:
        return ReportStream(sender.reports(record_texts(request.stream())))
    texts = await whole_body_texts(await request.body())
    if len(texts) == 1:
        return await sender.produce_one(texts[0])
    return ReportStream(sender.reports(_one(texts)))
