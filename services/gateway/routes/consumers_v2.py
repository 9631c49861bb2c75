"""REST Proxy v2 consumer instances: `/consumers/{group}` and `/consumers/{group}/instances/{instance}/...`.

    POST   /consumers/{group}                         create: {instance_id, base_uri}; 409 (40901) taken
                                                      name, 422 (42201 format, 42206 settings); takes
                                                      name, format, auto.offset.reset,
                                                      auto.commit.enable, isolation.level,
                                                      fetch.min.bytes, consumer.request.timeout.ms
    DELETE .../instances/{instance}                   close and leave the group (204)
    POST | GET | DELETE .../subscription              {topics} or {topic_pattern} (204) | {topics}
    POST | GET .../assignments                        {partitions: [{topic, partition}]}
    POST   .../positions                              {offsets: [{topic, partition, offset}], timestamps?}
    POST   .../positions/beginning | .../positions/end {partitions: [...]} (none given: all assigned)
    GET    .../records?timeout=&max_bytes=            [{topic, key, value, partition, offset}] in the
                                                      instance's format (406, 40601, for the other one)
    POST   .../offsets                                commit {offsets: [{topic, partition, offset}]}
                                                      (offset = the last record processed), or with no
                                                      body every record answered so far
    GET    .../offsets                                {partitions} -> {offsets: [{topic, partition,
                                                      offset, metadata}]}, committed ones only

An unknown instance is 404 (40403); a call the consumer's state refuses (seeking a partition not
assigned, subscribing while assigned by hand) 409 (40903). The instances themselves, their threading
and expiry: `services.gateway.consumer_instances`.

Several workers (`num.workers` > 1, started by `services.gateway.__main__`): every worker serves
the shared front port (SO_REUSEPORT, the kernel spreads connections over the workers) and a port of
its own (`worker.base.port` + index, by default the front port + 1 + index). An instance lives in
the worker that created it: its `base_uri` names that worker's own port, and its id carries the
worker index (generated ids) or is placed on a worker by a hash of group and name (names the client
chose; a create landing on another worker is redirected there, so the instance keeps its name).
A request for an instance of another worker, arriving on the front port, is answered
307 Temporary Redirect to the same path on the owning worker's port (`curl -L` and
`httpx follow_redirects` follow it, with method and body).
"""

from __future__ import annotations

import asyncio
import re
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import quote

from annotated_types import Le
from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    WithJsonSchema,
    field_validator,
)
from starlette.exceptions import HTTPException

from services.clients.consumer import Consumer, OffsetAndMetadata
from services.common.config import ConfigError
from services.common.errors import KafkaError
from services.common.security.acl import AclOperation, ResourceType
from services.common.service import listener_address
from services.common.shared_types import ISOLATION_LEVEL_NAMES
from services.common.topic_names import validate_topic_name
from services.common.topic_partition import TopicPartition
from services.gateway.config import GatewayConfig
from services.gateway.consumer_instances import (
    LEGAL_NAME,
    MAX_RESPONSE_BYTES,
    READ_BACKOFF_MAX_MS,
    READ_BACKOFF_MS,
    ConsumerInstance,
    InstanceRegistry,
    InstanceSettings,
    ReadProgress,
    consumer_errors,
    owner_of,
    read_timeout_ms,
    worker_port,
)
from services.gateway.errors import (
    CONSUMER_FORMAT_MISMATCH,
    ERROR_BODY_REF,
    INVALID_BODY,
    INVALID_CONSUMER_CONFIG,
    INVALID_FORMAT,
    INVALID_OFFSET,
    RestError,
    error_responses,
    partition_not_found,
    topic_not_found,
)
from services.gateway.media import (
    JSON,
    V2_BINARY,
    V2_EMBEDDED_JSON,
    V2_JSON,
    EmbeddedFormat,
    V2Response,
    check_accept,
    media_type,
)
from services.gateway.schemas import INT64_JSON_MAX, TOPIC_NAME_PATTERN
from services.gateway.security import authorize
from services.gateway.state import GatewayState, gateway_state

