"""A broker's live Kafka listener under malformed input, over real sockets: truncated frames, size
prefixes out of range, garbage, unknown API keys and versions, and real encoded Produce and Fetch
requests with bytes flipped, cut off or added, in the frame or inside the record batch, or with a
records length that lies.

Every bad connection is closed by the broker or answered, the broker stays up, one well-behaved
connection keeps getting answers throughout (a Metadata round trip and the log end offset after
every example, a produce and fetch at the end), and the partition's log grows only by the intact
batch: a Produce whose batch was damaged is refused with a Kafka error and appends nothing. The
frame reader and decoder alone are fuzzed by the unit tests of `tests/unit/kafka_wire`."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kio.schema.fetch.v12.request import FetchPartition as FetchPartitionV12
from kio.schema.fetch.v12.request import FetchTopic as FetchTopicV12
from kio.schema.list_offsets.v6.request import ListOffsetsPartition, ListOffsetsTopic
from kio.schema.metadata.v12.request import MetadataRequestTopic

from services.clients.admin import Admin
from services.common.errors import Errors
from services.common.kafka_wire import kafka_error
from services.common.kafka_wire.codec import api_schema, decode_request, peek_api_key_and_version
from services.common.records import build_batch, iter_batch_positions
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import create_topic, module_cluster
from tests.kafka_wire_support import WireConnection, decode_response, request_frame

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS = 0, 1, 2, 3, 18
TOPIC = "fuzzed"
VALUES = [b"fuzz-%d" % i for i in range(10)]
BATCH = build_batch(VALUES)
# header bytes of a batch a leader overwrites or that clients do not vouch for: baseOffset and
# partitionLeaderEpoch; damage anywhere else (length, magic, CRC, the CRC-covered rest) is corruption
UNCHECKED_BATCH_BYTES = set(range(0, 8)) | set(range(12, 16))
# what a Produce with a damaged batch may be answered
CORRUPTION_ERRORS = {Errors.CORRUPT_MESSAGE, Errors.INVALID_RECORD, Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                     Errors.UNSUPPORTED_COMPRESSION_TYPE, Errors.INVALID_TIMESTAMP}
PRODUCE_VERSIONS = (3, 7, 9, 11)
FETCH_VERSIONS = (4, 11, 12)
EXCHANGE_DEADLINE_S = 10.0
EXAMPLES = 300
FUZZ_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                         suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "kafka-wire-fuzz", brokers=1,
                        controllers=1) as cluster:
        yield cluster


@dataclass
class Target:
    cluster: LocalCluster
    port: int
    steady: WireConnection  # the well-behaved connection

    def log_end_offset(self) -> int:
        response = self.steady.call(LIST_OFFSETS, 6, replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(
            name=TOPIC, partitions=(ListOffsetsPartition(partition_index=0, timestamp=-1),)),))
        [answer] = response.topics[0].partitions
        assert answer.error_code == kafka_error(Errors.NONE)
        return answer.offset

    def metadata_round_trip(self) -> None:
        response = self.steady.call(METADATA, 12, topics=(MetadataRequestTopic(topic_id=None, name=TOPIC),),
                                    allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        assert response.topics[0].error_code == kafka_error(Errors.NONE)
        assert response.topics[0].partitions[0].leader_id == response.brokers[0].node_id

    def broker_up(self) -> bool:
        return self.cluster.running_pid(self.cluster.broker_names[0]) is not None


@pytest.fixture(scope="module")
def target(cluster: LocalCluster, admin: Admin) -> Iterator[Target]:
    create_topic(admin, TOPIC, partitions=1, replication=1)
    port = cluster.services[cluster.broker_names[0]].kafka_port
    with WireConnection(cluster.host, port) as steady:
        found = Target(cluster, port, steady)
        found.metadata_round_trip()
        yield found


def produce_frame(version: int, records: bytes = BATCH, correlation_id: int = 7, acks: int = -1) -> bytes:
    from kio.index import load_payload_module
    from kio.static.constants import EntityType
    module = load_payload_module(PRODUCE, version, EntityType.request)
    data = module.TopicProduceData(name=TOPIC, partition_data=(module.PartitionProduceData(index=0, records=records),))
    return request_frame(PRODUCE, version, correlation_id, acks=acks, timeout=timedelta(seconds=10),
                         transactional_id=None, topic_data=(data,))


def fetch_frame(version: int, correlation_id: int = 8) -> bytes:
    from kio.index import load_payload_module
    from kio.static.constants import EntityType
    module = load_payload_module(FETCH, version, EntityType.request)
    part = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "log_start_offset": -1,
            "current_leader_epoch": -1}
    part_type = FetchPartitionV12 if version == 12 else module.FetchPartition
    topic_type = FetchTopicV12 if version == 12 else module.FetchTopic
    fields = part_type.__dataclass_fields__
    wanted = topic_type(topic=TOPIC, partitions=(part_type(**{k: v for k, v in part.items() if k in fields}),))
    return request_frame(FETCH, version, correlation_id, replica_id=-1, max_wait=timedelta(0), min_bytes=1,
                         max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1, topics=(wanted,),
                         forgotten_topics_data=(), rack_id="")


@dataclass
class Exchange:
    answers: list[bytes]  # the payloads of whole response frames, in order
    closed_by_broker: bool  # the broker ended the connection before we stopped sending


def parks_longer_than_an_exchange(payload: bytes) -> bool:
    """Damage can leave a valid Fetch that asks to wait longer than an exchange lasts (its max_wait
    flipped high): the broker rightly parks it rather than answering or closing."""
    try:
        api_key, version = peek_api_key_and_version(payload)
        if api_key != FETCH:
            return False
        _, request = decode_request(api_schema(api_key, version), payload)
    except Exception:  # noqa: BLE001 - anything that does not decode as a Fetch is answered or closed
        return False
    return request.max_wait >= timedelta(seconds=EXCHANGE_DEADLINE_S)


def exchange(port: int, data: bytes, *, half_close: bool, may_park: bool = False) -> Exchange:
    """Sends `data` on a new connection, then (when `half_close`) ends our side, and reads every
    response until the broker closes the connection; fails if it neither answers nor closes,
    unless `may_park` (the request may rightly wait longer than this exchange)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=EXCHANGE_DEADLINE_S)
    received, closed = bytearray(), False
    try:
        try:
            sock.sendall(data)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        deadline = time.monotonic() + EXCHANGE_DEADLINE_S
        while not closed:
            if time.monotonic() >= deadline:
                assert may_park, f"the listener neither answered nor closed: {data[:64]!r}"
                break
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            except TimeoutError:
                if may_park:
                    break
                raise AssertionError(f"the listener neither answered nor closed: {data[:64]!r}") from None
            if not chunk:
                closed = True
            received += chunk
    finally:
        sock.close()
    answers, position = [], 0
    while position + 4 <= len(received):
        (size,) = struct.unpack_from(">i", received, position)
        assert position + 4 + size <= len(received), "the broker sent a partial response frame"
        answers.append(bytes(received[position + 4:position + 4 + size]))
        position += 4 + size
    assert position == len(received), "the broker sent bytes that are not a response frame"
    return Exchange(answers, closed_by_broker=not half_close)


