"""Transactions and exactly-once over Kafka's protocol with librdkafka (confluent-kafka), unchanged,
on one cluster shared by the module (one controller, three brokers, two coordinators, each with a
Kafka listener): a transactional producer commits and aborts and a read_committed consumer sees
exactly the committed records, while ListTransactions, DescribeTransactions (coordinator) and
DescribeProducers (partition leader) describe it; a second producer with the same transactional id
fences the first; a consume-transform-produce worker in a group, killed with SIGKILL four times
with a transaction open, still writes the transformed input exactly once; the Java clients'
transactional producer and Kafka's `kafka-transactions.sh` work; and an idempotent acks=all
producer loses and repeats nothing while its partition's leader is killed five times."""

from __future__ import annotations

import json
import logging
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.describe_producers.v0.request import TopicRequest as ProducersTopic

from bench.kafka_peer import KafkaJarsUnavailable, fetch_jars, java_argv, java_binary, run_tool
from services.clients.admin import Admin
from services.common.errors import Errors
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import TEST_BROKER_CONFIG, create_topic, module_cluster
from tests.kafka_wire_support import WireConnection

confluent_kafka = pytest.importorskip("confluent_kafka")

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 30.0
# a killed broker's partitions move once its ZooKeeper session expires: short, for the chaos test
BROKER_SESSION_TIMEOUT_MS = 3000
FIND_COORDINATOR, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 10, 61, 65, 66
TRANSACTION_KEY = 1
LEADER_KILLS = 5
WORKER_KILLS = 4
WORKER_RECORDS = 100  # per input partition
WORKER_BATCH = 10  # records per transaction
WORKER_COMMITS_BEFORE_KILL = 3  # transactions each killed run commits before it writes one more
PRODUCE_INTERVAL_S = 0.02
TRANSACTIONS_TOOL = "org.apache.kafka.tools.TransactionsCommand"
JAVA_TRANSACTIONS_SOURCE = Path(__file__).parent / "java" / "JavaTransactions.java"
FENCED_CODES = {confluent_kafka.KafkaError._FENCED, confluent_kafka.KafkaError.PRODUCER_FENCED,
                confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH}


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "kafka-txn", brokers=3,
                        controllers=1, coordinators=2,
                        broker_config={**TEST_BROKER_CONFIG,
                                       "zookeeper.session.timeout.ms": BROKER_SESSION_TIMEOUT_MS}) as local:
        yield local


def transactional_producer(cluster: LocalCluster, transactional_id: str,
                           transaction_timeout_ms: int = 10000) -> confluent_kafka.Producer:
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers,
                                         "transactional.id": transactional_id,
                                         "transaction.timeout.ms": transaction_timeout_ms, "linger.ms": 5})
    producer.init_transactions(DEADLINE_S)
    return producer


def produce_in_transaction(producer: confluent_kafka.Producer, topic: str, values: list[bytes],
                           commit: bool) -> None:
    producer.begin_transaction()
    for index, value in enumerate(values):
        producer.produce(topic, value, partition=index % 2)
    if commit:
        producer.commit_transaction(DEADLINE_S)
    else:
        producer.flush(DEADLINE_S)  # the records reach the log before the abort
        producer.abort_transaction(DEADLINE_S)


