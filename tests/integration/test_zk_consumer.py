"""The legacy 0.8 ZooKeeper consumer against a real cluster (one controller, two brokers and a
coordinator, shared by this module's tests): partition ownership in ZooKeeper across two members,
rebalancing to the survivor from the committed offsets after a shutdown and after a SIGKILL (once
the dead member's session expires), round-robin assignment over two topics with a rebalance
listener, a whitelist stream picking up a topic created later, partitions added to a topic, a
rebalance failing while another thread holds a partition, consumer.timeout.ms, streams created
only once, its own session expiring (it registers again and takes its partitions back),
out-of-range offsets reset per auto.offset.reset (beyond the log end, and below the log start
after retention), offsets kept in Kafka (offsets.storage=kafka) with dual commit, a group
migrating from ZooKeeper offsets to Kafka offsets and then dropping dual commit, a value decoder,
and a partition leader killed with SIGKILL (the leader finder moves the partition to the new
leader's fetcher; last, as it leaves a broker down)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.clients.lowlevel import LowLevelClient
from services.clients.zk_consumer import (
    ConsumerRebalanceFailedError,
    ConsumerRebalanceListener,
    ConsumerTimeoutError,
    MessageStreamsExistError,
    Whitelist,
    ZookeeperConsumerConnector,
)
from services.common.errors import Errors
from services.common.hashing import java_string_hashcode
from services.common.records import build_batch
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import start_python_module, stop_pid, wait_until
from tests.integration.conftest import (
    CLIENT_CONFIG,
    TEST_BROKER_CONFIG,
    create_topic,
    module_cluster,
    produce_values,
    zk_session,
)
from tests.integration.test_consumer_groups import describe_rows
from tests.integration.zk_session_expiry import expire_session

KILLED_SESSION_TIMEOUT_MS = 4000
LOGGED = 30  # records written before a reset test
# retention is checked from start and then every 300 ms (not first 30 s after start, as by default)
BROKER_CONFIG = {**TEST_BROKER_CONFIG, "log.retention.check.interval.ms": 300, "log.initial.task.delay.ms": 0}
FAST = {"rebalance.backoff.ms": 200, "rebalance.max.retries": 30, "refresh.leader.backoff.ms": 100,
        "auto.commit.interval.ms": 200, "consumer.timeout.ms": 200, "fetch.wait.max.ms": 50}


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "zkc", brokers=2,
                        controllers=1, coordinators=1, broker_config=BROKER_CONFIG) as local:
        local.zk_connect = zookeeper.connect_string + local.chroot
        yield local


@pytest.fixture
def connectors(cluster) -> Iterator:
    made: list[ZookeeperConsumerConnector] = []

    def make(group: str, **config) -> ZookeeperConsumerConnector:
        connector = ZookeeperConsumerConnector({"zookeeper.connect": cluster.zk_connect, "group.id": group,
                                                "auto.offset.reset": "smallest", **FAST, **config})
        made.append(connector)
        return connector

    yield make
    for connector in made:
        connector.shutdown()


class Collector:
    """One thread per stream, keeping every message (the thread ends with its stream)."""

    def __init__(self, streams):
        self.messages: list = []
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(s,), daemon=True) for s in streams]
        for thread in self.threads:
            thread.start()

    def _run(self, stream) -> None:
        while True:
            try:
                for message in stream:
                    with self._lock:
                        self.messages.append(message)
                return
            except ConsumerTimeoutError:
                continue

    def keys(self) -> set[tuple[int, int]]:
        with self._lock:
            return {(m.partition, m.offset) for m in self.messages}

    def first_offsets(self) -> dict[int, int]:
        with self._lock:
            firsts: dict[int, int] = {}
            for m in self.messages:
                firsts[m.partition] = min(firsts.get(m.partition, m.offset), m.offset)
            return firsts


def produce_all(writer, topic: str, partitions: int, per_partition: int, start: int = 0) -> set[tuple[int, int]]:
    produced = set()
    for p in range(partitions):
        base = produce_values(writer, topic, p, [b"%d-%d" % (p, start + i) for i in range(per_partition)])
        produced |= {(p, base + i) for i in range(per_partition)}
    return produced


def owners(cluster, group: str, topic: str, partitions: int) -> dict[int, str | None]:
    with zk_session(cluster.zk_connect) as zk:
        return {p: zk.get_partition_owner(group, TopicPartition(topic, p)) for p in range(partitions)}


def committed(cluster, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    with zk_session(cluster.zk_connect) as zk:
        return {p: zk.get_legacy_offset(group, TopicPartition(topic, p)) for p in range(partitions)}


def thread_ids(connector, streams: int) -> set[str]:
    return {f"{connector.consumer_id}-{n}" for n in range(streams)}


def test_two_members_split_six_partitions_then_the_survivor_resumes_from_committed_offsets(
        cluster, admin, writer, connectors):
    topic = create_topic(admin, "zkc-split", partitions=6)
    produced = produce_all(writer, topic, 6, 20)
    first = connectors("split", **{"consumer.id": "a", "num.consumer.fetchers": 2})
    second = connectors("split", **{"consumer.id": "b"})
    collected = Collector(first.create_message_streams({topic: 2})[topic])
    survivor = Collector(second.create_message_streams({topic: 3})[topic])
    everyone = thread_ids(first, 2) | thread_ids(second, 3)
    wait_until(lambda: set(owners(cluster, "split", topic, 6).values()) == everyone, 20,
               message=lambda: f"every thread owns a partition: {owners(cluster, 'split', topic, 6)}")
    wait_until(lambda: collected.keys() | survivor.keys() >= produced, 20, message="every message consumed")
    first_parts = {p for p, o in owners(cluster, "split", topic, 6).items() if o.startswith(first.consumer_id)}
    assert len(first_parts) == 3  # range: 6 partitions over a-0, a-1, b-0, b-1, b-2 -> a-0 gets two

    first.shutdown()
    at_shutdown = committed(cluster, "split", topic, 6)
    assert {p: at_shutdown[p] for p in first_parts} == {p: 20 for p in first_parts}
    wait_until(lambda: set(owners(cluster, "split", topic, 6).values()) <= thread_ids(second, 3)
               and None not in owners(cluster, "split", topic, 6).values(), 20, message="survivor owns all")
    before = len(survivor.keys())
    more = produce_all(writer, topic, 6, 5, start=20)
    wait_until(lambda: survivor.keys() >= more, 20, message="survivor reads the new messages")
    assert not {k for k in survivor.keys() if k[0] in first_parts} - more  # nothing before the commit
    assert len(survivor.keys()) == before + len(more)


class RecordingListener(ConsumerRebalanceListener):
    def __init__(self):
        self.calls: list[tuple] = []

    def before_releasing_partitions(self, partition_ownership):
        self.calls.append(("releasing", partition_ownership))

    def before_starting_fetchers(self, consumer_id, global_partition_assignment):
        self.calls.append(("starting", consumer_id, {topic: {p: str(thread) for p, thread in owners.items()}
                                                     for topic, owners in global_partition_assignment.items()}))


def test_round_robin_deals_two_topics_over_the_groups_threads_and_the_listener_sees_the_change(
        cluster, admin, writer, connectors):
    sizes = {create_topic(admin, "zkc-rr-five", partitions=5): 5, create_topic(admin, "zkc-rr-three", partitions=3): 3}
    produced = {(t, p, o) for t, n in sizes.items() for p, o in produce_all(writer, t, n, 10)}
    rr = {"partition.assignment.strategy": "roundrobin"}
    first = connectors("rr", **{"consumer.id": "a", **rr})
    listener = RecordingListener()
    first.set_consumer_rebalance_listener(listener)
    got_first = Collector([s for streams in first.create_message_streams(dict.fromkeys(sizes, 2)).values()
                           for s in streams])
    alone = {t: set(range(n)) for t, n in sizes.items()}
    assert [call[0] for call in listener.calls] == ["releasing", "starting"] and listener.calls[0][1] == {}
    assert {o for owners_of_topic in listener.calls[1][2].values() for o in owners_of_topic.values()} == thread_ids(
        first, 2)

    second = connectors("rr", **{"consumer.id": "b", **rr})
    got_second = Collector([s for streams in second.create_message_streams(dict.fromkeys(sizes, 2)).values()
                            for s in streams])
    # Kafka 0.8.2's rule: every partition sorted by Java hashCode of "[topic,partition]", dealt in turn
    dealt = sorted(((t, p) for t, n in sizes.items() for p in range(n)), key=lambda tp: java_string_hashcode(
        "[%s,%d]" % tp))
    threads = sorted(thread_ids(first, 2) | thread_ids(second, 2))
    expected = {tp: threads[i % 4] for i, tp in enumerate(dealt)}

    def in_zookeeper() -> dict:
        return {(t, p): o for t, n in sizes.items() for p, o in owners(cluster, "rr", t, n).items()}

    wait_until(lambda: in_zookeeper() == expected, 20, message=lambda: f"round-robin owners: {in_zookeeper()}")
    assert sorted(list(expected.values()).count(t) for t in threads) == [2, 2, 2, 2]

    def consumed() -> set:
        return {(m.topic, m.partition, m.offset) for c in (got_first, got_second) for m in list(c.messages)}

    wait_until(lambda: consumed() >= produced, 20, message="every message consumed")
    wait_until(lambda: listener.calls[-1][0] == "starting" and first.rebalance_count >= 2, 20,
               message="the first member rebalanced")
    assert ("releasing", alone) in listener.calls  # what it owned before the second member joined
    by_topic = {t: {p: o for (topic, p), o in expected.items() if topic == t} for t in sizes}
    assert listener.calls[-1] == ("starting", first.consumer_id, by_topic)


def test_a_partition_taken_over_starts_from_what_its_last_owner_committed_on_release(
        cluster, admin, writer, connectors):
    topic = create_topic(admin, "zkc-handover", partitions=1)
    produced = produce_all(writer, topic, 1, 10)
    first = connectors("handover", **{"consumer.id": "b", "auto.commit.interval.ms": 600000})
    got_first = Collector(first.create_message_streams({topic: 1})[topic])
    wait_until(lambda: got_first.keys() >= produced, 20, message="the first member reads everything")
    # "handover_a-0" sorts first, so the joiner takes partition 0; the first member commits 10 as it
    # releases the partition, and the joiner claims it only after that release
    joiner = connectors("handover", **{"consumer.id": "a"})
    claim = joiner.zk.claim_partition

    def claim_once_released(group, tp, thread_id):
        wait_until(lambda: owners(cluster, "handover", topic, 1)[0] is None, 20,
                   message="the first member to release the partition")
        return claim(group, tp, thread_id)

    joiner.zk.claim_partition = claim_once_released
    got_joiner = Collector(joiner.create_message_streams({topic: 1})[topic])
    assert committed(cluster, "handover", topic, 1) == {0: 10}
    more = produce_all(writer, topic, 1, 5, start=10)
    wait_until(lambda: got_joiner.keys() >= more, 20, message="the joiner reads the new messages")
    assert got_joiner.keys() == more


def test_a_killed_member_is_replaced_once_its_session_expires(cluster, admin, writer, connectors, tmp_path: Path):
    topic = create_topic(admin, "zkc-kill", partitions=4)
    produce_all(writer, topic, 4, 10)
    log = tmp_path / "member.log"
    child = start_python_module("tests.integration.zk_consumer_member", [
        "--zookeeper", cluster.zk_connect, "--group", "kill", "--topic", topic, "--consumer-id", "doomed",
        "--session-timeout-ms", str(KILLED_SESSION_TIMEOUT_MS)], log)
    try:
        wait_until(lambda: set(owners(cluster, "kill", topic, 4).values()) == {"kill_doomed-0"}, 30,
                   message=lambda: f"the child owns everything: {log.read_text()[-2000:]}")
        survivor_connector = connectors("kill", **{"consumer.id": "survivor"})
        survivor = Collector(survivor_connector.create_message_streams({topic: 2})[topic])
        wait_until(lambda: committed(cluster, "kill", topic, 4) == {0: 10, 1: 10}  # the child keeps 0 and 1
                   | {p: o for p, o in committed(cluster, "kill", topic, 4).items() if p > 1}, 20,
                   message=lambda: f"the child commits: {committed(cluster, 'kill', topic, 4)}")
        os.kill(child.pid, signal.SIGKILL)
        killed_at = time.monotonic()
    finally:
        stop_pid(child.pid, timeout_s=0)
    child.wait(5)
    frozen = committed(cluster, "kill", topic, 4)
    wait_until(lambda: set(owners(cluster, "kill", topic, 4).values()) == thread_ids(survivor_connector, 2),
               KILLED_SESSION_TIMEOUT_MS / 1000 + 20, message="the survivor takes the dead member's partitions")
    taken_over_s = time.monotonic() - killed_at
    more = produce_all(writer, topic, 4, 3, start=10)
    wait_until(lambda: survivor.keys() >= more, 20, message="the survivor reads on")
    assert survivor.first_offsets()[0] == frozen[0] and survivor.first_offsets()[1] == frozen[1]
    assert taken_over_s >= 2.0, "the dead member's partitions were free before its session expired"


def test_a_whitelist_stream_picks_up_a_topic_created_later(cluster, admin, writer, connectors):
    create_topic(admin, "zkc-wl-a", partitions=1)
    first = {(0, produce_values(writer, "zkc-wl-a", 0, [b"a"]))}
    connector = connectors("wl")
    stream, = connector.create_message_streams_by_filter(Whitelist("zkc-wl-.*"), 1)
    got = Collector([stream])
    wait_until(lambda: {(m.topic, m.offset) for m in got.messages} >= {("zkc-wl-a", o) for _, o in first}, 20,
               message="the first topic is read")
    create_topic(admin, "zkc-wl-b", partitions=2)
    produce_values(writer, "zkc-wl-b", 1, [b"b"])
    wait_until(lambda: any(m.topic == "zkc-wl-b" and m.message == b"b" for m in got.messages), 20,
               message="the topic created later is read")
    registration = owners(cluster, "wl", "zkc-wl-b", 2)
    assert set(registration.values()) == {f"{connector.consumer_id}-0"}


def test_partitions_added_to_a_topic_are_assigned_and_read(cluster, admin, writer, connectors):
    topic = create_topic(admin, "zkc-grow", partitions=1)
    connector = connectors("grow")
    got = Collector(connector.create_message_streams({topic: 2})[topic])
    wait_until(lambda: set(owners(cluster, "grow", topic, 1).values()) == {f"{connector.consumer_id}-0"}, 20,
               message="the first partition is owned")
    admin.create_partitions({topic: 3})
    admin.wait_for_topic(topic, 30, partitions=3)
    produce_values(writer, topic, 2, [b"in-a-new-partition"])
    wait_until(lambda: any(m.message == b"in-a-new-partition" for m in got.messages), 20,
               message="the new partition is read")
    assert set(owners(cluster, "grow", topic, 3).values()) == thread_ids(connector, 2)


def test_a_partition_held_by_another_thread_fails_the_rebalance_after_its_retries(cluster, admin, connectors):
    topic = create_topic(admin, "zkc-held", partitions=1)
    with zk_session(cluster.zk_connect) as squatter:
        assert squatter.claim_partition("held", TopicPartition(topic, 0), "held_other-0")
        connector = connectors("held", **{"rebalance.max.retries": 2, "rebalance.backoff.ms": 50})
        with pytest.raises(ConsumerRebalanceFailedError):
            connector.create_message_streams({topic: 1})
        assert squatter.get_partition_owner("held", TopicPartition(topic, 0)) == "held_other-0"


def test_an_expired_session_registers_again_and_takes_its_partitions_back(cluster, admin, writer, connectors):
    topic = create_topic(admin, "zkc-expiry", partitions=2)
    produce_values(writer, topic, 0, [b"before"])
    connector = connectors("expiry")
    got = Collector(connector.create_message_streams({topic: 1})[topic])
    mine = thread_ids(connector, 1)
    wait_until(lambda: set(owners(cluster, "expiry", topic, 2).values()) == mine and got.messages, 20,
               message="owned and read")
    with zk_session(cluster.zk_connect) as zk:
        first_registration = zk.zk.exists(f"/consumers/expiry/ids/{connector.consumer_id}").czxid
    expire_session(cluster.zk_connect, connector._zk_raw)

    def registered_again() -> bool:
        with zk_session(cluster.zk_connect) as zk:
            stat = zk.zk.exists(f"/consumers/expiry/ids/{connector.consumer_id}")
        return stat is not None and stat.czxid != first_registration

    wait_until(registered_again, 30, message="registered in a new session")
    wait_until(lambda: set(owners(cluster, "expiry", topic, 2).values()) == mine, 20, message="owned again")
    produce_values(writer, topic, 1, [b"after"])
    wait_until(lambda: any(m.message == b"after" for m in got.messages), 20, message="read after expiry")


def _start_after_reset(cluster, writer, connectors, topic: str, reset: str, out_of_range: int) -> Collector:
    """A connector of its own group on `topic` whose committed offset is `out_of_range`, once the
    fetcher has reset it; then three more records are produced."""
    group = f"group-{topic}"
    with zk_session(cluster.zk_connect) as zk:
        zk.commit_legacy_offset(group, TopicPartition(topic, 0), out_of_range)
    connector = connectors(group, **{"auto.offset.reset": reset})
    got = Collector(connector.create_message_streams({topic: 1})[topic])
    wait_until(lambda: connector.owned_partitions().get(TopicPartition(topic, 0), -1) not in (-1, out_of_range),
               20, message="the offset is reset")
    produce_values(writer, topic, 0, [b"new-%d" % i for i in range(3)])
    return got


def _check_reset(cluster, got: Collector, topic: str, reset: str, log_start: int) -> None:
    end = LOGGED + 3
    wait_until(lambda: end - 1 in {o for _, o in got.keys()}, 20, message=lambda: f"read to {end}: {got.keys()}")
    offsets = sorted(o for _, o in got.keys())
    if reset == "largest":
        assert offsets == [LOGGED, LOGGED + 1, LOGGED + 2]
    else:  # from the log start (retention may have moved it on since `log_start` was read)
        assert log_start <= offsets[0] < LOGGED and offsets == list(range(offsets[0], end))
    wait_until(lambda: committed(cluster, f"group-{topic}", topic, 1)[0] == end, 10, message="committed")


@pytest.mark.parametrize("reset", ["smallest", "largest"])
def test_an_offset_beyond_the_log_end_resets_per_auto_offset_reset(cluster, admin, writer, connectors, reset):
    topic = create_topic(admin, f"zkc-beyond-{reset}", partitions=1)
    produce_values(writer, topic, 0, [b"old-%d" % i for i in range(LOGGED)])
    got = _start_after_reset(cluster, writer, connectors, topic, reset, 1_000_000)
    _check_reset(cluster, got, topic, reset, 0)


def test_consumer_timeout_raises_and_streams_are_created_once(cluster, admin, connectors):
    topic = create_topic(admin, "zkc-timeout", partitions=1)
    connector = connectors("timeout", **{"consumer.timeout.ms": 300})
    stream, = connector.create_message_streams({topic: 1})[topic]
    with pytest.raises(ConsumerTimeoutError):
        next(stream)
    with pytest.raises(ConsumerTimeoutError):  # the stream stays usable
        next(stream)
    with pytest.raises(MessageStreamsExistError):
        connector.create_message_streams({topic: 1})
    with pytest.raises(MessageStreamsExistError):
        connector.create_message_streams_by_filter(Whitelist(".*"))
    connector.shutdown()
    assert list(stream) == []
    with zk_session(cluster.zk_connect) as zk:
        assert zk.get_legacy_consumer_ids("timeout") == []
    with contextlib.suppress(Exception):
        connector.shutdown()


KAFKA_STORAGE = {"offsets.storage": "kafka", "offsets.channel.backoff.ms": 100}


def take(stream, count: int) -> list:
    """The next `count` messages of `stream`, waiting through consumer timeouts (up to 30 s)."""
    taken: list = []
    deadline = time.monotonic() + 30
    while len(taken) < count and time.monotonic() < deadline:
        try:
            taken.append(next(stream))
        except ConsumerTimeoutError:
            continue
    assert len(taken) == count, taken
    return taken


def kafka_offsets(admin, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    found = admin.list_consumer_group_offsets(group, [TopicPartition(topic, p) for p in range(partitions)])
    return {p: found[TopicPartition(topic, p)].offset if TopicPartition(topic, p) in found else None
            for p in range(partitions)}


def test_kafka_storage_with_dual_commit_commits_to_the_coordinator_and_to_zookeeper(
        cluster, admin, writer, connectors):
    topic = create_topic(admin, "zkc-kafka", partitions=2)
    produce_all(writer, topic, 2, 20)
    connector = connectors("kafka-dual", **KAFKA_STORAGE, **{"auto.commit.interval.ms": 60000})
    streams = connector.create_message_streams({topic: 2})[topic]  # range: one partition per stream
    taken = [m for stream in streams for m in take(stream, 5)]
    assert sorted((m.partition, m.offset) for m in taken) == [(p, o) for p in range(2) for o in range(5)]
    assert connector.commit_offsets()
    connector.shutdown()
    assert committed(cluster, "kafka-dual", topic, 2) == {0: 5, 1: 5}
    assert kafka_offsets(admin, "kafka-dual", topic, 2) == {0: 5, 1: 5}
    rows = {(r["TOPIC"], r["PARTITION"]): r for r in describe_rows(cluster, "kafka-dual")}
    assert {key: (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for key, r in rows.items()} == {
        (topic, "0"): ("5", "20", "15"), (topic, "1"): ("5", "20", "15")}


def test_a_group_migrates_from_zookeeper_offsets_to_kafka_offsets(cluster, admin, writer, connectors):
    topic = create_topic(admin, "zkc-migrate", partitions=2)
    produce_all(writer, topic, 2, 30)
    group = "migrating"
    with zk_session(cluster.zk_connect) as zk:  # the group so far kept its offsets in ZooKeeper only
        zk.commit_legacy_offsets(group, {TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 10})
    admin.alter_consumer_group_offsets(group, {TopicPartition(topic, 1): 15})  # ahead in Kafka for one
    dual = connectors(group, **KAFKA_STORAGE)
    got = Collector(dual.create_message_streams({topic: 1})[topic])
    wait_until(lambda: len(got.keys()) == 20 + 15, 30, message="the rest after the larger offsets")
    assert got.first_offsets() == {0: 10, 1: 15}
    dual.shutdown()
    assert committed(cluster, group, topic, 2) == {0: 30, 1: 30}
    assert kafka_offsets(admin, group, topic, 2) == {0: 30, 1: 30}
    produce_all(writer, topic, 2, 5, start=30)
    with zk_session(cluster.zk_connect) as zk:  # ZooKeeper behind: no longer read without dual commit
        zk.commit_legacy_offsets(group, {TopicPartition(topic, 0): 3, TopicPartition(topic, 1): 3})
    kafka_only = connectors(group, **KAFKA_STORAGE, **{"dual.commit.enabled": False})
    got = Collector(kafka_only.create_message_streams({topic: 1})[topic])
    wait_until(lambda: len(got.keys()) == 10, 30, message="the records produced after the migration")
    assert got.first_offsets() == {0: 30, 1: 30}
    kafka_only.shutdown()
    assert kafka_offsets(admin, group, topic, 2) == {0: 35, 1: 35}
    assert committed(cluster, group, topic, 2) == {0: 3, 1: 3}


def test_a_value_decoder_hands_out_decoded_messages(cluster, admin, writer, connectors):
    topic = create_topic(admin, "zkc-decode", partitions=1)
    produce_values(writer, topic, 0, [json.dumps({"n": i}).encode() for i in range(4)])
    connector = connectors("decoding")
    stream, = connector.create_message_streams({topic: 1}, value_decoder=json.loads)[topic]
    assert [m.message for m in take(stream, 4)] == [{"n": i} for i in range(4)]


def test_an_offset_below_the_log_start_resets_per_auto_offset_reset(cluster, admin, writer, connectors):
    """The brokers check retention every 300 ms, so each log start soon moves past the first records."""
    topics = {reset: create_topic(admin, f"zkc-below-{reset}", partitions=1,
                                  configs={"segment.bytes": "1024", "retention.bytes": "1024"})
              for reset in ("smallest", "largest")}
    for i in range(LOGGED):
        for topic in topics.values():
            produce_values(writer, topic, 0, [b"old-%03d" % i + b"." * 200])
    log_starts = {reset: wait_until(lambda t=topic: writer.list_offset(t, 0, "earliest").offset, 40,
                                    message="retention") for reset, topic in topics.items()}
    for reset, topic in topics.items():
        got = _start_after_reset(cluster, writer, connectors, topic, reset, 0)
        _check_reset(cluster, got, topic, reset, log_starts[reset])


def test_a_killed_leader_moves_its_partition_to_the_new_leaders_fetcher(cluster, admin, writer, connectors):
    topic = create_topic(admin, "zkc-leader", partitions=1, replication=2)
    produce_values(writer, topic, 0, [b"v-%d" % i for i in range(10)])
    connector = connectors("leader")
    got = Collector(connector.create_message_streams({topic: 1})[topic])
    wait_until(lambda: len(got.keys()) == 10, 20, message="first records read")
    leader = writer.partitions_for(topic)[0].leader
    cluster.kill_service(cluster.broker_name(leader))
    with LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as producer:
        def moved() -> bool:
            info = producer.partitions_for(topic)
            return bool(info) and info[0].leader not in (-1, leader)

        wait_until(moved, 30, message="a new leader")
        result = producer.produce(topic, 0, build_batch([b"after-kill"]), acks=1)
        assert result.error_code == Errors.NONE, result
    wait_until(lambda: any(m.message == b"after-kill" for m in got.messages), 30,
               message="read from the new leader")
    assert sorted(o for _, o in got.keys()) == list(range(11))
    assert connector.owned_partitions()[TopicPartition(topic, 0)] == 11
