"""A real broker refuses every malformed record the one record reader refuses: each corrupt batch of
the reader's unit tests, sent in a ProduceRequest with a sound header and CRC, is answered with
CORRUPT_MESSAGE and leaves the partition empty, and the next sound batch is appended at offset 0.
Every shape the leader's validation refuses (unknown codec, wrong codec flag, each corrupted length
or varint, wrong record counts, offset deltas, a keyless record on a compacted topic, seeded random
damage), interleaved with sound batches, is refused with Kafka's error and leaves the log end where
it was, and a Consumer then reads the partition from offset 0 to its end."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from services.broker.log import LogConfig
from services.broker.log.validation import AppendOrigin, validate_leader_batches
from services.clients.admin import Admin
from services.clients.admin_types import NewTopic
from services.clients.consumer.consumer import Consumer
from services.clients.lowlevel import LowLevelClient
from services.common.errors import Errors, KafkaError
from services.common.records import Compression, build_batch, iter_records
from services.common.records.batch import HEADER_SIZE
from services.common.records.builder import assemble_batch, encode_records
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, module_cluster
from tests.unit.broker.log.support import START_MS, resealed
from tests.unit.test_record_reader import corrupt_batches

TOPIC = "framing"
VALIDATED = "validated"
COMPACTED = "compacted"
BOUNDED = "bounded"


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    """One controller and one broker for the whole module."""
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "framing", brokers=1,
                        controllers=1) as cluster:
        with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 1), NewTopic(VALIDATED, 1, 1),
                                 NewTopic(COMPACTED, 1, 1, configs={"cleanup.policy": "compact"}),
                                 NewTopic(BOUNDED, 1, 1, configs={"max.message.decompressed.bytes": "100000"})])
            for topic in (TOPIC, VALIDATED, COMPACTED, BOUNDED):
                admin.wait_for_topic(topic, 30)
        yield cluster


def test_the_broker_answers_corrupt_message_for_every_malformed_batch(cluster: LocalCluster, writer: LowLevelClient):
    malformed = corrupt_batches() + corrupt_batches(Compression.LZ4)
    for name, batch in malformed:
        assert writer.produce(TOPIC, 0, batch).error_code == Errors.CORRUPT_MESSAGE, name
    fetched = writer.fetch(TOPIC, 0, 0, max_wait_ms=0)
    assert (fetched.error_code, fetched.high_watermark, fetched.records) == (Errors.NONE, 0, b"")
    assert writer.produce(TOPIC, 0, build_batch([b"sound"])).base_offset == 0
    fetched = writer.fetch(TOPIC, 0, 0, max_wait_ms=0)
    assert [record.value for record in iter_records(fetched.records)] == [b"sound"]


def sound(index: int) -> bytes:
    return build_batch([b"sound-%d-%d" % (index, i) for i in range(3)], keys=[b"k%d" % i for i in range(3)],
                       timestamps=START_MS)


def malformed_shapes() -> list[tuple[str, bytes, int]]:
    """(name, batch, the error it is refused with)."""
    plain = sound(-1)
    shapes = [(f"unknown codec {codec}", resealed(plain, attributes=codec), Errors.UNSUPPORTED_COMPRESSION_TYPE)
              for codec in (5, 6, 7)]
    shapes += [(f"{codec.name} flag on uncompressed bytes", resealed(plain, attributes=int(codec)),
                Errors.CORRUPT_MESSAGE) for codec in list(Compression)[1:]]
    shapes += [(f"{name} ({codec.name})", batch, Errors.CORRUPT_MESSAGE)
               for codec in (Compression.NONE, Compression.GZIP) for name, batch in corrupt_batches(codec)]
    shapes.append(("offset delta beyond the count", assemble_batch(
        encode_records([b"a", b"b", b"c"], offset_deltas=[0, 1, 5]), records_count=3, last_offset_delta=2,
        base_timestamp=START_MS, max_timestamp=START_MS), Errors.INVALID_RECORD))
    shapes.append(("last offset delta beyond the count", assemble_batch(
        encode_records([b"a", b"b", b"c"]), records_count=3, last_offset_delta=5,
        base_timestamp=START_MS, max_timestamp=START_MS), Errors.INVALID_RECORD))
    return shapes


def randomly_damaged(seed: int) -> bytes:
    """A sound batch with 1-3 bytes of its records changed (seeded) and its CRC recomputed."""
    rng = random.Random(seed)
    damaged = bytearray(sound(100 + seed))
    for _ in range(rng.randint(1, 3)):
        damaged[rng.randrange(HEADER_SIZE, len(damaged))] = rng.randrange(256)
    return resealed(bytes(damaged))


def verdict(batch: bytes) -> int:
    """The error code the leader's validation gives `batch` here (NONE when it takes it)."""
    try:
        validate_leader_batches(batch, LogConfig(), AppendOrigin.CLIENT, START_MS)
    except KafkaError as exc:
        return exc.code
    return Errors.NONE