def watermarks(cluster: LocalCluster, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """{partition: (log start offset, high watermark)}; a read_committed consumer would be told the
    last stable offset instead, which stays behind until the markers of a transaction that has just
    ended are written."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap_servers,
                                         "group.id": "unused", "isolation.level": "read_uncommitted"})
    try:
        return {p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), DEADLINE_S)
                for p in range(partitions)}
    finally:
        consumer.close()


def read_to_end(cluster: LocalCluster, topic: str, partitions: int, isolation: str) -> dict[int, list[bytes]]:
    """Every value of each partition up to its high watermark, as a librdkafka consumer reads it
    at `isolation` (read_committed reads up to the last stable offset, which reaches the high
    watermark once every transaction has ended and its markers are written)."""
    ends = {p: high for p, (low, high) in watermarks(cluster, topic, partitions).items()
            if high > low}  # an empty partition gives the consumer no position
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap_servers,
                                         "group.id": "unused", "enable.auto.commit": False,
                                         "isolation.level": isolation})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in range(partitions)])
        values: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + DEADLINE_S

        def at_end() -> bool:
            positions = consumer.position([confluent_kafka.TopicPartition(topic, p) for p in range(partitions)])
            return all(tp.offset >= ends[tp.partition] for tp in positions if tp.partition in ends)

        while not at_end():
            assert time.monotonic() < deadline, f"read {values} of {topic}, ends {ends}"
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            values[message.partition()].append(message.value())
        return values
    finally:
        consumer.close()


def transaction_coordinator(cluster: LocalCluster, transactional_id: str) -> WireConnection:
    """A connection to the Kafka listener FindCoordinator names for `transactional_id`."""
    host, port = cluster.kafka_bootstrap_servers.split(",")[0].rsplit(":", 1)
    with WireConnection(host, int(port)) as broker:
        (found,) = broker.call(FIND_COORDINATOR, 4, key_type=TRANSACTION_KEY,
                               coordinator_keys=(transactional_id,)).coordinators
    assert found.error_code == Errors.NONE, found
    return WireConnection(found.host, found.port)


def committed_offsets(cluster: LocalCluster, group: str, topic: str, partitions: int) -> list[int]:
    """The group's committed offsets of the topic's partitions, asked without joining the group."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": group,
                                         "enable.auto.commit": False})
    try:
        tps = [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)]
        return [tp.offset for tp in consumer.committed(tps, timeout=10)]
    finally:
        consumer.close()


def partition_leader(producer: confluent_kafka.Producer, topic: str, partition: int) -> tuple[int, list[int]]:
    """(leader, in-sync replicas) of a partition, as metadata shows them ((-1, []) while it shows none)."""
    try:
        meta = producer.list_topics(topic, timeout=5).topics[topic].partitions.get(partition)
    except confluent_kafka.KafkaException:  # no broker answered in time: none is known
        return -1, []
    return (-1, []) if meta is None else (meta.leader, list(meta.isrs))


# ---------------------------------------------------------------------------------------------- tests


def test_committed_and_aborted_transactions_as_read_committed_consumers_and_admin_apis_see_them(
        cluster: LocalCluster, admin: Admin):
    topic = create_topic(admin, "kafka-txn", partitions=2, replication=3)
    producer = transactional_producer(cluster, "kafka-txn-1")
    produce_in_transaction(producer, topic, [b"a%d" % i for i in range(10)], commit=True)
    produce_in_transaction(producer, topic, [b"x%d" % i for i in range(10)], commit=False)
    produce_in_transaction(producer, topic, [b"b%d" % i for i in range(10)], commit=True)
    committed = read_to_end(cluster, topic, 2, "read_committed")
    assert committed == {p: [b"a%d" % i for i in range(p, 10, 2)] + [b"b%d" % i for i in range(p, 10, 2)]
                         for p in (0, 1)}
    everything = read_to_end(cluster, topic, 2, "read_uncommitted")
    assert sorted(sum(everything.values(), [])) == sorted(
        [b"%s%d" % (k, i) for k in (b"a", b"x", b"b") for i in range(10)])

    with transaction_coordinator(cluster, "kafka-txn-1") as coordinator:
        listed = coordinator.call(LIST_TRANSACTIONS, 1, state_filters=("CompleteCommit",), producer_id_filters=(),
                                  duration_filter=-1)
        assert listed.error_code == Errors.NONE
        assert "kafka-txn-1" in [s.transactional_id for s in listed.transaction_states]
        (described,) = coordinator.call(DESCRIBE_TRANSACTIONS, 0, transactional_ids=("kafka-txn-1",)) \
            .transaction_states
    assert (described.error_code, described.transaction_state) == (Errors.NONE, "CompleteCommit")
    leader, _ = partition_leader(producer, topic, 0)
    port = cluster.services[cluster.broker_name(leader)].kafka_port
    with WireConnection(cluster.host, port) as connection:
        (answered,) = connection.call(DESCRIBE_PRODUCERS, 0, topics=(
            ProducersTopic(name=topic, partition_indexes=(0,)),)).topics
    (partition,) = answered.partitions
    assert partition.error_code == Errors.NONE
    assert [(p.producer_id, p.producer_epoch, p.current_txn_start_offset) for p in partition.active_producers] \
        == [(described.producer_id, described.producer_epoch, -1)]
    producer.flush(1)


