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
records of each piece are handed to the process's shared Producer in one call on the threadpool,
piece after piece (so each partition keeps the records' order); the producer's callbacks complete
one future per record on the event loop, and the response writes the futures' reports in order.
At most `MAX_IN_FLIGHT_REPORTS` reports wait to be written (the body is not read further until
they are), and no report is awaited longer than `request.timeout.ms` plus a second past the
producer's delivery timeout (then it is 500/50003).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import json
from collections.abc import AsyncIterator, Iterable
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from services.clients.producer.errors import RecordTooLargeError
from services.common.errors import Errors, KafkaError
from services.gateway.errors import KAFKA_ERROR, RestError, from_kafka_error_v3
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

_DATA_SCHEMA = {"type": ["object", "null"], "properties": {
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
    """Sends the records of one request through the shared Producer and answers for each."""

    def __init__(self, state: GatewayState, cluster_id: str, topic: str, partitions_count: int) -> None:
        self.state = state
        self.cluster_id = cluster_id
        self.topic = topic
        self.partitions_count = partitions_count
        self.loop = asyncio.get_running_loop()
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
        [future] = await self.submit([text])
        outcome = await self._await(future)
        if isinstance(outcome, RestError):
            raise outcome
        return JSONResponse(outcome)

    async def submit(self, texts: Iterable[str],
                     pending: asyncio.Queue | None = None) -> list[asyncio.Future[Outcome]]:
        """One future per text, in order: the sound records are handed to the producer in order,
        `SUBMIT_CHUNK` at a time (which keeps each partition's order), and only then are their
        futures put in `pending`, so a full `pending` never waits on records not yet sent."""
        futures: list[asyncio.Future[Outcome]] = []
        chunk: list[asyncio.Future[Outcome]] = []
        batch: list[tuple[ProduceRecord, asyncio.Future[Outcome]]] = []
        for text in texts:
            future = self.loop.create_future()
            try:
                batch.append((self.record(text), future))
            except RestError as error:
                future.set_result(error)
            chunk.append(future)
            if len(chunk) >= SUBMIT_CHUNK:
                await self._hand_over(batch, chunk, pending)
                futures += chunk
                chunk, batch = [], []
        await self._hand_over(batch, chunk, pending)
        return futures + chunk

    async def _hand_over(self, batch: list[tuple[ProduceRecord, asyncio.Future[Outcome]]],
                         chunk: list[asyncio.Future[Outcome]], pending: asyncio.Queue | None) -> None:
        if batch:
            await run_in_threadpool(self._send_all, batch)
        if pending is not None:
            for future in chunk:
                await pending.put(future)

    async def reports(self, texts: AsyncIterator[list[str]]) -> AsyncIterator[bytes]:
        """The delivery report of every record of `texts`, in order, each as it completes."""
        pending: asyncio.Queue[asyncio.Future[Outcome] | None] = asyncio.Queue(MAX_IN_FLIGHT_REPORTS)
        reader = asyncio.create_task(self._read(texts, pending))
        try:
            while (future := await pending.get()) is not None:
                outcome = await self._await(future)
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
            await pending.put(_done(self.loop, error))
        except Exception as error:  # noqa: BLE001 - the body stopped: say why in a last report
            await pending.put(_done(self.loop, _body_failure(error)))
        await pending.put(None)

    async def _await(self, future: asyncio.Future[Outcome]) -> Outcome:
        try:
            outcome = await asyncio.wait_for(asyncio.shield(future), self.report_timeout_s)
        except TimeoutError:
            return from_kafka_error_v3(KafkaError(f"no delivery report within {self.report_timeout_s:g} s",
                                                  error=Errors.REQUEST_TIMED_OUT))
        if not isinstance(outcome, RestError):
            self.state.metrics.produced(1)
        return outcome

    def _send_all(self, batch: list[tuple[ProduceRecord, asyncio.Future[Outcome]]]) -> None:
        """On the threadpool: sends each record, its callback settling its future."""
        for record, future in batch:
            try:
                self.state.producer.send(self.topic, record.value, key=record.key, partition=record.partition,
                                         timestamp_ms=record.timestamp_ms, headers=record.headers,
                                         callback=functools.partial(self._delivered, record, future))
            except Exception as error:  # noqa: BLE001 - refused before it was queued: nothing written
                self._settle(future, _send_failure(error))

    def _delivered(self, record: ProduceRecord, future: asyncio.Future[Outcome], metadata, error) -> None:
        """The producer's callback, on its sender thread."""
        self._settle(future, _send_failure(error) if error is not None
                     else delivered_report(self.cluster_id, record, metadata))

    def _settle(self, future: asyncio.Future[Outcome], outcome: Outcome) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self.loop.call_soon_threadsafe(_set, future, outcome)


def _set(future: asyncio.Future[Outcome], outcome: Outcome) -> None:
    if not future.done():
        future.set_result(outcome)


def _done(loop: asyncio.AbstractEventLoop, outcome: Outcome) -> asyncio.Future[Outcome]:
    future = loop.create_future()
    future.set_result(outcome)
    return future


def _send_failure(error: BaseException) -> RestError:
    if isinstance(error, RecordTooLargeError):
        return RestError(413, 413, str(error))
    if isinstance(error, KafkaError):
        return from_kafka_error_v3(error)
    if isinstance(error, (ValueError, TypeError)):
        return bad_request(str(error))
    return RestError(500, KAFKA_ERROR, f"{type(error).__name__}: {error}")


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
                 "application/json": {"schema": PRODUCE_REQUEST_SCHEMA}}}})
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