router = APIRouter(tags=["v2 consumers"], default_response_class=V2Response, responses=error_responses(400, 422))

REGISTRY = "consumers_v2"
WORKER_URLS = "consumers_v2.worker_urls"
RESPONSE_MIN_BYTES_MAX = 10_000_000
SCHEMA_FORMATS = {"avro", "jsonschema", "protobuf"}
AUTO_OFFSET_RESETS = {"earliest", "latest", "none"}
_MEDIA_OF = {EmbeddedFormat.BINARY: V2_BINARY, EmbeddedFormat.JSON: V2_EMBEDDED_JSON}


# ---------------------------------------------------------------------------------------------- bodies


def _json_integer(value: Any) -> Any:
    """An integer as JSON Schema reads one: 3 or 3.0, not true or "3"."""
    if isinstance(value, bool | str):
        raise ValueError("must be an integer")
    return value


JsonInt = Annotated[int, BeforeValidator(_json_integer)]


def _either_case(*words: str) -> str:
    """A JSON Schema pattern of these words in any case ("json" -> "[Jj][Ss][Oo][Nn]")."""
    return "^(" + "|".join("".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in word)
                           for word in words) + ")$"


# The settings' texts a create accepts (checked by `instance_settings`, so a refusal keeps its code).
FETCH_MIN_BYTES_TEXT = re.compile(r"0*[0-9]{1,7}")  # 0 to 9999999: within RESPONSE_MIN_BYTES_MAX
TIMEOUT_MS_TEXT = re.compile(r"[0-9]+")


def _documented(schema: dict[str, Any]) -> Any:
    """The OpenAPI schema of a create setting: `schema` or null."""
    return WithJsonSchema({"anyOf": [schema, {"type": "null"}]})


class CreateConsumerRequest(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    name: Annotated[StrictStr | None, _documented({"type": "string", "pattern": f"^{LEGAL_NAME.pattern}$"})] = Field(
        None, description="The instance id; generated when absent.")
    format: Annotated[StrictStr | None, _documented({"type": "string", "pattern": _either_case("binary", "json")})] = \
        Field(None, description="binary (default) or json.")
    auto_offset_reset: Annotated[StrictStr | None, _documented({"enum": sorted(AUTO_OFFSET_RESETS)})] = Field(
        None, alias="auto.offset.reset", description="earliest, latest or none.")
    auto_commit_enable: Annotated[StrictStr | StrictBool | None, _documented({"anyOf": [
        {"type": "boolean"}, {"type": "string", "pattern": _either_case("true", "false")}]})] = Field(
        None, alias="auto.commit.enable", description="true or false.")
    isolation_level: Annotated[StrictStr | None, _documented({"enum": sorted(ISOLATION_LEVEL_NAMES)})] = Field(
        None, alias="isolation.level", description="read_uncommitted (default) or read_committed: whether records "
                                                   "of aborted and open transactions are read.")
    fetch_min_bytes: Annotated[JsonInt | StrictStr | None, _documented({"anyOf": [
        {"type": "integer", "minimum": -1, "maximum": RESPONSE_MIN_BYTES_MAX},
        {"type": "string", "pattern": f"^{FETCH_MIN_BYTES_TEXT.pattern}$"}]})] = Field(
        None, alias="fetch.min.bytes", description="A read answers once it holds more bytes than this (-1: never "
                                                   "before its timeout).")
    consumer_request_timeout_ms: Annotated[JsonInt | StrictStr | None, _documented({"anyOf": [
        {"type": "integer", "minimum": 0}, {"type": "string", "pattern": f"^{TIMEOUT_MS_TEXT.pattern}$"}]})] = Field(
        None, alias="consumer.request.timeout.ms", description="The longest a records read waits.")


class CreateConsumerResponse(BaseModel):
    instance_id: str
    base_uri: str


INT32_MAX = 2**31 - 1


def legal_topic(name: str) -> str:
    """Kafka's rules for a topic name (a ValueError, so a 422 with 42202, for an illegal one)."""
    try:
        validate_topic_name(name)
    except KafkaError as error:
        raise ValueError(error.args[0]) from None
    return name


def _date_time(value: Any) -> Any:
    """A date-time as text (ISO 8601), not a number or a text of one."""
    if not isinstance(value, str) or value.strip().lstrip("+-").replace(".", "", 1).isdigit():
        raise ValueError("must be an ISO 8601 date-time")
    return value


DateTime = Annotated[datetime, BeforeValidator(_date_time)]
TopicName = Annotated[str, WithJsonSchema({"type": "string", "pattern": TOPIC_NAME_PATTERN})]


class SubscriptionRequest(BaseModel):
    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"required": ["topics"], "properties": {"topics": {"type": "array"}}},
        {"required": ["topic_pattern"], "properties": {"topic_pattern": {"type": "string", "format": "regex",
                                                                     "minLength": 1}}}]})

    topics: list[TopicName] | None = None
    topic_pattern: str | None = None

    @field_validator("topics")
    @classmethod
    def _legal_topics(cls, topics: list[str] | None) -> list[str] | None:
        return None if topics is None else [legal_topic(topic) for topic in topics]


