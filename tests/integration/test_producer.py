"""The producer against real brokers.

On one broker (shared by the tests of this module): acknowledged offsets are contiguous and
records read back as sent; keyed records land where the Java client would put them; every
compression codec round-trips with headers; acks=0 and acks=1; records too large for the client
or for the topic; metadata that never comes; callbacks, interceptors and serializers.

On three brokers (RF=3, min.insync.replicas=2): the leader is killed with SIGKILL while an
idempotent producer is sending; afterwards every record is in the log exactly once and in send
order. Then, with a partition left without its only replica, a small `buffer.memory` fills, `send`
blocks `max.block.ms` and raises BufferExhaustedError, and the queued records expire after
`delivery.timeout.ms`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from services.clients.admin import Admin
from services.clients.admin_types import TopicDescription
from services.clients.lowlevel import LowLevelClient
from services.clients.producer import (
    BufferExhaustedError,
    KafkaTimeoutError,
    Producer,
    ProducerClosedError,
    RecordMetadata,
    RecordTooLargeError,
)
from services.common.errors import Errors, KafkaError
from services.common.hashing import partition_for_key
from services.common.records import Compression, Record, iter_batch_positions, parse_header
from services.common.records.batch import CODEC_MASK
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, SESSION_TIMEOUT_S, create_topic, module_cluster


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    """One controller and one broker for the whole module."""
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "producer", brokers=1,
                        controllers=1) as cluster:
        yield cluster


def read_all(cluster: LocalCluster, topic: str, partition: int) -> list[Record]:
    """Every record of the partition up to its high watermark."""
    records: list[Record] = []
    with LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as client:
        while True:
            found, result = client.fetch_records(topic, partition, len(records) and records[-1].offset + 1,
                                                 max_wait_ms=0, retry_timeout_ms=15000)
            assert result.error_code == 0, result
            records += found
            if not found or records[-1].offset + 1 >= result.high_watermark:
                return records


def producer_for(cluster: LocalCluster, **overrides) -> Producer:
    return Producer(bootstrap_servers=cluster.bootstrap_servers, **{**CLIENT_CONFIG, **overrides})


# --------------------------------------------------------------------------------------------- one broker

def test_acknowledged_offsets_are_contiguous_and_records_read_back_as_sent(cluster: LocalCluster, admin: Admin):
    create_topic(admin, "plain")
    values = [b"value-%05d" % i for i in range(3000)]
    answered: list[tuple[RecordMetadata | None, Exception | None]] = []
    with producer_for(cluster, linger_ms=2) as producer:
        futures = [producer.send("plain", v, callback=lambda md, exc: answered.append((md, exc)))
                   for v in values[:-1]]
        futures.append(producer.send("plain", values[-1], timestamp_ms=1234567, headers=[("h", b"x")]))
        producer.flush(30)
        assert all(f.done() for f in futures)
        offsets = [f.get(0).offset for f in futures]
        metrics = producer.metrics()
        assert producer.partitions_for("plain") == [0]
    assert offsets == list(range(len(values)))
    assert len(answered) == len(values) - 1 and all(exc is None for _, exc in answered)
    assert [md.offset for md, _ in answered] == offsets[:-1]  # callbacks in record order
    last = futures[-1].get()
    assert (last.topic, last.partition, last.timestamp, last.serialized_key_size,
            last.serialized_value_size) == ("plain", 0, 1234567, -1, len(values[-1]))
    records = read_all(cluster, "plain", 0)
    assert [(r.offset, r.key, r.value) for r in records] == [(i, None, v) for i, v in enumerate(values)]
    assert records[-1].headers == (("h", b"x"),) and records[-1].timestamp == 1234567
    assert metrics["record-send-total"] == len(values) and metrics["record-error-total"] == 0
    with pytest.raises(ProducerClosedError):
        producer.send("plain", b"late")


def test_keyed_records_land_where_the_java_client_puts_them(cluster: LocalCluster, admin: Admin):
    create_topic(admin, "keyed", partitions=3)
    keys = [b"key-%d" % i for i in range(60)] + [b"", b"a", b"\xff\xfe\xfd\xfc\xfb"]
    with producer_for(cluster) as producer:
        futures = {key: producer.send("keyed", b"v-" + key, key=key) for key in keys}
        placed = {key: f.get(30).partition for key, f in futures.items()}
    assert placed == {key: partition_for_key(key, 3) for key in keys}
    assert set(placed.values()) == {0, 1, 2}
    found = {r.key: (p, r.value) for p in range(3) for r in read_all(cluster, "keyed", p)}
    assert found == {key: (partition_for_key(key, 3), b"v-" + key) for key in keys}


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_codecs_round_trip(cluster: LocalCluster, admin: Admin, codec: str):
    topic = f"compressed-{codec}"
    create_topic(admin, topic)
    sent = [(b"k%d" % i, (b"%d " % i) * 40, [("n", b"%d" % i)]) for i in range(500)]
    with producer_for(cluster, compression_type=codec, linger_ms=5) as producer:
        for key, value, headers in sent:
            producer.send(topic, value, key=key, headers=headers)
        producer.flush(30)
    with LowLevelClient(bootstrap_servers=cluster.bootstrap_servers) as client:
        raw = client.fetch(topic, 0, 0, max_wait_ms=0).records
    codecs = {parse_header(raw, position).attributes & CODEC_MASK for position, _ in iter_batch_positions(raw)}
    assert codecs == {Compression.parse(codec)}
    records = read_all(cluster, topic, 0)
    assert [(r.key, r.value, list(r.headers)) for r in records] == sent


def test_acks_zero_and_one(cluster: LocalCluster, admin: Admin):
    create_topic(admin, "acks")
    with producer_for(cluster, acks=0) as fire_and_forget:
        assert not fire_and_forget.config.enable_idempotence  # acks=0 turns the default idempotence off
        zero = [fire_and_forget.send("acks", b"zero-%d" % i) for i in range(100)]
        fire_and_forget.flush(30)
    assert {f.get().offset for f in zero} == {-1}
    with producer_for(cluster, acks="1") as leader_only:
        one = [leader_only.send("acks", b"one-%d" % i) for i in range(100)]
        offsets = [f.get(30).offset for f in one]
    assert offsets == list(range(offsets[0], offsets[0] + 100))
    values = [r.value for r in read_all(cluster, "acks", 0)]
    assert values == [b"zero-%d" % i for i in range(100)] + [b"one-%d" % i for i in range(100)]


def test_records_too_large_for_the_client_or_the_topic(cluster: LocalCluster, admin: Admin):
    create_topic(admin, "small-messages", configs={"max.message.bytes": "3000"})
    with producer_for(cluster, max_request_size=10000, linger_ms=50) as producer:
        with pytest.raises(RecordTooLargeError) as refused:
            producer.send("small-messages", b"x" * 10000)
        assert refused.value.code == Errors.MESSAGE_TOO_LARGE == 10
        # 40 records of 200 bytes make one batch the topic refuses: it is split until the parts fit
        futures = [producer.send("small-messages", b"%03d" % i + b"y" * 197) for i in range(40)]
        single = producer.send("small-messages", b"z" * 5000)  # fits the client, not the topic
        offsets = [f.get(30).offset for f in futures]
        with pytest.raises(KafkaError) as too_large:
            single.get(30)
        assert too_large.value.error_name == "MESSAGE_TOO_LARGE"
        assert producer.metrics()["batch-split-total"] >= 1
    assert offsets == list(range(40))
    assert [r.value[:3] for r in read_all(cluster, "small-messages", 0)] == [b"%03d" % i for i in range(40)]


def test_missing_topics_and_partitions_fail_after_max_block_ms(cluster: LocalCluster, admin: Admin):
    create_topic(admin, "one-partition")
    with producer_for(cluster, max_block_ms=500) as producer:
        with pytest.raises(KafkaTimeoutError, match="Topic no-such-topic not present in metadata after 500 ms"):
            producer.send("no-such-topic", b"v")
        with pytest.raises(KafkaTimeoutError, match="Partition 5 of topic one-partition with partition count 1"):
            producer.send("one-partition", b"v", partition=5)
        assert producer.metrics()["record-error-total"] == 2


def test_serializers_interceptors_and_explicit_partitions(cluster: LocalCluster, admin: Admin):
    create_topic(admin, "plugged", partitions=2)

    class Tagging:
        def __init__(self):
            self.acknowledged: list[tuple[RecordMetadata | None, Exception | None]] = []

        def on_send(self, record):
            return record._replace(headers=[("tag", b"seen")])

        def on_acknowledgement(self, metadata, exception):
            self.acknowledged.append((metadata, exception))

    interceptor = Tagging()
    with producer_for(cluster, key_serializer=lambda k: k.to_bytes(4, "big"),
                      value_serializer=lambda v: v.encode("ascii"), interceptor_classes=[interceptor],
                      partitioner_class="round_robin") as producer:
        placed = [producer.send("plugged", f"value-{i}", key=i).get(30).partition for i in range(6)]
        explicit = producer.send("plugged", "pinned", key=99, partition=1).get(30)
    assert sorted(placed) == [0, 0, 0, 1, 1, 1] and placed[0] != placed[1]
    assert explicit.partition == 1 and explicit.serialized_key_size == 4
    assert len(interceptor.acknowledged) == 7 and all(exc is None for _, exc in interceptor.acknowledged)
    records = read_all(cluster, "plugged", 0) + read_all(cluster, "plugged", 1)
    assert {(int.from_bytes(r.key, "big"), r.value.decode(), r.headers) for r in records} == {
        *((i, f"value-{i}", (("tag", b"seen"),)) for i in range(6)), (99, "pinned", (("tag", b"seen"),))}


# --------------------------------------------------------------------------------------------- three brokers

def test_idempotent_sends_survive_a_leader_kill_exactly_once_in_order(cluster_factory):
    cluster = cluster_factory(brokers=3, controllers=1, broker_config={"replica.lag.time.max.ms": 3000})
    topic, total = "failover", 12000
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
        create_topic(admin, topic, replication=3, configs={"min.insync.replicas": "2"})
        described = wait_until(lambda: _fully_replicated(admin, topic), 30, 0.1, message="every replica in the ISR")
        leader = described.partitions[0].leader
        create_topic(admin, "stranded", assignment={0: [leader]})  # offline once the leader dies

    acknowledged: list[int] = []
    failed: list[Exception] = []
    stop = threading.Event()
    producer = producer_for(cluster, linger_ms=5, request_timeout_ms=5000)

    def answered(metadata, exception):
        if exception is not None:
            failed.append(exception)
        else:
            acknowledged.append(metadata.offset)

    def load() -> None:
        for start in range(0, total, 40):
            for i in range(start, start + 40):
                producer.send(topic, b"%06d" % i, callback=answered)
            if stop.wait(0.005):  # paces the load so the kill lands mid-stream
                return

    loader = threading.Thread(target=load, name="producer-load", daemon=True)
    try:
        loader.start()
        wait_until(lambda: len(acknowledged) >= 3000 or failed, 30, 0.01, message="3000 acknowledged records")
        cluster.kill_service(cluster.broker_name(leader))
        loader.join(60)
        assert not loader.is_alive()
        producer.flush(SESSION_TIMEOUT_S + 40)
        metrics = producer.metrics()
    finally:
        stop.set()
        producer.close(10)
    assert not failed, failed[:3]
    assert len(acknowledged) == total and metrics["record-retry-total"] > 0
    records = read_all(cluster, topic, 0)
    assert [r.value for r in records] == [b"%06d" % i for i in range(total)]  # once each, in order
    assert sorted(acknowledged) == list(range(total))

    # the stranded partition has no leader now: a small buffer fills and send gives up after max.block.ms
    with producer_for(cluster, buffer_memory=65536, batch_size=16384, max_block_ms=500, request_timeout_ms=1000,
                      delivery_timeout_ms=2500) as stuck:
        queued = []
        with pytest.raises(BufferExhaustedError) as exhausted:
            for i in range(5000):
                queued.append(stuck.send("stranded", b"%0100d" % i))
        assert exhausted.value.code == Errors.REQUEST_TIMED_OUT
        assert 4 * 100 < len(queued) < 4 * 16384 // 100 + 1
        assert stuck.metrics()["waiting-threads"] == 0
        with pytest.raises(KafkaTimeoutError, match="Expiring"):
            queued[0].get(10)
        assert all(f.exception(10) is not None for f in queued)


def _fully_replicated(admin: Admin, topic: str) -> TopicDescription | None:
    """The topic's description once every partition has a leader and a full ISR (a broker whose
    metadata does not know the topic yet answers an error: not yet)."""
    description = admin.describe_topics([topic], raise_errors=False)[topic]
    if isinstance(description, KafkaError):
        return None
    ready = all(p.leader >= 0 and set(p.isr) == set(p.replicas) for p in description.partitions)
    return description if ready else None