def produce_errors(request_payload: bytes, answers: list[bytes]) -> list[int]:
    """The error codes of our partition in the Produce responses among `answers` (the request's
    header says which version to decode them as; a frame whose header was damaged is not one)."""
    if len(request_payload) < 8:
        return []
    api_key, version, correlation_id = struct.unpack_from(">hhi", request_payload)
    if api_key != PRODUCE or version not in range(3, 12):
        return []
    codes = []
    for answer in answers:
        answered, response = decode_response(PRODUCE, version, answer)
        assert answered == correlation_id
        codes += [int(p.error_code) for t in response.responses if t.name == TOPIC
                  for p in t.partition_responses if p.index == 0]
    return codes


def is_intact(batch: bytes) -> bool:
    """The batch is ours with at most its baseOffset and partitionLeaderEpoch changed."""
    return len(batch) == len(BATCH) and batch[8:12] == BATCH[8:12] and batch[16:] == BATCH[16:]


def intact_batches(payload: bytes) -> int:
    """How many intact copies of our batch `payload` holds."""
    found, start = 0, 0
    while (at := payload.find(BATCH[16:], start)) >= 0:
        found += at >= 16 and is_intact(payload[at - 16:at - 16 + len(BATCH)])
        start = at + 1
    return found


def check_growth(target: Target, before: int, intact_batches: int, errors: list[int]) -> None:
    """The log grew by whole copies of the intact batch at most, and by one only if one was sent."""
    after = target.log_end_offset()
    grown = after - before
    assert grown in (0, len(VALUES)), f"the log grew by {grown} records"
    if grown:
        assert intact_batches >= 1, "a damaged batch was appended"
    if Errors.NONE in errors:
        assert grown == len(VALUES), "a Produce was acknowledged but nothing was appended"
    target.metadata_round_trip()
    assert target.broker_up()


# ------------------------------------------------------------------ damaged batches, well-formed requests

