"""v2 consumer instances without a cluster: which worker owns an instance, the checked create
settings, read timeouts and Accept negotiation, the buffer of polled records (reads stop at
max_bytes; commits and closing count only answered records), and idle expiry on a manual clock."""

from __future__ import annotations

import asyncio
import base64
from types import SimpleNamespace

import pytest
from starlette.requests import Request

from services.clients.consumer import ConsumerRecord, OffsetAndMetadata
from services.common.topic_partition import TopicPartition
from services.gateway.config import GatewayConfig
from services.gateway.consumer_instances import (
    ConsumerInstance,
    InstanceRegistry,
    InstanceSettings,
    ReadProgress,
    encode_key_or_value,
    generated_id,
    owner_of,
    read_timeout_ms,
    worker_port,
)
from services.gateway.errors import RestError
from services.gateway.media import EmbeddedFormat
from services.gateway.routes.consumers_v2 import CreateConsumerRequest, check_records_accept, instance_settings

TP = TopicPartition("events", 0)
BINARY_SETTINGS = InstanceSettings(EmbeddedFormat.BINARY, {})


def gateway_config(**settings) -> GatewayConfig:
    return GatewayConfig.load({"bootstrap.servers": "127.0.0.1:9092", **settings})


def record(offset: int, value: bytes | None = b"v", key: bytes | None = None,
           tp: TopicPartition = TP) -> ConsumerRecord:
    return ConsumerRecord(tp.topic, tp.partition, offset, 0, 0, key, value, (), None,
                          -1 if key is None else len(key), -1 if value is None else len(value))


class StandInConsumer:
    """What ConsumerInstance calls on a Consumer, answering from lists."""

    def __init__(self, polls: list[list[ConsumerRecord]], assigned=(TP,), positions=None, auto_commit=False):
        self.polls = polls
        self.assigned = set(assigned)
        self.positions = dict(positions or {})
        self.commits: list[dict | None] = []
        self.seeks: list[tuple[TopicPartition, int]] = []
        self.closed = False
        self.config = SimpleNamespace(auto_commit_enabled=auto_commit)

    def poll(self, timeout_ms=0):
        return self.polls.pop(0) if self.polls else []

    def assignment(self):
        return set(self.assigned)

    def position(self, tp, timeout_ms=None):
        return self.positions[tp]

    def commit_sync(self, offsets=None, timeout_ms=None):
        self.commits.append(offsets)

    def seek(self, tp, offset):
        self.seeks.append((tp, offset))

    def close(self, timeout=None):
        self.closed = True


def read(instance: ConsumerInstance, max_bytes: int = 1 << 20, min_bytes: int = 1 << 30) -> ReadProgress:
    progress = ReadProgress(max_bytes=max_bytes, min_bytes=min_bytes)
    instance.read_step(progress, deadline=float("inf"))
    return progress


# ---------------------------------------------------------------------------------------------- workers


def test_one_worker_owns_everything():
    assert owner_of("g", "anything", 1) == 0
    assert owner_of("g", generated_id(1, 3), 1) == 0


def test_generated_ids_name_their_worker_and_names_are_placed_by_a_stable_hash():
    for worker in range(4):
        assert owner_of("g", generated_id(7, worker), 4) == worker
    owners = {owner_of("g", f"name-{i}", 4) for i in range(64)}
    assert owners == {0, 1, 2, 3}
    assert all(owner_of("g", f"name-{i}", 4) == owner_of("g", f"name-{i}", 4) for i in range(64))
    assert owner_of("g", generated_id(7, 9), 4) in range(4)  # an index past the workers falls back to the hash


def test_worker_ports():
    assert worker_port(gateway_config(), 8080, 0) == 8081
    assert worker_port(gateway_config(), 8080, 2) == 8083
    assert worker_port(gateway_config(**{"worker.base.port": 9000}), 8080, 1) == 9001


# ---------------------------------------------------------------------------------------------- settings


def settings_of(**body) -> InstanceSettings:
    return instance_settings(CreateConsumerRequest.model_validate(body))


def error_code(**body) -> int:
    with pytest.raises(RestError) as raised:
        settings_of(**body)
    return raised.value.error_code