class SubscriptionResponse(BaseModel):
    topics: list[str]


class PartitionRef(BaseModel):
    topic: TopicName
    partition: JsonInt = Field(ge=0, le=INT32_MAX)

    @field_validator("topic")
    @classmethod
    def _legal_topic(cls, topic: str) -> str:
        return legal_topic(topic)


class PartitionsRequest(BaseModel):
    partitions: list[PartitionRef] = Field(default_factory=list)


class PartitionOffsetRequest(PartitionRef):
    offset: JsonInt = Field(le=INT64_JSON_MAX, json_schema_extra={"minimum": 0})  # 42203 below, by the routes
    metadata: str | None = None


class PartitionTimestamp(PartitionRef):
    timestamp: DateTime | Annotated[int, Le(INT64_JSON_MAX), BeforeValidator(_json_integer)] = Field(
        description="ISO 8601, or ms since the epoch (a time before 1970 seeks as 1970 does)")
    metadata: str | None = None


class PositionsRequest(BaseModel):
    offsets: list[PartitionOffsetRequest] = Field(default_factory=list)
    timestamps: list[PartitionTimestamp] = Field(default_factory=list)


class CommitRequest(BaseModel):
    offsets: list[PartitionOffsetRequest] | None = None


class CommittedOffset(BaseModel):
    topic: str
    partition: int
    offset: int
    metadata: str


class CommittedResponse(BaseModel):
    offsets: list[CommittedOffset]


class ConsumerRecordResponse(BaseModel):
    topic: str
    key: Any = None
    value: Any = None
    partition: int
    offset: int


def v2_json(content: Any, status_code: int = 200) -> JSONResponse:
    return JSONResponse(content, status_code=status_code, media_type=V2_JSON)


NO_CONTENT = 204


def no_content() -> Response:
    return Response(status_code=NO_CONTENT)


# ---------------------------------------------------------------------------------------------- settings


def _invalid_config(message: str) -> RestError:
    return RestError(422, INVALID_CONSUMER_CONFIG, f"Invalid consumer configuration: {message}")


def _int_setting(key: str, value: int | str | None, text: re.Pattern[str], low: int,
                 high: int | None = None) -> int | None:
    """A setting given as an integer, or as a text of digits `text` matches."""
    if value is None:
        return None
    if isinstance(value, str) and not text.fullmatch(value):
        raise _invalid_config(f"{key} must be an integer, not {value!r}")
    number = int(value)
    if number < low or (high is not None and number > high):
        bounds = f"at least {low}" if high is None else f"between {low} and {high}"
        raise _invalid_config(f"{key} must be {bounds}, not {number}")
    return number