def test_a_second_producer_with_the_transactional_id_fences_the_first(cluster: LocalCluster, admin: Admin):
    topic = create_topic(admin, "kafka-txn-fenced", partitions=2, replication=3)
    zombie = transactional_producer(cluster, "kafka-txn-fenced")
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie", partition=0)
    zombie.flush(DEADLINE_S)
    successor = transactional_producer(cluster, "kafka-txn-fenced")  # aborts the zombie's transaction
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        zombie.commit_transaction(DEADLINE_S)
    error = raised.value.args[0]
    assert error.code() in FENCED_CODES and error.fatal(), error
    produce_in_transaction(successor, topic, [b"successor"], commit=True)
    assert read_to_end(cluster, topic, 2, "read_committed") == {0: [b"successor"], 1: []}


@pytest.fixture(scope="module")
def kafka_jars() -> None:
    try:
        java_binary()
        fetch_jars()
    except KafkaJarsUnavailable as exc:
        pytest.skip(f"Apache Kafka's jars or Java are not available: {exc}")


def test_the_java_clients_commit_abort_and_send_offsets_in_transactions(cluster: LocalCluster, admin: Admin,
                                                                       kafka_jars):
    topic = create_topic(admin, "kafka-txn-java", partitions=1, replication=3)
    argv = java_argv(str(JAVA_TRANSACTIONS_SOURCE), [cluster.kafka_bootstrap_servers, topic, "kafka-txn-java",
                                                     "kafka-txn-java-group", "20"])
    run = subprocess.run(argv, capture_output=True, text=True, timeout=90)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == "read=20 aborted=0 committed_offset=7", run.stderr[-3000:]
    print(run.stderr.strip().splitlines()[-1])
    assert read_to_end(cluster, topic, 1, "read_committed")[0] == [b"committed-%d" % i for i in range(20)]


def test_kafka_transactions_tool_lists_and_describes_an_open_transaction(cluster: LocalCluster, admin: Admin,
                                                                         kafka_jars):
    topic = create_topic(admin, "kafka-txn-tool", partitions=2, replication=3)
    # open while the tool runs three times (a JVM start each): longer than the other tests' timeout
    producer = transactional_producer(cluster, "kafka-txn-tool", transaction_timeout_ms=120000)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=1)
    producer.flush(DEADLINE_S)
    bootstrap = ["--bootstrap-server", cluster.kafka_bootstrap_servers]

    def table(*args: str) -> list[dict[str, str]]:
        """The rows of the tool's tab-separated table."""
        output = run_tool(TRANSACTIONS_TOOL, [*bootstrap, *args]).check().stdout
        cells = [[cell.strip() for cell in line.rstrip().split("\t")] for line in output.strip().splitlines()]
        assert all(len(row) == len(cells[0]) for row in cells), output
        return [dict(zip(cells[0], row, strict=True)) for row in cells[1:]]

    listed = {row["TransactionalId"]: row for row in table("list")}
    assert listed["kafka-txn-tool"]["TransactionState"] == "Ongoing", listed
    (described,) = table("describe", "--transactional-id", "kafka-txn-tool")
    assert (described["TransactionState"], described["TopicPartitions"]) == ("Ongoing", f"{topic}-1"), described
    assert described["ProducerId"] == listed["kafka-txn-tool"]["ProducerId"]
    leader, _ = partition_leader(producer, topic, 1)
    assert table("find-hanging", "--broker-id", str(leader)) == []  # the open transaction is the coordinator's
    producer.commit_transaction(DEADLINE_S)


