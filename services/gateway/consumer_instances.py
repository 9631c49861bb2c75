"""REST Proxy v2 consumer instances of one gateway process: `ConsumerInstance` and `InstanceRegistry`.

An instance wraps one `services.clients.consumer.Consumer`, which is used by one thread at a time:
every call on it goes through `ConsumerInstance.call`, which takes the instance's asyncio lock, runs
the call on the threadpool and releases the lock only when the call has really returned (a call
that outlives its deadline is answered 5xx but still holds the lock, so the next call never meets
the consumer busy on another thread). A records read is a series of short steps, each a
non-blocking `poll(0)` plus taking records from the instance's buffer (at most `READ_STEP_MAX_MS`),
with an asyncio sleep after a step that found nothing ready, `READ_BACKOFF_MS` at first and doubling
up to `READ_BACKOFF_MAX_MS` while nothing comes: a long poll parks no thread, and hundreds of idle
reads take few threadpool turns from produce and admin calls, which share the threadpool.

The buffer holds records polled but not yet answered (a read stops at `max_bytes`); commits of
"everything fetched" (an empty offsets body) and an auto-commit at close count only records
answered, never buffered ones. Reads follow REST Proxy: a read waits `min(timeout, the instance's
consumer.request.timeout.ms)` and answers early only once it holds more than the instance's
`fetch.min.bytes` (a response-size threshold of the proxy, not the Kafka fetch setting) or the next
record would reach `max_bytes`.

The registry maps (group, instance id) to instances, creates them (409 for a taken id, 429 past
`consumer.max.instances`), closes instances idle longer than `consumer.instance.timeout.ms` from a
periodic task (they leave their group) and keeps the `consumer_instances` gauge equal to the number
of open instances.

Several worker processes (`num.workers` > 1): an instance lives in the worker that created it.
`owner_of(group, instance_id, workers)` says which worker that is: generated ids
(`rest-consumer-<gateway id>-<worker index>-<uuid>`) carry it, and a name chosen by the client is
placed by a stable hash of group and name (a create that lands on another worker is redirected to
the owner, so the id stays exactly the name the client chose). Routes answer a request for another
worker's instance with 307 to `worker_url(config, owner)` (see `routes.consumers_v2`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import logging
import re
import time
import uuid
import zlib
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool

from services.clients.consumer import Consumer, ConsumerRecord, IllegalStateError, OffsetAndMetadata
from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition
from services.gateway.config import GatewayConfig
from services.gateway.errors import (
    CONSUMER_ALREADY_EXISTS,
    CONSUMER_INSTANCE_NOT_FOUND,
    ILLEGAL_STATE,
    INVALID_BODY,
    KAFKA_ERROR,
    RestError,
)
from services.gateway.media import EmbeddedFormat

logger = logging.getLogger(__name__)

T = TypeVar("T")

READ_BACKOFF_MS = 50  # between two steps of a waiting read (REST Proxy's consumer.iterator.backoff.ms)
READ_BACKOFF_MAX_MS = 400  # the wait doubles after each empty step up to this, so idle reads cost little
READ_STEP_MAX_MS = 200  # the longest one step of a read holds a thread while records keep coming
MAX_RESPONSE_BYTES = 64 * 1024 * 1024  # the most a records read answers (REST Proxy's consumer.request.max.bytes)
CLOSE_TIMEOUT_S = 5.0
GENERATED_ID = re.compile(r"rest-consumer-\d+-(?P<worker>\d+)-[0-9a-f-]{36}")
LEGAL_NAME = re.compile(r"[^/?#%\s]{1,249}")  # a name the client chooses: one path segment as it is


def instance_not_found() -> RestError:
    return RestError(404, CONSUMER_INSTANCE_NOT_FOUND, "Consumer instance not found.")


def illegal_state(error: Exception) -> RestError:
    return RestError(409, ILLEGAL_STATE, f"Illegal state: {error.args[0] if error.args else error}")


# ---------------------------------------------------------------------------------------------- workers


def worker_port(config: GatewayConfig, front_port: int, worker_index: int) -> int:
    """The port of worker `worker_index`'s own listener."""
    return (config.worker_base_port or front_port + 1) + worker_index


def owner_of(group: str, instance_id: str, workers: int) -> int:
    """The index of the worker process an instance lives in (see the module docstring)."""
    if workers <= 1:
        return 0
    generated = GENERATED_ID.fullmatch(instance_id)
    if generated is not None and int(generated["worker"]) < workers:
        return int(generated["worker"])
    return zlib.crc32(f"{group}\x00{instance_id}".encode()) % workers