def instance_settings(body: CreateConsumerRequest) -> InstanceSettings:
    """The checked settings of a create request (422: 42201 for the format, 42206 for the rest)."""
    name = "binary" if body.format is None else body.format.lower()
    if name in SCHEMA_FORMATS:
        raise RestError(422, INVALID_FORMAT, f"The {name} format needs a schema registry, which Odradek has not; "
                                             f"use binary or json.")
    try:
        embedded = EmbeddedFormat(name)
    except ValueError:
        raise RestError(422, INVALID_FORMAT, f"Invalid format type {body.format!r}: binary or json.") from None
    consumer_settings: dict[str, Any] = {}
    if body.auto_offset_reset is not None:
        if body.auto_offset_reset not in AUTO_OFFSET_RESETS:
            raise _invalid_config(f"auto.offset.reset must be earliest, latest or none, not {body.auto_offset_reset!r}")
        consumer_settings["auto_offset_reset"] = body.auto_offset_reset
    if body.auto_commit_enable is not None:
        enable = body.auto_commit_enable
        if isinstance(enable, str):
            if enable.lower() not in ("true", "false"):
                raise _invalid_config(f"auto.commit.enable must be true or false, not {enable!r}")
            enable = enable.lower() == "true"
        consumer_settings["enable_auto_commit"] = enable
    if body.isolation_level is not None:
        if body.isolation_level not in ISOLATION_LEVEL_NAMES:
            raise _invalid_config(f"isolation.level must be read_uncommitted or read_committed, not "
                                  f"{body.isolation_level!r}")
        consumer_settings["isolation_level"] = body.isolation_level
    return InstanceSettings(
        embedded, consumer_settings,
        _int_setting("fetch.min.bytes", body.fetch_min_bytes, FETCH_MIN_BYTES_TEXT, -1, RESPONSE_MIN_BYTES_MAX),
        _int_setting("consumer.request.timeout.ms", body.consumer_request_timeout_ms, TIMEOUT_MS_TEXT, 0))


def _check_name(name: str) -> str:
    if not LEGAL_NAME.fullmatch(name):
        raise _invalid_config(f"name {name!r} must be 1 to 249 characters without '/', '?', '#', '%' or spaces")
    return name


# ---------------------------------------------------------------------------------------------- lifecycle


def consumer_factory(config: GatewayConfig):
    def create(group: str, instance_id: str, settings: InstanceSettings) -> Consumer:
        return Consumer(bootstrap_servers=config.bootstrap_servers, **config.client_settings(), group_id=group,
                        client_id=instance_id,
                        request_timeout_ms=config.request_timeout_ms,
                        default_api_timeout_ms=config.request_timeout_ms,
                        allow_auto_create_topics=False, **settings.consumer_settings)

    return create


async def startup(state: GatewayState) -> None:
    from services.gateway.app import advertised_url  # the app imports the routes

    config = state.config
    registry = InstanceRegistry(config, state.worker_index, consumer_factory(config),
                                on_count=state.metrics.consumer_instances.set)
    if config.num_workers > 1:
        front_port = listener_address(config.listeners)[1]
        state.extensions[WORKER_URLS] = [advertised_url(config, worker_port(config, front_port, index))
                                         for index in range(config.num_workers)]
    state.extensions[REGISTRY] = registry
    registry.start_expiry()


async def shutdown(state: GatewayState) -> None:
    registry: InstanceRegistry | None = state.extensions.pop(REGISTRY, None)
    if registry is not None:
        await registry.close_all()


def registry_of(state: GatewayState) -> InstanceRegistry:
    return state.extensions[REGISTRY]


def redirect_to_worker(request: Request, state: GatewayState, worker: int) -> HTTPException:
    """307 to the same request on worker `worker`'s own port."""
    path = request.scope.get("raw_path") or request.url.path.encode()  # as sent, escapes and all
    target = state.extensions[WORKER_URLS][worker] + path.decode("latin-1")
    if request.url.query:
        target += f"?{request.url.query}"
    return HTTPException(307, headers={"Location": target})


async def owned_instance(request: Request, group: str, instance: str) -> ConsumerInstance:
    """The instance a request names (a dependency): 307 when another worker holds it, else 404 when unknown."""
    state = gateway_state(request)
    registry = registry_of(state)
    if not registry.owns(group, instance):
        raise redirect_to_worker(request, state, owner_of(group, instance, state.config.num_workers))
    return registry.get(group, instance)