class Worker:
    """One run of `tests.integration.kafka_txn_worker`, its JSON lines read as they come."""

    def __init__(self, cluster: LocalCluster, **flags: str) -> None:
        argv = [sys.executable, "-m", "tests.integration.kafka_txn_worker",
                "--bootstrap", cluster.kafka_bootstrap_servers]
        for flag, value in flags.items():
            argv += [f"--{flag.replace('_', '-')}", value]
        self.process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, text=True)
        self.events: queue.Queue = queue.Queue()
        self.committed = 0  # transactions seen committed
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.events.put(json.loads(line))

    def wait_for(self, kind: str, count: int, timeout_s: float) -> None:
        """Until `count` more events of `kind` ("written", "committed") came."""
        deadline, seen = time.monotonic() + timeout_s, 0
        while seen < count:
            left = deadline - time.monotonic()
            assert left > 0 and self.process.poll() is None, f"worker: {seen} {kind} (exit {self.process.poll()})"
            try:
                event = self.events.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            seen += event["event"] == kind
            self.committed += event["event"] == "committed"

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)


def test_a_worker_killed_four_times_transforms_its_input_exactly_once(cluster: LocalCluster, admin: Admin):
    source = create_topic(admin, "kafka-ctp-in", partitions=2, replication=3)
    sink = create_topic(admin, "kafka-ctp-out", partitions=2, replication=3)
    feeder = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all"})
    values = {p: [b"%d-%d" % (p, i) for i in range(WORKER_RECORDS)] for p in (0, 1)}
    for partition, batch in values.items():
        for value in batch:
            feeder.produce(source, value, partition=partition)
    assert feeder.flush(DEADLINE_S) == 0
    flags = {"group": "kafka-ctp", "input": source, "output": sink, "transactional_id": "kafka-ctp",
             "instance_id": "kafka-ctp-worker", "batch": str(WORKER_BATCH)}
    workers: list[Worker] = []
    try:
        for _ in range(WORKER_KILLS):
            workers.append(Worker(cluster, **flags))
            workers[-1].wait_for("committed", WORKER_COMMITS_BEFORE_KILL, DEADLINE_S)
            workers[-1].wait_for("written", 1, DEADLINE_S)  # killed with a transaction open
            workers[-1].kill()
        workers.append(Worker(cluster, **flags))
        wait_until(lambda: committed_offsets(cluster, "kafka-ctp", source, 2) == [WORKER_RECORDS] * 2, 60, 0.5,
                   message=lambda: f"the group to commit {committed_offsets(cluster, 'kafka-ctp', source, 2)}")
        assert read_to_end(cluster, sink, 2, "read_committed") == {
            p: [b"out-" + v for v in batch] for p, batch in values.items()}
        written = sum(len(v) for v in read_to_end(cluster, sink, 2, "read_uncommitted").values())
        print(f"{len(workers)} worker runs; the killed ones committed {[w.committed for w in workers[:-1]]} "
              f"transactions before their SIGKILL; {written - 2 * WORKER_RECORDS} records written by "
              f"transactions the kills left open, aborted")
    finally:
        for worker in workers:
            if worker.process.poll() is None:
                worker.process.terminate()
                try:
                    worker.process.wait(10)
                except subprocess.TimeoutExpired:
                    worker.kill()


def group_log(path: Path) -> logging.Logger:
    """A logger for a librdkafka consumer's group, topic and fetch debug lines, to `path`."""
    log = logging.getLogger(f"rdkafka-member-{path.name}")
    log.setLevel(logging.DEBUG)
    log.propagate = False
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(created).3f %(message)s"))
    log.addHandler(handler)
    return log


# what a group member's librdkafka log says of where it reads from, when a check fails
GROUP_EVENTS = ("REJOIN", "OFFSETFETCH", "offset reset", "JoinGroup response", "SyncGroup response",
                "returned: Broker", "Heartbeat failed", "COORDSET", "lost", "OFFSETVALID", "truncation", "SEEK")


def group_events(path: Path) -> str:
    lines = [line.rstrip() for line in path.read_text().splitlines() if any(e in line for e in GROUP_EVENTS)]
    return "\n".join(lines[-80:])