def generated_id(gateway_id: int, worker_index: int) -> str:
    return f"rest-consumer-{gateway_id}-{worker_index}-{uuid.uuid4()}"


# ---------------------------------------------------------------------------------------------- settings


@dataclasses.dataclass(frozen=True)
class InstanceSettings:
    """What a create request asked for, checked: the embedded format, the Consumer's keyword
    settings, and the proxy-side read settings (None: the gateway's defaults)."""

    format: EmbeddedFormat
    consumer_settings: Mapping[str, Any]
    response_min_bytes: int | None = None
    request_timeout_ms: int | None = None


def read_timeout_ms(requested_ms: int | None, instance_ms: int | None, default_ms: int) -> int:
    """How long a records read waits: the instance's consumer.request.timeout.ms (else the
    gateway's), lowered by the request's `timeout` when that is positive, as REST Proxy does."""
    limit = default_ms if instance_ms is None else instance_ms
    if requested_ms is None or requested_ms <= 0:
        return limit
    return min(requested_ms, limit)


def encode_key_or_value(data: bytes | None, embedded: EmbeddedFormat) -> Any:
    """A record's key or value as a v2 response carries it: base64 text, or the JSON value it holds."""
    if data is None:
        return None
    if embedded is EmbeddedFormat.BINARY:
        return base64.b64encode(data).decode("ascii")
    return json.loads(data)


def record_size(record: ConsumerRecord) -> int:
    """REST Proxy's size of a record in a response: key bytes plus value bytes."""
    return (0 if record.key is None else len(record.key)) + (0 if record.value is None else len(record.value))


# ---------------------------------------------------------------------------------------------- reads


@dataclasses.dataclass
class ReadProgress:
    """The records one read has gathered so far, and whether it is complete."""

    max_bytes: int
    min_bytes: int  # answer once more than this many bytes are gathered
    records: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    size: int = 0
    full: bool = False  # the next record would reach max_bytes

    @property
    def done(self) -> bool:
        return self.full or self.size > self.min_bytes