async def on_consumer(state: GatewayState, instance: ConsumerInstance, function, *args: Any) -> Any:
    """`function(*args)` alone on the instance's consumer, within request.timeout.ms, errors mapped."""
    try:
        return await instance.call(function, *args, timeout_s=state.request_timeout_s)
    except (ValueError, KafkaError) as error:
        mapped = consumer_errors(error)
        if mapped is error:
            raise
        raise mapped from None


def _partitions(refs: list[PartitionRef]) -> list[TopicPartition]:
    return [TopicPartition(ref.topic, ref.partition) for ref in refs]


async def check_partitions_exist(state: GatewayState, partitions: list[TopicPartition]) -> None:
    """404 (40401 or 40402) for the first partition the cluster does not have."""
    topics = sorted({tp.topic for tp in partitions})
    if not topics:
        return
    described = await state.blocking(state.admin.describe_topics, topics, timeout_ms=state.config.request_timeout_ms,
                                     raise_errors=False)
    for tp in partitions:
        found = described.get(tp.topic)
        if isinstance(found, KafkaError) or found is None:
            raise topic_not_found(tp.topic)
        if tp.partition >= len(found.partitions):
            raise partition_not_found(tp.topic, tp.partition)


Instance = Annotated[ConsumerInstance, Depends(owned_instance)]


# ---------------------------------------------------------------------------------------------- routes

INSTANCE = "/consumers/{group}/instances/{instance}"
ON_ANOTHER_WORKER = {307: {"description": "The instance is another worker's: Location is this request on its port.",
                           "headers": {"Location": {"schema": {"type": "string"}}},
                           "content": {JSON: {"schema": ERROR_BODY_REF}}}}
CREATE_ANSWERS = {**ON_ANOTHER_WORKER, **error_responses(409, 429)}
instances = APIRouter(responses={**ON_ANOTHER_WORKER, **error_responses(404, 409)})  # the routes of INSTANCE


class RecordsResponse(JSONResponse):
    """Records read, in the binary embedded format (or the json one: see `read_records`)."""

    media_type = V2_BINARY


@router.post("/consumers/{group}", response_model=CreateConsumerResponse,
             summary="Create a consumer instance in the group", responses=CREATE_ANSWERS)
async def create_instance(group: str, request: Request,
                          body: Annotated[CreateConsumerRequest | None, Body()] = None) -> JSONResponse:
    state = gateway_state(request)
    body = body or CreateConsumerRequest()
    settings = instance_settings(body)
    registry = registry_of(state)
    if body.name is None:
        instance_id = registry.new_id()
    else:
        instance_id = _check_name(body.name)
        if not registry.owns(group, instance_id):
            raise redirect_to_worker(request, state, owner_of(group, instance_id, state.config.num_workers))
    try:
        await registry.create(group, instance_id, settings)
    except ConfigError as error:
        raise _invalid_config(str(error)) from None
    base_uri = f"{state.base_url}/consumers/{quote(group, safe='')}/instances/{quote(instance_id, safe='')}"
    return v2_json({"instance_id": instance_id, "base_uri": base_uri})


@instances.delete(INSTANCE, status_code=NO_CONTENT, summary="Close the instance; it leaves its group")
async def delete_instance(request: Request, instance: Instance) -> Response:
    await registry_of(gateway_state(request)).delete(instance.group, instance.instance_id)
    return no_content()


@instances.post(INSTANCE + "/subscription", status_code=NO_CONTENT, summary="Subscribe to topics or a pattern")
async def subscribe(request: Request, body: SubscriptionRequest,
                    instance: Instance) -> Response:
    if body.topics is None and body.topic_pattern is None:
        raise RestError(422, INVALID_BODY, "A subscription needs topics or a topic_pattern.")
    authorize(request, AclOperation.READ, ResourceType.TOPIC, body.topics or ())
    pattern = None
    if body.topics is None:
        try:
            pattern = re.compile(body.topic_pattern)
        except re.error as error:
            raise RestError(422, INVALID_BODY, f"Invalid topic_pattern {body.topic_pattern!r}: {error}") from None
    await on_consumer(gateway_state(request), instance, instance.subscribe, body.topics, pattern)
    return no_content()