def test_an_idempotent_producer_and_a_group_member_through_five_leader_kills_lose_and_repeat_nothing(
        cluster: LocalCluster, admin: Admin, tmp_path: Path):
    topic = create_topic(admin, "kafka-idempotent-chaos", partitions=1, replication=3,
                         configs={"min.insync.replicas": "2"})
    producer = confluent_kafka.Producer({
        "bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all", "enable.idempotence": True,
        "linger.ms": 5, "message.timeout.ms": 60000, "request.timeout.ms": 5000, "retry.backoff.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000})
    acknowledged: list[bytes] = []
    failed: list[str] = []

    def delivered(error, message) -> None:
        if error is None:
            acknowledged.append(message.value())
        else:
            failed.append(str(error))

    kills_done = threading.Event()
    phases: list[tuple[float, float]] = []  # (seconds to a new leader, then to a full ISR) of each kill
    killer_error: list[BaseException] = []

    def kill_leaders() -> None:
        try:
            for _ in range(LEADER_KILLS):
                leader = wait_until(lambda: max(partition_leader(producer, topic, 0)[0], 0), 30, 0.2,
                                    message="a leader")
                name = cluster.broker_name(leader)
                killed_at = time.monotonic()
                cluster.kill_service(name)
                cluster.start_service(name, wait=False)  # it waits out its old ZooKeeper session
                wait_until(lambda: partition_leader(producer, topic, 0)[0] not in (-1, leader), 30, 0.2,  # noqa: B023
                           message="a new leader")
                elected_at = time.monotonic()
                wait_until(lambda: len(partition_leader(producer, topic, 0)[1]) == 3, 45, 0.2,
                           message="the restarted broker back in the ISR")
                phases.append((round(elected_at - killed_at, 1), round(time.monotonic() - elected_at, 1)))
        except BaseException as exc:  # reported by the test
            killer_error.append(exc)
        finally:
            kills_done.set()

    # a group member reads along through the kills, committing as it goes
    member_log = tmp_path / "member.log"
    member = confluent_kafka.Consumer({
        "bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": "kafka-idempotent-chaos-readers",
        "auto.offset.reset": "earliest", "auto.commit.interval.ms": 500, "session.timeout.ms": 30000,
        "topic.metadata.refresh.interval.ms": 1000, "debug": "cgrp,topic,fetch", "logger": group_log(member_log)})
    member.subscribe([topic])
    consumed: list[bytes] = []
    consumer_errors: list[str] = []
    reported: list[str] = []
    producing_done = threading.Event()

    def consume() -> None:
        while not (producing_done.is_set() and set(acknowledged) <= set(consumed)):
            message = member.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                # librdkafka reports, and carries on after, what it meets through the kills (e.g. a
                # Metadata answer without the topic from a broker the controller has not updated
                # yet); only a fatal error stops a consumer
                if message.error().fatal():
                    consumer_errors.append(str(message.error()))
                else:
                    reported.append(str(message.error()))
                continue
            consumed.append(message.value())

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    killer = threading.Thread(target=kill_leaders, daemon=True)
    killer.start()
    sent = 0
    try:
        while not kills_done.is_set():
            producer.produce(topic, b"%d" % sent, on_delivery=delivered)
            sent += 1
            producer.poll(0)
            kills_done.wait(PRODUCE_INTERVAL_S)
        killer.join()
        assert producer.flush(90) == 0
        producing_done.set()
        reader.join(DEADLINE_S)
        assert not reader.is_alive(), f"the group member read {len(consumed)} of {len(acknowledged)} acknowledged"
    finally:
        producing_done.set()
        reader.join(DEADLINE_S)
        member.close()
    assert not killer_error, (killer_error, f"after {len(phases)} kills")
    read = read_to_end(cluster, topic, 1, "read_uncommitted")[0]
    assert len(read) == len(set(read)), "a record was written twice"
    assert read == sorted(read, key=int), "records out of order"
    assert set(acknowledged) <= set(read)
    assert not consumer_errors, consumer_errors
    assert len(consumed) == len(set(consumed)), (
        f"the group member read a record twice; it reported {sorted(set(reported))}; kills {phases}; its "
        f"group log:\n{group_events(member_log)}")
    assert consumed == sorted(consumed, key=int), "the group member read records out of order"
    assert set(acknowledged) <= set(consumed)
    print(f"sent {sent}, acknowledged {len(acknowledged)}, failed {len(failed)}, read {len(read)}, "
          f"read by the group member {len(consumed)} (it reported {sorted(set(reported))}); kills (to a new "
          f"leader, to a full ISR) in s: {phases}")