batch_damage = st.one_of(
    st.tuples(st.just("flip"), st.sampled_from(sorted(set(range(len(BATCH))) - UNCHECKED_BATCH_BYTES)),
              st.integers(1, 255)),
    st.tuples(st.just("cut"), st.integers(0, len(BATCH) - 1), st.just(0)),
    st.tuples(st.just("extend"), st.binary(min_size=1, max_size=80), st.just(0)),
)


def damaged(batch: bytes, damage: tuple) -> bytes:
    kind, where, how = damage
    if kind == "flip":
        return batch[:where] + bytes([batch[where] ^ how]) + batch[where + 1:]
    if kind == "cut":
        return batch[:where]
    return batch + where


@FUZZ_SETTINGS
@given(version=st.sampled_from(PRODUCE_VERSIONS), damage=batch_damage)
def test_a_produce_whose_batch_is_damaged_is_refused_and_appends_nothing(target: Target, version: int,
                                                                         damage: tuple):
    before = target.log_end_offset()
    frame = produce_frame(version, damaged(BATCH, damage))
    outcome = exchange(target.port, frame, half_close=True)
    errors = produce_errors(frame[4:], outcome.answers)
    assert len(errors) == 1, f"a well-formed Produce was not answered: {outcome}"
    assert errors[0] in CORRUPTION_ERRORS, f"{damage} was answered {Errors(errors[0]).name}"
    event(f"{damage[0]}: {Errors(errors[0]).name}")
    check_growth(target, before, intact_batches=0, errors=errors)


# ------------------------------------------------------------------ damaged Produce and Fetch frames

frame_damage = st.one_of(
    st.tuples(st.just("flip"), st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)), min_size=1,
                                        max_size=3)),
    st.tuples(st.just("cut"), st.integers(0, 1 << 16)),
    st.tuples(st.just("extend"), st.binary(min_size=1, max_size=64)),
)


@FUZZ_SETTINGS
@given(request=st.one_of(st.tuples(st.just(PRODUCE), st.sampled_from(PRODUCE_VERSIONS)),
                         st.tuples(st.just(FETCH), st.sampled_from(FETCH_VERSIONS))),
       damage=frame_damage, size_follows=st.booleans())
def test_damaged_produce_and_fetch_frames_are_refused_or_answered(target: Target, request: tuple, damage: tuple,
                                                                  size_follows: bool):
    """Damage anywhere in the payload; the size prefix follows the new length or keeps the old."""
    api_key, version = request
    frame = produce_frame(version) if api_key == PRODUCE else fetch_frame(version)
    payload = bytearray(frame[4:])
    kind, how = damage
    if kind == "flip":
        for where, mask in how:
            payload[where % len(payload)] ^= mask
    elif kind == "cut":
        del payload[how % len(payload):]
    else:
        payload += how
    size = len(payload) if size_follows else len(frame) - 4
    before = target.log_end_offset()
    sent = bytes(payload[:size])
    outcome = exchange(target.port, struct.pack(">i", size) + bytes(payload), half_close=True,
                       may_park=len(payload) == size and parks_longer_than_an_exchange(sent))
    intact = intact_batches(sent) if api_key == PRODUCE else 0
    errors = produce_errors(sent, outcome.answers)
    event(f"responses: {len(outcome.answers)}" + "".join(f", {Errors(code).name}" for code in errors))
    check_growth(target, before, intact_batches=intact, errors=errors)


def records_length_prefix(version: int, length: int) -> bytes:
    """How Produce `version` writes the length of a partition's records: an int32 before the
    flexible versions (9+), an unsigned varint of length + 1 from them on."""
    if version < 9:
        return struct.pack(">i", length)
    value, out = length + 1, bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@FUZZ_SETTINGS
@given(version=st.sampled_from(PRODUCE_VERSIONS),
       length=st.integers(0, 2 * len(BATCH)).filter(lambda n: n != len(BATCH)))
def test_a_produce_whose_records_length_lies_appends_nothing(target: Target, version: int, length: int):
    """The records field claims fewer or more bytes than the batch has: the request no longer
    decodes (closed), or the batch it holds is cut short (refused)."""
    frame = produce_frame(version)
    honest = records_length_prefix(version, len(BATCH))
    at = frame.index(honest + BATCH)
    payload = frame[4:at] + records_length_prefix(version, length) + frame[at + len(honest):]
    before = target.log_end_offset()
    outcome = exchange(target.port, _framed(payload), half_close=True)
    errors = produce_errors(payload, outcome.answers)
    assert all(code in CORRUPTION_ERRORS for code in errors), [Errors(code).name for code in errors]
    event(f"responses: {len(outcome.answers)}" + "".join(f", {Errors(code).name}" for code in errors))
    check_growth(target, before, intact_batches=0, errors=errors)


# ------------------------------------------------------------------ frames the listener must close on

ANY_HEADER_TAIL = st.binary(max_size=40)