def end_offset(writer: LowLevelClient, topic: str) -> int:
    fetched = writer.fetch(topic, 0, 0, max_wait_ms=0)
    assert fetched.error_code == Errors.NONE
    return fetched.high_watermark


def test_the_leader_refuses_every_malformed_shape_and_a_consumer_reads_the_rest(cluster: LocalCluster,
                                                                                 writer: LowLevelClient):
    expected: list[bytes] = []

    def append(batch: bytes) -> None:
        result = writer.produce(VALIDATED, 0, batch)
        assert (result.error_code, result.base_offset) == (Errors.NONE, len(expected))
        expected.extend(record.value for record in iter_records(batch))

    append(sound(0))
    shapes = malformed_shapes()
    random_damage = [(f"random damage, seed {seed}", randomly_damaged(seed)) for seed in range(20)]
    shapes += [(name, batch, verdict(batch)) for name, batch in random_damage]
    assert sum(code != Errors.NONE for _, _, code in shapes) > len(shapes) - 10
    for index, (name, batch, code) in enumerate(shapes):
        if code == Errors.NONE:  # damage that left a valid batch (a changed value byte) is taken
            append(batch)
            continue
        before = end_offset(writer, VALIDATED)
        assert writer.produce(VALIDATED, 0, batch).error_code == code, name
        assert end_offset(writer, VALIDATED) == before, name
        if index % 3 == 0:
            append(sound(index + 1))
    append(sound(len(shapes) + 1))

    tp = TopicPartition(VALIDATED, 0)
    read: list[bytes] = []
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
                  fetch_max_wait_ms=100, **CLIENT_CONFIG) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)

        def read_to_the_end() -> bool:
            read.extend(record.value for record in consumer.poll(timeout_ms=200))
            return len(read) >= len(expected)

        wait_until(read_to_the_end, 30, 0, message=lambda: f"{len(expected)} records, read {len(read)}")
    assert read == expected


def test_a_compacted_topic_refuses_a_record_without_key(writer: LowLevelClient):
    keyless = build_batch([b"a", b"b"], keys=[b"k", None], timestamps=START_MS)
    result = writer.produce(COMPACTED, 0, keyless)
    assert result.error_code == Errors.INVALID_RECORD
    assert result.record_errors == ((1, "Compacted topic cannot accept message without key"),)
    assert "Compacted topic cannot accept message without key" in result.error_message
    assert end_offset(writer, COMPACTED) == 0
    assert writer.produce(COMPACTED, 0, sound(0)).base_offset == 0


@pytest.mark.parametrize("codec", list(Compression)[1:])
def test_a_batch_decompressing_past_the_topic_bound_is_message_too_large(writer: LowLevelClient, codec):
    before = end_offset(writer, BOUNDED)
    bomb = build_batch([b"\0" * 10_000] * 20, timestamps=START_MS, compression=codec)  # 200 KB of records
    assert len(bomb) < 20_000  # snappy expands at most 22x; the others far more
    result = writer.produce(BOUNDED, 0, bomb)
    assert result.error_code == Errors.MESSAGE_TOO_LARGE
    assert "decompress to more than 100000 bytes" in result.error_message
    assert end_offset(writer, BOUNDED) == before
    within = build_batch([b"\0" * 10_000] * 9, timestamps=START_MS, compression=codec)
    assert writer.produce(BOUNDED, 0, within).base_offset == before