def test_create_settings():
    assert settings_of() == InstanceSettings(EmbeddedFormat.BINARY, {})
    settings = settings_of(format="JSON", **{"auto.offset.reset": "earliest", "auto.commit.enable": "False",
                                             "fetch.min.bytes": "10", "consumer.request.timeout.ms": 250})
    assert settings == InstanceSettings(EmbeddedFormat.JSON, {"auto_offset_reset": "earliest",
                                                              "enable_auto_commit": False}, 10, 250)
    assert settings_of(**{"auto.commit.enable": True}).consumer_settings == {"enable_auto_commit": True}
    assert settings_of(**{"isolation.level": "read_committed"}).consumer_settings == {
        "isolation_level": "read_committed"}


def test_refused_create_settings():
    assert error_code(format="avro") == 42201
    assert error_code(format="yaml") == 42201
    assert error_code(**{"auto.offset.reset": "smallest"}) == 42206
    assert error_code(**{"auto.commit.enable": "yes"}) == 42206
    assert error_code(**{"isolation.level": "committed"}) == 42206
    assert error_code(**{"fetch.min.bytes": -2}) == 42206
    assert error_code(**{"fetch.min.bytes": 10_000_001}) == 42206
    assert error_code(**{"consumer.request.timeout.ms": "soon"}) == 42206
    assert error_code(**{"consumer.request.timeout.ms": -1}) == 42206


def test_a_read_waits_the_instance_timeout_lowered_by_the_request():
    assert read_timeout_ms(None, None, 1000) == 1000
    assert read_timeout_ms(-1, 5000, 1000) == 5000
    assert read_timeout_ms(200, 5000, 1000) == 200
    assert read_timeout_ms(9000, 5000, 1000) == 5000


def request_accepting(accept: str | None) -> Request:
    headers = [] if accept is None else [(b"accept", accept.encode())]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers, "query_string": b""})


def test_records_answer_in_the_instance_format_or_406():
    binary, json_ = EmbeddedFormat.BINARY, EmbeddedFormat.JSON
    assert check_records_accept(request_accepting(None), json_) == "application/vnd.kafka.json.v2+json"
    assert check_records_accept(request_accepting("*/*"), binary) == "application/vnd.kafka.binary.v2+json"
    assert check_records_accept(request_accepting("application/vnd.kafka.v2+json"), binary) \
        == "application/vnd.kafka.binary.v2+json"
    for accept, embedded in (("application/vnd.kafka.binary.v2+json", json_),
                             ("application/vnd.kafka.v2+json", json_),
                             ("application/vnd.kafka.json.v2+json; q=1", binary)):
        with pytest.raises(RestError) as raised:
            check_records_accept(request_accepting(accept), embedded)
        assert (raised.value.status, raised.value.error_code) == (406, 40601)
    with pytest.raises(RestError) as raised:
        check_records_accept(request_accepting("text/html"), binary)
    assert raised.value.status == 406


def test_keys_and_values_in_each_format():
    assert encode_key_or_value(None, EmbeddedFormat.BINARY) is None
    assert encode_key_or_value(b"\x00\xff", EmbeddedFormat.BINARY) == base64.b64encode(b"\x00\xff").decode()
    assert encode_key_or_value(b'{"a": [1, null]}', EmbeddedFormat.JSON) == {"a": [1, None]}


# ---------------------------------------------------------------------------------------------- reads


def test_a_read_stops_before_the_record_that_would_reach_max_bytes_and_keeps_it():
    consumer = StandInConsumer([[record(0, b"aaaa"), record(1, b"bbbb"), record(2, b"cccc")]])
    instance = ConsumerInstance("g", "i", BINARY_SETTINGS, consumer)
    first = read(instance, max_bytes=9)
    assert [r["offset"] for r in first.records] == [0, 1]
    assert first.full and first.size == 8
    assert [r["offset"] for r in read(instance).records] == [2]


def test_a_read_answers_once_past_min_bytes():
    consumer = StandInConsumer([[record(0, b"aaaa")], [record(1, b"bbbb")], [record(2, b"cccc")]])
    instance = ConsumerInstance("g", "i", BINARY_SETTINGS, consumer)
    progress = read(instance, min_bytes=5)
    assert [r["offset"] for r in progress.records] == [0, 1]
    assert progress.done