@instances.get(INSTANCE + "/subscription", response_model=SubscriptionResponse, summary="The subscribed topics")
async def subscription(request: Request, instance: Instance) -> JSONResponse:
    topics = await on_consumer(gateway_state(request), instance, instance.consumer.subscription)
    return v2_json({"topics": sorted(topics)})


@instances.delete(INSTANCE + "/subscription", status_code=NO_CONTENT, summary="Unsubscribe from every topic")
async def unsubscribe(request: Request, instance: Instance) -> Response:
    await on_consumer(gateway_state(request), instance, instance.unsubscribe)
    return no_content()


@instances.post(INSTANCE + "/assignments", status_code=NO_CONTENT, summary="Assign partitions by hand")
async def assign(request: Request, body: PartitionsRequest,
                 instance: Instance) -> Response:
    state = gateway_state(request)
    partitions = _partitions(body.partitions)
    authorize(request, AclOperation.READ, ResourceType.TOPIC, (p.topic for p in partitions))
    await check_partitions_exist(state, partitions)
    await on_consumer(state, instance, instance.assign, partitions)
    return no_content()


@instances.get(INSTANCE + "/assignments", response_model=PartitionsRequest, summary="The assigned partitions")
async def assignments(request: Request, instance: Instance) -> JSONResponse:
    assigned = await on_consumer(gateway_state(request), instance, instance.consumer.assignment)
    return v2_json({"partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(assigned)]})


def _epoch_ms(value: datetime | int) -> int:
    """The ms since the epoch to seek to: a time before 1970 seeks to the first record, as 1970 does."""
    return max(0, value if isinstance(value, int) else int(value.timestamp() * 1000))


@instances.post(INSTANCE + "/positions", status_code=NO_CONTENT, summary="Seek partitions to offsets or timestamps")
async def seek(request: Request, body: PositionsRequest,
               instance: Instance) -> Response:
    state = gateway_state(request)
    offsets = {}
    for item in body.offsets:
        if item.offset < 0:
            raise RestError(422, INVALID_OFFSET, f"Offset {item.offset} of {item.topic}-{item.partition} is negative.")
        offsets[TopicPartition(item.topic, item.partition)] = item.offset
    timestamps = {TopicPartition(item.topic, item.partition): _epoch_ms(item.timestamp) for item in body.timestamps}
    await check_partitions_exist(state, list(timestamps))  # 404 at once, not a search of a log that is not there
    if offsets:
        await on_consumer(state, instance, instance.seek, offsets)
    if timestamps:
        await on_consumer(state, instance, instance.seek_to_times, timestamps, state.config.request_timeout_ms)
    return no_content()


@instances.post(INSTANCE + "/positions/beginning", status_code=NO_CONTENT,
                summary="Seek partitions to their first offset")
async def seek_to_beginning(request: Request, body: PartitionsRequest,
                            instance: Instance) -> Response:
    await on_consumer(gateway_state(request), instance, instance.seek_to, _partitions(body.partitions), True)
    return no_content()


@instances.post(INSTANCE + "/positions/end", status_code=NO_CONTENT, summary="Seek partitions to their end")
async def seek_to_end(request: Request, body: PartitionsRequest,
                      instance: Instance) -> Response:
    await on_consumer(gateway_state(request), instance, instance.seek_to, _partitions(body.partitions), False)
    return no_content()


def check_records_accept(request: Request, embedded: EmbeddedFormat) -> str:
    """The media type a records read answers in: the instance's; 406 (40601) when Accept names only
    the other embedded format (`application/vnd.kafka.v2+json` counts as binary, as in REST Proxy)."""
    own = _MEDIA_OF[embedded]
    header = request.headers.get("accept")
    if not header:
        return own
    wanted = {media_type(part) for part in header.split(",")}
    if own in wanted or embedded is EmbeddedFormat.BINARY and V2_JSON in wanted:
        return own
    if wanted & {V2_BINARY, V2_EMBEDDED_JSON, V2_JSON}:
        raise RestError(406, CONSUMER_FORMAT_MISMATCH, "The requested embedded data format does not match the "
                                                       "deserializer for this consumer instance")
    return check_accept(request, own)


@instances.get(INSTANCE + "/records", response_model=list[ConsumerRecordResponse],
            summary="Read records (long poll) in the instance's embedded format", response_class=RecordsResponse,
            responses={200: {"content": {V2_EMBEDDED_JSON: {}}}, **error_responses(406)})
async def read_records(request: Request, instance: Instance,
                       timeout: Annotated[int | None, Query(description="ms, at most the instance's "
                                                                        "consumer.request.timeout.ms")] = None,
                       max_bytes: Annotated[int | None, Query(description="most key and value bytes")] = None,
                       ) -> JSONResponse:
    state = gateway_state(request)
    answered_as = check_records_accept(request, instance.format)
    settings = instance.settings
    wait_s = read_timeout_ms(timeout, settings.request_timeout_ms, state.config.consumer_request_timeout_ms) / 1000
    min_bytes = settings.response_min_bytes
    progress = ReadProgress(max_bytes=min(max_bytes, MAX_RESPONSE_BYTES) if max_bytes and max_bytes > 0
                            else MAX_RESPONSE_BYTES,
                            min_bytes=RESPONSE_MIN_BYTES_MAX * 100 if min_bytes is None or min_bytes < 0 else min_bytes)
    deadline = instance.clock() + wait_s
    backoff_s = READ_BACKOFF_MS / 1000
    while True:
        gathered = len(progress.records)
        more_ready = await on_consumer(state, instance, instance.read_step, progress, deadline)
        remaining_s = deadline - instance.clock()
        if progress.done or remaining_s <= 0:
            break
        if more_ready or len(progress.records) > gathered:
            backoff_s = READ_BACKOFF_MS / 1000
        await asyncio.sleep(0 if more_ready else min(backoff_s, remaining_s))
        backoff_s = min(2 * backoff_s, READ_BACKOFF_MAX_MS / 1000)
        if instance.closed:  # deleted meanwhile: answer what was gathered
            break
    state.metrics.consumed(len(progress.records))
    return JSONResponse(progress.records, media_type=answered_as)


@instances.post(INSTANCE + "/offsets", summary="Commit offsets (no body: every record answered so far)")
async def commit_offsets(request: Request, instance: Instance,
                         body: Annotated[CommitRequest | None, Body()] = None) -> JSONResponse:
    state = gateway_state(request)
    timeout_ms = state.config.request_timeout_ms
    if body is None or body.offsets is None:
        await on_consumer(state, instance, instance.commit_answered, timeout_ms)
        return v2_json([])
    offsets = {}
    for item in body.offsets:
        if item.offset < 0:
            raise RestError(422, INVALID_OFFSET, f"Offset {item.offset} of {item.topic}-{item.partition} is negative.")
        offsets[TopicPartition(item.topic, item.partition)] = OffsetAndMetadata(item.offset + 1, item.metadata or "")
    await check_partitions_exist(state, list(offsets))  # as Kafka refuses a commit of an unknown partition
    await on_consumer(state, instance, instance.commit, offsets, timeout_ms)
    return v2_json([])


@instances.get(INSTANCE + "/offsets", response_model=CommittedResponse, summary="The group's committed offsets")
async def committed_offsets(request: Request, instance: Instance,
                            body: Annotated[PartitionsRequest, Body()]) -> JSONResponse:
    state = gateway_state(request)
    partitions = _partitions(body.partitions)
    committed = await on_consumer(state, instance, instance.consumer.committed, partitions,
                                  state.config.request_timeout_ms) if partitions else {}
    return v2_json({"offsets": [{"topic": tp.topic, "partition": tp.partition, "offset": found.offset,
                                 "metadata": found.metadata}
                                for tp in partitions if (found := committed.get(tp)) is not None]})


router.include_router(instances)
