"""Kafka clients' consumer groups on Odradek's coordinators (three brokers, one controller and two
coordinators with Kafka listeners, shared by the module): librdkafka (confluent-kafka) groups of
three sharing six partitions under the eager `range` and the `cooperative-sticky` assignors, through
a fourth member joining and one leaving, every record read once; static members restarted within
their session timeout without a rebalance of the others; committed offsets resumed after the
group's coordinator restarts; kafka-python and aiokafka members of one group; Apache Kafka's
console consumer in a group and its consumer-groups command (--list, --describe, --reset-offsets).
Members poll from the test's thread with short session and heartbeat timeouts."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from bench.kafka_peer import KafkaJarsUnavailable, fetch_jars, java_binary, run_tool
from services.clients.admin import Admin
from services.common.errors import Errors
from services.common.kafka_wire import kafka_error
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import create_topic, module_cluster
from tests.kafka_wire_support import WireConnection

confluent_kafka = pytest.importorskip("confluent_kafka")

DEADLINE_S = 30.0
POLL_S = 0.05
FIND_COORDINATOR, HEARTBEAT, DESCRIBE_GROUPS = 10, 12, 15
# A member's settings: a short session, frequent heartbeats, commits by the test.
MEMBER_CONFIG = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300, "max.poll.interval.ms": 10000,
                 "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100}
PARTITIONS = 6
RECORDS_PER_PARTITION = 10


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client,
            tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "kafka-groups", brokers=3,
                        controllers=1, coordinators=2) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def jars() -> None:
    try:
        java_binary()
        fetch_jars()
    except KafkaJarsUnavailable as exc:
        pytest.skip(f"Apache Kafka's jars or Java are not available: {exc}")


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = DEADLINE_S,
             between: Callable[[], None] = lambda: time.sleep(POLL_S)) -> None:
    """Runs `between` (polling the members) until `condition` holds; fails after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting {timeout_s} s for {what}")
        between()


def produce(cluster: LocalCluster, topic: str, partitions: int, per_partition: int, tag: str) -> None:
    """`per_partition` records to each partition, acknowledged by all replicas."""
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all",
                                         "linger.ms": 5})
    failures = []
    for partition in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, f"{tag}-{partition}-{i}".encode(), partition=partition,
                             on_delivery=lambda error, _: error and failures.append(error))
    assert producer.flush(DEADLINE_S) == 0 and not failures, failures


class Member:
    """A confluent-kafka group member, polled by the test: its assignment as the rebalance
    callbacks leave it (eager assignors revoke and assign everything, cooperative ones only what
    moves), what it was revoked, and the (partition, offset) of every record it read, each
    committed at once."""

    def __init__(self, cluster: LocalCluster, group: str, topic: str, name: str, **config: object) -> None:
        self.name = name
        self.assigned: set[int] = set()
        self.revoked: list[set[int]] = []
        self.assignments = 0
        self.read: list[tuple[int, int]] = []
        self.closed = False
        self.consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap_servers,
                                                  "group.id": group, "client.id": name, **MEMBER_CONFIG, **config})
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_revoke)

    def _on_assign(self, consumer, partitions) -> None:
        self.assignments += 1
        self.assigned |= {tp.partition for tp in partitions}

    def _on_revoke(self, consumer, partitions) -> None:
        revoked = {tp.partition for tp in partitions}
        self.revoked.append(revoked)
        self.assigned -= revoked

    def poll(self) -> None:
        message = self.consumer.poll(POLL_S)
        if message is None:
            return
        assert message.error() is None, message.error()
        self.read.append((message.partition(), message.offset()))
        self.consumer.commit(message=message, asynchronous=False)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def poll_all(members: list[Member]) -> Callable[[], None]:
    def poll() -> None:
        for member in members:
            member.poll()
    return poll


def settled(members: list[Member], sizes: list[int], partitions: int = PARTITIONS) -> Callable[[], bool]:
    """The members hold every partition once, in shares of `sizes`."""
    def check() -> bool:
        held = [p for m in members for p in m.assigned]
        return sorted(len(m.assigned) for m in members) == sorted(sizes) and sorted(held) == list(range(partitions))
    return check


def read_all(members: list[Member], expected: int) -> None:
    wait_for(lambda: sum(len(m.read) for m in members) >= expected, f"{expected} records read",
             between=poll_all(members))


@contextlib.contextmanager
def closing(members: list[Member]) -> Iterator[list[Member]]:
    """Closes every member (those added meanwhile too) however the test ends."""
    try:
        yield members
    finally:
        for member in members:
            member.close()