@FUZZ_SETTINGS
@given(case=st.one_of(
    # a size prefix above socket.request.max.bytes or below zero, then some bytes
    st.tuples(st.just("size"), st.one_of(st.integers(104857601, 2**31 - 1), st.integers(-2**31, -1)),
              st.binary(max_size=32)),
    # an API key not served (ApiVersions and the broker's eight are), any version
    st.tuples(st.just("key"), st.integers(-2**15, 2**15 - 1).filter(lambda k: k not in (0, 1, 2, 3, 10, 17, 18,
                                                                                        22, 23)),
              st.tuples(st.integers(-2**15, 2**15 - 1), ANY_HEADER_TAIL)),
    # a served API at a version outside its range
    st.tuples(st.just("version"), st.sampled_from([(PRODUCE, 12), (PRODUCE, 2), (FETCH, 3), (FETCH, 13),
                                                   (METADATA, 13), (LIST_OFFSETS, 0)]), ANY_HEADER_TAIL),
    # a frame too short to hold a request header
    st.tuples(st.just("short"), st.binary(max_size=3), st.just(b"")),
))
def test_frames_no_request_can_be_read_from_close_the_connection(target: Target, case: tuple):
    kind, first, second = case
    if kind == "size":
        data = struct.pack(">i", first) + second
    elif kind == "key":
        version, tail = second
        data = _framed(struct.pack(">hhi", first, version, 1) + tail)
    elif kind == "version":
        api_key, version = first
        data = _framed(struct.pack(">hhi", api_key, version, 1) + second)
    else:
        data = _framed(first)
    before = target.log_end_offset()
    outcome = exchange(target.port, data, half_close=False)
    assert outcome.closed_by_broker and outcome.answers == []
    check_growth(target, before, intact_batches=0, errors=[])


@FUZZ_SETTINGS
@given(garbage=st.binary(min_size=1, max_size=512), size_follows=st.booleans())
def test_garbage_is_refused_or_answered(target: Target, garbage: bytes, size_follows: bool):
    size = len(garbage) if size_follows else len(garbage) + 16
    before = target.log_end_offset()
    outcome = exchange(target.port, struct.pack(">i", size) + garbage, half_close=True)
    event(f"responses: {len(outcome.answers)}")
    check_growth(target, before, intact_batches=0, errors=[])


def test_an_unsupported_api_versions_version_is_answered_with_its_error(target: Target):
    data = _framed(struct.pack(">hhi", API_VERSIONS, 99, 5) + b"\x00\x05fuzz\x00")
    outcome = exchange(target.port, data, half_close=True)
    [answer] = outcome.answers
    correlation_id, response = decode_response(API_VERSIONS, 0, answer)
    assert correlation_id == 5 and response.error_code == kafka_error(Errors.UNSUPPORTED_VERSION)


def _framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


# ------------------------------------------------------------------ afterwards


def test_the_well_behaved_connection_still_produces_and_fetches(target: Target):
    """Runs after the fuzzing: every record in the log is an intact batch's, and a new one goes in."""
    from kio.index import load_payload_module
    from kio.static.constants import EntityType
    assert target.broker_up()
    target.metadata_round_trip()
    before = target.log_end_offset()
    module = load_payload_module(PRODUCE, 9, EntityType.request)
    produced = target.steady.call(PRODUCE, 9, 11, acks=-1, timeout=timedelta(seconds=10), transactional_id=None,
                                  topic_data=(module.TopicProduceData(name=TOPIC, partition_data=(
                                      module.PartitionProduceData(index=0, records=build_batch([b"after"])),)),))
    result = produced.responses[0].partition_responses[0]
    assert result.error_code == kafka_error(Errors.NONE) and result.base_offset == before
    fetched = target.steady.call(FETCH, 12, 12, replica_id=-1, max_wait=timedelta(0), min_bytes=1,
                                 max_bytes=64 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                                 topics=(FetchTopicV12(topic=TOPIC, partitions=(FetchPartitionV12(
                                     partition=0, fetch_offset=0, partition_max_bytes=64 << 20,
                                     current_leader_epoch=-1, log_start_offset=-1),)),),
                                 forgotten_topics_data=(), rack_id="")
    [data] = fetched.responses[0].partitions
    assert data.error_code == kafka_error(Errors.NONE) and data.high_watermark == before + 1
    records = bytes(data.records)
    batches = [records[position:position + size] for position, size in iter_batch_positions(records)]
    assert sum(len(b) for b in batches) == len(records)
    # everything stored before is copies of the intact batch (offsets patched), then the new one
    assert all(is_intact(b) for b in batches[:-1])
    assert len(batches) - 1 == before // len(VALUES)
