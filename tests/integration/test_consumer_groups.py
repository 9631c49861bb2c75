"""Consumer groups against a real cluster (one controller, three brokers, two coordinators, shared
by the tests of this module): members sharing a topic without overlap, rebalances after a join, a
leave and a SIGKILL, idle extra members, committed offsets surviving a restart of every consumer
and a SIGKILL of the group's coordinator, kafka-python's `commit()` and `poll()` by partition,
fencing of an old generation, and the `consumer-groups` tool's lag, resets (to a datetime, by a
duration, from an exported plan), delete and delete-offsets.

Members that get killed run in processes of their own (`group_member`); the others run in threads.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.clients import cli
from services.clients.admin import Admin
from services.clients.consumer import Consumer
from services.clients.lowlevel import LowLevelClient
from services.clients.transport import COORDINATOR, ChannelPool
from services.common.errors import Errors
from services.common.hashing import coordinator_partition
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.records import build_batch
from services.common.topic_partition import TopicPartition
from services.common.zk.coordinators import decode_ownership
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, SESSION_TIMEOUT_MS, create_topic, module_cluster, produce_values

REPO = Path(__file__).resolve().parents[2]
REPLICATION = 2


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "groups", brokers=3, controllers=1,
                        coordinators=2) as local:
        yield local


def produce(writer: LowLevelClient, topic: str, partition: int, values: list[str]) -> None:
    produce_values(writer, topic, partition, [v.encode() for v in values])


def group_consumer(cluster: LocalCluster, group: str, **config) -> Consumer:
    settings = {**CLIENT_CONFIG, "fetch_max_wait_ms": 100, "group_id": group, "auto_offset_reset": "earliest",
                "session_timeout_ms": SESSION_TIMEOUT_MS, "heartbeat_interval_ms": 500, **config}
    return Consumer(bootstrap_servers=cluster.bootstrap_servers, **settings)


# --------------------------------------------------------------------------------------------- members

class Member:
    """A group member in its own process, reporting its assignment as JSON lines."""

    def __init__(self, cluster: LocalCluster, group: str, topic: str, name: str, *, commit: bool = False,
                 assignor: str = "range", instance_id: str | None = None) -> None:
        command = [sys.executable, "-m", "tests.integration.group_member", "--bootstrap", cluster.bootstrap_servers,
                   "--group", group, "--topic", topic, "--client-id", name,
                   "--session-timeout-ms", str(SESSION_TIMEOUT_MS), "--assignor", assignor]
        if instance_id is not None:
            command += ["--instance-id", instance_id]
        if commit:
            command.append("--commit")
        self.name = name
        self.process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.assignment: set[tuple[str, int]] = set()
        self.values: list[str] = []
        self.rebalances = 0
        self.stderr: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_errors, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            event = json.loads(line)
            with self._lock:
                if event["event"] == "assigned":
                    self.assignment = {tuple(p) for p in event["partitions"]}
                    self.rebalances += 1
                elif event["event"] in ("revoked", "closed"):
                    self.assignment = set()
                elif event["event"] == "records":
                    self.values.extend(event["values"])

    def _read_errors(self) -> None:
        for line in self.process.stderr:
            self.stderr.append(line)

    def current(self) -> set[tuple[str, int]]:
        with self._lock:
            return set(self.assignment)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def terminate(self) -> None:
        if self.alive:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(20)

    def kill(self) -> None:
        if self.alive:
            self.process.kill()
            self.process.wait(10)
        with self._lock:
            self.assignment = set()


@pytest.fixture
def members(cluster: LocalCluster) -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for member in started:
        try:
            member.terminate()
        except subprocess.TimeoutExpired:
            member.kill()
        if member.stderr and any("Traceback" in line for line in member.stderr):
            print(f"----- {member.name} stderr -----\n{''.join(member.stderr[-40:])}")


def covered_once(live: list[Member], topic: str, partitions: int) -> bool:
    """Every partition is owned by exactly one live member, every member has been through a
    rebalance, and the shares differ by one at most (what the range assignor ends with)."""
    owned = [tp for m in live for tp in m.current()]
    sizes = [len(m.current()) for m in live]
    return (sorted(owned) == [(topic, p) for p in range(partitions)] and all(m.rebalances for m in live)
            and max(sizes) - min(sizes) <= 1)


def wait_covered(live: list[Member], topic: str, partitions: int, timeout_s: float = 40) -> float:
    started = time.monotonic()
    wait_until(lambda: covered_once(live, topic, partitions), timeout_s, 0.05,
               message=lambda: f"each partition owned once: {[(m.name, sorted(m.current())) for m in live]}")
    return time.monotonic() - started


# --------------------------------------------------------------------------------------------- membership

def test_three_members_share_six_partitions_and_every_change_rebalances(cluster, admin, members):
    topic = create_topic(admin, "shared", 6, REPLICATION)
    members.extend(Member(cluster, "sharers", topic, f"m{i}") for i in range(3))
    wait_covered(members, topic, 6)
    assert [len(m.current()) for m in members] == [2, 2, 2]

    members.append(Member(cluster, "sharers", topic, "m3"))          # a fourth joins
    wait_covered(members, topic, 6)
    assert sorted(len(m.current()) for m in members) == [1, 1, 2, 2]

    members[0].terminate()                                           # one leaves the group
    live = members[1:]
    wait_covered(live, topic, 6)
    assert sorted(len(m.current()) for m in live) == [2, 2, 2]

    members[1].kill()                                                # one crashes
    live = members[2:]
    # how long covering a crash takes is measured by bench/rebalance.py, not bounded here
    wait_covered(live, topic, 6, timeout_s=SESSION_TIMEOUT_MS / 1000 + 30)
    assert sorted(len(m.current()) for m in live) == [3, 3]


def test_members_beyond_the_partition_count_stay_idle(cluster, admin, members):
    topic = create_topic(admin, "few", 2, REPLICATION)
    members.extend(Member(cluster, "crowd", topic, f"c{i}") for i in range(3))
    wait_covered(members, topic, 2)
    wait_until(lambda: all(m.rebalances for m in members), 30, message="every member saw an assignment")
    assert sorted(len(m.current()) for m in members) == [0, 1, 1]


def test_cooperative_sticky_members_keep_their_partitions_across_a_join(cluster, admin, members):
    topic = create_topic(admin, "cooperative", 6, REPLICATION)
    members.extend(Member(cluster, "cooperators", topic, f"k{i}", assignor="cooperative-sticky") for i in range(2))
    wait_covered(members, topic, 6)
    before = [m.current() for m in members]
    members.append(Member(cluster, "cooperators", topic, "k2", assignor="cooperative-sticky"))
    wait_covered(members, topic, 6)
    assert [len(m.current()) for m in members] == [2, 2, 2]
    for owned_before, member in zip(before, members[:2], strict=True):
        assert member.current() <= owned_before     # nothing moved between the first two


def test_a_static_member_restarting_within_its_session_gets_its_partitions_back(cluster, admin, members):
    topic = create_topic(admin, "static", 4, REPLICATION)
    members.extend(Member(cluster, "statics", topic, f"s{i}", instance_id=f"host-{i}") for i in range(2))
    wait_covered(members, topic, 4)
    before = members[0].current()
    members[0].kill()
    members[0] = Member(cluster, "statics", topic, "s0-again", instance_id="host-0")
    wait_covered(members, topic, 4, timeout_s=SESSION_TIMEOUT_MS / 1000 - 1)
    assert members[0].current() == before
    assert members[1].rebalances == 1                 # the other member saw no rebalance
    assert admin.describe_consumer_groups(["statics"])["statics"].state == "Stable"


def test_a_member_that_stops_polling_leaves_and_its_partitions_move(cluster, admin, members):
    topic = create_topic(admin, "slow", 2, REPLICATION)
    members.append(Member(cluster, "pollers", topic, "p0"))
    stalled = group_consumer(cluster, "pollers", max_poll_interval_ms=4000)
    try:
        stalled.subscribe([topic])
        wait_until(lambda: (stalled.poll(timeout_ms=100) is not None and len(stalled.assignment()) == 1
                            and len(members[0].current()) == 1), 30, message="the two members to share")
        # no poll() from now on: after max.poll.interval.ms its heartbeat thread leaves the group
        wait_until(lambda: len(members[0].current()) == 2, 20, 0.1, message="the partitions to move")
    finally:
        stalled.close()


def test_pattern_subscription_and_auto_commit_on_close(cluster, admin, writer):
    for name in ("metrics-eu", "metrics-us"):
        create_topic(admin, name, 1, REPLICATION)
        produce(writer, name, 0, [f"{name}-{i}" for i in range(20)])
    create_topic(admin, "logs-eu", 1, REPLICATION)
    with group_consumer(cluster, "patterned", auto_commit_interval_ms=60000) as consumer:
        consumer.subscribe(pattern=r"metrics-.*")
        seen: set[str] = set()
        deadline = time.monotonic() + 30
        while len(seen) < 40 and time.monotonic() < deadline:
            seen.update(r.value.decode() for r in consumer.poll(timeout_ms=200))
        assert consumer.subscription() == {"metrics-eu", "metrics-us"}
        assert {tp.topic for tp in consumer.assignment()} == {"metrics-eu", "metrics-us"}
        assert len(seen) == 40
    # the interval had not come round: close committed the positions
    committed = admin.list_consumer_group_offsets("patterned")
    assert {tp.topic: o.offset for tp, o in committed.items()} == {"metrics-eu": 20, "metrics-us": 20}


# --------------------------------------------------------------------------------------------- offsets

def consume_until(consumer: Consumer, wanted: set[str], seen: set[str], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not wanted <= seen and time.monotonic() < deadline:
        for record in consumer.poll(timeout_ms=200):
            seen.add(record.value.decode())
        consumer.commit_sync()
    assert wanted <= seen, f"missing {sorted(wanted - seen)[:10]}"


def test_committed_offsets_resume_after_every_consumer_restarts(cluster, admin, writer):
    topic = create_topic(admin, "resume", 4, REPLICATION)
    first = {f"a{i}" for i in range(200)}
    for p in range(4):
        produce(writer, topic, p, sorted(v for v in first if int(v[1:]) % 4 == p))
    consumers = [group_consumer(cluster, "resumers", enable_auto_commit=False) for _ in range(2)]
    seen: set[str] = set()
    stop = threading.Event()

    def run(consumer: Consumer) -> None:
        consumer.subscribe([topic])
        while not stop.is_set():
            for record in consumer.poll(timeout_ms=200):
                seen.add(record.value.decode())
            consumer.commit_sync()
        consumer.close()

    threads = [threading.Thread(target=run, args=(c,)) for c in consumers]
    for thread in threads:
        thread.start()
    wait_until(lambda: first <= seen, 40, message=lambda: f"first round: {len(seen)} of {len(first)}")
    stop.set()
    for thread in threads:
        thread.join(30)
    committed = admin.list_consumer_group_offsets("resumers")
    assert sum(o.offset for o in committed.values()) == 200

    second = {f"b{i}" for i in range(100)}
    for p in range(4):
        produce(writer, topic, p, sorted(v for v in second if int(v[1:]) % 4 == p))
    again: set[str] = set()
    with group_consumer(cluster, "resumers", enable_auto_commit=False) as consumer:
        consumer.subscribe([topic])
        consume_until(consumer, second, again)
    assert not again & first, "records before the committed offsets were read again"


def test_offsets_survive_a_kill_of_the_groups_coordinator(cluster, admin, writer):
    topic = create_topic(admin, "durable", 2, REPLICATION)
    for p in range(2):
        produce(writer, topic, p, [f"{p}-{i}" for i in range(50)])
    with group_consumer(cluster, "durable-group", enable_auto_commit=False) as consumer:
        consumer.subscribe([topic])
        consume_until(consumer, {f"{p}-{i}" for p in range(2) for i in range(50)}, set())
        consumer.commit_sync({TopicPartition(topic, 0): _offset(40), TopicPartition(topic, 1): _offset(45)})
    owner = admin.find_group_coordinator("durable-group")
    name = f"coordinator-{owner.node_id}"
    cluster.kill_service(name)
    try:
        wait_until(lambda: admin.find_group_coordinator("durable-group").node_id != owner.node_id, 30, 0.2,
                   message="another coordinator to take the group over")
        committed = admin.list_consumer_group_offsets("durable-group")
        assert {tp: o.offset for tp, o in committed.items()} == {
            TopicPartition(topic, 0): 40, TopicPartition(topic, 1): 45}
        with group_consumer(cluster, "durable-group", enable_auto_commit=False) as consumer:
            consumer.subscribe([topic])
            seen: set[str] = set()
            consume_until(consumer, {"0-40", "1-45", "0-49", "1-49"}, seen)
            assert "0-39" not in seen and "1-44" not in seen
    finally:
        cluster.start_service(name)


def _offset(value: int):
    from services.clients.consumer import OffsetAndMetadata

    return OffsetAndMetadata(value)


def test_a_kafka_python_loop_commits_with_commit_and_reads_the_poll_by_partition(cluster, admin, writer):
    topic = create_topic(admin, "kafka-python", 2, REPLICATION)
    expected = {TopicPartition(topic, p): [f"{p}-{i}" for i in range(30)] for p in range(2)}
    for tp, values in expected.items():
        produce(writer, topic, tp.partition, values)
    read: dict[TopicPartition, list[str]] = {}
    with group_consumer(cluster, "kafka-python-group", enable_auto_commit=False) as consumer:
        consumer.subscribe([topic])

        def poll_and_commit() -> bool:
            records = consumer.poll(timeout_ms=200)
            for tp, part in records.items():
                assert tp in records and records[tp] == part == records.get(tp)
                read.setdefault(tp, []).extend(record.value.decode() for record in part)
            assert len(records) == sum(map(len, records.values()))
            if records:
                consumer.commit()
            return sum(map(len, read.values())) >= 60

        wait_until(poll_and_commit, 30, 0, message=lambda: f"60 records, got {read}")
    assert read == expected
    committed = admin.list_consumer_group_offsets("kafka-python-group")
    assert {tp: o.offset for tp, o in committed.items()} == {tp: 30 for tp in expected}


def test_a_member_of_an_old_generation_cannot_commit(cluster, admin):
    topic = create_topic(admin, "fenced", 1, REPLICATION)
    node = admin.find_group_coordinator("fencing")
    with ChannelPool(request_timeout_ms=30000) as pool:
        def call(method: str, request):
            return pool.call(node.address, COORDINATOR, method, request, 30000)

        def join(member_id: str = ""):
            request = pb.JoinGroupRequest(group_id="fencing", session_timeout_ms=SESSION_TIMEOUT_MS,
                                          rebalance_timeout_ms=10000, member_id=member_id, protocol_type="consumer",
                                          client_id="raw",
                                          protocols=[pb.JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                                                  metadata=b"")])
            response = call("JoinGroup", request)
            if response.error_code == Errors.MEMBER_ID_REQUIRED:
                response = call("JoinGroup", pb.JoinGroupRequest(**{**_fields(request),
                                                                    "member_id": response.member_id}))
            return response

        first = join()
        assert first.error_code == 0 and first.generation_id == 1
        call("SyncGroup", pb.SyncGroupRequest(group_id="fencing", generation_id=1, member_id=first.member_id))

        def commit(generation: int, member_id: str) -> int:
            request = pb.OffsetCommitRequest(group_id="fencing", generation_id=generation, member_id=member_id,
                                             retention_time_ms=-1)
            request.topics.add(name=topic).partitions.add(partition_index=0, committed_offset=1,
                                                          committed_leader_epoch=-1)
            return call("OffsetCommit", request).topics[0].partitions[0].error_code

        assert commit(1, first.member_id) == 0
        # a second member joins: the first must rejoin, and generation 2 begins
        second_result = {}
        joiner = threading.Thread(target=lambda: second_result.update(response=join()))
        joiner.start()
        wait_until(lambda: call("Heartbeat", pb.HeartbeatRequest(group_id="fencing", generation_id=1,
                                                                 member_id=first.member_id)).error_code
                   == Errors.REBALANCE_IN_PROGRESS, 20, 0.1, message="the rebalance to begin")
        rejoined = join(first.member_id)
        joiner.join(30)
        second = second_result["response"]
        assert rejoined.generation_id == second.generation_id == 2
        assert commit(2, first.member_id) == Errors.REBALANCE_IN_PROGRESS   # awaiting the assignment
        syncs = [threading.Thread(target=call, args=("SyncGroup", pb.SyncGroupRequest(
            group_id="fencing", generation_id=2, member_id=member_id))) for member_id in
            (rejoined.member_id, second.member_id)]
        for sync in syncs:
            sync.start()
        for sync in syncs:
            sync.join(30)
        assert commit(1, first.member_id) == Errors.ILLEGAL_GENERATION
        assert commit(2, "someone-else") == Errors.UNKNOWN_MEMBER_ID
        assert commit(-1, "") == Errors.UNKNOWN_MEMBER_ID   # not a standalone group any more
        assert commit(2, first.member_id) == 0


def _fields(message) -> dict:
    return {field.name: value for field, value in message.ListFields()}


def test_a_deposed_owner_cannot_write_the_offsets_topic(cluster, admin, writer, _zk_root_client):
    topic = create_topic(admin, "owned-offsets", 1, REPLICATION)   # offsets of a missing topic go on loading
    admin.alter_consumer_group_offsets("owned", {TopicPartition(topic, 0): 1})
    tp = TopicPartition("__consumer_offsets", coordinator_partition("owned"))

    def owner():
        data, _ = _zk_root_client.get(f"{cluster.chroot}/coordinators/ownership")
        return decode_ownership(data).partitions[tp]

    before = owner()
    name = f"coordinator-{before.owner_id}"
    cluster.stop_service(name)               # its partitions move to the other coordinator
    try:
        wait_until(lambda: owner().owner_id != before.owner_id, 30, 0.1, message="the partition to move")
        after = owner()
        assert (after.epoch, after.producer_id) == (before.epoch + 1, before.producer_id)
        assert admin.list_consumer_group_offsets("owned") == {TopicPartition(topic, 0): _offset(1)}
        # a write in the old owner's name, with its epoch: the brokers refuse it
        record = build_batch([None], [b"\x00\x03\x00\x00\x00\x01"], producer_id=before.producer_id,
                             producer_epoch=before.epoch, base_sequence=1000)
        stale = writer.produce(tp.topic, tp.partition, record, acks=-1, coordinator_id=after.owner_id)
        assert stale.error_code == Errors.INVALID_PRODUCER_EPOCH
        anyone = writer.produce(tp.topic, tp.partition, build_batch([b"v"]), acks=-1)
        assert anyone.error_code == Errors.INVALID_TOPIC_EXCEPTION   # clients cannot write it at all
    finally:
        cluster.start_service(name)


# --------------------------------------------------------------------------------------------- tool

def run_cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    saved = sys.stdout
    sys.stdout = out
    try:
        code = cli.main(list(args))
    finally:
        sys.stdout = saved
    return code, out.getvalue()


def describe_rows(cluster: LocalCluster, group: str) -> list[dict[str, str]]:
    code, output = run_cli("consumer-groups", "--bootstrap-server", cluster.bootstrap_servers, "--describe",
                           "--group", group)
    assert code == 0, output
    lines = [line.split() for line in output.splitlines() if line.strip() and not line.startswith("Consumer group")]
    header, rows = lines[0], lines[1:]
    return [dict(zip(header, row, strict=True)) for row in rows]


def test_describe_shows_the_lag_while_a_producer_runs(cluster, admin, writer):
    topic = create_topic(admin, "lagging", 2, REPLICATION)
    for p in range(2):
        produce(writer, topic, p, [f"{p}-{i}" for i in range(30)])
    with group_consumer(cluster, "laggards", enable_auto_commit=False) as consumer:
        consumer.subscribe([topic])
        consume_until(consumer, {f"{p}-{i}" for p in range(2) for i in range(30)}, set())
        consumer.commit_sync({TopicPartition(topic, 0): _offset(10), TopicPartition(topic, 1): _offset(20)})
    stop = threading.Event()
    produced = {0: 30, 1: 30}

    def keep_producing() -> None:
        while not stop.is_set():
            for p in range(2):
                produce(writer, topic, p, ["more"] * 5)
                produced[p] += 5

    producer = threading.Thread(target=keep_producing)
    producer.start()
    try:
        wait_until(lambda: min(produced.values()) >= 60, 30, message="the producer to get going")
        before = dict(produced)
        rows = describe_rows(cluster, "laggards")
        after = dict(produced)
    finally:
        stop.set()
        producer.join(30)
    assert [(r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"]) for r in rows] == [
        (topic, "0", "10"), (topic, "1", "20")]
    for row in rows:
        partition = int(row["PARTITION"])
        end = int(row["LOG-END-OFFSET"])
        assert before[partition] <= end <= after[partition] + 5
        assert int(row["LAG"]) == end - int(row["CURRENT-OFFSET"])
    final = describe_rows(cluster, "laggards")
    assert [int(r["LAG"]) for r in final] == [produced[0] - 10, produced[1] - 20]


def test_list_reset_and_delete_with_the_tool(cluster, admin, writer):
    topic = create_topic(admin, "resettable", 2, REPLICATION)
    for p in range(2):
        produce(writer, topic, p, [f"{p}-{i}" for i in range(10)])
    admin.alter_consumer_group_offsets("resetters", {TopicPartition(topic, 0): 7, TopicPartition(topic, 1): 3})
    bootstrap = ("consumer-groups", "--bootstrap-server", cluster.bootstrap_servers)
    code, output = run_cli(*bootstrap, "--list")
    assert code == 0 and "resetters" in output.split()

    code, output = run_cli(*bootstrap, "--reset-offsets", "--group", "resetters", "--topic", topic,
                           "--to-earliest", "--execute")
    assert code == 0, output
    assert {tp.partition: o.offset for tp, o in admin.list_consumer_group_offsets("resetters").items()} == {0: 0, 1: 0}

    code, output = run_cli(*bootstrap, "--reset-offsets", "--group", "resetters", "--topic", f"{topic}:1",
                           "--to-offset", "4", "--execute")
    assert code == 0, output
    assert output.split()[-4:] == ["resetters", topic, "1", "4"]
    code, _ = run_cli(*bootstrap, "--reset-offsets", "--group", "resetters", "--all-topics", "--to-latest")
    assert code == 0   # a dry run commits nothing
    assert {tp.partition: o.offset for tp, o in admin.list_consumer_group_offsets("resetters").items()} == {0: 0, 1: 4}

    code, output = run_cli(*bootstrap, "--delete", "--group", "resetters")
    assert code == 0 and "was successful" in output
    assert admin.list_consumer_group_offsets("resetters") == {}


def committed_offsets(admin: Admin, group: str) -> dict[tuple[str, int], int]:
    return {(tp.topic, tp.partition): o.offset for tp, o in admin.list_consumer_group_offsets(group).items()}


def new_offsets(output: str) -> dict[tuple[str, int], int]:
    """The NEW-OFFSET table of `--reset-offsets`: {(topic, partition): offset}."""
    rows = [line.split() for line in output.splitlines() if line.strip() and not line.startswith(("GROUP", "Warn"))]
    return {(topic, int(partition)): int(offset) for _group, topic, partition, offset in rows}


JAN_1_2021_MS = 1609459200000   # 2021-01-01T00:00:00.000Z


def test_reset_to_a_datetime_and_by_a_duration_on_known_timestamps(cluster, admin, writer):
    topic = create_topic(admin, "timed", 2, REPLICATION)
    # partition 0: one record a second from 2021-01-01T00:00:00Z; partition 1: one an hour, ending an hour ago
    produce_values(writer, topic, 0, [b"old"] * 10, timestamps=[JAN_1_2021_MS + i * 1000 for i in range(10)])
    now_ms = int(time.time() * 1000)
    produce_values(writer, topic, 1, [b"new"] * 5, timestamps=[now_ms - (5 - i) * 3_600_000 for i in range(5)])
    admin.alter_consumer_group_offsets("timers", {TopicPartition(topic, 0): 1, TopicPartition(topic, 1): 1})
    bootstrap = ("consumer-groups", "--bootstrap-server", cluster.bootstrap_servers)

    code, output = run_cli(*bootstrap, "--reset-offsets", "--group", "timers", "--topic", topic,
                           "--to-datetime", "2021-01-01T00:00:05.500", "--execute")
    assert code == 0, output
    assert new_offsets(output) == {(topic, 0): 6, (topic, 1): 0}   # the first record at or after the time
    assert committed_offsets(admin, "timers") == {(topic, 0): 6, (topic, 1): 0}
    code, output = run_cli(*bootstrap, "--reset-offsets", "--group", "timers", "--topic", f"{topic}:0",
                           "--to-datetime", "2021-01-01T01:00:03.000+01:00", "--dry-run")
    assert code == 0 and new_offsets(output) == {(topic, 0): 3}, output

    code, output = run_cli(*bootstrap, "--reset-offsets", "--group", "timers", "--topic", topic,
                           "--by-duration", "PT2H30M", "--execute")
    assert code == 0, output
    # partition 1's records are 5..1 hours old: the first within 2.5 hours is offset 3; partition 0
    # has nothing that recent and falls back to its log end offset, with Kafka's warning
    assert new_offsets(output) == {(topic, 0): 10, (topic, 1): 3}
    assert f"Warn: Partition 0 from topic {topic} is empty. Falling back to latest known offset." in output
    assert committed_offsets(admin, "timers") == {(topic, 0): 10, (topic, 1): 3}

    code, output = run_cli(*bootstrap, "--reset-offsets", "--group", "timers", "--topic", topic,
                           "--to-datetime", "2021-01-01", "--execute")
    assert (code, output.strip()) == (1, "Error: Error parsing timestamp. It does not contain a 'T' according to "
                                         "ISO8601 format")
    code, output = run_cli(*bootstrap, "--reset-offsets", "--group", "timers", "--topic", topic,
                           "--by-duration", "2h", "--execute")
    assert (code, output.strip()) == (1, "Error: Text cannot be parsed to a Duration")


def test_an_exported_plan_resets_from_file(cluster, admin, writer, tmp_path):
    topic = create_topic(admin, "planned", 2, REPLICATION)
    for p in range(2):
        produce(writer, topic, p, [f"{p}-{i}" for i in range(10)])
    for group in ("planners", "others"):
        admin.alter_consumer_group_offsets(group, {TopicPartition(topic, 0): 9, TopicPartition(topic, 1): 9})
    bootstrap = ("consumer-groups", "--bootstrap-server", cluster.bootstrap_servers)

    code, exported = run_cli(*bootstrap, "--reset-offsets", "--group", "planners", "--topic", f"{topic}:0",
                             "--topic", f"{topic}:1", "--shift-by", "-4", "--dry-run", "--export")
    assert code == 0, exported
    assert exported == f"{topic},0,5\n{topic},1,5\n\n"
    assert committed_offsets(admin, "planners") == {(topic, 0): 9, (topic, 1): 9}   # a dry run
    plan = tmp_path / "plan.csv"
    plan.write_text(exported.replace(f"{topic},1,5", f"{topic},1,2"))
    code, output = run_cli(*bootstrap, "--reset-offsets", "--group", "planners", "--from-file", str(plan),
                           "--execute")
    assert code == 0, output
    assert new_offsets(output) == {(topic, 0): 5, (topic, 1): 2}
    assert committed_offsets(admin, "planners") == {(topic, 0): 5, (topic, 1): 2}

    # two groups: the plan names the group on every line, and an offset past the end is clamped
    code, exported = run_cli(*bootstrap, "--reset-offsets", "--group", "planners", "--group", "others",
                             "--topic", topic, "--to-earliest", "--export")
    assert code == 0, exported
    assert sorted(exported.split()) == sorted(f"{g},{topic},{p},0" for g in ("planners", "others") for p in (0, 1))
    plan.write_text(f"planners,{topic},0,7\nothers,{topic},1,99\n")
    code, output = run_cli(*bootstrap, "--reset-offsets", "--group", "planners", "--group", "others",
                           "--from-file", str(plan), "--execute", "--export")
    assert code == 0 and output == f"planners,{topic},0,7\nothers,{topic},1,10\n\n", output
    assert committed_offsets(admin, "planners") == {(topic, 0): 7, (topic, 1): 2}
    assert committed_offsets(admin, "others") == {(topic, 0): 9, (topic, 1): 10}


def test_delete_offsets_of_an_inactive_group_and_not_of_an_active_subscribed_one(cluster, admin, writer):
    kept, dropped = create_topic(admin, "kept-offsets", 1, REPLICATION), create_topic(admin, "dropped-offsets", 2,
                                                                                       REPLICATION)
    for name, partitions in ((kept, 1), (dropped, 2)):
        for p in range(partitions):
            produce(writer, name, p, [f"{p}-{i}" for i in range(5)])
    admin.alter_consumer_group_offsets("deleters", {TopicPartition(kept, 0): 3, TopicPartition(dropped, 0): 4,
                                                    TopicPartition(dropped, 1): 5})
    bootstrap = ("consumer-groups", "--bootstrap-server", cluster.bootstrap_servers)
    code, output = run_cli(*bootstrap, "--delete-offsets", "--group", "deleters", "--topic", dropped)
    assert code == 0, output
    lines = output.splitlines()
    assert lines[0] == f"Request succeed for deleting offsets with topic {dropped} group deleters"
    assert [line.split() for line in lines[2:]] == [["TOPIC", "PARTITION", "STATUS"], [dropped, "0", "Successful"],
                                                     [dropped, "1", "Successful"]]
    assert committed_offsets(admin, "deleters") == {(kept, 0): 3}
    code, output = run_cli(*bootstrap, "--delete-offsets", "--group", "nobody-here", "--topic", kept)
    assert code == 1 and output.splitlines()[0] == "Error: 'nobody-here' does not exist.", output

    with group_consumer(cluster, "subscribers", enable_auto_commit=False) as consumer:
        consumer.subscribe([kept])
        wait_until(lambda: consumer.poll(timeout_ms=200) is not None and consumer.assignment(), 30,
                   message="the consumer's assignment")
        consumer.commit_sync({TopicPartition(kept, 0): 2, TopicPartition(dropped, 0): 1})
        assert admin.describe_consumer_groups(["subscribers"])["subscribers"].state == "Stable"
        code, output = run_cli(*bootstrap, "--delete-offsets", "--group", "subscribers", "--topic", kept,
                               "--topic", f"{dropped}:0")
        assert code == 1, output
        lines = output.splitlines()
        assert lines[0] == "Error: Encounter some partition level error, see the follow-up details:"
        statuses = {tuple(line.split()[:2]): line.split(None, 2)[2] for line in lines[3:]}
        assert statuses[(dropped, "0")] == "Successful"
        assert statuses[(kept, "0")] == ("Error: Deleting offsets of a topic is forbidden while the consumer group "
                                         "is actively subscribed to it.")
        assert committed_offsets(admin, "subscribers") == {(kept, 0): 2}


def test_a_lone_coordinator_restarted_under_the_same_id_takes_a_new_epoch(cluster_factory, _zk_root_client, zk_chroot):
    single = cluster_factory(brokers=1, controllers=1, coordinators=1)
    name = single.coordinator_names[0]
    tp = TopicPartition("__consumer_offsets", coordinator_partition("lonely"))
    with Admin(bootstrap_servers=single.bootstrap_servers, **CLIENT_CONFIG) as lone_admin:
        create_topic(lone_admin, "t")   # the offsets of a topic that does not exist go on loading
        lone_admin.alter_consumer_group_offsets("lonely", {TopicPartition("t", 0): 9})

        def owner():
            data, _ = _zk_root_client.get(f"{zk_chroot}/coordinators/ownership")
            return decode_ownership(data).partitions[tp]

        before = owner()
        single.kill_service(name)
        single.start_service(name)       # registers once the old session is gone
        wait_until(lambda: owner().registration != before.registration, 30, 0.2,
                   message="the restarted coordinator to own the partition again")
        after = owner()
        assert (after.owner_id, after.epoch, after.producer_id) == (before.owner_id, before.epoch + 1,
                                                                   before.producer_id)
        assert lone_admin.list_consumer_group_offsets("lonely") == {TopicPartition("t", 0): _offset(9)}
        lone_admin.alter_consumer_group_offsets("lonely", {TopicPartition("t", 0): 10})
        assert lone_admin.list_consumer_group_offsets("lonely") == {TopicPartition("t", 0): _offset(10)}