def rebalance(members: list[Member], sizes: list[int], cooperative: bool, change: Callable[[], None]) -> None:
    """Applies `change` and waits for `members` (those left after it) to settle in `sizes`;
    cooperative members are never revoked what they keep, eager ones are revoked everything."""
    before = {m.name: set(m.assigned) for m in members}
    revocations = {m.name: len(m.revoked) for m in members}
    change()
    wait_for(settled(members, sizes), f"the group to settle in shares {sizes}", between=poll_all(members))
    for member in members:
        if not before.get(member.name):
            continue  # a member that joined in this rebalance
        revoked = set().union(*member.revoked[revocations[member.name]:])
        if cooperative:
            assert not revoked & member.assigned, (member.name, before[member.name], revoked, member.assigned)
        else:
            assert revoked == before[member.name], (member.name, before[member.name], revoked)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_confluent_group_shares_partitions_through_a_join_and_a_leave(cluster: LocalCluster, admin: Admin,
                                                                      strategy: str):
    topic = create_topic(admin, f"shared-{strategy}", partitions=PARTITIONS, replication=2)
    group = f"group-{strategy}"
    cooperative = strategy == "cooperative-sticky"
    members = [Member(cluster, group, topic, f"member-{i}", **{"partition.assignment.strategy": strategy})
               for i in range(3)]
    everyone = list(members)
    with closing(everyone):
        wait_for(settled(members, [2, 2, 2]), "three members with two partitions each",
                 between=poll_all(members))
        produce(cluster, topic, PARTITIONS, RECORDS_PER_PARTITION, "first")
        read_all(members, PARTITIONS * RECORDS_PER_PARTITION)

        def join() -> None:
            fourth = Member(cluster, group, topic, "member-3", **{"partition.assignment.strategy": strategy})
            everyone.append(fourth)
            members.append(fourth)
        rebalance(members, [2, 2, 1, 1], cooperative, join)
        produce(cluster, topic, PARTITIONS, RECORDS_PER_PARTITION, "second")
        read_all(members, 2 * PARTITIONS * RECORDS_PER_PARTITION)

        leaving = members.pop(1)
        rebalance(members, [2, 2, 2], cooperative, leaving.close)
        produce(cluster, topic, PARTITIONS, RECORDS_PER_PARTITION, "third")
        read_all(members, 3 * PARTITIONS * RECORDS_PER_PARTITION - len(leaving.read))

        read = [record for member in everyone for record in member.read]
        expected = [(p, o) for p in range(PARTITIONS) for o in range(3 * RECORDS_PER_PARTITION)]
        assert sorted(read) == expected  # each record once, across both rebalances
        committed = members[0].consumer.committed(
            [confluent_kafka.TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=DEADLINE_S)
        assert [tp.offset for tp in committed] == [3 * RECORDS_PER_PARTITION] * PARTITIONS


# ---------------------------------------------------------------------------------------- the wire

def group_coordinator(cluster: LocalCluster, group: str) -> tuple[str, int]:
    """(service name, Kafka port) of the coordinator FindCoordinator names for `group`."""
    port = cluster.services[cluster.broker_names[0]].kafka_port
    with WireConnection(cluster.host, port) as connection:
        found = connection.call(FIND_COORDINATOR, 3, key=group, key_type=0)
    assert found.error_code == kafka_error(Errors.NONE), found
    name = next(n for n in cluster.coordinator_names if cluster.services[n].node_id == found.node_id)
    assert found.port == cluster.services[name].kafka_port
    return name, found.port


def described_members(cluster: LocalCluster, group: str) -> dict[str, str]:
    """group instance id -> member id, as DescribeGroups shows the group."""
    _, port = group_coordinator(cluster, group)
    with WireConnection(cluster.host, port) as connection:
        described = connection.call(DESCRIBE_GROUPS, 5, groups=(group,), include_authorized_operations=False)
    assert described.groups[0].error_code == kafka_error(Errors.NONE)
    return {m.group_instance_id: m.member_id for m in described.groups[0].members}


def generation(cluster: LocalCluster, group: str, instance_id: str, member_id: str) -> int:
    """The group's generation: the one a Heartbeat of this static member is answered NONE at."""
    _, port = group_coordinator(cluster, group)
    with WireConnection(cluster.host, port) as connection:
        for candidate in range(1, 100):
            answer = connection.call(HEARTBEAT, 4, candidate, group_id=group, generation_id=candidate,
                                     member_id=member_id, group_instance_id=instance_id)
            if answer.error_code == kafka_error(Errors.NONE):
                return candidate
            assert answer.error_code == kafka_error(Errors.ILLEGAL_GENERATION), answer
    raise AssertionError("no generation below 100 is the group's")


def test_static_member_restarted_within_its_session_gets_its_partitions_back_without_a_rebalance(
        cluster: LocalCluster, admin: Admin):
    topic = create_topic(admin, "static", partitions=PARTITIONS, replication=2)
    group = "static-group"

    def member(i: int) -> Member:
        return Member(cluster, group, topic, f"static-{i}", **{"group.instance.id": f"static-{i}",
                                                               "session.timeout.ms": 15000,
                                                               "max.poll.interval.ms": 15000})
    members = [member(i) for i in range(3)]
    everyone = list(members)
    with closing(everyone):
        wait_for(settled(members, [2, 2, 2]), "three static members with two partitions each",
                 between=poll_all(members))
        before = described_members(cluster, group)
        assert set(before) == {"static-0", "static-1", "static-2"}
        first_generation = generation(cluster, group, "static-0", before["static-0"])
        held = set(members[1].assigned)
        others = {m.name: (m.assignments, len(m.revoked)) for m in (members[0], members[2])}

        members[1].close()  # a static member does not leave: the group keeps its place
        assert described_members(cluster, group) == before
        restarted = member(1)
        everyone.append(restarted)
        members[1] = restarted
        wait_for(lambda: restarted.assigned == held, "the restarted member to get its partitions back",
                 between=poll_all(members))

        after = described_members(cluster, group)
        assert after["static-0"] == before["static-0"] and after["static-2"] == before["static-2"]
        assert after["static-1"] != before["static-1"]  # the same instance, a new member id
        assert generation(cluster, group, "static-0", after["static-0"]) == first_generation
        for _ in range(10):  # the others go on without being told of any rebalance
            poll_all(members)()
        assert {m.name: (m.assignments, len(m.revoked)) for m in (members[0], members[2])} == others


def test_committed_offsets_are_resumed_after_the_group_coordinator_restarts(cluster: LocalCluster, admin: Admin):
    topic = create_topic(admin, "resumed", partitions=2, replication=2)
    group = "resumed-group"
    produce(cluster, topic, 2, RECORDS_PER_PARTITION, "resumed")
    total = 2 * RECORDS_PER_PARTITION
    first = Member(cluster, group, topic, "first")
    with closing([first]):
        read_all([first], total // 2)
    committed = {}
    for partition, offset in first.read[:total // 2]:
        committed[partition] = max(committed.get(partition, 0), offset + 1)

    name, _ = group_coordinator(cluster, group)
    cluster.restart_service(name)

    second = Member(cluster, group, topic, "second")
    with closing([second]):
        read_all([second], total - total // 2)
        starts = {}
        for partition, offset in second.read:
            starts.setdefault(partition, offset)
        assert all(starts.get(p, RECORDS_PER_PARTITION) == committed.get(p, 0) for p in range(2)), (starts, committed)
        assert sorted(first.read[:total // 2] + second.read) == [(p, o) for p in range(2)
                                                                 for o in range(RECORDS_PER_PARTITION)]


# --------------------------------------------------------------------------- kafka-python, aiokafka

class AiokafkaMember(threading.Thread):
    """An aiokafka group member on an event loop of its own thread, until `stop`."""

    def __init__(self, cluster: LocalCluster, group: str, topic: str) -> None:
        super().__init__(name="aiokafka-member", daemon=True)
        self.args = (cluster.kafka_bootstrap_servers, group, topic)
        self.assigned: set[int] = set()
        self.read: list[tuple[int, int]] = []
        self.stopping = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._consume())
        except BaseException as exc:  # reported by the test's thread
            self.failure = exc

    async def _consume(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        bootstrap, group, topic = self.args
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id="aiokafka",
                                    partition_assignment_strategy=(RoundRobinPartitionAssignor,),
                                    enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=6000,
                                    heartbeat_interval_ms=300, max_poll_interval_ms=10000, fetch_max_wait_ms=100)
        await consumer.start()
        try:
            while not self.stopping.is_set():
                batches = await consumer.getmany(timeout_ms=100)
                self.read.extend((r.partition, r.offset) for records in batches.values() for r in records)
                if batches:
                    await consumer.commit()
                self.assigned = {tp.partition for tp in consumer.assignment()}
        finally:
            await consumer.stop()

    def stop(self) -> None:
        self.stopping.set()
        self.join(DEADLINE_S)
        if self.failure is not None:
            raise self.failure


def test_kafka_python_and_aiokafka_members_share_a_topic(cluster: LocalCluster, admin: Admin):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    topic = create_topic(admin, "python-clients", partitions=4, replication=2)
    group = "python-clients"
    python_member = KafkaConsumer(topic, bootstrap_servers=cluster.kafka_bootstrap_servers, group_id=group,
                                  client_id="kafka-python", partition_assignment_strategy=[RoundRobinPartitionAssignor],
                                  enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=6000,
                                  heartbeat_interval_ms=300, max_poll_interval_ms=10000, fetch_max_wait_ms=100)
    python_read: list[tuple[int, int]] = []

    def poll() -> None:
        batches = python_member.poll(timeout_ms=100)
        python_read.extend((r.partition, r.offset) for records in batches.values() for r in records)
        if batches:
            python_member.commit()
        assert async_member.failure is None, async_member.failure

    def python_assigned() -> set[int]:
        return {tp.partition for tp in python_member.assignment()}

    async_member = AiokafkaMember(cluster, group, topic)
    async_member.start()
    try:
        wait_for(lambda: len(python_assigned()) == 2 and python_assigned() | async_member.assigned == set(range(4)),
                 "kafka-python and aiokafka to hold two partitions each", between=poll)
        produce(cluster, topic, 4, RECORDS_PER_PARTITION, "python")
        total = 4 * RECORDS_PER_PARTITION
        wait_for(lambda: len(python_read) + len(async_member.read) >= total, f"{total} records read", between=poll)
        assert {p for p, _ in python_read} == python_assigned()
        assert {p for p, _ in async_member.read} == async_member.assigned
        assert sorted(python_read + async_member.read) == [(p, o) for p in range(4)
                                                           for o in range(RECORDS_PER_PARTITION)]
        wait_for(lambda: all(python_member.committed(TopicPartition(topic, p)) == RECORDS_PER_PARTITION
                             for p in range(4)), "both members' commits", between=poll)
    finally:
        try:
            async_member.stop()
        finally:
            python_member.close()


# ------------------------------------------------------------------------------ Kafka's Java tools

def tool_rows(output: str, first_column: str = "GROUP") -> list[dict[str, str]]:
    """The rows of a table the consumer-groups command prints, by column name."""
    lines = [line.split() for line in output.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line and line[0] == first_column)
    return [dict(zip(lines[start], row, strict=False)) for row in lines[start + 1:] if len(row) == len(lines[start])]


def test_java_console_consumer_in_a_group_and_the_consumer_groups_command(cluster: LocalCluster, admin: Admin,
                                                                           jars):
    topic = create_topic(admin, "java-group", partitions=3, replication=2)
    group = "java-group"
    produce(cluster, topic, 3, RECORDS_PER_PARTITION, "java")
    total = 3 * RECORDS_PER_PARTITION
    bootstrap = ["--bootstrap-server", cluster.kafka_bootstrap_servers]
    consumed = run_tool("console-consumer", [*bootstrap, "--topic", topic, "--group", group, "--from-beginning",
                                             "--max-messages", str(total), "--timeout-ms", "20000"]).check()
    assert f"Processed a total of {total} messages" in consumed.stderr, consumed.stderr[-2000:]
    assert sorted(consumed.stdout.splitlines()) == sorted(f"java-{p}-{i}" for p in range(3)
                                                          for i in range(RECORDS_PER_PARTITION))

    assert group in run_tool("consumer-groups", [*bootstrap, "--list"]).check().stdout.split()
    described = run_tool("consumer-groups", [*bootstrap, "--describe", "--group", group]).check()
    rows = tool_rows(described.stdout)
    assert sorted((r["TOPIC"], int(r["PARTITION"]), r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"])
                  for r in rows) == [(topic, p, "10", "10", "0") for p in range(3)], described.stdout

    reset = run_tool("consumer-groups", [*bootstrap, "--reset-offsets", "--to-earliest", "--execute",
                                         "--group", group, "--topic", topic]).check()
    assert sorted((int(r["PARTITION"]), r["NEW-OFFSET"]) for r in tool_rows(reset.stdout)) == [
        (p, "0") for p in range(3)], reset.stdout
    reader = confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": group})
    try:
        committed = reader.committed([confluent_kafka.TopicPartition(topic, p) for p in range(3)],
                                     timeout=DEADLINE_S)
    finally:
        reader.close()
    assert [tp.offset for tp in committed] == [0, 0, 0]