def test_a_step_of_a_read_holds_its_thread_briefly_while_records_keep_coming():
    clock = ManualClock()

    class Endless(StandInConsumer):
        def poll(self, timeout_ms=0):
            clock.now += 0.06
            return [record(int(clock.now * 100), b"x")]

    instance = ConsumerInstance("g", "i", BINARY_SETTINGS, Endless([]), clock=clock)
    progress = ReadProgress(max_bytes=1 << 20, min_bytes=1 << 30)
    assert instance.read_step(progress, deadline=clock.now + 60) is True  # stopped at READ_STEP_MAX_MS
    assert len(progress.records) == 4
    assert instance.read_step(progress, deadline=clock.now + 0.1) is True
    assert instance.read_step(ReadProgress(max_bytes=1, min_bytes=0), deadline=clock.now + 60) is False


def test_a_record_that_is_not_json_ends_the_read_before_it_then_fails_the_next():
    consumer = StandInConsumer([[record(0, b"1"), record(1, b"not json"), record(2, b"2")]])
    instance = ConsumerInstance("g", "i", InstanceSettings(EmbeddedFormat.JSON, {}), consumer)
    assert [r["value"] for r in read(instance).records] == [1]
    with pytest.raises(RestError) as raised:
        read(instance)
    assert (raised.value.status, raised.value.error_code) == (500, 50002)
    instance.seek({TP: 2})  # seeking past it drops the buffered records
    assert consumer.seeks == [(TP, 2)]
    assert read(instance).records == []


def test_committing_everything_fetched_counts_only_answered_records():
    other = TopicPartition("events", 1)
    consumer = StandInConsumer([[record(5, b"aaaa"), record(6, b"bbbb")]], assigned=(TP, other),
                               positions={TP: 7, other: 40})
    instance = ConsumerInstance("g", "i", BINARY_SETTINGS, consumer)
    read(instance, max_bytes=6)
    instance.commit_answered(1000)
    assert consumer.commits == [{TP: OffsetAndMetadata(6), other: OffsetAndMetadata(40)}]
    read(instance)
    instance.commit_answered(1000)
    assert consumer.commits[-1] is None  # nothing buffered: the consumer's positions


def test_closing_rewinds_unanswered_records_before_the_auto_commit():
    consumer = StandInConsumer([[record(5, b"aaaa"), record(6, b"bbbb")]], positions={TP: 7}, auto_commit=True)
    instance = ConsumerInstance("g", "i", BINARY_SETTINGS, consumer)
    read(instance, max_bytes=6)
    instance.close()
    assert consumer.seeks == [(TP, 6)]
    assert consumer.closed and instance.closed


# ---------------------------------------------------------------------------------------------- registry


class ManualClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_idle_instances_are_closed_and_counted():
    clock = ManualClock()
    counts: list[int] = []
    consumers: list[StandInConsumer] = []

    def factory(group, instance_id, settings):
        consumers.append(StandInConsumer([]))
        return consumers[-1]

    async def scenario() -> None:
        registry = InstanceRegistry(gateway_config(**{"consumer.instance.timeout.ms": 1000,
                                                                    "consumer.max.instances": 2}), 0, factory,
                                    on_count=counts.append, clock=clock)
        await registry.create("g", "old", BINARY_SETTINGS)
        clock.now += 0.6
        await registry.create("g", "new", BINARY_SETTINGS)
        with pytest.raises(RestError) as raised:
            await registry.create("g", "new", BINARY_SETTINGS)
        assert (raised.value.status, raised.value.error_code) == (409, 40901)
        clock.now += 0.5
        assert await registry.close_expired() == 1
        assert consumers[0].closed and not consumers[1].closed
        with pytest.raises(RestError) as raised:
            registry.get("g", "old")
        assert raised.value.error_code == 40403
        registry.get("g", "new")  # a request keeps it alive
        await registry.create("g", "third", BINARY_SETTINGS)
        with pytest.raises(RestError) as raised:
            await registry.create("g", "fourth", BINARY_SETTINGS)
        assert (raised.value.status, raised.value.error_code) == (429, 429)
        await registry.delete("g", "third")
        clock.now += 0.9
        assert await registry.close_expired() == 0
        await registry.close_all()
        assert consumers[1].closed

    asyncio.run(scenario())
    assert counts == [1, 2, 1, 2, 1, 0]