class ConsumerInstance:
    """One v2 consumer instance; see the module docstring."""

    def __init__(self, group: str, instance_id: str, settings: InstanceSettings, consumer: Consumer,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.group = group
        self.instance_id = instance_id
        self.settings = settings
        self.consumer = consumer
        self.clock = clock
        self._lock = asyncio.Lock()
        self._buffer: deque[ConsumerRecord] = deque()
        self.last_used = clock()
        self.busy = 0
        self.closed = False

    @property
    def format(self) -> EmbeddedFormat:
        return self.settings.format

    def idle_for_s(self) -> float:
        return 0.0 if self.busy else self.clock() - self.last_used

    async def call(self, function: Callable[..., T], *args: Any, timeout_s: float) -> T:
        """`function(*args)` on the threadpool, alone on this instance, answered within `timeout_s`
        (REQUEST_TIMED_OUT past it); 404 once the instance is closed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        self.busy += 1
        try:
            try:
                await asyncio.wait_for(self._lock.acquire(), timeout_s)
            except TimeoutError:
                raise KafkaError(f"the consumer instance stayed busy for {timeout_s:g} s",
                                 error=Errors.REQUEST_TIMED_OUT) from None
            if self.closed:
                self._lock.release()
                raise instance_not_found()
            task = asyncio.ensure_future(run_in_threadpool(function, *args))
            task.add_done_callback(self._finished)
            try:
                return await asyncio.wait_for(asyncio.shield(task), max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise KafkaError(f"no answer from the cluster within {timeout_s:g} s",
                                 error=Errors.REQUEST_TIMED_OUT) from None
        finally:
            self.busy -= 1
            self.last_used = self.clock()

    def _finished(self, task: asyncio.Future) -> None:
        self._lock.release()
        if not task.cancelled() and task.exception() is not None and self.closed:
            logger.debug("a call on closed consumer instance %s failed: %s", self.instance_id, task.exception())

    # ------------------------------------------------------------------ calls (on the threadpool)

    def read_step(self, progress: ReadProgress, deadline: float) -> bool:
        """Moves buffered and newly polled records into `progress` until it is done, nothing more
        is ready, or `deadline` (monotonic seconds) or the step's own limit (READ_STEP_MAX_MS) passes;
        True when records may be ready at once (the step stopped at its limit)."""
        step_deadline = min(deadline, self.clock() + READ_STEP_MAX_MS / 1000)
        while not progress.done:
            if self.clock() >= step_deadline:
                return True
            if not self._buffer:
                if self.closed:
                    return False
                try:
                    polled = self.consumer.poll(0)
                except Exception:
                    if progress.records:
                        return False  # answer what was gathered; the next read raises it again
                    raise
                if not polled:
                    return False
                self._buffer.extend(polled)
            self._drain(progress)
        return False

    def _drain(self, progress: ReadProgress) -> None:
        embedded = self.settings.format
        while self._buffer and not progress.done:
            record = self._buffer[0]
            size = record_size(record)
            if progress.size + size >= progress.max_bytes:
                progress.full = True
                return
            try:
                answered = {"topic": record.topic, "key": encode_key_or_value(record.key, embedded),
                            "value": encode_key_or_value(record.value, embedded),
                            "partition": record.partition, "offset": record.offset}
            except ValueError as error:
                if progress.records:
                    progress.full = True
                    return
                raise RestError(500, KAFKA_ERROR, f"Kafka error: the record at offset {record.offset} of "
                                                  f"{record.topic}-{record.partition} is not JSON: {error}") from None
            self._buffer.popleft()
            progress.records.append(answered)
            progress.size += size

    def _answered_positions(self, timeout_ms: int) -> dict[TopicPartition, OffsetAndMetadata] | None:
        """The positions of every assigned partition counting only answered records; None when
        nothing is buffered (the consumer's own positions are those)."""
        if not self._buffer:
            return None
        first_buffered: dict[TopicPartition, int] = {}
        for record in self._buffer:
            first_buffered.setdefault(record.topic_partition, record.offset)
        positions = {}
        for tp in self.consumer.assignment():
            offset = first_buffered.get(tp)
            positions[tp] = OffsetAndMetadata(self.consumer.position(tp, timeout_ms) if offset is None else offset)
        return positions

    def commit_answered(self, timeout_ms: int) -> None:
        """Commits the position after the last answered record of every assigned partition."""
        self.consumer.commit_sync(self._answered_positions(timeout_ms), timeout_ms=timeout_ms)

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_ms: int) -> None:
        if offsets:
            self.consumer.commit_sync(dict(offsets), timeout_ms=timeout_ms)

    def forget_buffered(self, keep: Callable[[TopicPartition], bool]) -> None:
        """Drops buffered records of partitions `keep` rejects (after seeks and reassignments)."""
        self._buffer = deque(record for record in self._buffer if keep(record.topic_partition))

    def subscribe(self, topics: list[str] | None, pattern: str | None) -> None:
        self.consumer.subscribe(topics, pattern=pattern)
        self.forget_buffered(lambda tp: bool(topics) and tp.topic in topics)

    def unsubscribe(self) -> None:
        self.consumer.unsubscribe()
        self._buffer.clear()

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.consumer.assign(partitions)
        wanted = set(partitions)
        self.forget_buffered(lambda tp: tp in wanted)

    def seek(self, offsets: Mapping[TopicPartition, int]) -> None:
        for tp in offsets:  # every partition first, so nothing is half done when one is not assigned
            if tp not in self.consumer.assignment():
                raise IllegalStateError(f"No current assignment for partition {tp}")
        for tp, offset in offsets.items():
            self.consumer.seek(tp, offset)
        self.forget_buffered(lambda tp: tp not in offsets)

    def seek_to_times(self, timestamps: Mapping[TopicPartition, int], timeout_ms: int) -> None:
        """Seeks each partition to its first record at or after the timestamp (ms), or to its end."""
        found = self.consumer.offsets_for_times(dict(timestamps), timeout_ms)
        for tp, hit in found.items():
            if hit is None:
                self.consumer.seek_to_end(tp)
            else:
                self.consumer.seek(tp, hit.offset)
        self.forget_buffered(lambda tp: tp not in timestamps)

    def seek_to(self, partitions: list[TopicPartition], beginning: bool) -> None:
        (self.consumer.seek_to_beginning if beginning else self.consumer.seek_to_end)(*partitions)
        chosen = set(partitions)
        self.forget_buffered(lambda tp: bool(chosen) and tp not in chosen)

    def close(self) -> None:
        """Leaves the group (an auto-commit first counts only answered records) and closes the consumer."""
        self.closed = True
        try:
            if self._buffer and self.consumer.config.auto_commit_enabled:
                for tp, position in (self._answered_positions(int(CLOSE_TIMEOUT_S * 1000)) or {}).items():
                    self.consumer.seek(tp, position.offset)
        except Exception:  # noqa: BLE001 - closing goes on regardless
            logger.warning("could not rewind consumer instance %s before closing", self.instance_id, exc_info=True)
        self._buffer.clear()
        self.consumer.close(timeout=CLOSE_TIMEOUT_S)


def consumer_errors(error: Exception) -> Exception:
    """What a route raises for an error of a call on a consumer: IllegalStateError is 409 (40903),
    a ValueError of bad input 422 (42202); Kafka's errors are left to the app's handlers."""
    if isinstance(error, IllegalStateError):
        return illegal_state(error)
    if isinstance(error, ValueError) and not isinstance(error, KafkaError):
        return RestError(422, INVALID_BODY, str(error))
    return error


# ---------------------------------------------------------------------------------------------- registry


ConsumerFactory = Callable[[str, str, InstanceSettings], Consumer]


class InstanceRegistry:
    """The consumer instances of one process; see the module docstring."""

    def __init__(self, config: GatewayConfig, worker_index: int, factory: ConsumerFactory,
                 on_count: Callable[[int], None] = lambda _count: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.worker_index = worker_index
        self._factory = factory
        self._on_count = on_count
        self.clock = clock
        self._instances: dict[tuple[str, str], ConsumerInstance | None] = {}  # None: being created
        self._expiry: asyncio.Task | None = None

    def __len__(self) -> int:
        return sum(1 for instance in self._instances.values() if instance is not None)

    def new_id(self) -> str:
        return generated_id(self.config.gateway_id, self.worker_index)

    def owns(self, group: str, instance_id: str) -> bool:
        return owner_of(group, instance_id, self.config.num_workers) == self.worker_index

    async def create(self, group: str, instance_id: str, settings: InstanceSettings) -> ConsumerInstance:
        key = (group, instance_id)
        if key in self._instances:
            raise RestError(409, CONSUMER_ALREADY_EXISTS,
                            "Consumer with specified consumer ID already exists in the specified consumer group.")
        if len(self._instances) >= self.config.consumer_max_instances:
            raise RestError(429, 429, f"This gateway process holds consumer.max.instances "
                                      f"({self.config.consumer_max_instances}) consumer instances already; "
                                      f"delete some first.")
        self._instances[key] = None
        try:
            consumer = await asyncio.wait_for(
                run_in_threadpool(self._factory, group, instance_id, settings), self.config.request_timeout_ms / 1000)
        except BaseException:
            del self._instances[key]
            raise
        instance = ConsumerInstance(group, instance_id, settings, consumer, self.clock)
        self._instances[key] = instance
        self._on_count(len(self))
        return instance

    def get(self, group: str, instance_id: str) -> ConsumerInstance:
        instance = self._instances.get((group, instance_id))
        if instance is None or instance.closed:
            raise instance_not_found()
        instance.last_used = self.clock()
        return instance

    async def delete(self, group: str, instance_id: str) -> None:
        instance = self.get(group, instance_id)
        await self._close(instance)

    async def _close(self, instance: ConsumerInstance) -> None:
        if self._instances.get((instance.group, instance.instance_id)) is instance:
            del self._instances[(instance.group, instance.instance_id)]
            self._on_count(len(self))
        with contextlib.suppress(RestError):  # closed meanwhile by another request
            await instance.call(instance.close, timeout_s=CLOSE_TIMEOUT_S * 2 + self.config.request_timeout_ms / 1000)

    def expired(self) -> list[ConsumerInstance]:
        limit_s = self.config.consumer_instance_timeout_ms / 1000
        return [instance for instance in self._instances.values()
                if instance is not None and instance.idle_for_s() >= limit_s]

    async def close_expired(self) -> int:
        expired = self.expired()
        for instance in expired:
            logger.info("closing consumer instance %s of group %s, idle past consumer.instance.timeout.ms",
                        instance.instance_id, instance.group)
            try:
                await self._close(instance)
            except Exception:  # noqa: BLE001 - the next instance is closed regardless
                logger.warning("closing expired consumer instance %s failed", instance.instance_id, exc_info=True)
        return len(expired)

    def start_expiry(self) -> None:
        self._expiry = asyncio.get_running_loop().create_task(self._expire_forever())

    async def _expire_forever(self) -> None:
        interval_s = min(1.0, max(0.05, self.config.consumer_instance_timeout_ms / 4000))
        while True:
            await asyncio.sleep(interval_s)
            await self.close_expired()

    async def close_all(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry
        instances = [instance for instance in self._instances.values() if instance is not None]
        await asyncio.gather(*(self._close(instance) for instance in instances), return_exceptions=True)
